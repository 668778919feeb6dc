"""Which index expressions are provably non-negative, for the code generators.

Index expressions (:mod:`kiln.dialects.loop.expr`) floor like Python's ``//`` and ``%``;
C's and Triton's integer ``/`` and ``%`` truncate. Both agree when the dividend is
non-negative and the divisor positive, so both the C++ emitter and the Triton lowering
print the plain operator exactly when :func:`is_nonnegative` holds for the dividend and
:func:`is_positive` for the divisor. One definition, so the two cannot drift apart.
"""

from __future__ import annotations

from typing import cast

import sympy

from kiln.dialects.loop.expr import FloorDiv


def is_positive(expr: sympy.Expr) -> bool:
    """Whether ``expr`` is provably > 0 (from the symbols' assumptions)."""
    if expr.is_Integer:
        return int(expr) > 0
    return bool(expr.is_positive)


def is_nonnegative(expr: sympy.Expr) -> bool:
    """Whether ``expr`` is provably >= 0, structurally and from the symbols'
    assumptions (index variables are non-negative, sizes positive). Floor division and
    modulo by a positive divisor follow Python's (flooring) semantics."""
    if expr.is_Integer:
        return int(expr) >= 0
    if isinstance(expr, sympy.Symbol):
        return bool(expr.is_nonnegative)
    if isinstance(expr, sympy.Add | sympy.Mul):
        return all(is_nonnegative(cast(sympy.Expr, a)) for a in expr.args)
    if isinstance(expr, sympy.Pow):
        return is_nonnegative(cast(sympy.Expr, expr.base))
    if isinstance(expr, FloorDiv):
        numerator, divisor = (cast(sympy.Expr, a) for a in expr.args)
        return is_nonnegative(numerator) and is_positive(divisor)
    if isinstance(expr, sympy.Mod):
        return is_positive(cast(sympy.Expr, expr.args[1]))
    return False


__all__ = ["is_nonnegative", "is_positive"]

"""How an index expression moves with one loop variable: its stride, when it is linear.

Used to pick the loop to vectorize: contiguous loads (stride 0 or 1) vectorize into plain
vector loads, others into gathers. A reduction whose loads are contiguous along the
pointwise space but strided along the reduction (``x.sum(0)`` on a row-major matrix) is
vectorized across outputs instead (see :mod:`kiln.passes.kernel_to_cpp.outer`).
"""

from __future__ import annotations

from collections.abc import Iterable

import sympy


def stride(expr: sympy.Expr, symbol: sympy.Symbol) -> int | None:
    """The integer ``c`` with ``expr(symbol + 1) - expr(symbol) == c`` everywhere, or
    None when the expression is not linear in ``symbol`` with a constant coefficient."""
    if symbol not in expr.free_symbols:
        return 0
    total = 0
    for term in sympy.Add.make_args(sympy.expand(expr)):
        if symbol not in term.free_symbols:
            continue
        coefficient, rest = term.as_independent(symbol, as_Add=False)
        if rest != symbol or not coefficient.is_Integer:
            return None
        total += int(coefficient)
    return total


def contiguous(strides: Iterable[int | None]) -> int:
    """How many of these strides are not vector-friendly (not 0 or 1)."""
    return sum(1 for s in strides if s not in (0, 1))


__all__ = ["contiguous", "stride"]

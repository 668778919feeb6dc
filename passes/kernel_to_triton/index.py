"""Index expressions (sympy) as triton ops.

:class:`IndexEmitter` turns an index expression over the kernel's lane indices
(``xindex``, ``rindex``, ``yindex``), its size parameters and indirect indices into
integer triton ops in the kernel's index type, building each subexpression once per
scope. An expression that does not use the reduction index is built outside the
reduction loop (loop-invariant), one that does inside it.

Index expressions floor (``//`` and ``%`` as in Python) while Triton's integer ``//`` and
``%`` truncate toward zero; where the dividend may be negative (a padded or shifted
index in a masked lane), the floor is computed from the truncated quotient.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import cast

import sympy
from xdsl.dialects.builtin import IntegerType
from xdsl.ir import SSAValue

from kiln.dialects.loop.expr import FloorDiv
from kiln.dialects.loop.index_sign import is_nonnegative
from kiln.passes.kernel_to_triton.builder import TritonBuilder


class IndexLoweringError(ValueError):
    """An index expression with a construct Triton cannot compute."""


@dataclass
class IndexEmitter:
    """Builds index expressions (see the module docstring)."""

    builder: TritonBuilder
    index_type: IntegerType
    bases: dict[sympy.Symbol, SSAValue] = field(default_factory=dict[sympy.Symbol, SSAValue])
    """The value of each symbol: lane indices and size parameters."""
    depths: dict[sympy.Symbol, int] = field(default_factory=dict[sympy.Symbol, int])
    """The scope depth where each symbol's value is defined (default 0)."""

    def emit(
        self, expr: sympy.Expr, extra: Mapping[sympy.Symbol, SSAValue] | None = None
    ) -> SSAValue:
        """The value of ``expr``; ``extra`` binds indirect symbols (``i<k>``) for one load."""
        expr = sympy.sympify(expr)
        if extra:
            return self._build(expr, dict(extra), len(self.builder.scopes) - 1)
        return self._build(expr, {}, self._depth(expr))

    def _depth(self, expr: sympy.Expr) -> int:
        symbols = cast(set[sympy.Symbol], expr.free_symbols)
        return max((self.depths.get(s, 0) for s in symbols), default=0)

    def _build(self, expr: sympy.Expr, extra: dict[sympy.Symbol, SSAValue], depth: int) -> SSAValue:
        if expr.is_Integer:
            return self.builder.const(int(expr), self.index_type)
        if not extra:
            depth = self._depth(expr)
            found = self.builder.lookup(("index", expr), depth)
            if found is not None:
                return found
        value = self._compute(expr, extra, depth)
        if not extra:
            self.builder.remember(("index", expr), value, depth)
        return value

    def _sub(self, expr: sympy.Expr, extra: dict[sympy.Symbol, SSAValue], depth: int) -> SSAValue:
        if extra and not (expr.free_symbols & extra.keys()):
            return self._build(expr, {}, depth)
        return self._build(expr, extra, depth)

    def _compute(
        self, expr: sympy.Expr, extra: dict[sympy.Symbol, SSAValue], depth: int
    ) -> SSAValue:
        b = self.builder
        if isinstance(expr, sympy.Symbol):
            value = extra.get(expr) or self.bases.get(expr)
            if value is None:
                raise IndexLoweringError(f"index expression uses {expr}, which has no value here")
            return b.cast(value, self.index_type, depth)
        if isinstance(expr, sympy.Add):
            terms = cast(list[sympy.Expr], list(expr.as_ordered_terms()))
            positive = [t for t in terms if not _is_negated(t)]
            negative = [-t for t in terms if _is_negated(t)]
            if not positive:
                total = b.const(0, self.index_type)
            else:
                total = self._sub(positive[0], extra, depth)
                for term in positive[1:]:
                    total = b.binary("add", total, self._sub(term, extra, depth), depth)
            for term in negative:
                total = b.binary("sub", total, self._sub(term, extra, depth), depth)
            return total
        if isinstance(expr, sympy.Mul):
            coeff, rest = expr.as_coeff_Mul()
            factors = [f for f in sympy.Mul.make_args(rest)]
            if coeff == -1:
                zero = b.const(0, self.index_type)
                return b.binary("sub", zero, self._sub(rest, extra, depth), depth)
            out = self._sub(factors[0], extra, depth)
            for factor in factors[1:]:
                out = b.binary("mul", out, self._sub(factor, extra, depth), depth)
            if coeff != 1:
                out = b.binary("mul", b.const(int(coeff), self.index_type), out, depth)
            return out
        if isinstance(expr, sympy.Pow):
            base = self._sub(cast(sympy.Expr, expr.base), extra, depth)
            out = base
            for _ in range(int(cast(sympy.Expr, expr.exp)) - 1):
                out = b.binary("mul", out, base, depth)
            return out
        if isinstance(expr, FloorDiv | sympy.Mod):
            num_expr, den_expr = (cast(sympy.Expr, a) for a in expr.args)
            num = self._sub(num_expr, extra, depth)
            den = self._sub(den_expr, extra, depth)
            exact = is_nonnegative(num_expr)
            if isinstance(expr, FloorDiv):
                quotient = b.binary("floordiv", num, den, depth)
                if exact:
                    return quotient
                # floor(n / d) for d > 0: the truncated quotient, minus one where n < 0
                # leaves a remainder.
                remainder = b.binary("mod", num, den, depth)
                zero = b.const(0, self.index_type)
                adjust = b.cmp("lt", remainder, zero, depth)
                return b.binary("sub", quotient, b.cast(adjust, self.index_type, depth), depth)
            remainder = b.binary("mod", num, den, depth)
            if exact:
                return remainder
            zero = b.const(0, self.index_type)
            negative = b.cmp("lt", remainder, zero, depth)
            shifted = b.binary("add", remainder, den, depth)
            from kiln.dialects.triton import WhereOp

            return b.add(WhereOp(negative, shifted, remainder), depth)
        raise IndexLoweringError(f"cannot compute index expression {expr}")


def _is_negated(term: sympy.Expr) -> bool:
    coeff, _ = term.as_coeff_Mul()
    return bool(coeff.is_Number and coeff < 0)


__all__ = ["IndexEmitter", "IndexLoweringError"]

"""The index expression a host integer op computes from its operands' expressions.

``lower-aten``'s size expressions and ``buffer-reuse``'s buffer sizes both read host
``arith`` ops as expressions: constants, sums, differences, products and floor divisions
by a positive constant. Each caller says what an operand is (``operand_expr``) and what
an op outside these is (it gets None).
"""

from __future__ import annotations

from collections.abc import Callable

import sympy
from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import Operation, SSAValue

from kiln.dialects.loop.expr import Expr, floordiv


def arith_expr(owner: object, operand_expr: Callable[[SSAValue], Expr]) -> Expr | None:
    """``owner``'s result as an expression over ``operand_expr`` of its operands, or None
    when it is not one of the ops above."""
    if not isinstance(owner, Operation):
        return None
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return sympy.Integer(int(owner.value.value.data))
    if isinstance(owner, arith.AddiOp | arith.SubiOp | arith.MuliOp):
        a, b = (operand_expr(v) for v in owner.operands)
        if isinstance(owner, arith.AddiOp):
            return a + b
        return a - b if isinstance(owner, arith.SubiOp) else a * b
    if isinstance(owner, arith.FloorDivSIOp):
        a, b = (operand_expr(v) for v in owner.operands)
        if b.is_Integer and int(b) > 0:
            return floordiv(a, b)
    return None


__all__ = ["arith_expr"]

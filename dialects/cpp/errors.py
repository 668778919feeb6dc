"""Which ops of a ``cpp.func`` may raise its error flags.

A function returns ``KILN_ERR_INDEX`` when a checked load or a ``cpp.check_index`` finds
an index out of range, and ``KILN_ERR_DIV_ZERO`` when an integer division or remainder
divides by zero (eager raises for both). The emitter keeps a flag for these ops only, and
a loop holding one is not vectorized with ``omp simd`` (:mod:`kiln.backends.cpp.emit`).
"""

from __future__ import annotations

from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import Operation

from kiln.dialects.cpp.memory_ops import CheckIndexOp, LoadOp

INTEGER_DIVISIONS: tuple[type[Operation], ...] = (
    arith.DivSIOp,
    arith.DivUIOp,
    arith.RemSIOp,
    arith.RemUIOp,
    arith.FloorDivSIOp,
    arith.CeilDivSIOp,
    arith.CeilDivUIOp,
)


def may_divide_by_zero(op: Operation) -> bool:
    """An integer division or remainder whose divisor is not a nonzero constant."""
    if not isinstance(op, INTEGER_DIVISIONS):
        return False
    divisor = op.operands[1].owner
    return not (
        isinstance(divisor, arith.ConstantOp)
        and isinstance(divisor.value, IntegerAttr)
        and int(divisor.value.value.data) != 0  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
    )


def may_fail(op: Operation) -> bool:
    """Whether ``op`` can raise one of its function's error flags."""
    if isinstance(op, LoadOp):
        return op.checked is not None
    return isinstance(op, CheckIndexOp) or may_divide_by_zero(op)


__all__ = ["INTEGER_DIVISIONS", "may_divide_by_zero", "may_fail"]

"""Two versions of a loop nest, one of which runs, chosen at run time.

The cpp dialect has no ``if``; a version is a serial loop that runs once or not at all::

    int64_t use_fast = condition ? 1 : 0;
    for (int64_t v = 0; v < use_fast; ++v) { <fast copy> }
    for (int64_t v = use_fast; v < 1; ++v) { <original> }

The C compiler sees through the one-trip loops; each copy is optimized on its own (the
fast one without the work the condition made unnecessary).
"""

from __future__ import annotations

from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr
from xdsl.ir import Operation, SSAValue

from kiln.dialects.cpp.attributes import LoopKind
from kiln.dialects.cpp.loop_ops import ForOp


def version(root: Operation, condition: SSAValue, name: str) -> tuple[Operation, Operation]:
    """Replace ``root`` by a copy that runs when ``condition`` holds and the original that
    runs otherwise; returns ``(copy, original)``. ``condition`` must be defined before
    ``root``."""
    block = root.parent_block()
    assert block is not None
    one = arith.ConstantOp(IntegerAttr(1, IndexType()))
    zero = arith.ConstantOp(IntegerAttr(0, IndexType()))
    trips = arith.SelectOp(condition, one.result, zero.result)
    trips.result.name_hint = name
    for op in (one, zero, trips):
        block.insert_op_before(op, root)
    copy = root.clone()
    fast = ForOp(LoopKind.SERIAL, [zero.result], [trips.result])
    slow = ForOp(LoopKind.SERIAL, [trips.result], [one.result])
    block.insert_op_before(fast, root)
    block.insert_op_before(slow, root)
    root.detach()
    for guard, body in ((fast, copy), (slow, root)):
        terminator = guard.body.block.last_op
        assert terminator is not None
        guard.body.block.insert_op_before(body, terminator)
    return copy, root


__all__ = ["version"]

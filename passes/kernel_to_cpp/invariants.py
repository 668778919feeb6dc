"""Moving loop-invariant work out of vectorized loops.

The lowering translates every node's body at each point, so a value that does not
depend on the vectorized dim (the row of an embedding gather, ``ids[x0]``, read inside
the loop over ``x1``) is still loaded inside the SIMD loop. The C compiler cannot hoist
such a load itself (a store of the loop might alias it), so the load stays, and an
address computed from it is no longer affine in the loop variable: the access becomes a
gather instead of a contiguous vector load. ``#pragma omp simd`` already lets iterations
run concurrently, so reading an invariant element once before the loop is what the
pragma allows anyway.

Hoisted: ops whose operands are all defined outside the loop that are pure (``cpp.index``,
``arith``/``math`` scalar ops, except integer divisions by a divisor that may be zero, which
raise an error flag)
or plain loads (no mask, no bounds check: an out-of-range indirect index must raise its
error only when the loop runs) of a buffer the loop does not store to; and
``cpp.check_index`` of an invariant index (an embedding row's id, checked once per row
rather than once per element: the index was read at a valid position, and eager checks
every index whatever the other dims). With :mod:`kiln.backends.cpp.emit`'s guarded
checked loads this speeds up an embedding gather (docs/benchmarks/design-notes.md).
"""

from __future__ import annotations

from xdsl.ir import Operation, SSAValue
from xdsl.traits import is_side_effect_free

from kiln.dialects.cpp.attributes import LoopKind
from kiln.dialects.cpp.errors import may_divide_by_zero
from kiln.dialects.cpp.func_ops import FuncOp
from kiln.dialects.cpp.loop_ops import ForOp
from kiln.dialects.cpp.memory_ops import CheckIndexOp, LoadOp, StoreOp


def _defined_outside(value: SSAValue, loop: ForOp) -> bool:
    owner = value.owner
    return not loop.is_ancestor(owner)


def _stored_buffers(loop: ForOp) -> set[SSAValue]:
    return {op.buffer for op in loop.walk() if isinstance(op, StoreOp)}


def _hoistable(op: Operation, loop: ForOp, stored: set[SSAValue]) -> bool:
    if op.regions or may_divide_by_zero(op):
        return False
    if not all(_defined_outside(v, loop) for v in op.operands):
        return False
    if isinstance(op, LoadOp):
        return op.mask is None and op.checked is None and op.buffer not in stored
    if isinstance(op, CheckIndexOp):
        # An invariant index (an embedding row, read once per row) is checked once per
        # row. If the loop runs zero times nothing reads the index's row either, but the
        # index itself was read at a valid position, and eager checks every index.
        return True
    return is_side_effect_free(op)


def hoist_from(loop: ForOp) -> int:
    """Move the invariant ops of ``loop``'s body (in order) before it; returns how many."""
    stored = _stored_buffers(loop)
    parent = loop.parent_block()
    assert parent is not None
    moved = 0
    for op in list(loop.body.block.ops):
        if _hoistable(op, loop, stored):
            op.detach()
            parent.insert_op_before(op, loop)
            moved += 1
    return moved


def hoist_invariants(func: FuncOp) -> None:
    """Hoist the invariant work of every vectorized loop of ``func`` (see the module
    docstring)."""
    loops = [
        op
        for op in func.walk()
        if isinstance(op, ForOp) and op.loop_kind in (LoopKind.SIMD, LoopKind.PARALLEL_SIMD)
    ]
    for loop in loops:
        hoist_from(loop)


__all__ = ["hoist_from", "hoist_invariants"]

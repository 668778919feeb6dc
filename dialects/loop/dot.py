"""Matrix products among ``loop.reduction`` ops: the shape a GPU runs with ``tl.dot``.

A sum over ``r0`` of a product of two loads, one that does not depend on the second
index variable and one that does not depend on the first, is a matrix product
``out[d0, d1] = sum_r0 a[d0, r0] * b[r0, d1]`` (each operand through any strided view,
each widened to the accumulator's type first)::

    %mm = loop.reduction sum [8, 16] reduce [32] (%a, %b) {kiln.dot} : (memref<8x32xbf16>, memref<16x32xbf16>) -> memref<8x16xf32> {
    ^bb0(%d0: index, %d1: index, %r0: index, %x: memref<8x32xbf16>, %w: memref<16x32xbf16>):
      %0 = loop.load %x["32*d0 + r0"] : memref<8x32xbf16>
      %1 = loop.load %w["32*d1 + r0"] : memref<16x32xbf16>
      %2 = arith.extf %0 : bf16 to f32
      %3 = arith.extf %1 : bf16 to f32
      %4 = arith.mulf %2, %3 : f32
      loop.yield %4 : f32
    }

``lower-aten`` builds this form, marked ``kiln.dot``, for the products ``dot-kernels``
chose (a sum of products of the user's, a matrix-vector product say, stays a plain
reduction: only a marked one is a matrix product here); the scheduler
keeps such a node the only reduction of its kernel, with nothing inlined into its loads
(:func:`dot_operands` must keep matching), and ``lower-to-triton`` runs it as a tiled
``tl.dot`` loop with the kernel's pointwise nodes as its epilogue. Any other backend
runs it as the sum it is.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.dialects.builtin import UnitAttr
from xdsl.ir import Operation, SSAValue

from kiln.dialects.loop.attributes import ReductionKind
from kiln.dialects.loop.body_ops import LoadOp
from kiln.dialects.loop.body_ops import YieldOp as LoopYieldOp
from kiln.dialects.loop.expr import index_var, reduction_var
from kiln.dialects.loop.ops import ReductionOp

DOT_ATTR = "kiln.dot"


def mark_dot(op: ReductionOp) -> None:
    """Mark ``op``, built as a matrix product, for :func:`dot_operands`."""
    op.attributes[DOT_ATTR] = UnitAttr()


@dataclass(frozen=True)
class DotOperands:
    """The two loads of a matrix product node: ``lhs[d0, r0]`` and ``rhs[r0, d1]``."""

    lhs: LoadOp
    rhs: LoadOp


def _through_extf(value: SSAValue) -> SSAValue:
    owner = value.owner
    if isinstance(owner, arith.ExtFOp):
        return owner.input
    return value


def dot_operands(op: Operation) -> DotOperands | None:
    """The operands of ``op`` if it is a matrix product (see the module docstring)."""
    if not isinstance(op, ReductionOp) or op.kind.data is not ReductionKind.SUM:
        return None
    if DOT_ATTR not in op.attributes:
        return None
    if len(op.sizes.data) != 2 or len(op.reduction_sizes.data) != 1 or op.syms:
        return None
    ops = list(op.body.block.ops)
    yielded = ops[-1]
    if not isinstance(yielded, LoopYieldOp) or len(yielded.values) != 1:
        return None
    product = yielded.values[0].owner
    if not isinstance(product, arith.MulfOp):
        return None
    loads: list[LoadOp] = []
    for operand in (product.lhs, product.rhs):
        load = _through_extf(operand).owner
        if not isinstance(load, LoadOp) or load.mask is not None or load.indirect:
            return None
        loads.append(load)
    # Nothing else in the body: every op is one of the loads, their widenings, the
    # product or the yield.
    expected = {id(product), id(yielded), *(id(load) for load in loads)}
    expected |= {id(o.owner) for o in (product.lhs, product.rhs)}
    if any(id(o) not in expected for o in ops):
        return None
    d0, d1, r0 = index_var(0), index_var(1), reduction_var(0)

    def uses(load: LoadOp) -> set[object]:
        return set(load.index.data.free_symbols)

    a, b = loads
    if d1 in uses(a) or d0 in uses(b):
        a, b = b, a
    if d1 in uses(a) or d0 in uses(b) or r0 not in uses(a) or r0 not in uses(b):
        return None
    return DotOperands(a, b)


def is_dot(op: Operation) -> bool:
    return dot_operands(op) is not None


__all__ = ["DOT_ATTR", "DotOperands", "dot_operands", "is_dot", "mark_dot"]

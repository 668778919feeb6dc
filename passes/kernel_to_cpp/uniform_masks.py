"""Vectorized loops whose loads are masked by a condition that holds for the whole loop.

A padded window (max or average pooling, a convolution lowered to loops, ``pad``) reads
each tap under a bounds mask of the output position; over channels-last data the
vectorized loop runs along the channels, so every mask is the same for all its lanes::

    bool in_row = 2*x1 - 1 >= 0 && ...;
    for (x3 = 0; x3 < 24; ++x3) { a = in_row ? in[... + x3] : -inf; ... }

The conditional loads keep the C compiler from vectorizing plainly (ShuffleNet-v2's max
pool over 32x112x112x24: 4.8 ms a call). Such a loop is versioned (:mod:`.versioning`):
a copy with the masks taken as true (plain loads) runs when all of them hold (every
interior point), the original otherwise (1.1 ms for the same pool)::

    for (v = 0; v < (in_row && ... ? 1 : 0); ++v) { <loop, plain loads> }
    for (v = (...); v < 1; ++v) { <loop, masked loads> }
"""

from __future__ import annotations

from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, UnitAttr, i1
from xdsl.ir import Operation, SSAValue
from xdsl.rewriter import Rewriter

from kiln.dialects.cpp.attributes import LoopKind
from kiln.dialects.cpp.func_ops import FuncOp
from kiln.dialects.cpp.loop_ops import ForOp
from kiln.dialects.cpp.memory_ops import LoadOp
from kiln.passes.kernel_to_cpp.versioning import version

VERSIONED_ATTR = "kiln.masks_versioned"
"""On the masked original of a versioned loop: running the rewrite again skips it."""


def _uniform_masks(loop: ForOp) -> list[SSAValue]:
    """The masks of ``loop``'s loads that are computed outside it, in first-use order."""
    masks: list[SSAValue] = []
    for op in loop.body.block.ops:
        if isinstance(op, LoadOp) and op.mask is not None and op.mask not in masks:
            owner = op.mask.owner
            if not (isinstance(owner, Operation) and loop.is_ancestor(owner)):
                masks.append(op.mask)
    return masks


def _assume_true(loop: ForOp, masks: list[SSAValue]) -> None:
    """In ``loop`` (the fast copy), read the masks as true: their loads become plain."""
    block = loop.parent_block()
    assert block is not None
    true = arith.ConstantOp(IntegerAttr(1, i1))
    true.result.name_hint = "mask_true"
    block.insert_op_before(true, loop)
    for op in list(loop.walk()):
        for k, operand in enumerate(op.operands):
            if operand in masks:
                op.operands[k] = true.result
        if isinstance(op, LoadOp) and op.mask is true.result:
            plain = LoadOp(
                op.buffer, op.index.data, list(op.indices), checked=op.checked is not None
            )
            Rewriter.replace_op(op, plain)


def version_uniform_masks(func: FuncOp) -> None:
    """Version every vectorized loop whose loads are masked by loop-invariant conditions
    (module docstring)."""
    for loop in [op for op in func.walk() if isinstance(op, ForOp)]:
        if loop.loop_kind not in (LoopKind.SIMD, LoopKind.PARALLEL_SIMD):
            continue
        if VERSIONED_ATTR in loop.attributes:
            continue
        masks = _uniform_masks(loop)
        if not masks:
            continue
        block = loop.parent_block()
        assert block is not None
        condition = masks[0]
        for mask in masks[1:]:
            both = arith.AndIOp(condition, mask)
            block.insert_op_before(both, loop)
            condition = both.result
        fast, original = version(loop, condition, "in_bounds")
        assert isinstance(fast, ForOp)
        original.attributes[VERSIONED_ATTR] = UnitAttr()
        _assume_true(fast, masks)


__all__ = ["VERSIONED_ATTR", "version_uniform_masks"]

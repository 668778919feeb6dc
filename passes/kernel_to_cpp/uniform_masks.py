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

A ``cat`` masks the loads of each input by a comparison and those of the next by its
negation (``x3 < 1``, ``x3 >= 1`` once the channels split at the offset: see
:mod:`.thresholds`): they never all hold, so the loop is first versioned on one of
them, a copy for each value, the comparison and its negation constants in each (the
other input's loads gone), and each copy is then versioned on what masks it has left.
"""

from __future__ import annotations

from typing import cast

from xdsl.dialects import arith
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, UnitAttr, i1
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


def _assume(loop: ForOp, values: dict[SSAValue, bool]) -> None:
    """In ``loop`` (a copy that runs only where they hold), read each mask as its value:
    a load masked by a true one becomes plain, one masked by a false one its fill."""
    block = loop.parent_block()
    assert block is not None
    constants: dict[bool, SSAValue] = {}
    for value in sorted(set(values.values())):
        constant = arith.ConstantOp(IntegerAttr(int(value), i1))
        constant.result.name_hint = "mask_true" if value else "mask_false"
        block.insert_op_before(constant, loop)
        constants[value] = constant.result
    true, false = constants.get(True), constants.get(False)
    for op in list(loop.walk()):
        for k, operand in enumerate(op.operands):
            if operand in values:
                op.operands[k] = constants[values[operand]]
        if isinstance(op, LoadOp) and op.mask is not None and op.mask in (true, false):
            if op.mask is true:
                plain = LoadOp(
                    op.buffer, op.index.data, list(op.indices), checked=op.checked is not None
                )
                Rewriter.replace_op(op, plain)
            else:
                Rewriter.replace_op(op, arith.ConstantOp(cast(FloatAttr | IntegerAttr, op.fill)))


_NEGATED = {
    "slt": "sge", "sge": "slt", "sle": "sgt", "sgt": "sle",
    "ult": "uge", "uge": "ult", "ule": "ugt", "ugt": "ule", "eq": "ne", "ne": "eq",
}  # fmt: skip
"""Each ``arith.cmpi`` predicate's negation."""


def _relation(mask: SSAValue) -> tuple[SSAValue, SSAValue, str] | None:
    owner = mask.owner
    if not isinstance(owner, arith.CmpiOp):
        return None
    predicate = arith.CMPI_COMPARISON_OPERATIONS[owner.predicate.value.data]
    return owner.lhs, owner.rhs, predicate


def _atoms(mask: SSAValue) -> list[SSAValue]:
    """The conjuncts of ``mask`` (``arith.andi`` trees)."""
    owner = mask.owner
    if isinstance(owner, arith.AndIOp):
        return _atoms(owner.lhs) + _atoms(owner.rhs)
    return [mask]


def _selector(masks: list[SSAValue]) -> tuple[SSAValue, SSAValue] | None:
    """A comparison among the masks' conjuncts whose negation is one too (a ``cat``'s
    inputs: their masks never all hold), with that negation."""
    atoms = [a for m in masks for a in _atoms(m)]
    relations = {a: r for a in atoms if (r := _relation(a)) is not None}
    for atom, (lhs, rhs, predicate) in relations.items():
        for other, (a, b, p) in relations.items():
            if a is lhs and b is rhs and p == _NEGATED[predicate]:
                return atom, other
    return None


def _implied(
    masks: list[SSAValue], atom: SSAValue, value: bool, assumed: dict[SSAValue, bool]
) -> dict[SSAValue, bool]:
    """``assumed`` and the conjuncts and masks whose values follow from ``atom`` being
    ``value``: the same comparison (``value``), its negation (not ``value``), and the
    masks all of whose conjuncts are known or one of which is false."""
    relation = _relation(atom)
    assert relation is not None
    lhs, rhs, predicate = relation
    known = dict(assumed)
    for mask in masks:
        for a in _atoms(mask):
            r = _relation(a)
            if r is not None and r[0] is lhs and r[1] is rhs:
                if r[2] == predicate:
                    known[a] = value
                elif r[2] == _NEGATED[predicate]:
                    known[a] = not value
    for mask in masks:
        atoms = [known.get(a) for a in _atoms(mask)]
        if False in atoms:
            known[mask] = False
        elif all(atoms):
            known[mask] = True
    return known


def version_uniform_masks(func: FuncOp) -> None:
    """Version every vectorized loop whose loads are masked by loop-invariant conditions
    (module docstring)."""
    for loop in [op for op in func.walk() if isinstance(op, ForOp)]:
        if loop.loop_kind not in (LoopKind.SIMD, LoopKind.PARALLEL_SIMD):
            continue
        if VERSIONED_ATTR in loop.attributes:
            continue
        _version(loop)


MAX_SELECTIONS = 3
"""At most this many nested versions on a ``cat``'s comparisons (2**3 copies of a loop)."""


def _version(loop: ForOp, assumed: dict[SSAValue, bool] | None = None, depth: int = 0) -> None:
    """Version ``loop`` on its uniform masks; ``assumed``: the conjuncts the versions
    around it hold fixed."""
    assumed = {} if assumed is None else assumed
    masks = _uniform_masks(loop)
    if not masks:
        return
    block = loop.parent_block()
    assert block is not None
    selector = _selector(masks) if depth < MAX_SELECTIONS else None
    if selector is not None:
        atom, _ = selector
        chosen, other = version(loop, atom, "selected")
        assert isinstance(chosen, ForOp)
        assert isinstance(other, ForOp)
        for copy, value in ((chosen, True), (other, False)):
            implied = _implied(masks, atom, value, assumed)
            _assume(copy, implied)
            _version(copy, implied, depth + 1)
        return
    condition = masks[0]
    for mask in masks[1:]:
        both = arith.AndIOp(condition, mask)
        block.insert_op_before(both, loop)
        condition = both.result
    fast, original = version(loop, condition, "in_bounds")
    assert isinstance(fast, ForOp)
    original.attributes[VERSIONED_ATTR] = UnitAttr()
    _assume(fast, dict.fromkeys(masks, True))


__all__ = ["VERSIONED_ATTR", "version_uniform_masks"]

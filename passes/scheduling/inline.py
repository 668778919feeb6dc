"""Inlining cheap pointwise producers into their consumers (recompute instead of store).

A ``loop.pointwise`` node ``P`` whose buffer only loop nests read (it is neither
returned nor passed to an extern call) can disappear: each ``loop.load`` of its buffer
becomes a copy of ``P``'s body, with ``P``'s index variables replaced by the
coordinates of the loaded position. That removes ``P``'s write and the consumers'
reads of it, at the price of recomputing ``P`` and reading its inputs in every
consumer. :func:`~kiln.passes.scheduling.inline_cost.worth_inlining` weighs the two in bytes of memory traffic, and only
takes cheap bodies (few ops, transcendental functions only for a single consumer), so
that what is recomputed stays negligible; Inductor makes the same trade when it inlines
pointwise nodes at lowering time. Inlining also lets nodes fuse that could not before:
a broadcast constant or mask feeding a reduction kernel, for example.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import sympy
from xdsl.dialects import arith
from xdsl.dialects.builtin import FloatAttr, IndexType, IntegerAttr, MemRefType
from xdsl.dialects.func import FuncOp
from xdsl.ir import Attribute, Block, Operation, SSAValue

from kiln.dialects.loop.attributes import IndexExprAttr
from kiln.dialects.loop.body_ops import IndexOp, LoadOp, YieldOp, fill_attr
from kiln.dialects.loop.dot import is_dot
from kiln.dialects.loop.expr import (
    index_var,
    indirect_var,
    size_var,
)
from kiln.dialects.loop.ops import LoopNestOp, PointwiseOp, ReductionOp, segment_sizes
from kiln.dialects.loop.simplify import simplify_with_ranges
from kiln.passes.scheduling.build import unflatten
from kiln.passes.scheduling.exprs import substitute
from kiln.passes.scheduling.inline_cost import (
    gather_ranges,
    gathered_index_op,
    gathered_position,
    index_only,
    loads_of,
    permuted_read,
    reads_in_order,
    split_read,
    worth_inlining,
)
from kiln.passes.scheduling.legality import loop_ranges
from kiln.passes.scheduling.mask_facts import mask_facts


def _set_operands(
    consumer: LoopNestOp, inputs: Sequence[SSAValue], syms: Sequence[SSAValue]
) -> None:
    """Give the consumer new operand lists in place (its block arguments already fit them):
    building a new op and moving the body over cost ~5 % of ``fuse`` at 48 layers."""
    consumer.operands = [*inputs, *syms]
    consumer.properties["operandSegmentSizes"] = segment_sizes(len(inputs), len(syms))


def inline_into(producer: PointwiseOp, consumer: LoopNestOp) -> None:
    """Replace every load of ``producer``'s buffer in ``consumer`` by its body (in place)."""
    block: Block = consumer.body.block
    loads = loads_of(consumer, producer.result)
    inputs = list(consumer.inputs)
    syms = list(consumer.syms)
    # The producer's inputs and sizes, as the consumer's block arguments and s<k>.
    arg_for: dict[SSAValue, SSAValue] = dict(
        zip(consumer.inputs, consumer.input_args(), strict=True)
    )
    for outer in producer.inputs:
        if outer not in arg_for:
            inputs.append(outer)
            arg_for[outer] = block.insert_arg(outer.type, len(block.args))
    sym_rename: dict[sympy.Symbol, sympy.Expr] = {}
    for k, value in enumerate(producer.syms):
        if value not in syms:
            syms.append(value)
        sym_rename[size_var(k)] = size_var(syms.index(value))
    producer_sizes = [substitute(s.data, sym_rename) for s in producer.sizes.data]
    ranges = loop_ranges(consumer)
    p_block = producer.body.block
    p_vars = p_block.args[: producer.num_loop_vars]
    p_inputs = producer.input_args()
    outer_ranges = ranges
    for load in loads:
        # Where the load is masked off, the producer's position does not matter (its
        # loads are masked too and the fill replaces the value): the mask's bounds on
        # the loop variables hold wherever the inlined body counts, e.g. ``d3 < 16``
        # for the first half of a ``cat`` (RoPE's ``cat([-x2, x1])``), which drops the
        # per-element ``//`` and ``%`` of the producer's unflattened position.
        # Where the mask bounds an expression (``d3 // 2 + 58*(d3 % 2) >= 58``, the
        # second input of a ``cat`` after a channel shuffle), the coordinates are
        # simplified knowing it (``mask_facts``).
        facts = mask_facts(load, outer_ranges)
        masked_ranges = dict(facts.ranges)
        ranges = gather_ranges(load.indirect, masked_ranges)
        if reads_in_order(load, producer_sizes, outer_ranges):
            coordinates = [index_var(k) for k in range(len(producer_sizes))]
        elif (permuted := permuted_read(load, producer_sizes, outer_ranges)) is not None:
            coordinates = permuted
        elif (split := split_read(load, producer_sizes, outer_ranges)) is not None:
            coordinates = split
        else:
            coordinates = [
                facts.simplify(c, ranges)
                for c in unflatten(facts.write(load.index.data), producer_sizes)
            ]
        substitution = {**sym_rename, **{index_var(k): c for k, c in enumerate(coordinates)}}
        mapping: dict[SSAValue, SSAValue] = {
            arg: arg_for[outer] for arg, outer in zip(p_inputs, producer.inputs, strict=True)
        }
        for k, var_arg in enumerate(p_vars):
            gathered = gathered_position(coordinates[k])
            if var_arg.uses and gathered is not None:
                mapping[var_arg] = load.indirect[gathered]
            elif var_arg.uses:
                index_op = IndexOp.build(
                    properties={
                        "expr": IndexExprAttr(simplify_with_ranges(coordinates[k], ranges))
                    },
                    result_types=[IndexType()],
                )
                block.insert_op_before(index_op, load)
                mapping[var_arg] = index_op.result
        value: SSAValue | None = None
        for inner in p_block.ops:
            if isinstance(inner, YieldOp):
                value = mapping.get(inner.values[0], inner.values[0])
                break
            if isinstance(inner, IndexOp):
                gathered = gathered_index_op(inner, coordinates)
                if gathered is not None:
                    mapping[inner.result] = load.indirect[gathered]
                    continue
            clone = inner.clone(value_mapper=mapping)
            block.insert_op_before(clone, load)
            if isinstance(clone, LoadOp):
                # The consumer's indirect indices follow the producer load's own (i<k>
                # renumbered); where the consumer's load is masked off, the producer's
                # position may be out of bounds, so its loads are masked too.
                shift = {
                    indirect_var(j): indirect_var(len(clone.indirect) + j)
                    for j in range(len(load.indirect))
                }
                moved = {v: substitute(e, shift) for v, e in substitution.items()}
                # The clone's indirect indices: its own, then the consumer's (shifted).
                clone_ranges = gather_ranges([*clone.indirect, *load.indirect], masked_ranges)
                clone.index = IndexExprAttr(
                    facts.simplify(sympy.expand(substitute(clone.index.data, moved)), clone_ranges)
                )
                if load.indirect or load.mask is not None:
                    mapping[inner.results[0]] = _retarget(clone, load, block)
            else:
                _substitute(clone, substitution, ranges)
        assert value is not None
        if load.mask is not None and load.fill is not None:
            fill = arith.ConstantOp(cast(FloatAttr | IntegerAttr, load.fill))
            select = arith.SelectOp(load.mask, value, fill.result)
            block.insert_ops_before([fill, select], load)
            value = select.result
        load.result.replace_all_uses_with(value)
        block.erase_op(load)
    # Drop the producer's buffer from the consumer if nothing reads it any more.
    keep_inputs: list[SSAValue] = []
    for outer, arg in list(zip(inputs, block.args[consumer.num_loop_vars :], strict=True)):
        if arg.uses:
            keep_inputs.append(outer)
        else:
            block.erase_arg(arg)
    _set_operands(consumer, keep_inputs, syms)


def _retarget(load: LoadOp, consumer_load: LoadOp, block: Block) -> SSAValue:
    """Replace ``load`` (a producer's load inlined at ``consumer_load``) by one that also
    takes the consumer's indirect indices and reads nothing where its mask is false."""
    new_ops: list[Operation] = []
    mask = consumer_load.mask
    properties: dict[str, Attribute] = {"index": load.index}
    if mask is not None and load.mask is not None:
        both = arith.AndIOp(load.mask, mask)
        new_ops.append(both)
        mask = both.result
    elif mask is None:
        mask = load.mask
    if mask is not None:
        buffer_type = load.buffer.type
        assert isinstance(buffer_type, MemRefType)
        properties["fill"] = (
            load.fill if load.fill is not None else fill_attr(0, buffer_type.element_type)
        )
    masked = LoadOp.build(
        operands=[
            load.buffer,
            [*load.indirect, *consumer_load.indirect],
            [mask] if mask is not None else [],
        ],
        result_types=[load.result.type],
        properties=properties,
    )
    new_ops.append(masked)
    block.insert_ops_before(new_ops, load)
    load.result.replace_all_uses_with(masked.result)
    block.erase_op(load)
    return masked.result


def _substitute(
    op: Operation,
    substitution: dict[sympy.Symbol, sympy.Expr],
    ranges: dict[sympy.Symbol, sympy.Expr],
) -> None:
    for inner in op.walk():
        if isinstance(inner, LoadOp):
            expr = inner.index.data.xreplace(substitution)
            inner.index = IndexExprAttr(simplify_with_ranges(sympy.expand(expr), ranges))
        elif isinstance(inner, IndexOp):
            expr = inner.expr.data.xreplace(substitution)
            inner.expr = IndexExprAttr(simplify_with_ranges(sympy.expand(expr), ranges))


def _empty_space(op: LoopNestOp) -> bool:
    """``op`` iterates over no element (a size that is the integer 0)."""
    sizes = [*op.sizes.data, *op.reduction_sizes_list()]
    return any(size.data == 0 for size in sizes)


def inline_cheap_producers(
    func: FuncOp,
    max_rounds: int = 8,
    pairs: list[tuple[Operation, Operation]] | None = None,
    cpu: bool = False,
) -> int:
    """Inline every pointwise node worth inlining; returns how many were inlined.
    ``pairs``: gets each (producer, consumer) inlined, in order, but for producers that
    read no buffer (what they bring into a consumer depends on nothing outside it);
    ``cpu``: the kernels run on the CPU (see :func:`worth_inlining`)."""
    block = func.body.block
    returned = set(block.last_op.operands) if block.last_op is not None else set()
    inlined = 0
    # How often each op was changed (inlined into): a producer refused with the same
    # consumers, none of them changed since, is refused again without weighing it (a
    # fifth of the calls at 48 layers).
    changes: dict[Operation, int] = {}
    refused: set[tuple[tuple[Operation, int], ...]] = set()
    for _ in range(max_rounds):
        changed: set[Operation] = set()
        same_space = _reductions_by_space(block)
        for producer in [op for op in block.ops if isinstance(op, PointwiseOp)]:
            result = producer.result
            # An op changed this round waits for the next (as a rebuilt op did, which
            # was not in this round's list).
            if producer in changed or result in returned or not result.uses:
                continue
            consumers = list(dict.fromkeys(use.operation for use in result.uses))
            if not all(isinstance(c, LoopNestOp) for c in consumers):
                continue
            loops = [c for c in consumers if isinstance(c, LoopNestOp)]
            if any(is_dot(c) for c in loops):
                # A matrix product's operands are plain loads (``tl.dot`` tiles), so what
                # feeds it stays a kernel of its own, as for cuBLAS.
                continue
            if any(_empty_space(op) for op in (producer, *loops)):
                # Nothing to compute, and composing indices would divide by the zero size
                # (qr's gradient of a [5, 0] matrix: ``zoo*d0``).
                continue
            siblings = {c: _siblings(c, same_space) for c in loops}
            weighed = [*loops, *(s for c in loops for s in siblings[c])]
            key = tuple((op, changes.get(op, 0)) for op in (producer, *weighed))
            if key in refused:
                continue
            if not worth_inlining(producer, loops, cpu, siblings=siblings):
                refused.add(key)
                continue
            position_only = index_only(producer, cpu)
            for consumer in loops:
                inline_into(producer, consumer)
                if pairs is not None and not position_only:
                    pairs.append((producer, consumer))
                changes[consumer] = changes.get(consumer, 0) + 1
                changed.add(consumer)
            block.erase_op(producer)
            inlined += 1
        if not changed:
            break
    return inlined


def _space(loop: LoopNestOp) -> tuple[object, ...] | None:
    """What a reduction iterates over (sizes, reduction sizes, size operands); None for a
    pointwise node."""
    if not isinstance(loop, ReductionOp):
        return None
    return (
        tuple(str(s) for s in loop.sizes.data),
        tuple(str(s) for s in loop.reduction_sizes_list()),
        tuple(loop.syms),
    )


def _siblings(
    loop: LoopNestOp, same_space: dict[tuple[object, ...], list[LoopNestOp]]
) -> list[LoopNestOp]:
    """The other reductions over ``loop``'s space (none for a pointwise node). ``tile``
    splits a kernel of several reductions as it splits one of one (each with its own
    partials), so the pair fused runs as fast as either alone (ResNet-18's training step
    at batch 32 on an H200: 6.90 ms of kernels with the credit off where tile splits,
    6.18 ms with it on)."""
    space = _space(loop)
    if space is None:
        return []
    return [s for s in same_space.get(space, ()) if s is not loop]


def _reductions_by_space(block: Block) -> dict[tuple[object, ...], list[LoopNestOp]]:
    groups: dict[tuple[object, ...], list[LoopNestOp]] = {}
    for op in block.ops:
        if isinstance(op, ReductionOp):
            space = _space(op)
            assert space is not None
            groups.setdefault(space, []).append(op)
    return groups


__all__ = ["inline_cheap_producers", "inline_into", "worth_inlining"]

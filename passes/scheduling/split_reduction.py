"""Splitting a large reduction with a small output into two kernels.

``x.sum()`` over 2^24 elements has one output: a single block would do all the work.
Like Inductor's ``split_reductions``, the reduction is cut into ``S`` chunks: a first
kernel (kind ``split``) computes ``numel * S`` partial results over ``rnumel / S``
elements each, together with the pointwise prologue nodes fused before the reduction;
a second kernel reduces the ``S`` partials of each output and runs the epilogue.

Only kernels of this shape are split: reductions whose partials combine (sum, prod,
max, min, any, all with the same reduction; ``welford`` with Chan's formula, see
:func:`_combine_welford`; several, as batch norm's backward ``sum(g)`` and
``sum(g * (x - m))``, each with its own partials and combine), none reading another; nodes over the whole space that do not depend on them (computed
where a reduction reads them, or beside them); and epilogue nodes over the reduced space
after them; static sizes, and ``S`` divides ``rnumel``.

Where the partials go: an *inner* reduction (contiguous along the reduced dimension,
``x.sum(-1)``, ``x.sum()``) keeps each output's ``S`` partials together
(``[*sizes, S]``: a program reads one contiguous chunk). An *outer* reduction
(``x.amax(0)``: neighbouring outputs are neighbours in memory) puts the chunk index
first (``[S, *sizes]``), so that the lanes of a program read neighbouring columns of one
chunk (chunk-innermost partials measured far slower, whatever the block sizes, because a
block's lanes then spanned only XBLOCK/S columns: docs/benchmarks/design-notes.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import sympy
from xdsl.dialects.arith import AddfOp, DivfOp, MulfOp, SubfOp
from xdsl.dialects.builtin import ArrayAttr, IndexType, MemRefType
from xdsl.ir import Attribute, Block, Region, SSAValue

from kiln.dialects.kernel.attributes import KernelKind
from kiln.dialects.kernel.kernel_ops import VARS_ATTR, KernelOp, YieldOp, node_vars, vars_attr
from kiln.dialects.loop.attributes import IndexExprAttr, ReductionKind, ReductionKindAttr
from kiln.dialects.loop.body_ops import IndexOp, LoadOp
from kiln.dialects.loop.body_ops import YieldOp as LoopYieldOp
from kiln.dialects.loop.expr import FloorDiv, index_var, reduction_var
from kiln.dialects.loop.ops import LoopNestOp, PointwiseOp, ReductionOp, buffer_type
from kiln.dialects.loop.simplify import simplify_with_ranges
from kiln.passes.scheduling.build import R, X, node_kernel_vars, unflatten
from kiln.passes.scheduling.legality import Level, flat_index
from kiln.passes.scheduling.tiling import combinable


@dataclass
class SplitKernels:
    first: KernelOp
    second: KernelOp
    partial_types: list[MemRefType]
    """One partials buffer per reduction result (three for a ``welford``): the last
    results of ``first``, the first arguments of ``second``, in this order."""
    first_outputs: list[int]
    """For each result of ``first`` before the partials: the original result index."""
    second_inputs: list[int | None]
    """For each argument of ``second``: an original argument index, or None for a
    partials buffer (the next one of :attr:`partial_types`)."""
    second_outputs: list[int]


def _level(node: LoopNestOp) -> Level:
    if isinstance(node, ReductionOp):
        return Level.RED
    return Level.XR if any(e.has(R) for e in node_vars(node)) else Level.X


@dataclass
class SplitParts:
    """The nodes of a kernel :func:`split_kernel` can split."""

    prologue: list[LoopNestOp]
    """Nodes over the whole space before the first reduction, and later ones a reduction
    reads (directly or through another): computed where the partial reductions read."""
    beside: list[LoopNestOp]
    """The other nodes over the whole space (after a reduction, not read by one, not
    reading one): they run in the first kernel too, enumerating the space row-major."""
    reductions: list[ReductionOp]
    epilogue: list[LoopNestOp]
    """Nodes over the reduced space that read the reductions: they run in the second
    kernel."""


def split_parts(kernel: KernelOp, outer: bool = False) -> SplitParts | None:
    """How :func:`split_kernel` would split ``kernel`` (None: it cannot).

    A node over the whole space fused after a reduction but not reading it (a
    batch-norm backward's ``grad * (x - mean)``, fused beside ``sum(grad)`` because both
    read ``grad``) runs beside the partial reductions: left unsplit, such a kernel ran the
    whole reduction in one program per block of channels (81 ms for one kernel of
    MobileNet-v2's training step on an H200)."""
    if kernel.kernel_kind is not KernelKind.REDUCTION or kernel.sym_args():
        return None
    reductions: list[ReductionOp] = []
    whole: list[LoopNestOp] = []
    before_any: set[LoopNestOp] = set()
    epilogue: list[LoopNestOp] = []
    reduced: set[SSAValue] = set()
    for node in kernel.nodes():
        reads_reduced = any(v in reduced for v in node.operands)
        if isinstance(node, ReductionOp):
            if reads_reduced or not combinable(node):
                return None
            reductions.append(node)
            reduced.update(node.results)
        elif reads_reduced:
            if _level(node) is not Level.X:
                return None
            reduced.update(node.results)
            epilogue.append(node)
        elif _level(node) is Level.XR:
            whole.append(node)
            if not reductions:
                before_any.add(node)
        else:
            return None
    if not reductions:
        return None
    # The nodes before the first reduction, and the later whole-space nodes a reduction
    # reads (directly or through one another).
    read: set[SSAValue] = {v for r in reductions for v in r.operands}
    prologue: list[LoopNestOp] = []
    for node in reversed(whole):
        if node in before_any or any(v in read for v in node.results):
            prologue.append(node)
            read.update(node.operands)
    prologue.reverse()
    beside = [n for n in whole if n not in prologue]
    # The second kernel reads the kernel's arguments, the reductions and the epilogue only.
    args = set(kernel.body.block.args)
    if any(v not in args and v not in reduced for n in epilogue for v in n.operands):
        return None
    # Nodes beside the reductions enumerate the space as an inner split does (see
    # split_kernel): an outer split's prologue does otherwise, so they must not read it.
    prologue_values = {v for n in prologue for v in n.results}
    if outer and any(v in prologue_values for n in beside for v in n.operands):
        return None
    return SplitParts(prologue, beside, reductions, epilogue)


def can_split(kernel: KernelOp, outer: bool = False) -> bool:
    return split_parts(kernel, outer) is not None


def _partial_reduction(
    red: ReductionOp, splits: int, chunk: sympy.Expr, outer: bool
) -> ReductionOp:
    """``red`` over ``[*sizes, splits]`` (``[splits, *sizes]`` if ``outer``) reduce
    ``[chunk]``: partial results per chunk."""
    n_d = len(red.sizes.data)
    rsizes = [s.data for s in red.reduction_sizes.data]
    old_block = red.body.block
    new_block = Block(arg_types=[IndexType()] * (n_d + 2) + [v.type for v in red.inputs])
    # Position of the chunk index and of each old index among the new ones.
    split_position = 0 if outer else n_d
    positions = [k + 1 if outer else k for k in range(n_d)]
    flat_r = index_var(split_position) * chunk + reduction_var(0)
    old_r = unflatten(flat_r, rsizes)
    substitution: dict[sympy.Basic, sympy.Expr] = {reduction_var(k): e for k, e in enumerate(old_r)}
    substitution.update({index_var(k): index_var(p) for k, p in enumerate(positions) if k != p})
    mapping: dict[SSAValue, SSAValue] = {}
    for k in range(n_d):
        mapping[old_block.args[k]] = new_block.args[positions[k]]
    for old, new in zip(red.input_args(), new_block.args[n_d + 2 :], strict=True):
        mapping[old] = new
        new.name_hint = old.name_hint
    for k in range(len(rsizes)):
        arg = old_block.args[n_d + k]
        if arg.uses:
            index_op = IndexOp.build(
                properties={"expr": IndexExprAttr(sympy.sympify(old_r[k]))},
                result_types=[IndexType()],
            )
            new_block.add_op(index_op)
            mapping[arg] = index_op.result
    ranges = {index_var(positions[k]): s.data for k, s in enumerate(red.sizes.data)}
    ranges[index_var(split_position)] = sympy.Integer(splits)
    ranges[reduction_var(0)] = chunk

    def rewrite(expr: sympy.Expr) -> IndexExprAttr:
        return IndexExprAttr(
            simplify_with_ranges(sympy.expand(expr.xreplace(substitution)), ranges)
        )

    for op in old_block.ops:
        clone = op.clone(value_mapper=mapping)
        for inner in clone.walk():
            if isinstance(inner, LoadOp):
                inner.index = rewrite(inner.index.data)
            elif isinstance(inner, IndexOp):
                inner.expr = rewrite(inner.expr.data)
        new_block.add_op(clone)
    old_sizes = [s.data for s in red.sizes.data]
    sizes = [sympy.Integer(splits), *old_sizes] if outer else [*old_sizes, sympy.Integer(splits)]
    partial = ReductionOp.build(
        operands=[list(red.inputs), list(red.syms)],
        result_types=[[buffer_type(_element(out.type), sizes) for out in red.outputs]],
        properties={
            "kind": red.kind,
            "sizes": ArrayAttr(IndexExprAttr(sympy.sympify(s)) for s in sizes),
            "reduction_sizes": ArrayAttr([IndexExprAttr(sympy.sympify(chunk))]),
        },
        regions=[Region(new_block)],
    )
    return partial


def _element(buffer: Attribute) -> Attribute:
    assert isinstance(buffer, MemRefType)
    return buffer.element_type


def _partial_index(sizes: list[sympy.Expr], splits: int, outer: bool) -> sympy.Expr:
    """Where partial ``r0`` of output ``d`` lies in a partials buffer."""
    d = [index_var(k) for k in range(len(sizes))]
    if outer:
        numel: sympy.Expr = sympy.Integer(1)
        for size in sizes:
            numel = numel * size
        return sympy.expand(reduction_var(0) * numel + flat_index(d, sizes))
    return sympy.expand(flat_index(d, sizes) * splits + reduction_var(0))


def _load(buffer: SSAValue, index: sympy.Expr) -> LoadOp:
    return LoadOp.build(
        operands=[buffer, [], []],
        result_types=[_element(buffer.type)],
        properties={"index": IndexExprAttr(sympy.sympify(index))},
    )


def _reduction_block(n_d: int, inputs: list[SSAValue]) -> Block:
    return Block(arg_types=[IndexType()] * (n_d + 1) + [v.type for v in inputs])


def _sum_node(red: ReductionOp, inputs: list[SSAValue], block: Block, splits: int) -> ReductionOp:
    value = block.last_op
    assert value is not None
    assert len(value.results) == 1
    block.add_op(LoopYieldOp(value.results[0]))
    return ReductionOp.build(
        operands=[inputs, []],
        result_types=[[red.outputs[0].type]],
        properties={
            "kind": ReductionKindAttr(ReductionKind.SUM),
            "sizes": red.sizes,
            "reduction_sizes": ArrayAttr([IndexExprAttr(sympy.Integer(splits))]),
        },
        regions=[Region(block)],
    )


def _combine(red: ReductionOp, partials: SSAValue, splits: int, outer: bool) -> ReductionOp:
    """Reduces the ``splits`` partials of each output with the same reduction."""
    sizes = [s.data for s in red.sizes.data]
    block = Block(arg_types=[IndexType()] * (len(sizes) + 1) + [partials.type])
    load = _load(block.args[-1], _partial_index(sizes, splits, outer))
    block.add_ops([load, LoopYieldOp(load.result)])
    combine = ReductionOp.build(
        operands=[[partials], []],
        result_types=[[red.outputs[0].type]],
        properties={
            "kind": ReductionKindAttr(red.kind.data),
            "sizes": red.sizes,
            "reduction_sizes": ArrayAttr([IndexExprAttr(sympy.Integer(splits))]),
        },
        regions=[Region(block)],
    )
    return combine


def _combine_welford(
    red: ReductionOp, partials: Sequence[SSAValue], splits: int, outer: bool
) -> tuple[list[LoopNestOp], list[SSAValue]]:
    """The nodes combining a ``welford``'s partial (mean, m2, count) triples, and the
    values standing for its three results.

    Chan et al.'s formula in two passes over the partials, which are sums:
    ``n = sum(n_i)``, ``mean = sum(n_i * mean_i) / n``,
    ``m2 = sum(m2_i + n_i * (mean_i - mean)^2)`` (the deviations from the combined mean,
    not the cancellation-prone sum of squares). Every chunk holds ``rnumel / S``
    elements, so ``n`` is never zero."""
    sizes = [s.data for s in red.sizes.data]
    n_d = len(sizes)
    at = _partial_index(sizes, splits, outer)
    here = flat_index([index_var(k) for k in range(n_d)], sizes)
    mean_p, m2_p, count_p = partials

    block = _reduction_block(n_d, [count_p])
    block.add_op(_load(block.args[-1], at))
    count = _sum_node(red, [count_p], block, splits)

    block = _reduction_block(n_d, [mean_p, count_p])
    m, n = _load(block.args[-2], at), _load(block.args[-1], at)
    block.add_ops([m, n, MulfOp(n.result, m.result)])
    weighted = _sum_node(red, [mean_p, count_p], block, splits)

    inputs = [mean_p, m2_p, count_p, weighted.outputs[0], count.outputs[0]]
    block = _reduction_block(n_d, inputs)
    m_i, m2_i, n_i = (_load(a, at) for a in block.args[-5:-2])
    total, n = _load(block.args[-2], here), _load(block.args[-1], here)
    mean = DivfOp(total.result, n.result)
    deviation = SubfOp(m_i.result, mean.result)
    square = MulfOp(deviation.result, deviation.result)
    weighted_square = MulfOp(n_i.result, square.result)
    block.add_ops([m_i, m2_i, n_i, total, n, mean, deviation, square, weighted_square])
    block.add_op(AddfOp(m2_i.result, weighted_square.result))
    m2 = _sum_node(red, inputs, block, splits)

    out = [weighted.outputs[0], count.outputs[0]]
    block = Block(arg_types=[IndexType()] * n_d + [v.type for v in out])
    total, n = _load(block.args[-2], here), _load(block.args[-1], here)
    mean = DivfOp(total.result, n.result)
    block.add_ops([total, n, mean, LoopYieldOp(mean.result)])
    mean_node = PointwiseOp.build(
        operands=[out, []],
        result_types=[red.outputs[0].type],
        properties={"sizes": red.sizes},
        regions=[Region(block)],
    )
    return [count, weighted, m2, mean_node], [mean_node.result, m2.outputs[0], count.outputs[0]]


def split_kernel(
    kernel: KernelOp, splits: int, names: tuple[str, str], outer: bool = False
) -> SplitKernels:
    """The two kernels replacing ``kernel`` (see the module docstring; ``outer`` puts the
    chunk index first in the partials)."""
    numel = kernel.numel.data
    rnumel = kernel.rnumel.data
    chunk = sympy.Integer(int(rnumel) // splits)
    parts = split_parts(kernel, outer)
    assert parts is not None, f"@{kernel.sym_name.data} cannot be split"
    whole = set(parts.prologue) | set(parts.beside)
    args = list(kernel.body.block.args)
    outputs = list(kernel.yield_op().values)

    # First kernel: the whole-space nodes and the partial reductions over (x', r'), in
    # the original order.
    first_block = Block(arg_types=[a.type for a in args])
    mapping: dict[SSAValue, SSAValue] = dict(zip(args, first_block.args, strict=True))
    for old, new in zip(args, first_block.args, strict=True):
        new.name_hint = old.name_hint
    # Point (x, r) of the first kernel is point (X, R) of the original one. The prologue
    # is computed where the partial reductions read it; nodes beside them enumerate
    # their space row-major (x * chunk + r is X * rnumel + R).
    row_major = {X: FloorDiv(X, splits), R: sympy.Mod(X, splits) * chunk + R}
    if outer:
        remap = {X: sympy.Mod(X, numel), R: FloorDiv(X, numel) * chunk + R}
    else:
        remap = row_major
    partials: list[ReductionOp] = []
    for node in kernel.nodes():
        if isinstance(node, ReductionOp):
            partial = _partial_reduction(node, splits, chunk, outer)
            partial.operands = tuple(mapping.get(v, v) for v in partial.operands)
            partial_sizes = [s.data for s in partial.sizes.data]
            partial.attributes[VARS_ATTR] = vars_attr(
                node_kernel_vars(partial_sizes, [chunk], Level.RED, numel * splits, chunk)
            )
            first_block.add_op(partial)
            partials.append(partial)
        elif node in whole:
            clone = node.clone(value_mapper=mapping)
            substitution = row_major if node in parts.beside else remap
            clone.attributes[VARS_ATTR] = vars_attr(
                [sympy.expand(e.xreplace(substitution)) for e in node_vars(node)]
            )
            first_block.add_op(clone)
    first_outputs: list[int] = []
    first_values: list[SSAValue] = []
    for k, value in enumerate(outputs):
        if value.owner in whole:
            first_values.append(mapping[value])
            first_outputs.append(k)
    first_values += [out for p in partials for out in p.outputs]
    first_block.add_op(YieldOp(*first_values))
    first = KernelOp(
        names[0],
        KernelKind.SPLIT,
        numel * splits,
        chunk,
        first_block.arg_types,
        [v.type for v in first_values],
        Region(first_block),
    )

    # Second kernel: combine each reduction's partials, then the epilogue.
    after = parts.epilogue
    used_args = [a for a in args if any(a in n.operands for n in after)]
    partial_types: list[MemRefType] = []
    for partial in partials:
        for out in partial.outputs:
            assert isinstance(out.type, MemRefType)
            partial_types.append(out.type)
    n_partials = len(partial_types)
    second_block = Block(arg_types=[*partial_types, *(a.type for a in used_args)])
    mapping2: dict[SSAValue, SSAValue] = {}
    for old, new in zip(used_args, second_block.args[n_partials:], strict=True):
        mapping2[old] = new
        new.name_hint = old.name_hint
    unread = iter(second_block.args[:n_partials])
    for red in parts.reductions:
        sizes = [s.data for s in red.sizes.data]
        red_partials = [next(unread) for _ in red.outputs]
        for arg in red_partials:
            arg.name_hint = "partials"
        if red.kind.data is ReductionKind.WELFORD:
            nodes, values = _combine_welford(red, red_partials, splits, outer)
        else:
            combine = _combine(red, red_partials[0], splits, outer)
            nodes, values = [combine], [combine.outputs[0]]
        for node in nodes:
            level = Level.RED if isinstance(node, ReductionOp) else Level.X
            node.attributes[VARS_ATTR] = vars_attr(
                node_kernel_vars(
                    sizes, [sympy.Integer(splits)], level, numel, sympy.Integer(splits)
                )
            )
            second_block.add_op(node)
        for old_value, new_value in zip(red.outputs, values, strict=True):
            new_value.name_hint = old_value.name_hint
            mapping2[old_value] = new_value
    for node in after:
        second_block.add_op(node.clone(value_mapper=mapping2))
    second_outputs: list[int] = []
    second_values: list[SSAValue] = []
    for k, value in enumerate(outputs):
        if value.owner in parts.reductions or value.owner in after:
            second_values.append(mapping2[value])
            second_outputs.append(k)
    second_block.add_op(YieldOp(*second_values))
    second = KernelOp(
        names[1],
        KernelKind.REDUCTION,
        numel,
        sympy.Integer(splits),
        second_block.arg_types,
        [v.type for v in second_values],
        Region(second_block),
    )
    second_inputs: list[int | None] = [None] * n_partials
    second_inputs += [args.index(a) for a in used_args]
    return SplitKernels(first, second, partial_types, first_outputs, second_inputs, second_outputs)


__all__ = [
    "SplitKernels",
    "SplitParts",
    "can_split",
    "split_kernel",
    "split_parts",
]

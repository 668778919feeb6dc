"""``merge-products``: matrix products that share an operand run as one product.

Attention's query, key and value projections multiply the same activations by three
weights, a SwiGLU MLP's gate and up projections by two; in the backward their weight
gradients multiply the same activations by three (two) output gradients. At a small
model's sizes each product is launch bound (a cuBLAS call of a few microseconds, often
with a split-K reduction kernel after it), so one product of the concatenated operands
does the work of several. Products sharing their left operand concatenate the right ones'
columns, products sharing their right operand the left ones' rows; each old result is a
slice of the merged one::

    %q = aten.mm.default(%x, %wq_t) : (tensor<32x128xf32>, tensor<128x128xf32>) -> tensor<32x128xf32>
    %k = aten.mm.default(%x, %wk_t) : (tensor<32x128xf32>, tensor<128x32xf32>) -> tensor<32x32xf32>

becomes::

    %merged_operand = aten.cat.default(tensors = [%wq_t, %wk_t], dim = 1) : (...) -> tensor<128x160xf32>
    %merged = aten.mm.default(%x, %merged_operand) : (...) -> tensor<32x160xf32>
    %q = aten.slice.Tensor(%merged, dim = 1, start = 0, end = 128) : (...) -> tensor<32x128xf32>
    %k = aten.slice.Tensor(%merged, dim = 1, start = 128, end = 160) : (...) -> tensor<32x32xf32>

A backward's input gradient through those projections, ``dq @ wq + dk @ wk + dv @ wv``
(each product seen through one reshape, other terms of the sum kept), becomes one product
of the concatenated gradients and the concatenated weights, summing over the
concatenated inner dimension; the gradients' concatenation is the one the weight
gradients' merged product reads, built once::

    %pa = aten.mm.default(%ga, %wa) : (tensor<8x6xf32>, tensor<6x16xf32>) -> tensor<8x16xf32>
    %pb = aten.mm.default(%gb, %wb) : (tensor<8x10xf32>, tensor<10x16xf32>) -> tensor<8x16xf32>
    %s = aten.add.Tensor(%pa, %pb) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>

becomes::

    %g = aten.cat.default(tensors = [%ga, %gb], dim = 1) : (...) -> tensor<8x16xf32>
    %w = aten.cat.default(tensors = [%wa, %wb]) : (...) -> tensor<16x16xf32>
    %s = aten.mm.default(%g, %w) : (...) -> tensor<8x16xf32>

Operands that are all transposes (``permute(w, [1, 0])``, ``t(w)``: a linear layer's
weight, a weight gradient's output gradient) are concatenated untransposed and the
concatenation transposed, so the copy reads and writes rows. A concatenation is a kernel
(a pointwise producer of its inputs computed into it); the weights' is the price of
each merge.

Returned products: products sharing their right operand (a backward's weight
gradients, returned) give row slices of the merged product, which have eager's strides:
the function returns the merged product, seen through each slice by ``kiln.outputs``
(:func:`~kiln.passes.output_layout.return_views_of_roots`, as ``pad-mm`` returns a padded
product), so no slice is copied out; only where ``pad-mm`` will not pad the merged
product's columns (a multiple of 8), which would make each slice's rows longer than
eager's. A returned column slice would be (its strides are
not eager's), so returned products sharing their left operand stay apart. The products of
a group must be independent (no product's operand computed from another's result); the
merged product takes the place of the last of them, and the ops between that read an
earlier product's result move after it (pure ops only). ``aten.mm`` of static 2-D
operands of one dtype, and ``aten.addmm`` adding a bias vector (``alpha = beta = 1``;
``unfuse-addmm`` left it: its result feeds views, BERT's and Qwen2's query, key and value
projections) sharing its left operand with other such ``addmm``: the biases concatenate as
the columns do::

    %merged_bias = aten.cat.default(tensors = [%bq, %bk]) : (...) -> tensor<20xf32>
    %merged = aten.addmm.default(%merged_bias, %x, %merged_operand) : (...) -> tensor<8x20xf32>

In a training forward those results are saved for the backward (returned): such groups
merge only in inference.

``cpu``/``gpu`` choose the programs it runs on (``kiln.device``): on by default on a GPU,
off on the CPU; ``half`` (default true) includes bfloat16/float16 products. H100, small,
summed kernel ms a step, ``train_step_profile.py --backends
"kiln,kiln:merge-products{half=true},inductor,kiln,kiln:merge-products{half=true}"`` before
half became the default: bfloat16 training LLaMA 0.176 -> 0.168 (Inductor 0.190), T5 0.440
-> 0.394 (0.562), BERT 0.186 -> 0.176 (0.224), BART 0.460 -> 0.444 (0.515), Qwen2 0.178 ->
0.172 (0.217); bfloat16 inference of six language models 4-9 % less (one round). H100,
float32 training step, small, summed kernel ms, two rounds in one process
(``train_step_profile.py --backends
"kiln,kiln:merge-products{gpu=true},inductor,kiln,kiln:merge-products{gpu=true}"``,
before the default changed): BERT 0.337/0.337 -> 0.284/0.285 (Inductor 0.339), T5
0.872/0.949 -> 0.706/0.707 (0.861), Qwen2 0.374/0.414 -> 0.313/0.314 (0.428), LLaMA
0.341/0.349 -> 0.323/0.325 (0.333), Mistral 0.342/0.379 -> 0.326/0.351 (0.332), BART
0.884/0.890 -> 0.797/0.883 (0.881); docs/benchmarks/train-kernels.md, "Session 54".
CPU census of a small training step (``train_kernels.py --passes "merge-products{cpu=true
gpu=true}"``, kernels + ATen calls): LLaMA forward 35 -> 35 (15 -> 13 products),
backward 55 -> 49 (30 -> 18 products); T5 forward 88 -> 84, backward 147 -> 123 (74 ->
44 products); BERT backward 61 -> 57. On the 2-core CPU, inference of LLaMA and T5 ran
slower merged (the weights are concatenated at every call); training within noise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import BFloat16Type, Float16Type, ModuleOp, TensorType
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.traits import Pure

from kiln.dialects.aten.dialect import op_class
from kiln.dialects.aten.function_attrs import runs_on_cpu
from kiln.dialects.aten.ops import AtenOp
from kiln.dialects.aten.shapes import static_shape
from kiln.dialects.aten.traits import ViewLike, has_aten_trait
from kiln.passes.output_layout import return_views_of_roots
from kiln.passes.pad_mm import ALIGNMENT
from kiln.passes.unfuse_addmm import is_one

MM = "aten::mm.default"
ADDMM = "aten::addmm.default"
PAD_MM_ALIGNMENT = max(ALIGNMENT.values())
"""The largest column alignment ``pad-mm`` pads a product to: a product whose columns are
a multiple of it keeps them."""
TRANSPOSES = frozenset({"aten::t.default", "aten::permute.default", "aten::transpose.int"})


def _matrices(op: AtenOp) -> tuple[SSAValue, SSAValue]:
    """The two matrices a product multiplies (``addmm``'s after its bias)."""
    return (op.operands[1], op.operands[2]) if op.overload_name == ADDMM else (op.operands[0], op.operands[1])  # fmt: skip


def _product_shapes(op: Operation) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """``(a, b)`` shapes of a static 2-D ``mm``, or of an ``addmm`` adding a bias vector
    (``alpha = beta = 1``), else ``None``."""
    if not isinstance(op, AtenOp) or op.overload_name not in (MM, ADDMM) or op.sym_operands():
        return None
    result = static_shape(op.results[0], 2)
    if result is None:
        return None
    if op.overload_name == ADDMM and (
        static_shape(op.operands[0]) != result[1:]
        or not (is_one(op, "alpha") and is_one(op, "beta"))
    ):
        return None
    a, b = (static_shape(v, 2) for v in _matrices(op))
    if a is None or b is None:
        return None
    return a, b


def _transposed_source(value: SSAValue) -> SSAValue | None:
    """``w`` where ``value`` is ``w`` transposed (2-D), else ``None``."""
    op = value.owner
    if not isinstance(op, AtenOp) or op.overload_name not in TRANSPOSES:
        return None
    if op.overload_name == "aten::permute.default" and list(op.static_arg("dims")) != [1, 0]:
        return None
    if op.overload_name == "aten::transpose.int" and {
        op.static_arg("dim0") % 2,
        op.static_arg("dim1") % 2,
    } != {0, 1}:
        return None
    source = op.operands[0]
    return source if static_shape(source, 2) is not None else None


def _element(value: SSAValue) -> Attribute:
    ty = value.type
    assert isinstance(ty, TensorType)
    return ty.element_type  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]


def _is_half(value: SSAValue) -> bool:
    return isinstance(_element(value), BFloat16Type | Float16Type)


def _returned(value: SSAValue) -> bool:
    """Whether the function returns ``value`` or a view of it: a returned slice of the
    merged product would be copied into a buffer of its own (a program returns whole
    buffers), a kernel for each of a backward's weight gradients."""
    for use in value.uses:
        user = use.operation
        if isinstance(user, ReturnOp):
            return True
        if isinstance(user, AtenOp) and has_aten_trait(user, ViewLike):
            if any(_returned(r) for r in user.results):
                return True
    return False


def _groups(block: Block, half: bool) -> list[tuple[int, list[AtenOp]]]:
    """Products by shared operand (0: left, 1: right), two or more each, in block order;
    a product joins the first group it can. Half-precision ones only where ``half``."""
    by_operand: dict[tuple[int, SSAValue, str], list[AtenOp]] = {}
    for op in block.ops:
        shapes = _product_shapes(op)
        if shapes is None:
            continue
        assert isinstance(op, AtenOp)
        if not half and _is_half(op.results[0]):
            continue
        # A returned product's column slice would be copied out (eager's strides); a
        # row slice is returned as the merged product seen through it, if pad-mm will not
        # pad the merged product's columns (its rows would then be longer than eager's).
        returned = _returned(op.results[0])
        if returned and shapes[1][1] % PAD_MM_ALIGNMENT:
            continue
        # addmm's biases concatenate along the columns: a shared left operand only.
        sides = (1,) if returned else (0, 1)
        if op.overload_name == ADDMM:
            sides = () if returned else (0,)
        for side in sides:
            key = (side, _matrices(op)[side], op.overload_name)
            by_operand.setdefault(key, []).append(op)
    taken: set[AtenOp] = set()
    groups: list[tuple[int, list[AtenOp]]] = []
    for (side, _, _), members in by_operand.items():
        free = [m for m in members if m not in taken]
        dtypes = {str(_element(m.results[0])) for m in free}
        if len(free) >= 2 and len(dtypes) == 1:
            groups.append((side, free))
            taken.update(free)
    return groups


def _schedule(
    members: Sequence[AtenOp], order: dict[Operation, int]
) -> tuple[AtenOp, list[Operation]] | None:
    """The last member and the ops before it that read an earlier member's result (to
    move after the merged product), or ``None`` where the products are not independent
    or such an op is not pure. ``order``: the products' positions in their block."""
    first = min(members, key=lambda m: order[m])
    last = max(members, key=lambda m: order[m])
    tainted: set[Operation] = {m for m in members if m is not last}
    later: list[Operation] = []
    op = first.next_op
    while op is not None and op is not last:
        if op not in tainted and any(operand.owner in tainted for operand in op.operands):
            if not op.has_trait(Pure) or op.regions:
                return None
            tainted.add(op)
            later.append(op)
        op = op.next_op
    for member in members:
        if any(operand.owner in tainted for operand in member.operands):
            return None  # one product reads another's result
    return last, later


def _product_order(block: Block) -> dict[Operation, int]:
    """The positions of ``block``'s products, in order (other ops share their numbers)."""
    order: dict[Operation, int] = {}
    for k, op in enumerate(block.ops):
        if _product_shapes(op) is not None:
            order[op] = k
    return order


def _build(overload: str, args: dict[str, object], shape: list[int], element: Attribute, name: str, at: InsertPoint) -> SSAValue:  # fmt: skip
    cls = op_class(overload)
    assert cls is not None
    new = cls.from_args(args, [TensorType(element, shape)])  # pyright: ignore[reportArgumentType]
    Rewriter.insert_op(new, at)
    new.results[0].name_hint = name
    return new.results[0]


_Memo = dict[tuple[tuple[SSAValue, ...], int], SSAValue]
"""Concatenations built so far, by operands and dimension: a backward's output
gradients concatenate once for the weight gradients' product and the input gradient's."""


def _cat(
    values: Sequence[SSAValue], dim: int, before: Operation, memo: _Memo, name: str
) -> SSAValue:
    """``cat(values, dim)`` before ``before``, or an earlier one."""
    key = (tuple(values), dim)
    earlier = memo.get(key)
    if earlier is not None and (
        not isinstance(owner := earlier.owner, Operation) or owner.is_before_in_block(before)
    ):
        return earlier
    shape = list(static_shape(values[0]))  # pyright: ignore[reportArgumentType]
    shape[dim] = sum(static_shape(v)[dim] for v in values)  # pyright: ignore[reportOptionalSubscript]
    at = InsertPoint.before(before)
    memo[key] = _build("cat.default", {"tensors": list(values), "dim": dim}, shape, _element(values[0]), name, at)  # fmt: skip
    return memo[key]


def _concatenated(values: Sequence[SSAValue], dim: int, before: Operation, memo: _Memo) -> SSAValue:
    """``cat(values, dim)`` of 2-D tensors before ``before``; transposes are concatenated
    untransposed (a row-major copy) and the concatenation transposed."""
    sources = [s for v in values if (s := _transposed_source(v)) is not None]
    if len(sources) < len(values):
        return _cat(values, dim, before, memo, "merged_operand")
    cat = _cat(sources, 1 - dim, before, memo, "merged_source")
    cat_shape = static_shape(cat, 2)
    assert cat_shape is not None
    shape = [cat_shape[1], cat_shape[0]]
    at = InsertPoint.before(before)
    return _build("permute.default", {"self": cat, "dims": [1, 0]}, shape, _element(cat), "merged_operand", at)  # fmt: skip


def _erase_dead_transposes(values: Sequence[SSAValue]) -> None:
    for value in values:
        owner = value.owner
        if isinstance(owner, AtenOp) and not value.uses and owner.overload_name in TRANSPOSES:
            Rewriter.erase_op(owner)


def _merge(
    side: int, members: Sequence[AtenOp], last: AtenOp, later: list[Operation], memo: _Memo
) -> list[SSAValue]:
    """Replace ``members`` (sharing operand ``side``) by one product before ``last``;
    returns the slices that replaced their results."""
    shared = _matrices(members[0])[side]
    others = [_matrices(m)[1 - side] for m in members]
    element = _element(members[0].results[0])
    at = InsertPoint.before(last)
    # Along which dimension the other operands concatenate: columns of right operands,
    # rows of left ones; the result's slices follow.
    dim = 1 if side == 0 else 0
    widths = [static_shape(v, 2)[dim] for v in others]  # pyright: ignore[reportOptionalSubscript]
    merged_other = _concatenated(others, dim, last, memo)
    a, b = (shared, merged_other) if side == 0 else (merged_other, shared)
    a_shape, b_shape = static_shape(a, 2), static_shape(b, 2)
    assert a_shape is not None
    assert b_shape is not None
    shape = [a_shape[0], b_shape[1]]
    if members[0].overload_name == ADDMM:  # the biases side by side, as the columns
        bias = _cat([m.operands[0] for m in members], 0, last, memo, "merged_bias")
        product = _build("addmm.default", {"self": bias, "mat1": a, "mat2": b}, shape, element, "merged", at)  # fmt: skip
    else:
        product = _build("mm.default", {"self": a, "mat2": b}, shape, element, "merged", at)  # fmt: skip
    start = 0
    slices: list[SSAValue] = []
    for member, width in zip(members, widths, strict=True):
        result = member.results[0]
        shape = list(static_shape(result, 2))  # pyright: ignore[reportArgumentType]
        piece = _build(
            "slice.Tensor",
            {"self": product, "dim": dim, "start": start, "end": start + width},
            shape,
            element,
            result.name_hint or "product",
            at,
        )
        start += width
        result.replace_all_uses_with(piece)
        slices.append(piece)
    anchor: Operation = last
    for op in later:  # after the slices, in their order
        op.detach()
        Rewriter.insert_op(op, InsertPoint.after(anchor))
        anchor = op
    for member in members:
        Rewriter.erase_op(member)
    _erase_dead_transposes(others)
    return slices


ADD = "aten::add.Tensor"
RESHAPES = frozenset({"aten::view.default", "aten::_unsafe_view.default", "aten::reshape.default"})


def _is_plain_add(op: Operation) -> bool:
    """``a + b`` of two tensors of the result's shape (no broadcast, alpha 1)."""
    if not isinstance(op, AtenOp) or op.overload_name != ADD or len(op.operands) != 2:
        return False
    if op.arg_attr("alpha") is not None and op.static_arg("alpha") != 1:
        return False
    return all(v.type == op.results[0].type for v in op.operands)


def _sum_terms(root: AtenOp) -> tuple[list[SSAValue], list[AtenOp]]:
    """The terms of the sum ``root`` ends (adds used only by the sum opened up) and the
    adds it is made of."""
    terms: list[SSAValue] = []
    adds = [root]
    stack = list(reversed(root.operands))
    while stack:
        value = stack.pop()
        owner = value.owner
        if isinstance(owner, AtenOp) and _is_plain_add(owner) and value.has_one_use():
            adds.append(owner)
            stack.extend(reversed(owner.operands))
        else:
            terms.append(value)
    return terms, adds


def _product_term(term: SSAValue) -> tuple[AtenOp, AtenOp | None] | None:
    """``(mm, reshape)`` where the term is a product used only by the sum (seen through
    one reshape used only so, or none)."""
    owner = term.owner
    reshape: AtenOp | None = None
    if isinstance(owner, AtenOp) and owner.overload_name in RESHAPES and term.has_one_use():
        reshape, term = owner, owner.operands[0]
        owner = term.owner
    if not isinstance(owner, AtenOp) or owner.overload_name != MM:
        return None
    if _product_shapes(owner) is None or not term.has_one_use():
        return None
    return owner, reshape


def _merge_sum(root: AtenOp, memo: _Memo) -> bool:
    """``x1 @ w1 + x2 @ w2 + rest`` as ``cat(x, 1) @ cat(w, 0) + rest`` where ``root`` ends
    such a sum (two products or more, one shape, one dtype); whether it did."""
    terms, adds = _sum_terms(root)
    products: list[tuple[AtenOp, AtenOp | None]] = []
    rest: list[SSAValue] = []
    for term in terms:
        found = _product_term(term)
        if found is not None and (not products or _same_kind(products[0], found)):
            products.append(found)
        else:
            rest.append(term)
    if len(products) < 2:
        return False
    mms = [mm for mm, _ in products]
    element = _element(root.results[0])
    at = InsertPoint.before(root)
    lefts = _concatenated([mm.operands[0] for mm in mms], 1, root, memo)
    rights = _concatenated([mm.operands[1] for mm in mms], 0, root, memo)
    shape = list(static_shape(mms[0].results[0], 2))  # pyright: ignore[reportArgumentType]
    total = _build("mm.default", {"self": lefts, "mat2": rights}, shape, element, "merged_sum", at)  # fmt: skip
    reshape = products[0][1]
    if reshape is not None:
        total = _build("reshape.default", {"self": total, "shape": list(static_shape(reshape.results[0]))}, list(static_shape(reshape.results[0])), element, "merged_sum_view", at)  # fmt: skip  # pyright: ignore[reportArgumentType]
    for term in rest:
        total = _build("add.Tensor", {"self": total, "other": term}, list(static_shape(root.results[0])), element, "sum", at)  # fmt: skip  # pyright: ignore[reportArgumentType]
    total.name_hint = root.results[0].name_hint
    root.results[0].replace_all_uses_with(total)
    for add in adds:
        Rewriter.erase_op(add)
    for mm, view in products:
        if view is not None:
            Rewriter.erase_op(view)
        operands = list(mm.operands)
        Rewriter.erase_op(mm)
        _erase_dead_transposes(operands)
    return True


def _same_kind(a: tuple[AtenOp, AtenOp | None], b: tuple[AtenOp, AtenOp | None]) -> bool:
    """Products of one result type, seen through reshapes to one type (or none)."""
    (mm_a, view_a), (mm_b, view_b) = a, b
    if mm_a.results[0].type != mm_b.results[0].type:
        return False
    if view_a is None or view_b is None:
        return view_a is view_b
    return view_a.results[0].type == view_b.results[0].type


@dataclass(frozen=True)
class MergeProductsPass(ModulePass):
    """Products sharing an operand as one product (see the module docstring)."""

    name: ClassVar[str] = "merge-products"  # pyright: ignore[reportIncompatibleVariableOverride]

    gpu: bool = True
    """Merge in GPU programs."""
    half: bool = True
    """Also bfloat16 and float16 products (on a GPU: dot kernels or cuBLAS's tensor-core
    kernels; measured in training and inference, see the module docstring)."""
    cpu: bool = False
    """Merge in CPU programs."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if not (self.cpu if runs_on_cpu(op) else self.gpu):
            return
        for func in [f for f in op.walk() if isinstance(f, FuncOp)]:
            if not func.body.blocks:
                continue
            block = func.body.block
            rows: list[SSAValue] = []
            memo: _Memo = {}
            order = _product_order(block)
            for side, members in _groups(block, self.half):
                scheduled = _schedule(members, order)
                if scheduled is not None:
                    slices = _merge(side, members, *scheduled, memo)
                    rows.extend(slices if side == 1 else ())
                    if any(moved in order for moved in scheduled[1]):
                        order = _product_order(block)  # a product moved
            # Sums of products (a backward's input gradient through several
            # projections), from the last sum up: an inner sum is part of an outer one.
            for add in reversed(list(block.ops)):
                if add.parent is block and _is_plain_add(add):
                    assert isinstance(add, AtenOp)
                    if self.half or not _is_half(add.results[0]):
                        _merge_sum(add, memo)
            if rows:  # returned row slices: the merged product, seen through them
                return_views_of_roots(func, rows, clone_bare_roots=False)


__all__ = ["MergeProductsPass"]

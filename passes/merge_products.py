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

Operands that are all transposes (``permute(w, [1, 0])``, ``t(w)``: a linear layer's
weight, a weight gradient's output gradient) are concatenated untransposed and the
concatenation transposed, so the copy reads and writes rows. The concatenation is a
kernel unless its inputs' producers are (a pointwise producer is computed into it); the
weights' copy is the price, paid once per merged product.

Products whose result (or a view of it) the function returns are left alone: a program
returns whole buffers, so each returned slice would be copied (a backward's weight
gradients: one copy kernel each, more than the products saved). The products must be
independent (no product's operand computed from another's result);
the merged product takes the place of the last of them, and the ops between that read an
earlier product's result move after it (pure ops only). Only ``aten.mm`` of static 2-D
operands of one dtype. ``cpu``/``gpu`` choose the programs it runs on (``kiln.device``),
both off by default: on this project's 2-core CPU, inference of LLaMA and T5 (small) ran
slower merged (0.7-1.0 -> 0.7-1.2 ms and 1.2-2.0 -> 1.8-2.6 ms a call: the weights are
concatenated at every call), and in a training step only the forward's unsaved products merge
(LLaMA: 15 forward products -> 13, plus 2 concatenations; the backward's weight
gradients are returned). Not yet timed on a GPU: ``kiln:merge-products{gpu=true}`` with
``benchmarks/train_step_profile.py`` (docs/benchmarks/train-kernels.md, "Session 53").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, TensorType
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

MM = "aten::mm.default"
TRANSPOSES = frozenset({"aten::t.default", "aten::permute.default", "aten::transpose.int"})


def _product_shapes(op: Operation) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """``(a, b)`` shapes of a static 2-D ``mm``, else ``None``."""
    if not isinstance(op, AtenOp) or op.overload_name != MM or op.sym_operands():
        return None
    a, b = static_shape(op.operands[0], 2), static_shape(op.operands[1], 2)
    if a is None or b is None or static_shape(op.results[0], 2) is None:
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


def _groups(block: Block) -> list[tuple[int, list[AtenOp]]]:
    """Products by shared operand (0: left, 1: right), two or more each, in block order;
    a product joins the first group it can."""
    by_operand: dict[tuple[int, SSAValue], list[AtenOp]] = {}
    for op in block.ops:
        shapes = _product_shapes(op)
        if shapes is None or _returned(op.results[0]):
            continue
        assert isinstance(op, AtenOp)
        for side in (0, 1):
            by_operand.setdefault((side, op.operands[side]), []).append(op)
    taken: set[AtenOp] = set()
    groups: list[tuple[int, list[AtenOp]]] = []
    for (side, _), members in by_operand.items():
        free = [m for m in members if m not in taken]
        dtypes = {str(_element(m.results[0])) for m in free}
        if len(free) >= 2 and len(dtypes) == 1:
            groups.append((side, free))
            taken.update(free)
    return groups


def _schedule(block: Block, members: Sequence[AtenOp]) -> tuple[AtenOp, list[Operation]] | None:
    """The last member and the ops before it that read an earlier member's result (to
    move after the merged product), or ``None`` where the products are not independent
    or such an op is not pure."""
    order = {op: k for k, op in enumerate(block.ops)}
    last = max(members, key=lambda m: order[m])
    first = min(order[m] for m in members)
    tainted: set[Operation] = {m for m in members if m is not last}
    later: list[Operation] = []
    for op in list(block.ops)[first + 1 : order[last]]:
        if op in tainted:
            continue
        if any(operand.owner in tainted for operand in op.operands):
            if not op.has_trait(Pure) or op.regions:
                return None
            tainted.add(op)
            later.append(op)
    for member in members:
        if any(operand.owner in tainted for operand in member.operands):
            return None  # one product reads another's result
    return last, later


def _build(overload: str, args: dict[str, object], shape: list[int], element: Attribute, name: str, at: InsertPoint) -> SSAValue:  # fmt: skip
    cls = op_class(overload)
    assert cls is not None
    new = cls.from_args(args, [TensorType(element, shape)])  # pyright: ignore[reportArgumentType]
    Rewriter.insert_op(new, at)
    new.results[0].name_hint = name
    return new.results[0]


def _merge(side: int, members: Sequence[AtenOp], last: AtenOp, later: list[Operation]) -> None:
    """Replace ``members`` (sharing operand ``side``) by one product before ``last``."""
    shared = members[0].operands[side]
    others = [m.operands[1 - side] for m in members]
    element = _element(members[0].results[0])
    at = InsertPoint.before(last)
    # Along which dimension the other operands concatenate: columns of right operands,
    # rows of left ones; the result's slices follow.
    dim = 1 if side == 0 else 0
    widths = [static_shape(v, 2)[dim] for v in others]  # pyright: ignore[reportOptionalSubscript]
    total = sum(widths)
    other_shape = list(static_shape(others[0], 2))  # pyright: ignore[reportArgumentType]
    other_shape[dim] = total
    sources = [_transposed_source(v) for v in others]
    if all(s is not None for s in sources):
        # Concatenate the untransposed sources (rows of a row-major copy), then transpose.
        flipped = list(reversed(other_shape))
        cat = _build("cat.default", {"tensors": sources, "dim": 1 - dim}, flipped, element, "merged_source", at)  # fmt: skip
        merged_other = _build("permute.default", {"self": cat, "dims": [1, 0]}, other_shape, element, "merged_operand", at)  # fmt: skip
    else:
        merged_other = _build("cat.default", {"tensors": others, "dim": dim}, other_shape, element, "merged_operand", at)  # fmt: skip
    a, b = (shared, merged_other) if side == 0 else (merged_other, shared)
    a_shape, b_shape = static_shape(a, 2), static_shape(b, 2)
    assert a_shape is not None
    assert b_shape is not None
    product = _build("mm.default", {"self": a, "mat2": b}, [a_shape[0], b_shape[1]], element, "merged", at)  # fmt: skip
    start = 0
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
    anchor: Operation = last
    for op in later:  # after the slices, in their order
        op.detach()
        Rewriter.insert_op(op, InsertPoint.after(anchor))
        anchor = op
    for member in members:
        Rewriter.erase_op(member)
    for value in others:  # transposes now read by nothing
        if isinstance(value.owner, AtenOp) and not value.uses and sources[0] is not None:
            Rewriter.erase_op(value.owner)


@dataclass(frozen=True)
class MergeProductsPass(ModulePass):
    """Products sharing an operand as one product (see the module docstring)."""

    name: ClassVar[str] = "merge-products"  # pyright: ignore[reportIncompatibleVariableOverride]

    gpu: bool = False
    """Merge in GPU programs."""
    cpu: bool = False
    """Merge in CPU programs."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if not (self.cpu if runs_on_cpu(op) else self.gpu):
            return
        for func in [f for f in op.walk() if isinstance(f, FuncOp)]:
            if not func.body.blocks:
                continue
            block = func.body.block
            for side, members in _groups(block):
                scheduled = _schedule(block, members)
                if scheduled is not None:
                    _merge(side, members, *scheduled)


__all__ = ["MergeProductsPass"]

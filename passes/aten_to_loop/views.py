"""Views: new index maps over the same buffer, never copies.

``view``, ``reshape``, ``permute``, ``transpose``, ``t``, ``expand``, ``squeeze``,
``unsqueeze``, ``slice``, ``select``, ``split``, ``unbind``, ``as_strided``,
``diagonal``, ``alias``, ``clone``, ``contiguous`` (and the ``*_copy`` forms that
functionalized graphs use) return a :class:`TensorRef` over their input's buffer; the
consumers' loads compose the maps (see :mod:`kiln.passes.aten_to_loop.tensors`). ``clone``
and ``contiguous`` are views too, because buffers are immutable at this level; only
``clone(memory_format=channels_last)`` copies (into an NHWC buffer), since the layout is
what it asks for (``channels-last`` inserts it ahead of convolutions).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, cast

import sympy
from xdsl.dialects.builtin import StringAttr

from kiln.dialects.aten.memory_format import NCHW, NHWC
from kiln.dialects.aten.storage import dense_dims, storage_layout
from kiln.dialects.loop.expr import (
    MAX_INDEX_NODES,
    FloorDiv,
    expr_nodes,
    floordiv,
    index_var,
    mod,
    operands,
)
from kiln.dialects.loop.simplify import simplify_with_ranges
from kiln.passes.aten_to_loop.context import (
    Lowered,
    Lowering,
    LoweringContext,
    LoweringError,
    OpArgs,
)
from kiln.passes.aten_to_loop.tensors import (
    ONE,
    ZERO,
    TensorRef,
    expr,
    numel,
    strided_index,
)
from kiln.passes.aten_to_loop.types import NoLowering

Expr = sympy.Expr


def wrap_dim(dim: int, rank: int) -> int:
    r = max(rank, 1)
    if not -r <= dim < r:
        raise NoLowering(f"dim {dim} out of range for rank {rank}")
    return dim % r


def _sizes(values: Sequence[Any]) -> list[Expr]:
    return [expr(v) for v in values]


def infer_view_sizes(ref: TensorRef, requested: Sequence[Any]) -> list[Expr]:
    """``view`` sizes with a ``-1`` resolved from the element count."""
    sizes = _sizes(requested)
    holes = [k for k, s in enumerate(sizes) if s == -1]
    if len(holes) > 1:
        raise NoLowering("more than one -1 in view sizes")
    if holes:
        known = numel([s for k, s in enumerate(sizes) if k != holes[0]])
        sizes[holes[0]] = floordiv(numel(ref.sizes), known) if known != 0 else ONE
    return sizes


def index_nodes(ref: TensorRef) -> int:
    """The size of ``ref``'s index expression (sympy nodes) over fresh index variables."""
    if ref.strides is not None:
        return 0
    return expr_nodes(ref.storage_index([index_var(k) for k in range(ref.rank)]))


def _divides_by_size(ref: TensorRef) -> bool:
    """Whether ``ref``'s index, simplified with its sizes as ranges, still divides (``//``
    or ``%``) by an expression of size symbols."""
    idx = [index_var(k) for k in range(ref.rank)]
    e = simplify_with_ranges(ref.storage_index(idx), dict(zip(idx, ref.sizes, strict=True)))
    return any(
        isinstance(n, FloorDiv | sympy.Mod) and bool(operands(n)[1].free_symbols)
        for n in sympy.preorder_traversal(e)
    )


def bounded_reshape(ctx: LoweringContext, ref: TensorRef, sizes: Sequence[Expr]) -> TensorRef:
    """``ref.reshape(sizes)``, through a contiguous copy of ``ref`` when the reshaped
    index expression would exceed :data:`~kiln.dialects.loop.expr.MAX_INDEX_NODES`
    (a reshape of a layout torch cannot view nests ``//`` and ``%``; chained, they grow
    without bound under symbolic sizes)."""
    out = ref.reshape(sizes)
    if out.strides is None and (index_nodes(out) > MAX_INDEX_NODES or _divides_by_size(out)):
        # Also where the reshaped index divides by a size symbol: the copy in ``ref``'s
        # own space is a strided loop nest (the ``[s0, s1, 4, 32]`` attention output
        # before its ``[s0*s1, 128]`` view divided per row by ``s1``, a real division
        # where a static size is a shift); the reshape of the copy is then a view.
        copy = ctx.pointwise(ref.sizes, ref.dtype, lambda bb, idx: bb.load(ref, idx))
        out = copy.reshape(sizes)
    return out


def _view(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    ref = args.tensor("self")
    # ``view(self, size)`` and ``reshape(self, shape)``: the same lowering.
    requested = args.value("shape" if args.op.overload_name.startswith("aten::reshape") else "size")
    sizes = args.result_sizes(0, infer_view_sizes(ref, requested))
    traced = ctx.traced_sizes(args.op, 0)
    if traced is not None and len(traced) == len(sizes):
        # Both are the size at run time; the one with fewer divisions compares
        # structurally with the sizes around it. A -1 resolves to ``numel // known``
        # (``s0 // 4``: multiplied back, ``4*(s0 // 4)``, not ``s0``, and the reshape
        # becomes a general one that divides per element) where the tracer may know
        # ``s1``; and the tracer may write ``4*(s0 // 4)`` where the graph passes ``s0``.
        sizes = [
            s if t is None or _divisions(t) >= _divisions(s) else t
            for s, t in zip(sizes, traced, strict=True)
        ]
    return [bounded_reshape(ctx, ref, sizes)]


def _divisions(e: Expr) -> int:
    return sum(1 for n in sympy.preorder_traversal(e) if isinstance(n, FloorDiv | sympy.Mod))


def _alias(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    return [args.tensor("self")]


def _clone(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    """An alias, except that a 4-D ``channels_last`` clone is materialized NHWC."""
    ref = args.tensor("self")
    memory_format = args.op.arg_attr("memory_format")
    if (
        not isinstance(memory_format, StringAttr)
        or memory_format.data != "channels_last"
        or ref.rank != 4
        or ref.is_channels_last()
    ):
        return [ref]
    nhwc = ctx.pointwise(
        [ref.sizes[d] for d in NHWC],
        ref.dtype,
        lambda bb, idx: bb.load(ref, [idx[d] for d in NCHW]),
    )
    return [nhwc.permute(NCHW)]


def _permute(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    ref = args.tensor("self")
    dims = [wrap_dim(d, ref.rank) for d in args.value("dims")]
    return [ref.permute(dims)]


def _transpose(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    ref = args.tensor("self")
    if ref.rank == 0:
        return [ref]
    a, b = wrap_dim(args.value("dim0"), ref.rank), wrap_dim(args.value("dim1"), ref.rank)
    dims = list(range(ref.rank))
    dims[a], dims[b] = dims[b], dims[a]
    return [ref.permute(dims)]


def _t(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    ref = args.tensor("self")
    if ref.rank < 2:
        return [ref]
    return [ref.permute([1, 0])]


def _expand(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    ref = args.tensor("self")
    requested = _sizes(args.value("size"))
    lead = len(requested) - ref.rank
    sizes = [ref.sizes[k - lead] if s == -1 and k >= lead else s for k, s in enumerate(requested)]
    return [ref.expand(args.result_sizes(0, sizes))]


def _squeeze_dims(ref: TensorRef, dims: Sequence[int] | None) -> TensorRef:
    if ref.rank == 0:
        return ref
    candidates = range(ref.rank) if dims is None else [wrap_dim(d, ref.rank) for d in dims]
    drop = [d for d in candidates if ref.sizes[d] == ONE]
    return ref.squeeze(drop) if ref.rank else ref


def _squeeze(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    return [_squeeze_dims(args.tensor("self"), None)]


def _squeeze_dim(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    return [_squeeze_dims(args.tensor("self"), [args.value("dim")])]


def _squeeze_dims_op(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    return [_squeeze_dims(args.tensor("self"), args.value("dim"))]


def _unsqueeze(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    ref = args.tensor("self")
    dim = wrap_dim(args.value("dim"), ref.rank + 1)
    return [ref.unsqueeze(dim)]


def clamp_slice(size: Expr, start: Any, end: Any, step: int) -> tuple[Expr, Expr]:
    """torch's slice bounds: (start, length) after wrapping negatives and clamping."""
    if step <= 0:
        raise NoLowering("slice step must be positive")
    start_e = expr(0 if start is None else start)
    end_e = size if end is None or (isinstance(end, int) and end >= sys.maxsize) else expr(end)
    if size.is_Integer:
        n = int(size)
        if not (start_e.is_Integer and end_e.is_Integer):
            raise NoLowering("symbolic slice bounds on a static dim")
        s, e = int(start_e), int(end_e)
        s = s + n if s < 0 else s
        e = e + n if e < 0 else e
        s = min(max(s, 0), n)
        e = min(max(e, s), n)
        return sympy.Integer(s), sympy.Integer((e - s + step - 1) // step)
    # Symbolic sizes: bounds must be plainly in range (what torch's guards ensured).
    if (start_e.is_Integer and int(start_e) < 0) or (end_e.is_Integer and int(end_e) < 0):
        raise NoLowering("negative slice bounds on a symbolic dim")
    if start_e.is_Integer and end_e.is_Integer and int(end_e) <= int(start_e):
        return start_e, sympy.Integer(0)  # eager clamps end to start: an empty slice
    return start_e, floordiv(end_e - start_e + step - 1, step)


def _slice(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    ref = args.tensor("self")
    dim = wrap_dim(args.value("dim"), ref.rank)
    step = args.value("step")
    if not isinstance(step, int):
        raise NoLowering("symbolic slice step")
    start, end = args.value("start"), args.value("end")
    try:
        start_e, length = clamp_slice(ref.sizes[dim], start, end, step)
    except NoLowering:
        traced = _unclamped_traced_slice(ctx, args, start, end, step, dim)
        if traced is None:
            raise
        start_e, length = traced
    length = args.result_sizes(0, [*ref.sizes[:dim], length, *ref.sizes[dim + 1 :]])[dim]
    return [ref.slice(dim, start_e, length, sympy.Integer(step))]


def _unclamped_traced_slice(
    ctx: LoweringContext, args: OpArgs, start: Any, end: Any, step: int, dim: int
) -> tuple[Expr, Expr] | None:
    """(start, length) of a slice with symbolic bounds on a static dim (``cos[:t]`` of a
    rotary table) where the tracer's result size is exactly the unclamped
    ``ceil((end - start) / step)``: dynamo guarded that the bounds neither wrap nor clamp
    (``0 <= start``, ``end <= size``) for every size this graph runs at. None otherwise
    (the slice then runs as an ATen call)."""
    start_e = expr(0 if start is None else start)
    if end is None or not start_e.is_nonnegative:
        return None
    traced = ctx.traced_sizes(args.op, 0)
    if traced is None or len(traced) <= dim or traced[dim] is None:
        return None
    length = floordiv(expr(end) - start_e + step - 1, step)
    if sympy.expand(cast(Expr, traced[dim]) - length) != 0:
        return None
    return start_e, length


def _select(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    ref = args.tensor("self")
    dim = wrap_dim(args.value("dim"), ref.rank)
    index = expr(args.value("index"))
    if index.is_Integer and int(index) < 0:
        index = ref.sizes[dim] + index
    return [ref.select(dim, index)]


def _split_by_sizes(ref: TensorRef, sizes: Sequence[Expr], dim: int) -> list[Lowered]:
    out: list[Lowered] = []
    start: Expr = sympy.Integer(0)
    for size in sizes:
        out.append(ref.slice(dim, start, size, ONE))
        start = start + size
    return out


def _split(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    ref = args.tensor("self")
    dim = wrap_dim(args.value("dim"), ref.rank)
    split = expr(args.value("split_size"))
    total = ref.sizes[dim]
    if split.is_Integer and total.is_Integer:
        n, k = int(total), int(split)
        if k <= 0:
            raise NoLowering("split size must be positive")
        sizes = (
            [sympy.Integer(min(k, n - s)) for s in range(0, max(n, 1), k)]
            if n
            else [sympy.Integer(0)]
        )
        return _split_by_sizes(ref, sizes, dim)
    return _split_by_sizes(ref, _symbolic_pieces(total, split, len(args.op.results)), dim)


def _symbolic_pieces(total: Expr, piece: Expr, count: int) -> list[Expr]:
    """Sizes of ``count`` pieces of ``piece`` elements out of ``total`` (symbolic): all
    full but the last, which takes what remains (``total - (count-1)*piece``, at most
    ``piece``). The number of pieces is the graph's (dynamo guarded it on the sizes)."""
    if count <= 0:
        raise NoLowering("split into no pieces")
    return [*([piece] * (count - 1)), total - (count - 1) * piece]


def _split_with_sizes(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    ref = args.tensor("self")
    dim = wrap_dim(args.value("dim"), ref.rank)
    return _split_by_sizes(ref, _sizes(args.value("split_sizes")), dim)


def _unbind(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    ref = args.tensor("self")
    dim = wrap_dim(args.value("dim"), ref.rank)
    n = ref.sizes[dim]
    if not n.is_Integer:
        raise NoLowering("unbind of a symbolic dim")
    return [ref.select(dim, sympy.Integer(i)) for i in range(int(n))]


def _chunk(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    ref = args.tensor("self")
    dim = wrap_dim(args.value("dim"), ref.rank)
    chunks = args.value("chunks")
    total = ref.sizes[dim]
    if not isinstance(chunks, int) or chunks <= 0:
        raise NoLowering("symbolic chunk count")
    if not total.is_Integer:
        # torch.chunk: pieces of ceil(total / chunks), the last one shorter.
        piece = floordiv(total + chunks - 1, chunks)
        return _split_by_sizes(ref, _symbolic_pieces(total, piece, len(args.op.results)), dim)
    n = int(total)
    k = (n + chunks - 1) // chunks
    sizes = [sympy.Integer(min(k, n - s)) for s in range(0, n, k)] if k else [sympy.Integer(0)]
    if len(sizes) != len(args.op.results):
        raise NoLowering("chunk count does not match the results")
    return _split_by_sizes(ref, sizes, dim)


def _as_strided(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    ref = args.tensor("self")
    sizes = args.result_sizes(0, _sizes(args.value("size")))
    strides = _sizes(args.value("stride"))
    offset = args.value("storage_offset")
    layout = storage_layout(args.op)
    if layout is not None:
        return [_storage_view(args, ref, layout, sizes, strides, offset)]
    # IR without eager's layout (written by hand): the buffer is taken to be the storage.
    if ref.strides is None:
        raise NoLowering("as_strided of a non-strided view")
    start = ref.offset if offset is None else expr(offset)
    return [ref.strided(sizes, strides, start)]


def _storage_view(
    args: OpArgs,
    ref: TensorRef,
    layout: tuple[int, tuple[int, ...]],
    sizes: Sequence[Expr],
    strides: Sequence[Expr],
    offset: Any,
) -> TensorRef:
    """``as_strided`` over ``ref``, whose eager storage layout is ``layout``: element
    ``idx`` of the result is the element of ``ref`` that eager stores at position
    ``offset + sum(strides * idx)`` (kiln's buffer may hold ``ref`` in another layout)."""
    base_offset, base_strides = layout
    base_sizes = [int(s) if s.is_Integer else None for s in ref.sizes]
    start = expr(base_offset if offset is None else offset)
    if (
        None in base_sizes
        or len(base_strides) != ref.rank
        or not all(e.is_Integer for e in (*sizes, *strides, start))
    ):
        raise LoweringError(f"{args.op.name}: symbolic sizes with a recorded storage layout")
    static_sizes = [int(s) for s in base_sizes if s is not None]
    dims = dense_dims(static_sizes, base_strides)
    covered = 1
    for k in dims or ():
        covered *= static_sizes[k]
    first = int(start) + sum(
        int(st) * (int(n) - 1) for st, n in zip(strides, sizes, strict=True) if int(st) < 0
    )
    last = int(start) + sum(
        int(st) * (int(n) - 1) for st, n in zip(strides, sizes, strict=True) if int(st) > 0
    )
    empty = any(int(n) == 0 for n in sizes)
    if not empty and (dims is None or first < base_offset or last >= base_offset + covered):
        # Eager reads storage that holds no element of the tensor kiln was given (a
        # graph input that is a slice of a larger tensor, gaps between elements):
        # kiln's buffers do not have it, so no lowering or extern can be right.
        raise LoweringError(
            f"{args.op.name}: reads storage positions [{first}, {last}] outside the"
            f" {covered} elements its input holds (eager strides {list(base_strides)},"
            f" offset {base_offset}); kiln cannot reproduce that storage"
        )
    if ref.strides is not None and all(
        n == 1 or st == s for n, st, s in zip(static_sizes, base_strides, ref.strides, strict=True)
    ):
        # kiln holds the elements in eager's layout: storage positions carry over.
        return ref.strided(sizes, strides, ref.offset + start - base_offset)
    inner = list(dims or ())

    def element(idx: Sequence[Expr]) -> list[Expr]:
        position = strided_index(tuple(strides), start - base_offset, tuple(idx))
        out: list[Expr] = [ZERO] * ref.rank
        for k in inner:
            part = floordiv(position, sympy.Integer(base_strides[k]))
            out[k] = (
                part
                if base_strides[k] * static_sizes[k] == covered
                else mod(part, sympy.Integer(static_sizes[k]))
            )
        return out

    return ref.with_map(sizes, element)


def _diagonal(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    ref = args.tensor("self")
    dim1 = wrap_dim(args.value("dim1"), ref.rank)
    dim2 = wrap_dim(args.value("dim2"), ref.rank)
    offset = args.value("offset")
    if dim1 == dim2 or not isinstance(offset, int):
        raise NoLowering("diagonal arguments")
    if not all(ref.sizes[d].is_Integer for d in (dim1, dim2)):
        raise NoLowering("diagonal of symbolic dims")
    out = ref.diagonal(offset, dim1, dim2)
    return [
        TensorRef(
            out.buffer,
            tuple(args.result_sizes(0, out.sizes)),
            out.dtype,
            out.strides,
            out.offset,
            out.general,
            out.buffer_sizes,
        )
    ]


def _flatten(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    ref = args.tensor("self")
    if ref.rank == 0:
        return [ref.reshape([ONE])]
    start = wrap_dim(args.value("start_dim"), ref.rank)
    end = wrap_dim(args.value("end_dim"), ref.rank)
    sizes = [*ref.sizes[:start], numel(ref.sizes[start : end + 1]), *ref.sizes[end + 1 :]]
    return [bounded_reshape(ctx, ref, args.result_sizes(0, sizes))]


def _unflatten(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    ref = args.tensor("self")
    dim = wrap_dim(args.value("dim"), ref.rank)
    inner = TensorRef(ref.buffer, (ref.sizes[dim],), ref.dtype, (ONE,))
    parts = infer_view_sizes(inner, args.value("sizes"))
    sizes = [*ref.sizes[:dim], *parts, *ref.sizes[dim + 1 :]]
    return [bounded_reshape(ctx, ref, args.result_sizes(0, sizes))]


def _narrow(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    ref = args.tensor("self")
    dim = wrap_dim(args.value("dim"), ref.rank)
    start = expr(args.value("start"))
    if start.is_Integer and int(start) < 0:
        start = ref.sizes[dim] + start
    length = expr(args.value("length"))
    return [ref.slice(dim, start, length, ONE)]


def _sym_size(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    """A size as an ``index`` value (static: a constant; symbolic: the size symbols'
    arithmetic)."""
    ref = args.tensor("self")
    return [ctx.index_value(ref.sizes[wrap_dim(args.value("dim"), ref.rank)])]


def _sym_numel(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    return [ctx.index_value(numel(args.tensor("self").sizes))]


LOWERINGS: dict[str, Lowering] = {
    "sym_size.int": _sym_size,
    "sym_numel": _sym_numel,
    "view": _view,
    "reshape": _view,
    "_unsafe_view": _view,
    "view_copy": _view,
    "_reshape_alias": _view,
    "alias": _alias,
    "alias_copy": _alias,
    "clone": _clone,
    "contiguous": _alias,
    "detach": _alias,
    "detach_copy": _alias,
    "lift_fresh_copy": _alias,
    "lift_fresh": _alias,
    "permute": _permute,
    "permute_copy": _permute,
    "transpose.int": _transpose,
    "transpose_copy.int": _transpose,
    "t": _t,
    "t_copy": _t,
    "expand": _expand,
    "expand_copy": _expand,
    "squeeze": _squeeze,
    "squeeze.dim": _squeeze_dim,
    "squeeze.dims": _squeeze_dims_op,
    "squeeze_copy": _squeeze,
    "squeeze_copy.dim": _squeeze_dim,
    "squeeze_copy.dims": _squeeze_dims_op,
    "unsqueeze": _unsqueeze,
    "unsqueeze_copy": _unsqueeze,
    "slice.Tensor": _slice,
    "slice_copy.Tensor": _slice,
    "select.int": _select,
    "select_copy.int": _select,
    "split.Tensor": _split,
    "split_copy.Tensor": _split,
    "split_with_sizes": _split_with_sizes,
    "split_with_sizes_copy": _split_with_sizes,
    "unbind.int": _unbind,
    "unbind_copy.int": _unbind,
    "chunk": _chunk,
    "as_strided": _as_strided,
    "as_strided_copy": _as_strided,
    "diagonal": _diagonal,
    "diagonal_copy": _diagonal,
    "flatten.using_ints": _flatten,
    "unflatten.int": _unflatten,
    "narrow": _narrow,
}

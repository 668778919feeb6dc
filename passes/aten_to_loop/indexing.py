"""Indexing, concatenation and padding: masked and indirect loads.

``cat``/``stack`` select between masked loads of their inputs; ``constant_pad_nd``
loads with a mask and the pad value as fill; ``index.Tensor``, ``index_select``,
``gather`` and ``embedding`` load an index from one buffer and use it (an indirect
``i<k>`` variable) in the index expression of another. ``repeat``, ``flip`` and
``roll`` are views (index maps with ``%`` or negative strides); ``tril``/``triu``
mask by the index. Boolean-mask indexing has a data-dependent shape and runs as extern.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sympy
from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, i64
from xdsl.ir import SSAValue

from kiln.dialects.loop.expr import floordiv, indirect_var
from kiln.passes.aten_to_loop.body import BodyBuilder
from kiln.passes.aten_to_loop.context import Lowered, Lowering, LoweringContext, OpArgs
from kiln.passes.aten_to_loop.pointwise import broadcast_sizes
from kiln.passes.aten_to_loop.tensors import (
    ONE,
    ZERO,
    TensorRef,
    contiguous_strides,
    expr,
    numel,
    safe_mod,
)
from kiln.passes.aten_to_loop.types import NoLowering, compute_type, is_bool, is_float
from kiln.passes.aten_to_loop.views import wrap_dim

Expr = sympy.Expr
Value = SSAValue


def indexed_element(
    bb: BodyBuilder,
    x: TensorRef,
    idx: Sequence[Expr],
    layout: Sequence[tuple[str, int]],
    bsizes: Sequence[Expr],
    positions: Sequence[int],
    expanded: Sequence[TensorRef],
) -> tuple[list[Expr], list[Value]]:
    """The element of ``x`` that point ``idx`` of an advanced-indexing space addresses:
    ``x``'s index (an ``indirect_var`` at each indexed position) and the loaded, wrapped
    and checked indices (``index.Tensor``'s gather, ``index_put``'s scatter)."""
    bidx: list[Expr] = [ZERO] * len(bsizes)
    xidx: dict[int, Expr] = {}
    for (kind, j), d in zip(layout, idx, strict=True):
        if kind == "b":
            bidx[j] = d
        else:
            xidx[j] = d
    indirect: list[Value] = []
    for n, (pos, t) in enumerate(zip(positions, expanded, strict=True)):
        indirect.append(_as_index(bb, bb.load(t, bidx), x.sizes[pos], wrap=True))
        xidx[pos] = indirect_var(n)
    return [xidx[k] for k in range(x.rank)], indirect


def _as_index(bb: BodyBuilder, v: Value, size: Expr, wrap: bool) -> Value:
    """A loaded integer index into a dimension of ``size``, as an ``index`` value checked
    to lie in ``[0, size)`` (``loop.check_index``: eager raises for an index outside its
    dimension, which the buffer's flat bounds cannot see). ``wrap``: a negative index
    counts from the end first (advanced indexing, ``x[idx]``; ``gather``,
    ``index_select`` and ``embedding`` raise on negatives)."""
    if is_float(v.type) or is_bool(v.type):
        raise NoLowering(f"index tensor of {v.type}")
    v = bb.cast(v, i64)
    if wrap:
        zero = bb.const(0, i64)
        wrapped = bb.add_(v, bb.index_as(size, i64))
        v = bb.select(bb.cmp("lt", v, zero), wrapped, v)
    index = bb.emit(arith.IndexCastOp(v, IndexType()))
    return bb.check_index(index, size)


# --- cat / stack -----------------------------------------------------------------

MAX_POINTWISE_CAT_INPUTS = 64
"""More inputs than this: ``cat``/``stack`` run as the ATen call. The pointwise form
selects among all its inputs at every element, so its body (and the C++ compiler's
work on it) grows with the input count: a cat of 400 kept g++ busy for minutes, where
ATen copies each input once. Inductor switches earlier (8 inputs) to copies into slices
of the output; 64 keeps the fused form for the cats real models have (DenseNet's
blocks concatenate up to 49)."""


def _pointwise_cat_inputs(name: str, count: int) -> None:
    if count > MAX_POINTWISE_CAT_INPUTS:
        raise NoLowering(f"{name} of {count} inputs (more than {MAX_POINTWISE_CAT_INPUTS})")


def _cat_refs(ctx: LoweringContext, args: OpArgs, refs: Sequence[TensorRef], dim: int) -> Lowered:
    out_type = args.result_dtype()
    ty = compute_type(out_type)
    total: Expr = ZERO
    parts: list[tuple[TensorRef, Expr, Expr]] = []
    for ref in refs:
        parts.append((ref, total, ref.sizes[dim]))
        total = total + ref.sizes[dim]
    base = list(refs[0].sizes)
    base[dim] = total
    sizes = args.result_sizes(0, base)
    if len(parts) == 1:
        only = parts[0][0]
        return ctx.pointwise(sizes, out_type, lambda bb, idx: bb.load(only, idx))

    def body(bb: BodyBuilder, idx: Sequence[Expr]) -> Value:
        d = idx[dim]
        values: list[Value] = []
        for j, (ref, lo, n) in enumerate(parts):
            shifted = [*idx[:dim], d - lo, *idx[dim + 1 :]]
            lo_check = None if j == 0 else lo
            hi_check = None if j == len(parts) - 1 else lo + n
            mask = range_mask(bb, d, lo_check, hi_check)
            fill = False if is_bool(ref.dtype) else 0
            loaded = bb.load(ref, shifted, mask, fill) if mask else bb.load(ref, shifted)
            values.append(bb.cast(loaded, ty))
        result = values[-1]
        for j in range(len(parts) - 2, -1, -1):
            _, lo, n = parts[j]
            inside = bb.emit(arith.CmpiOp(bb.index_value(d), bb.index_value(lo + n), "slt"))
            result = bb.select(inside, values[j], result)
        return result

    return ctx.pointwise(sizes, out_type, body)


def range_mask(bb: BodyBuilder, d: Expr, lo: Expr | None, hi: Expr | None) -> Value | None:
    checks: list[Value] = []
    if lo is not None:
        checks.append(bb.emit(arith.CmpiOp(bb.index_value(d), bb.index_value(lo), "sge")))
    if hi is not None:
        checks.append(bb.emit(arith.CmpiOp(bb.index_value(d), bb.index_value(hi), "slt")))
    if not checks:
        return None
    mask = checks[0]
    for c in checks[1:]:
        mask = bb.and_(mask, c)
    return mask


def _cat(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    refs = [r for r in args.tensors("tensors") if r is not None]
    rank = args.result_type().get_num_dims()
    # Legacy: 1-D empty tensors are skipped whatever their rank.
    refs = [r for r in refs if not (r.rank == 1 and r.sizes[0] == 0 and rank != 1)]
    if not refs:
        raise NoLowering("cat of nothing")
    _pointwise_cat_inputs("cat", len(refs))
    dim = wrap_dim(args.value("dim"), rank)
    return [_cat_refs(ctx, args, refs, dim)]


def _stack(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    refs = [r for r in args.tensors("tensors") if r is not None]
    if not refs:
        raise NoLowering("stack of nothing")
    _pointwise_cat_inputs("stack", len(refs))
    dim = wrap_dim(args.value("dim"), refs[0].rank + 1)
    return [_cat_refs(ctx, args, [r.unsqueeze(dim) for r in refs], dim)]


# --- padding ---------------------------------------------------------------------


def _constant_pad_nd(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    x = args.tensor("self")
    pad = [expr(p) for p in args.value("pad")]
    value = args.value("value")
    if len(pad) % 2 or len(pad) // 2 > x.rank:
        raise NoLowering("bad pad length")
    lows: list[Expr] = [ZERO] * x.rank
    highs: list[Expr] = [ZERO] * x.rank
    for k in range(len(pad) // 2):
        dim = x.rank - 1 - k
        lows[dim], highs[dim] = pad[2 * k], pad[2 * k + 1]
    sizes = args.result_sizes(
        0, [s + lo + hi for s, lo, hi in zip(x.sizes, lows, highs, strict=True)]
    )
    out_type = args.result_dtype()

    def body(bb: BodyBuilder, idx: Sequence[Expr]) -> Value:
        from kiln.passes.aten_to_loop.pointwise import scalar

        src = [d - lo for d, lo in zip(idx, lows, strict=True)]
        mask: Value | None = None
        for k, (lo, hi) in enumerate(zip(lows, highs, strict=True)):
            need_lo = not (lo.is_Integer and int(lo) <= 0)
            need_hi = not (hi.is_Integer and int(hi) <= 0)
            check = range_mask(
                bb, src[k], ZERO if need_lo else None, x.sizes[k] if need_hi else None
            )
            if check is not None:
                mask = check if mask is None else bb.and_(mask, check)
        if mask is None:
            return bb.load(x, src)
        fill = value if not isinstance(value, sympy.Expr) else None
        if fill is None:
            raise NoLowering("symbolic pad value")
        try:
            return bb.load(x, src, mask, fill)
        except ValueError:
            # A fill the buffer's type cannot hold exactly (e.g. 0.5 for ints): torch
            # converts it, so select between the load and the converted scalar.
            v = bb.load(x, src, mask, 0)
            return bb.select(mask, v, scalar(bb, value, x.dtype))

    return [ctx.pointwise(sizes, out_type, body)]


def _pad_by_index(reflect: bool, ndim: int) -> Callable[[LoweringContext, OpArgs], list[Lowered]]:
    """``reflection_pad{1,2,3}d``/``replication_pad{1,2,3}d``: the source index of each
    padded dim is computed in the body (mirror or clamp) and loaded indirectly."""

    def lower(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
        x = args.tensor("self")
        padding = [expr(p) for p in args.value("padding")]
        if len(padding) != 2 * ndim or x.rank < ndim:
            raise NoLowering("padding does not match the dims")
        lows: dict[int, Expr] = {}
        sizes = list(x.sizes)
        for k in range(ndim):
            dim = x.rank - 1 - k
            lows[dim] = padding[2 * k]
            sizes[dim] = x.sizes[dim] + padding[2 * k] + padding[2 * k + 1]
        sizes = args.result_sizes(0, sizes)
        index_type = IndexType()

        def body(bb: BodyBuilder, idx: Sequence[Expr]) -> Value:
            src: list[Expr] = list(idx)
            indirect: list[Value] = []
            for dim, lo in lows.items():
                i = bb.index_value(idx[dim] - lo)
                last = bb.index_value(x.sizes[dim] - 1)
                zero = bb.const(0, index_type)
                if reflect:
                    i = _abs_index(bb, i, zero)
                    i = bb.sub(last, _abs_index(bb, bb.sub(last, i), zero))
                else:
                    i = bb.minimum(bb.maximum(i, zero), last)
                src[dim] = indirect_var(len(indirect))
                indirect.append(i)
            return bb.load(x, src, indirect=indirect)

        return [ctx.pointwise(sizes, args.result_dtype(), body)]

    return lower


def _abs_index(bb: BodyBuilder, v: Value, zero: Value) -> Value:
    return bb.select(bb.cmp("lt", v, zero), bb.sub(zero, v), v)


# --- indirect loads --------------------------------------------------------------


def _index_tensor(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    x = args.tensor("self")
    indices = args.tensors("indices")
    if len(indices) > x.rank:
        raise NoLowering("too many indices")
    positions = [k for k, t in enumerate(indices) if t is not None]
    if not positions:
        return [x]
    tensors = [indices[k] for k in positions]
    assert all(t is not None for t in tensors)
    for t in tensors:
        assert t is not None
        if is_bool(t.dtype) or is_float(t.dtype):
            raise NoLowering("boolean or float index (data-dependent shape)")
    bsizes = broadcast_sizes([t.sizes for t in tensors if t is not None])
    adjacent = positions[-1] - positions[0] + 1 == len(positions)
    rest = [k for k in range(x.rank) if k not in positions]
    if adjacent:
        before = [k for k in rest if k < positions[0]]
        after = [k for k in rest if k > positions[0]]
        layout: list[tuple[str, int]] = (
            [("x", k) for k in before]
            + [("b", j) for j in range(len(bsizes))]
            + [("x", k) for k in after]
        )
    else:
        layout = [("b", j) for j in range(len(bsizes))] + [("x", k) for k in rest]
    computed = [bsizes[j] if kind == "b" else x.sizes[j] for kind, j in layout]
    sizes = args.result_sizes(0, computed)
    expanded = [t.expand(bsizes) for t in tensors if t is not None]

    def body(bb: BodyBuilder, idx: Sequence[Expr]) -> Value:
        xidx, indirect = indexed_element(bb, x, idx, layout, bsizes, positions, expanded)
        return bb.load(x, xidx, indirect=indirect)

    return [ctx.pointwise(sizes, args.result_dtype(), body)]


def _index_select(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    x, index = args.tensor("self"), args.tensor("index")
    if x.rank == 0:
        raise NoLowering("index_select of a scalar")
    dim = wrap_dim(args.value("dim"), x.rank)
    length = index.sizes[0] if index.rank else ONE
    sizes = args.result_sizes(0, [*x.sizes[:dim], length, *x.sizes[dim + 1 :]])

    def body(bb: BodyBuilder, idx: Sequence[Expr]) -> Value:
        loaded = bb.load(index, [idx[dim]] if index.rank else [])
        i = _as_index(bb, loaded, x.sizes[dim], wrap=False)
        return bb.load(x, [*idx[:dim], indirect_var(0), *idx[dim + 1 :]], indirect=[i])

    return [ctx.pointwise(sizes, args.result_dtype(), body)]


def _gather(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    x, index = args.tensor("self"), args.tensor("index")
    if x.rank == 0 or index.rank != x.rank:
        raise NoLowering("gather of a scalar")
    dim = wrap_dim(args.value("dim"), x.rank)
    sizes = args.result_sizes(0, list(index.sizes))

    def body(bb: BodyBuilder, idx: Sequence[Expr]) -> Value:
        i = _as_index(bb, bb.load(index, idx), x.sizes[dim], wrap=False)
        return bb.load(x, [*idx[:dim], indirect_var(0), *idx[dim + 1 :]], indirect=[i])

    return [ctx.pointwise(sizes, args.result_dtype(), body)]


def _embedding(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    weight, indices = args.tensor("weight"), args.tensor("indices")
    if weight.rank != 2:
        raise NoLowering("embedding weight must be 2-D")
    sizes = args.result_sizes(0, [*indices.sizes, weight.sizes[1]])

    def body(bb: BodyBuilder, idx: Sequence[Expr]) -> Value:
        i = _as_index(bb, bb.load(indices, idx[:-1]), weight.sizes[0], wrap=False)
        return bb.load(weight, [indirect_var(0), idx[-1]], indirect=[i])

    return [ctx.pointwise(sizes, args.result_dtype(), body)]


# --- index-map views and masks -------------------------------------------------------------


def _repeat(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    x = args.tensor("self")
    repeats = [expr(r) for r in args.value("repeats")]
    lead = len(repeats) - x.rank
    if lead < 0:
        raise NoLowering("fewer repeats than dims")
    padded = [ONE] * lead + list(x.sizes)
    sizes = args.result_sizes(0, [s * r for s, r in zip(padded, repeats, strict=True)])
    inner = x

    def fn(idx: Sequence[Expr]) -> list[Expr]:
        return [safe_mod(idx[lead + k], inner.sizes[k]) for k in range(inner.rank)]

    return [x.with_map(sizes, fn)]


def _flip(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    x = args.tensor("self")
    dims = {wrap_dim(d, x.rank) for d in args.value("dims")}
    if x.strides is not None:
        strides = [(-s if k in dims else s) for k, s in enumerate(x.strides)]
        offset = x.offset + sum((x.strides[k] * (x.sizes[k] - 1) for k in dims), ZERO)
        return [x.strided(x.sizes, strides, offset)]
    return [
        x.with_map(
            x.sizes, lambda idx: [x.sizes[k] - 1 - i if k in dims else i for k, i in enumerate(idx)]
        )
    ]


def _roll(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    x = args.tensor("self")
    shifts = list(args.value("shifts"))
    dims = list(args.value("dims") or [])
    if not dims:
        return [_roll_flat(x, expr(shifts[0]) if shifts else ZERO)]
    amount = {wrap_dim(d, x.rank): expr(s) for d, s in zip(dims, shifts, strict=True)}

    def fn(idx: Sequence[Expr]) -> list[Expr]:
        return [
            safe_mod(i - amount[k], x.sizes[k]) if k in amount else i for k, i in enumerate(idx)
        ]

    return [x.with_map(x.sizes, fn)]


def _roll_flat(x: TensorRef, shift: Expr) -> TensorRef:
    """``roll`` without dims: along the flattened (row-major) tensor."""
    strides = contiguous_strides(x.sizes)
    count = numel(x.sizes)
    if count == ZERO:
        return x

    def fn(idx: Sequence[Expr]) -> list[Expr]:
        flat = safe_mod(
            sum((s * i for s, i in zip(strides, idx, strict=True)), ZERO) - shift, count
        )
        return [
            floordiv(flat, stride) if k == 0 else safe_mod(floordiv(flat, stride), size)
            for k, (stride, size) in enumerate(zip(strides, x.sizes, strict=True))
        ]

    return x.with_map(x.sizes, fn)


def _triangle(lower: bool) -> Callable[[LoweringContext, OpArgs], list[Lowered]]:
    def lower_op(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
        x = args.tensor("self")
        if x.rank < 2:
            raise NoLowering("tril/triu of fewer than 2 dims")
        diagonal = args.value("diagonal")
        ty = x.dtype

        def body(bb: BodyBuilder, idx: Sequence[Expr]) -> Value:
            offset = bb.index_value(idx[-1] - idx[-2])
            bound = bb.index_value(expr(diagonal))
            keep = bb.emit(arith.CmpiOp(offset, bound, "sle" if lower else "sge"))
            zero = bb.const(False if is_bool(ty) else 0, ty)
            return bb.select(keep, bb.load(x, idx), zero)

        return [ctx.pointwise(x.sizes, args.result_dtype(), body)]

    return lower_op


# --- writing into views, functionally -------------------------------------------------------


def _embed(
    ctx: LoweringContext,
    args: OpArgs,
    base: TensorRef | None,
    src: TensorRef,
    dim: int,
    where: Callable[[BodyBuilder, Expr], tuple[Value | None, Expr]],
) -> Lowered:
    """``base`` (zeros when None) with ``src`` written where ``where`` says, along ``dim``.

    ``where(bb, d)`` gives the mask of positions ``d`` that come from ``src`` and the
    index of ``d`` in ``src``'s dim (None as dimension: ``src`` lacks ``dim``)."""
    out_type = args.result_dtype()
    sizes = args.result_sizes(0, list(base.sizes) if base is not None else _backward_sizes(args))
    dropped = src.rank < len(sizes)

    def body(bb: BodyBuilder, idx: Sequence[Expr]) -> Value:
        mask, position = where(bb, idx[dim])
        src_idx = [*idx[:dim], *([] if dropped else [position]), *idx[dim + 1 :]]
        zero = False if is_bool(src.dtype) else 0
        if mask is None:
            return bb.load(src, src_idx)
        inside = bb.load(src, src_idx, mask, zero)
        outside = bb.load(base, idx) if base is not None else bb.const(zero, src.dtype)
        return bb.select(mask, bb.cast(inside, out_type), bb.cast(outside, out_type))

    return ctx.pointwise(sizes, out_type, body)


def _backward_sizes(args: OpArgs) -> list[Expr]:
    return [expr(s) for s in args.value("input_sizes")]


def _slice_where(
    size: Expr, start: Any, end: Any, step: int
) -> Callable[[BodyBuilder, Expr], tuple[Value | None, Expr]]:
    from kiln.passes.aten_to_loop.views import clamp_slice

    first, length = clamp_slice(size, start, end, step)

    def where(bb: BodyBuilder, d: Expr) -> tuple[Value | None, Expr]:
        offset = d - first
        mask = range_mask(bb, d, first, first + length * step)
        if step != 1:
            on_step = bb.emit(
                arith.CmpiOp(
                    bb.index_value(safe_mod(offset, sympy.Integer(step))),
                    bb.index_value(ZERO),
                    "eq",
                )
            )
            mask = on_step if mask is None else bb.and_(mask, on_step)
        return mask, floordiv(offset, step) if step != 1 else offset

    return where


def _select_where(index: Expr) -> Callable[[BodyBuilder, Expr], tuple[Value | None, Expr]]:
    def where(bb: BodyBuilder, d: Expr) -> tuple[Value | None, Expr]:
        mask = bb.emit(arith.CmpiOp(bb.index_value(d), bb.index_value(index), "eq"))
        return mask, ZERO

    return where


def _slice_scatter(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    base, src = args.tensor("self"), args.tensor("src")
    dim = wrap_dim(args.value("dim"), base.rank)
    step = args.value("step")
    if not isinstance(step, int):
        raise NoLowering("symbolic step")
    where = _slice_where(base.sizes[dim], args.value("start"), args.value("end"), step)
    return [_embed(ctx, args, base, src, dim, where)]


def _slice_backward(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    src = args.tensor("grad_output")
    sizes = _backward_sizes(args)
    dim = wrap_dim(args.value("dim"), len(sizes))
    step = args.value("step")
    if not isinstance(step, int):
        raise NoLowering("symbolic step")
    where = _slice_where(sizes[dim], args.value("start"), args.value("end"), step)
    return [_embed(ctx, args, None, src, dim, where)]


def _select_index(size: Expr, index: Any) -> Expr:
    e = expr(index)
    return size + e if e.is_Integer and int(e) < 0 else e


def _select_scatter(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    base, src = args.tensor("self"), args.tensor("src")
    dim = wrap_dim(args.value("dim"), base.rank)
    index = _select_index(base.sizes[dim], args.value("index"))
    return [_embed(ctx, args, base, src, dim, _select_where(index))]


def _select_backward(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    src = args.tensor("grad_output")
    sizes = _backward_sizes(args)
    dim = wrap_dim(args.value("dim"), len(sizes))
    index = _select_index(sizes[dim], args.value("index"))
    return [_embed(ctx, args, None, src, dim, _select_where(index))]


LOWERINGS: dict[str, Lowering] = {
    "slice_scatter": _slice_scatter,
    "select_scatter": _select_scatter,
    "slice_backward": _slice_backward,
    "select_backward": _select_backward,
    "cat": _cat,
    "stack": _stack,
    "constant_pad_nd": _constant_pad_nd,
    **{f"reflection_pad{n}d": _pad_by_index(True, n) for n in (1, 2, 3)},
    **{f"replication_pad{n}d": _pad_by_index(False, n) for n in (1, 2, 3)},
    "index.Tensor": _index_tensor,
    "index_select": _index_select,
    "gather": _gather,
    "embedding": _embedding,
    "repeat": _repeat,
    "flip": _flip,
    "roll": _roll,
    "tril": _triangle(True),
    "triu": _triangle(False),
}

"""Scatters: ``index_put``, ``scatter_add``, ``scatter_reduce`` (sum), ``scatter`` (value, src).

Each becomes a ``loop.scatter`` over the source's iteration space (the index and value
tensors broadcast together): every point loads its indices (wrapped when negative where
eager wraps them, then checked by ``loop.check_index``), loads its value and adds it at
the element of a zero-initialised buffer those indices name; duplicates add up. The
result is that buffer when ``self`` is known to be zeros (the embedding gradient's
``new_zeros``), else ``self`` plus it (a pointwise node)::

    %g = loop.scatter sum [4, 8] into [100, 8] at "d1 + 8*i0" (%idx, %src) ...

Backends run it as atomic adds (``#pragma omp atomic``, ``tl.atomic_add``) after a zero
fill, as Inductor does. It stays an ATen call when deterministic algorithms are on
(``torch.use_deterministic_algorithms``: atomic float adds are not), and for dtypes the
device's atomics do not cover (:func:`atomic_dtypes`).

Non-accumulating scatters (``scatter.value``/``scatter.src``, ``index_put`` without
accumulate) write instead of adding; with duplicate positions eager keeps one of the
written values, unspecified (CUDA) or the last (CPU). Only the cases whose result is exact
are lowered, the rest stay ATen:

- one index per row (``index.size(dim) == 1``, the other dims ``self``'s): no position is
  written twice, so it is a pointwise select, ``d == index ? src : self`` (what
  ``nll_loss_backward``'s ``scatter(zeros, 1, target, -1.0)`` is, fused with its
  neighbours, no atomics);
- one value written everywhere (``scatter.value``, ``index_put`` of a one-element or
  constant ``values``): duplicates write the same value, so the result is ``self`` where
  no position is hit, else the value. The hits are counted by an i32 ``loop.scatter``
  (integer adds are exact in any order, so also under deterministic algorithms), then
  ``where(count != 0, value, self)``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import sympy
from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    ArrayAttr,
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
    i32,
)
from xdsl.ir import Attribute, Region, SSAValue

from kiln.dialects.loop.attributes import ReductionKind, ReductionKindAttr
from kiln.dialects.loop.body_ops import YieldOp
from kiln.dialects.loop.expr import indirect_var
from kiln.dialects.loop.ops import PointwiseOp, ScatterOp, buffer_type, segment_sizes
from kiln.passes.aten_to_loop.body import BodyBuilder, expr_attr
from kiln.passes.aten_to_loop.context import Lowered, Lowering, LoweringContext, OpArgs
from kiln.passes.aten_to_loop.indexing import (  # pyright: ignore[reportPrivateUsage]
    _as_index,
    indexed_element,
)
from kiln.passes.aten_to_loop.pointwise import broadcast_sizes, scalar
from kiln.passes.aten_to_loop.tensors import ZERO, TensorRef, contiguous_strides
from kiln.passes.aten_to_loop.types import NoLowering, is_bool, is_float
from kiln.passes.aten_to_loop.views import wrap_dim

Expr = sympy.Expr
Value = SSAValue


def atomic_dtypes(device: str) -> tuple[type[Attribute], ...]:
    """Element types the device's atomic add covers, as kiln's backends emit it.

    C++ (``#pragma omp atomic``): f32, f64, i32, i64. Triton 3.6 (``tl.atomic_add``): f32,
    f64, f16, i32, and bf16 from sm90 on (:func:`cuda_bf16_atomics`); not i64 or bool
    (Inductor's ``needs_fallback_due_to_atomic_add_limitations``). Widths are checked by
    :func:`_atomic_supported`.
    """
    if device.startswith("cuda"):
        bf16 = (BFloat16Type,) if cuda_bf16_atomics(device) else ()
        return (Float32Type, Float64Type, Float16Type, IntegerType, *bf16)
    return (Float32Type, Float64Type, IntegerType)


def cuda_bf16_atomics(device: str) -> bool:
    """Whether ``tl.atomic_add`` of bf16 runs on ``device``: a native bf16 atomic needs
    compute capability 9.0 (Hopper) or later, as Inductor decides. Asked of the device the
    program is compiled for (no GPU here: no)."""
    import torch

    if not device.startswith("cuda") or not torch.cuda.is_available():
        return False
    return torch.cuda.get_device_capability(torch.device(device)) >= (9, 0)


def _atomic_supported(ty: Attribute, device: str) -> bool:
    if not isinstance(ty, atomic_dtypes(device)):
        return False
    if isinstance(ty, IntegerType):
        widths = (32,) if device.startswith("cuda") else (32, 64)
        return ty.width.data in widths
    return True


def _check_scatter_allowed(ctx: LoweringContext, dtype: Attribute) -> None:
    import torch

    if torch.are_deterministic_algorithms_enabled():
        raise NoLowering("deterministic algorithms are on (atomic adds are not deterministic)")
    if not _atomic_supported(dtype, ctx.device):
        raise NoLowering(f"no atomic add of {dtype} on {ctx.device}")


ScatterBody = Callable[[BodyBuilder, list[sympy.Symbol]], tuple[Value, Expr, list[Value]]]
"""Builds a scatter's body at a point: its value, its flat position in the output
(``i<k>`` standing for the k-th index value) and those index values."""


def _scatter(
    ctx: LoweringContext,
    sizes: Sequence[Expr],
    out_sizes: Sequence[Expr],
    dtype: Attribute,
    body: ScatterBody,
) -> TensorRef:
    """A ``loop.scatter`` over ``sizes`` into a zero buffer of ``out_sizes``."""
    bb = ctx.body(sizes)
    size_attrs = [expr_attr(bb.localize(sympy.sympify(s))) for s in sizes]
    out_attrs = [expr_attr(bb.localize(sympy.sympify(s))) for s in out_sizes]
    value, position, indirect = body(bb, bb.index)
    value = bb.cast(value, dtype)
    position_attr = expr_attr(bb.localize(sympy.sympify(position)))
    bb.block.add_op(YieldOp(value, *indirect))
    op = ScatterOp.create(
        operands=[*bb.inputs, *bb.sym_values],
        result_types=[buffer_type(dtype, out_sizes)],
        properties={
            "kind": ReductionKindAttr(ReductionKind.SUM),
            "sizes": ArrayAttr(size_attrs),
            "out_sizes": ArrayAttr(out_attrs),
            "index": position_attr,
            "operandSegmentSizes": segment_sizes(len(bb.inputs), len(bb.sym_values)),
        },
        regions=[Region(bb.block)],
    )
    ctx.emit(op)
    return TensorRef.of_buffer(op.result, out_sizes)


def constant_value(ref: TensorRef) -> float | int | bool | None:
    """The value every element of ``ref`` holds, when it is a view of a ``loop.pointwise``
    buffer whose body yields a constant (``zeros``, ``full``, ``new_ones``); else None."""
    owner = ref.buffer.owner
    if not isinstance(owner, PointwiseOp):
        return None
    last = owner.body.block.last_op
    if not isinstance(last, YieldOp) or len(last.values) != 1:
        return None
    const = last.values[0].owner
    if not isinstance(const, arith.ConstantOp):
        return None
    value = getattr(const.value, "value", None)
    data = getattr(value, "data", None)
    if not isinstance(data, int | float):
        return None
    ty = const.result.type
    if isinstance(ty, IntegerType) and ty.width.data == 1:
        return bool(data)  # i1 attributes may hold true as -1
    return data


def is_zeros(ref: TensorRef) -> bool:
    """Whether every element of ``ref`` is zero (``zeros``, ``new_zeros``, ``full(0)``)."""
    value = constant_value(ref)
    return value is not None and value == 0


def _plus_self(ctx: LoweringContext, args: OpArgs, base: TensorRef, acc: TensorRef) -> TensorRef:
    """``base + acc`` (``acc`` alone when ``base`` is all zeros)."""
    if is_zeros(base):
        return acc
    out_type = args.result_dtype()

    def body(bb: BodyBuilder, idx: Sequence[Expr]) -> Value:
        a = bb.cast(bb.load(base, idx), out_type)
        b = bb.cast(bb.load(acc, idx), out_type)
        if is_bool(out_type):
            return bb.or_(a, b)
        return bb.add_(a, b)

    return ctx.pointwise(base.sizes, out_type, body)


def _flat(idx: Sequence[Expr], sizes: Sequence[Expr]) -> Expr:
    return sum(
        (s * i for s, i in zip(contiguous_strides(sizes), idx, strict=True)), sympy.Integer(0)
    )


def _where_hit(
    ctx: LoweringContext,
    args: OpArgs,
    x: TensorRef,
    count: TensorRef,
    written: Callable[[BodyBuilder], Value],
) -> TensorRef:
    """``where(count != 0, written, x)``: ``x`` with one value written wherever a
    counting scatter hit (see the module docstring)."""
    out_type = args.result_dtype()
    sizes = args.result_sizes(0, list(x.sizes))

    def body(bb: BodyBuilder, idx: Sequence[Expr]) -> Value:
        hit = bb.cmp("ne", bb.load(count, idx), bb.const(0, i32))
        old = bb.cast(bb.load(x, idx), out_type)
        return bb.select(hit, bb.cast(written(bb), out_type), old)

    return ctx.pointwise(sizes, out_type, body)


def _one_value(ref: TensorRef) -> Callable[[BodyBuilder], Value] | None:
    """How to produce the one value every element of ``ref`` holds, when that is known
    at compile time: one element (a scalar tensor, broadcast) or a constant buffer."""
    if all(s == 1 for s in ref.sizes):
        zeros = [ZERO] * ref.rank
        return lambda bb: bb.load(ref, zeros)
    const = constant_value(ref)
    if const is None:
        return None
    return lambda bb: bb.const(const, ref.dtype)


# --- index_put ---------------------------------------------------------------------------


def _index_put(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    accumulate = bool(args.value("accumulate"))
    x = args.tensor("self")
    values = args.tensor("values")
    indices = args.tensors("indices")
    dtype = args.result_dtype()
    if values.dtype != x.dtype or dtype != x.dtype:
        raise NoLowering("index_put of values of another dtype (eager raises)")
    one_value = None if accumulate else _one_value(values)
    if not accumulate and one_value is None:
        # Duplicate positions: eager keeps one of the values written there (the last on
        # CPU, any on CUDA); only a single value written everywhere is exact.
        raise NoLowering("index_put without accumulate of several values (duplicates)")
    if accumulate:
        _check_scatter_allowed(ctx, dtype)
    if len(indices) > x.rank:
        raise NoLowering("too many indices")
    positions = [k for k, t in enumerate(indices) if t is not None]
    if not positions:
        raise NoLowering("index_put without index tensors")
    mask = indices[positions[0]]
    if (
        one_value is not None
        and all(s == 1 for s in values.sizes)
        and len(positions) == 1
        and mask is not None
        and is_bool(mask.dtype)
        # values broadcast to the masked result, [nnz, dims after the mask]
        and values.rank <= x.rank - mask.rank + 1
    ):
        return [_masked_fill(ctx, args, x, mask, positions[0], one_value)]
    tensors: list[TensorRef] = []
    for k in positions:
        t = indices[k]
        assert t is not None
        if is_bool(t.dtype) or is_float(t.dtype):
            raise NoLowering("boolean or float index")
        tensors.append(t)
    bsizes = broadcast_sizes([t.sizes for t in tensors])
    adjacent = positions[-1] - positions[0] + 1 == len(positions)
    rest = [k for k in range(x.rank) if k not in positions]
    if adjacent:
        before = [k for k in rest if k < positions[0]]
        after = [k for k in rest if k > positions[0]]
        layout = (
            [("x", k) for k in before]
            + [("b", j) for j in range(len(bsizes))]
            + [("x", k) for k in after]
        )
    else:
        layout = [("b", j) for j in range(len(bsizes))] + [("x", k) for k in rest]
    space = [bsizes[j] if kind == "b" else x.sizes[j] for kind, j in layout]
    lead = len(space) - values.rank
    if lead < 0 or any(
        not (v == 1 or sympy.expand(v - s) == 0)
        for v, s in zip(values.sizes, space[lead:], strict=True)
    ):
        raise NoLowering("values do not broadcast to the indexed shape (eager raises)")
    src = values.expand(space)
    expanded = [t.expand(bsizes) for t in tensors]

    def body_of(
        value: Callable[[BodyBuilder, list[sympy.Symbol]], Value],
    ) -> ScatterBody:
        def body(bb: BodyBuilder, idx: list[sympy.Symbol]) -> tuple[Value, Expr, list[Value]]:
            xidx, indirect = indexed_element(bb, x, idx, layout, bsizes, positions, expanded)
            return value(bb, idx), _flat(xidx, x.sizes), indirect

        return body

    if one_value is not None:
        count = _scatter(ctx, space, x.sizes, i32, body_of(lambda bb, _: bb.const(1, i32)))
        return [_where_hit(ctx, args, x, count, one_value)]
    acc = _scatter(ctx, space, x.sizes, dtype, body_of(lambda bb, idx: bb.load(src, idx)))
    return [_plus_self(ctx, args, x, acc)]


def _masked_fill(
    ctx: LoweringContext,
    args: OpArgs,
    x: TensorRef,
    mask: TensorRef,
    start: int,
    written: Callable[[BodyBuilder], Value],
) -> TensorRef:
    """``x[..., mask] = v`` with one value: a pointwise ``where(mask, v, x)``, the mask
    covering ``x``'s dims from ``start`` (its shape must be theirs: eager raises else)."""
    dims = range(start, start + mask.rank)
    if start + mask.rank > x.rank or any(
        sympy.expand(mask.sizes[d - start] - x.sizes[d]) != 0 for d in dims
    ):
        raise NoLowering("boolean index whose shape is not the indexed dims' (eager raises)")
    out_type = args.result_dtype()
    sizes = args.result_sizes(0, list(x.sizes))

    def body(bb: BodyBuilder, idx: list[sympy.Symbol]) -> Value:
        hit = bb.load(mask, [idx[d] for d in dims])
        old = bb.cast(bb.load(x, idx), out_type)
        return bb.select(hit, bb.cast(written(bb), out_type), old)

    return ctx.pointwise(sizes, out_type, body)


# --- scatter_add / scatter_reduce(sum) / scatter ----------------------------------------------


def _check_along(args: OpArgs, x: TensorRef, index: TensorRef, src: TensorRef | None) -> int:
    """Eager's checks of a scatter along ``dim`` that kiln must see statically (else
    ATen raises them); the wrapped ``dim``."""
    if x.rank == 0 or index.rank != x.rank or (src is not None and src.rank != x.rank):
        raise NoLowering("scatter of a scalar or of mismatched ranks")
    if is_bool(index.dtype) or is_float(index.dtype):
        raise NoLowering("index of a non-integer dtype")
    dim = wrap_dim(args.value("dim"), x.rank)
    # Eager requires index.size(d) <= src.size(d), and <= self.size(d) for d != dim.
    for d in range(x.rank):
        bounds = [] if src is None else [src.sizes[d]]
        if d != dim:
            bounds.append(x.sizes[d])
        for bound in bounds:
            diff = sympy.expand(bound - index.sizes[d])
            if not (diff.is_Integer and int(diff) >= 0):
                raise NoLowering("index larger than src or self (or symbolic)")
    return dim


def _along_body(
    x: TensorRef,
    index: TensorRef,
    dim: int,
    value: Callable[[BodyBuilder, list[sympy.Symbol]], Value],
) -> ScatterBody:
    """Point ``p`` of ``index``'s shape writes ``value`` at ``p`` with dim ``dim``
    replaced by ``index[p]`` (no wrapping: eager raises on negatives)."""

    def body(bb: BodyBuilder, idx: list[sympy.Symbol]) -> tuple[Value, Expr, list[Value]]:
        i = _as_index(bb, bb.load(index, idx), x.sizes[dim], wrap=False)
        target = [*idx[:dim], indirect_var(0), *idx[dim + 1 :]]
        return value(bb, idx), _flat(target, x.sizes), [i]

    return body


def _scatter_along(ctx: LoweringContext, args: OpArgs, x: TensorRef) -> TensorRef:
    """``zeros_like(self)`` with ``src[p]`` added at ``p`` with dim ``dim`` replaced by
    ``index[p]``, for every ``p`` of ``index``'s shape."""
    index, src = args.tensor("index"), args.tensor("src")
    dtype = args.result_dtype()
    if src.dtype != x.dtype or dtype != x.dtype:
        raise NoLowering("scatter of src of another dtype (eager raises)")
    _check_scatter_allowed(ctx, dtype)
    dim = _check_along(args, x, index, src)
    body = _along_body(x, index, dim, lambda bb, idx: bb.load(src, idx))
    return _scatter(ctx, list(index.sizes), x.sizes, dtype, body)


def _scatter_add(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    x = args.tensor("self")
    return [_plus_self(ctx, args, x, _scatter_along(ctx, args, x))]


def _scatter_reduce(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    if args.value("reduce") != "sum" or not args.value("include_self"):
        raise NoLowering("scatter_reduce other than sum including self")
    x = args.tensor("self")
    return [_plus_self(ctx, args, x, _scatter_along(ctx, args, x))]


def _one_per_row(x: TensorRef, index: TensorRef, dim: int) -> bool:
    """Whether ``index`` holds one position per row along ``dim`` and covers every row of
    ``x``: each element of the result is written at most once, by a known point."""
    return all(
        sympy.expand(index.sizes[d] - (1 if d == dim else x.sizes[d])) == 0 for d in range(x.rank)
    )


def _select_row(
    ctx: LoweringContext,
    args: OpArgs,
    x: TensorRef,
    index: TensorRef,
    dim: int,
    written: Callable[[BodyBuilder, list[Expr]], Value],
) -> TensorRef:
    """The one-index-per-row scatter as a pointwise op: element ``p`` is ``written`` (at
    ``p`` with dim ``dim`` set to 0) when ``p[dim] == index[p with dim 0]``, else
    ``x[p]``."""
    out_type = args.result_dtype()
    sizes = args.result_sizes(0, list(x.sizes))

    def body(bb: BodyBuilder, idx: list[sympy.Symbol]) -> Value:
        row: list[Expr] = [*idx[:dim], ZERO, *idx[dim + 1 :]]
        i = _as_index(bb, bb.load(index, row), x.sizes[dim], wrap=False)
        hit = bb.emit(arith.CmpiOp(bb.index_value(idx[dim]), i, "eq"))
        old = bb.cast(bb.load(x, idx), out_type)
        return bb.select(hit, bb.cast(written(bb, row), out_type), old)

    return ctx.pointwise(sizes, out_type, body)


def _scatter_value(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    """``scatter.value``: one value written everywhere, exact whatever the duplicates."""
    x, index = args.tensor("self"), args.tensor("index")
    value = args.value("value")
    dtype = args.result_dtype()
    if dtype != x.dtype:
        raise NoLowering("scatter into another dtype")
    dim = _check_along(args, x, index, None)
    return [_scatter_one_value(ctx, args, x, index, dim, lambda bb: scalar(bb, value, dtype))]


def _scatter_one_value(
    ctx: LoweringContext,
    args: OpArgs,
    x: TensorRef,
    index: TensorRef,
    dim: int,
    written: Callable[[BodyBuilder], Value],
) -> TensorRef:
    if _one_per_row(x, index, dim):
        return _select_row(ctx, args, x, index, dim, lambda bb, _: written(bb))
    body = _along_body(x, index, dim, lambda bb, _: bb.const(1, i32))
    count = _scatter(ctx, list(index.sizes), x.sizes, i32, body)
    return _where_hit(ctx, args, x, count, written)


def _scatter_src(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    """``scatter.src``: exact with one index per row (no position written twice) or a
    constant ``src``; other duplicates keep an unspecified one of the values: ATen."""
    x, index, src = args.tensor("self"), args.tensor("index"), args.tensor("src")
    dtype = args.result_dtype()
    if src.dtype != x.dtype or dtype != x.dtype:
        raise NoLowering("scatter of src of another dtype (eager raises)")
    dim = _check_along(args, x, index, src)
    if _one_per_row(x, index, dim):
        return [_select_row(ctx, args, x, index, dim, lambda bb, row: bb.load(src, row))]
    one_value = _one_value(src)
    if one_value is None:
        raise NoLowering("scatter of several values where positions may repeat")
    return [_scatter_one_value(ctx, args, x, index, dim, one_value)]


LOWERINGS: dict[str, Lowering] = {
    "index_put": _index_put,
    "scatter_add": _scatter_add,
    "scatter_reduce.two": _scatter_reduce,
    "scatter.value": _scatter_value,
    "scatter.src": _scatter_src,
}

__all__ = ["LOWERINGS", "atomic_dtypes", "constant_value", "cuda_bf16_atomics", "is_zeros"]

"""Accumulating scatters: ``index_put(accumulate=True)``, ``scatter_add``, ``scatter_reduce``
(sum).

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
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import sympy
from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    ArrayAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
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
from kiln.passes.aten_to_loop.pointwise import broadcast_sizes
from kiln.passes.aten_to_loop.tensors import TensorRef, contiguous_strides
from kiln.passes.aten_to_loop.types import NoLowering, is_bool, is_float
from kiln.passes.aten_to_loop.views import wrap_dim

Expr = sympy.Expr
Value = SSAValue


def atomic_dtypes(device: str) -> tuple[type[Attribute], ...]:
    """Element types the device's atomic add covers, as kiln's backends emit it.

    C++ (``#pragma omp atomic``): f32, f64, i32, i64. Triton 3.6 (``tl.atomic_add``): f32,
    f64, f16, i32; not i64, bool or bf16 (Inductor's
    ``needs_fallback_due_to_atomic_add_limitations``; bf16 would need sm90 and its
    config flag). Widths are checked by :func:`_atomic_supported`.
    """
    if device.startswith("cuda"):
        return (Float32Type, Float64Type, Float16Type, IntegerType)
    return (Float32Type, Float64Type, IntegerType)


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


def is_zeros(ref: TensorRef) -> bool:
    """Whether every element of ``ref`` is zero: a view of a ``loop.pointwise`` buffer
    whose body yields the constant 0 (``zeros``, ``new_zeros``, ``full(0)``)."""
    owner = ref.buffer.owner
    if not isinstance(owner, PointwiseOp):
        return False
    last = owner.body.block.last_op
    if not isinstance(last, YieldOp) or len(last.values) != 1:
        return False
    const = last.values[0].owner
    if not isinstance(const, arith.ConstantOp):
        return False
    value = getattr(const.value, "value", None)
    data = getattr(value, "data", None)
    return isinstance(data, int | float) and data == 0


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


# --- index_put(accumulate=True) ----------------------------------------------------------


def _index_put(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    if not args.value("accumulate"):
        raise NoLowering("index_put without accumulate (duplicates: last write wins)")
    x = args.tensor("self")
    values = args.tensor("values")
    indices = args.tensors("indices")
    dtype = args.result_dtype()
    if values.dtype != x.dtype or dtype != x.dtype:
        raise NoLowering("index_put of values of another dtype (eager raises)")
    _check_scatter_allowed(ctx, dtype)
    if len(indices) > x.rank:
        raise NoLowering("too many indices")
    positions = [k for k, t in enumerate(indices) if t is not None]
    if not positions:
        raise NoLowering("index_put without index tensors")
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

    def body(bb: BodyBuilder, idx: list[sympy.Symbol]) -> tuple[Value, Expr, list[Value]]:
        xidx, indirect = indexed_element(bb, x, idx, layout, bsizes, positions, expanded)
        return bb.load(src, idx), _flat(xidx, x.sizes), indirect

    acc = _scatter(ctx, space, x.sizes, dtype, body)
    return [_plus_self(ctx, args, x, acc)]


# --- scatter_add / scatter_reduce(sum) --------------------------------------------------------


def _scatter_along(ctx: LoweringContext, args: OpArgs, x: TensorRef) -> TensorRef:
    """``zeros_like(self)`` with ``src[p]`` added at ``p`` with dim ``dim`` replaced by
    ``index[p]``, for every ``p`` of ``index``'s shape."""
    index, src = args.tensor("index"), args.tensor("src")
    dtype = args.result_dtype()
    if src.dtype != x.dtype or dtype != x.dtype:
        raise NoLowering("scatter of src of another dtype (eager raises)")
    _check_scatter_allowed(ctx, dtype)
    if x.rank == 0 or index.rank != x.rank or src.rank != x.rank:
        raise NoLowering("scatter of a scalar or of mismatched ranks")
    if is_bool(index.dtype) or is_float(index.dtype):
        raise NoLowering("index of a non-integer dtype")
    dim = wrap_dim(args.value("dim"), x.rank)
    # Eager requires index.size(d) <= src.size(d), and <= self.size(d) for d != dim.
    for d in range(x.rank):
        for bound in (src.sizes[d], *([] if d == dim else [x.sizes[d]])):
            diff = sympy.expand(bound - index.sizes[d])
            if not (diff.is_Integer and int(diff) >= 0):
                raise NoLowering("index larger than src or self (or symbolic)")

    def body(bb: BodyBuilder, idx: list[sympy.Symbol]) -> tuple[Value, Expr, list[Value]]:
        i = _as_index(bb, bb.load(index, idx), x.sizes[dim], wrap=False)
        target = [*idx[:dim], indirect_var(0), *idx[dim + 1 :]]
        return bb.load(src, idx), _flat(target, x.sizes), [i]

    return _scatter(ctx, list(index.sizes), x.sizes, dtype, body)


def _scatter_add(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    x = args.tensor("self")
    return [_plus_self(ctx, args, x, _scatter_along(ctx, args, x))]


def _scatter_reduce(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    if args.value("reduce") != "sum" or not args.value("include_self"):
        raise NoLowering("scatter_reduce other than sum including self")
    x = args.tensor("self")
    return [_plus_self(ctx, args, x, _scatter_along(ctx, args, x))]


LOWERINGS: dict[str, Lowering] = {
    "index_put": _index_put,
    "scatter_add": _scatter_add,
    "scatter_reduce.two": _scatter_reduce,
}

__all__ = ["LOWERINGS", "atomic_dtypes", "is_zeros"]

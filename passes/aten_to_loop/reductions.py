"""Reductions over any dims, with ``keepdim`` and ``dtype``: one ``loop.reduction`` each.

sum, prod, amax/amin, max/min (values and indices), argmax/argmin, any/all reduce
directly; mean is a sum and a division; var/std/var_mean go through a ``welford``
reduction; softmax, log_softmax and logsumexp are a max reduction, a sum of
exponentials and a pointwise epilogue (what ``decompose`` would produce, done here
too so that they lower without it); cumsum along a short dim is a masked sum (below).
Half and bfloat16 reduce in f32 and round once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sympy
from xdsl.dialects import arith
from xdsl.dialects import math as xmath
from xdsl.dialects.builtin import i1
from xdsl.ir import Attribute, SSAValue

from kiln.dialects.loop.attributes import ReductionKind
from kiln.passes.aten_to_loop.body import BodyBuilder
from kiln.passes.aten_to_loop.context import Lowered, Lowering, LoweringContext, OpArgs
from kiln.passes.aten_to_loop.tensors import ONE, TensorRef, numel
from kiln.passes.aten_to_loop.types import NoLowering, compute_type, is_float
from kiln.passes.aten_to_loop.views import wrap_dim

Expr = sympy.Expr
Value = SSAValue
K = ReductionKind


def normalize_dims(dims: Any, rank: int) -> list[int]:
    """Reduced dims, sorted; None or [] mean all dims."""
    if rank == 0:
        return []
    if dims is None:
        return list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    if len(dims) == 0:
        return list(range(rank))
    out = sorted({wrap_dim(int(d), rank) for d in dims})
    return out


class Reduce:
    """The index bookkeeping of reducing ``x`` over ``dims``."""

    def __init__(self, x: TensorRef, dims: Sequence[int], keepdim: bool) -> None:
        self.x = x
        self.dims = list(dims)
        self.keepdim = keepdim
        kept = [k for k in range(x.rank) if k not in self.dims]
        self.kept = kept
        if keepdim:
            self.out_sizes = [ONE if k in self.dims else x.sizes[k] for k in range(x.rank)]
        else:
            self.out_sizes = [x.sizes[k] for k in kept]
        self.reduction_sizes = [x.sizes[k] for k in self.dims]

    def input_index(self, idx: Sequence[Expr], ridx: Sequence[Expr]) -> list[Expr]:
        full: list[Expr] = []
        r = 0
        for k in range(self.x.rank):
            if k in self.dims:
                full.append(ridx[r])
                r += 1
            else:
                full.append(idx[k] if self.keepdim else idx[self.kept.index(k)])
        return full

    def broadcast_index(self, idx: Sequence[Expr]) -> list[Expr]:
        """The index into a reduced (output-sized) buffer for an input-shaped ``idx``."""
        if self.keepdim:
            return [sympy.Integer(0) if k in self.dims else idx[k] for k in range(self.x.rank)]
        return [idx[k] for k in self.kept]

    def run(
        self,
        ctx: LoweringContext,
        kind: ReductionKind,
        value_type: Attribute,
        value: Callable[[BodyBuilder, Value], Value] | None = None,
    ) -> list[TensorRef]:
        x = self.x

        def body(bb: BodyBuilder, idx: list[sympy.Symbol], ridx: list[sympy.Symbol]) -> Value:
            v = bb.load(x, self.input_index(idx, ridx))
            if value is not None:
                return value(bb, v)
            return bb.cast(v, value_type)

        return ctx.reduction(kind, self.out_sizes, self.reduction_sizes, value_type, body)


def finish_in(ctx: LoweringContext, ref: TensorRef, dtype: Attribute) -> TensorRef:
    """Round a reduction computed in f32 to the result's half type (a pointwise cast)."""
    if ref.dtype == dtype:
        return ref
    return ctx.pointwise(ref.sizes, dtype, lambda bb, idx: bb.load(ref, idx))


def _simple(
    kind: ReductionKind, all_dims: bool = False
) -> Callable[[LoweringContext, OpArgs], list[Lowered]]:
    """sum/prod/amax/amin/any/all, over ``dim`` (or all dims)."""

    def lower(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
        x = args.tensor("self")
        dims = normalize_dims(None if all_dims else args.value("dim"), x.rank)
        keepdim = False if all_dims else bool(args.value("keepdim"))
        out = args.result_dtype()
        if kind in (K.ANY, K.ALL):
            ty: Attribute = i1
            if out != i1:
                raise NoLowering("any/all with a non-bool result")
        elif kind in (K.MAX, K.MIN):
            ty = x.dtype
        else:
            ty = compute_type(out)
        r = Reduce(x, dims, keepdim)
        (result,) = r.run(ctx, kind, ty)
        return [finish_in(ctx, result, out)]

    return lower


def _arg(kind: ReductionKind) -> Callable[[LoweringContext, OpArgs], list[Lowered]]:
    def lower(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
        x = args.tensor("self")
        dim = args.value("dim")
        keepdim = bool(args.value("keepdim"))
        if dim is None:
            r = Reduce(x, list(range(x.rank)), keepdim)
        else:
            r = Reduce(x, normalize_dims([dim], x.rank), keepdim)
        return list(r.run(ctx, kind, x.dtype))

    return lower


def _values_and_indices(
    value_kind: ReductionKind, index_kind: ReductionKind
) -> Callable[[LoweringContext, OpArgs], list[Lowered]]:
    """``max.dim``/``min.dim``: the extreme value and its index along ``dim``."""

    def lower(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
        x = args.tensor("self")
        r = Reduce(x, normalize_dims([args.value("dim")], x.rank), bool(args.value("keepdim")))
        (values,) = r.run(ctx, value_kind, x.dtype)
        (indices,) = r.run(ctx, index_kind, x.dtype)
        return [values, indices]

    return lower


def _mean(ctx: LoweringContext, args: OpArgs, dims: Any, keepdim: bool) -> list[Lowered]:
    x = args.tensor("self")
    out = args.result_dtype()
    ty = compute_type(out)
    if not is_float(ty):
        raise NoLowering("mean of ints")
    r = Reduce(x, normalize_dims(dims, x.rank), keepdim)
    (total,) = r.run(ctx, K.SUM, ty)
    count = numel(r.reduction_sizes)

    def body(bb: BodyBuilder, idx: Sequence[Expr]) -> Value:
        return bb.div(bb.load(total, idx), bb.index_as(count, ty))

    return [ctx.pointwise(total.sizes, out, body)]


def _mean_all(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    return _mean(ctx, args, None, False)


def _mean_dim(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    return _mean(ctx, args, args.value("dim"), bool(args.value("keepdim")))


def _welford(
    args: OpArgs, ctx: LoweringContext, dims: Any, keepdim: bool
) -> tuple[Reduce, list[TensorRef], Attribute]:
    x = args.tensor("self")
    ty = compute_type(args.result_dtype())
    if not is_float(ty):
        raise NoLowering("variance of ints")
    r = Reduce(x, normalize_dims(dims, x.rank), keepdim)
    return r, r.run(ctx, K.WELFORD, ty), ty


def _correction(args: OpArgs) -> Any:
    names = {a.name for a in args.op.op_schema().arguments}
    if "correction" in names:
        c = args.value("correction")
        return 1 if c is None else c
    unbiased = args.value("unbiased")
    return 1 if unbiased is None or unbiased else 0


def _variance(
    ctx: LoweringContext,
    m2: TensorRef,
    count: Expr,
    correction: Any,
    ty: Attribute,
    out: Attribute,
    sqrt: bool,
) -> TensorRef:
    def body(bb: BodyBuilder, idx: Sequence[Expr]) -> Value:
        from kiln.passes.aten_to_loop.pointwise import scalar

        denom = bb.sub(bb.index_as(count, ty), scalar(bb, correction, ty))
        denom = bb.maximum(denom, bb.const(0.0, ty))
        v = bb.div(bb.load(m2, idx), denom)
        return bb.math(xmath.SqrtOp, v) if sqrt else v

    return ctx.pointwise(m2.sizes, out, body)


def _var(sqrt: bool) -> Callable[[LoweringContext, OpArgs], list[Lowered]]:
    def lower(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
        keepdim = bool(args.value("keepdim"))
        r, (_, m2, _), ty = _welford(args, ctx, args.value("dim"), keepdim)
        count = numel(r.reduction_sizes)
        return [_variance(ctx, m2, count, _correction(args), ty, args.result_dtype(), sqrt)]

    return lower


def _var_mean(sqrt: bool) -> Callable[[LoweringContext, OpArgs], list[Lowered]]:
    """``var_mean``/``std_mean``: both from one welford reduction."""

    def lower(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
        keepdim = bool(args.value("keepdim"))
        r, (mean, m2, _), ty = _welford(args, ctx, args.value("dim"), keepdim)
        count = numel(r.reduction_sizes)
        var = _variance(ctx, m2, count, _correction(args), ty, args.result_dtype(0), sqrt)
        return [var, finish_in(ctx, mean, args.result_dtype(1))]

    return lower


def _softmax_backward(log: bool) -> Callable[[LoweringContext, OpArgs], list[Lowered]]:
    """``_softmax_backward_data``: ``y * (g - sum(g * y))``; log: ``g - exp(y) * sum(g)``."""

    def lower(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
        grad, y = args.tensor("grad_output"), args.tensor("output")
        out = args.result_dtype()
        ty = compute_type(out)
        if not is_float(ty):
            raise NoLowering("softmax backward of ints")
        r = Reduce(grad, normalize_dims([args.value("dim")], grad.rank), True)

        def summand(bb: BodyBuilder, idx: list[sympy.Symbol], ridx: list[sympy.Symbol]) -> Value:
            full = r.input_index(idx, ridx)
            g = bb.load_as(grad, full, ty)
            return g if log else bb.mul(g, bb.load_as(y, full, ty))

        (total,) = ctx.reduction(K.SUM, r.out_sizes, r.reduction_sizes, ty, summand)

        def epilogue(bb: BodyBuilder, idx: Sequence[Expr]) -> Value:
            g, v = bb.load_as(grad, idx, ty), bb.load_as(y, idx, ty)
            s = bb.load(total, r.broadcast_index(idx))
            if log:
                return bb.sub(g, bb.mul(bb.exp(v), s))
            return bb.mul(v, bb.sub(g, s))

        return [ctx.pointwise(grad.sizes, out, epilogue)]

    return lower


def _softmax(
    log: bool, dtype_arg: str | None
) -> Callable[[LoweringContext, OpArgs], list[Lowered]]:
    def lower(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
        x = args.tensor("self")
        out = args.result_dtype()
        ty = compute_type(out)
        if not is_float(ty):
            raise NoLowering("softmax of ints")
        r = Reduce(x, normalize_dims([args.value("dim")], x.rank), True)

        def shifted(bb: BodyBuilder, idx: Sequence[Expr], top: TensorRef) -> Value:
            return bb.sub(bb.load_as(x, idx, ty), bb.load(top, r.broadcast_index(idx)))

        (top,) = r.run(ctx, K.MAX, ty)

        def exp_body(bb: BodyBuilder, idx: list[sympy.Symbol], ridx: list[sympy.Symbol]) -> Value:
            full = r.input_index(idx, ridx)
            return bb.exp(shifted(bb, full, top))

        (total,) = ctx.reduction(K.SUM, r.out_sizes, r.reduction_sizes, ty, exp_body)

        def epilogue(bb: BodyBuilder, idx: Sequence[Expr]) -> Value:
            s = shifted(bb, idx, top)
            denom = bb.load(total, r.broadcast_index(idx))
            if log:
                return bb.sub(s, bb.math(xmath.LogOp, denom))
            return bb.div(bb.exp(s), denom)

        return [ctx.pointwise(x.sizes, out, epilogue)]

    return lower


def _logsumexp(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    x = args.tensor("self")
    out = args.result_dtype()
    ty = compute_type(out)
    if not is_float(ty):
        raise NoLowering("logsumexp of ints")
    keepdim = bool(args.value("keepdim"))
    r = Reduce(x, normalize_dims(args.value("dim"), x.rank), keepdim)
    (top,) = r.run(ctx, K.MAX, ty, lambda bb, v: bb.cast(v, ty))

    def safe_max(bb: BodyBuilder, idx: Sequence[Expr]) -> Value:
        # ATen: an infinite max contributes 0 to the shift (so inf - inf is not nan).
        m = bb.load(top, idx)
        infinite = bb.cmp("eq", bb.math(xmath.AbsFOp, m), bb.const(float("inf"), ty))
        return bb.select(infinite, bb.const(0.0, ty), m)

    def exp_body(bb: BodyBuilder, idx: list[sympy.Symbol], ridx: list[sympy.Symbol]) -> Value:
        v = bb.load_as(x, r.input_index(idx, ridx), ty)
        return bb.exp(bb.sub(v, safe_max(bb, idx)))

    (total,) = ctx.reduction(K.SUM, r.out_sizes, r.reduction_sizes, ty, exp_body)

    def epilogue(bb: BodyBuilder, idx: Sequence[Expr]) -> Value:
        return bb.add_(bb.math(xmath.LogOp, bb.load(total, idx)), safe_max(bb, idx))

    return [ctx.pointwise(total.sizes, out, epilogue)]


SHORT_SCAN = 128
"""The longest (static) dim a cumsum is lowered along: each output element sums its whole
row masked to the elements up to it, so the work is ``numel * n`` instead of a scan's
``numel``; for the short rows of masks and position ids (a 32-token sequence) that is one
fusable kernel where ATen's scan is a memset and a scan launch. Longer or symbolic dims
stay ATen's ``cumsum``."""
SCAN_WORK = 1 << 18
"""The most loads (``numel * n``) a masked-sum cumsum may cost."""


def _cumsum(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    """``cumsum(x, dim)`` as ``sum(r <= i ? x[..r..] : 0)`` over ``r`` in ``[0, n)``:
    exact for integers and bool (summed as int64), for floats a sum of the same terms
    (in f32 for half types, as ATen accumulates), in another order."""
    x = args.tensor("self")
    if x.rank == 0:
        raise NoLowering("cumsum of a 0-dim tensor")
    dim = wrap_dim(int(args.value("dim")), x.rank)
    n = sympy.sympify(x.sizes[dim])
    work = numel(x.sizes) * n
    if not (n.is_Integer and work.is_Integer):
        raise NoLowering("cumsum with symbolic sizes (ATen's scan)")
    if int(n) > SHORT_SCAN or int(work) > SCAN_WORK:
        raise NoLowering(f"cumsum along {n} elements, {work} loads as a masked sum (ATen's scan)")
    out = args.result_dtype()
    ty = compute_type(out)

    def body(bb: BodyBuilder, idx: list[sympy.Symbol], ridx: list[sympy.Symbol]) -> Value:
        at = list(idx)
        at[dim] = ridx[0]
        upto = bb.emit(arith.CmpiOp(bb.index_value(ridx[0]), bb.index_value(idx[dim]), "sle"))
        return bb.select(upto, bb.load_as(x, at, ty), bb.const(0, ty))

    (total,) = ctx.reduction(K.SUM, x.sizes, [n], ty, body)
    return [finish_in(ctx, total, out)]


LOWERINGS: dict[str, Lowering] = {
    "sum": _simple(K.SUM, all_dims=True),
    "sum.dim_IntList": _simple(K.SUM),
    "prod": _simple(K.PROD, all_dims=True),
    "prod.dim_int": _simple(K.PROD),
    "amax": _simple(K.MAX),
    "amin": _simple(K.MIN),
    "max": _simple(K.MAX, all_dims=True),
    "min": _simple(K.MIN, all_dims=True),
    "any": _simple(K.ANY, all_dims=True),
    "any.dim": _simple(K.ANY),
    "any.dims": _simple(K.ANY),
    "all": _simple(K.ALL, all_dims=True),
    "all.dim": _simple(K.ALL),
    "all.dims": _simple(K.ALL),
    "argmax": _arg(K.ARGMAX),
    "argmin": _arg(K.ARGMIN),
    "max.dim": _values_and_indices(K.MAX, K.ARGMAX),
    "min.dim": _values_and_indices(K.MIN, K.ARGMIN),
    "mean": _mean_all,
    "mean.dim": _mean_dim,
    "var.correction": _var(sqrt=False),
    "var.dim": _var(sqrt=False),
    "std.correction": _var(sqrt=True),
    "std.dim": _var(sqrt=True),
    "var_mean.correction": _var_mean(sqrt=False),
    "std_mean.correction": _var_mean(sqrt=True),
    "_softmax_backward_data": _softmax_backward(log=False),
    "_log_softmax_backward_data": _softmax_backward(log=True),
    "_softmax": _softmax(log=False, dtype_arg=None),
    "_log_softmax": _softmax(log=True, dtype_arg=None),
    "softmax.int": _softmax(log=False, dtype_arg="dtype"),
    "log_softmax.int": _softmax(log=True, dtype_arg="dtype"),
    "logsumexp": _logsumexp,
    "cumsum": _cumsum,
}

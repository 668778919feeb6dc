"""Elementwise ops of three operands: ``where``, ``clamp``, ``masked_fill``,
``addcmul``/``addcdiv`` and ``lerp``."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.dialects import math as xmath
from xdsl.dialects.builtin import i1

from kiln.passes.aten_to_loop.body import BodyBuilder
from kiln.passes.aten_to_loop.context import Lowered, Lowering, LoweringContext, OpArgs
from kiln.passes.aten_to_loop.pointwise.common import (
    Expr,
    Operand,
    Value,
    add,
    broadcast_sizes,
    elementwise,
    mul,
    operand,
    required,
    scalar,
    scaled,
)
from kiln.passes.aten_to_loop.tensors import TensorRef
from kiln.passes.aten_to_loop.types import NoLowering, compute_type, is_float


def _where(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    cond, a, b = args.tensor("condition"), required(args, "self"), required(args, "other")
    ty = compute_type(args.result_dtype())
    tensors = [t for t in (cond, a, b) if isinstance(t, TensorRef)]
    sizes = args.result_sizes(0, broadcast_sizes([t.sizes for t in tensors]))
    ec = cond.expand(sizes)
    ea = a.expand(sizes) if isinstance(a, TensorRef) else a
    eb = b.expand(sizes) if isinstance(b, TensorRef) else b

    def body(bb: BodyBuilder, idx: Sequence[Expr]) -> Value:
        c = bb.cast(bb.load(ec, idx), i1)
        x = bb.load_as(ea, idx, ty) if isinstance(ea, TensorRef) else scalar(bb, ea, ty)
        y = bb.load_as(eb, idx, ty) if isinstance(eb, TensorRef) else scalar(bb, eb, ty)
        return bb.select(c, x, y)

    return [ctx.pointwise(sizes, args.result_dtype(), body)]


def _clamp(
    min_name: str | None, max_name: str | None
) -> Callable[[LoweringContext, OpArgs], list[Lowered]]:
    def lower(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
        x = args.tensor("self")
        lo = operand(args, min_name) if min_name else None
        hi = operand(args, max_name) if max_name else None
        ty = compute_type(args.result_dtype())
        operands: list[Operand] = [x]
        if lo is not None:
            operands.append(lo)
        if hi is not None:
            operands.append(hi)

        def formula(bb: BodyBuilder, xs: list[Value]) -> Value:
            v, rest = xs[0], xs[1:]
            if lo is not None:
                v = bb.maximum(v, rest.pop(0))
            if hi is not None:
                v = bb.minimum(v, rest.pop(0))
            return v

        return [elementwise(ctx, args, operands, formula, ty)]

    return lower


def _masked_fill(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    x, mask, value = args.tensor("self"), args.tensor("mask"), required(args, "value")
    ty = compute_type(args.result_dtype())
    tensors = [x, mask] + ([value] if isinstance(value, TensorRef) else [])
    sizes = args.result_sizes(0, broadcast_sizes([t.sizes for t in tensors]))
    ex, em = x.expand(sizes), mask.expand(sizes)
    ev = value.expand(sizes) if isinstance(value, TensorRef) else value

    def body(bb: BodyBuilder, idx: Sequence[Expr]) -> Value:
        m = bb.cast(bb.load(em, idx), i1)
        fill = bb.load_as(ev, idx, ty) if isinstance(ev, TensorRef) else scalar(bb, ev, ty)
        return bb.select(m, fill, bb.load_as(ex, idx, ty))

    return [ctx.pointwise(sizes, args.result_dtype(), body)]


def _addcmul(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    s, t1, t2 = args.tensor("self"), args.tensor("tensor1"), args.tensor("tensor2")
    value = args.value("value")
    ty = compute_type(args.result_dtype())

    def formula(bb: BodyBuilder, xs: list[Value]) -> Value:
        return add(bb, xs[0], mul(bb, scaled(bb, xs[1], value), xs[2]))

    return [elementwise(ctx, args, [s, t1, t2], formula, ty)]


def _addcdiv(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    s, t1, t2 = args.tensor("self"), args.tensor("tensor1"), args.tensor("tensor2")
    value = args.value("value")
    ty = compute_type(args.result_dtype())
    if not is_float(ty):
        raise NoLowering("addcdiv of ints")

    def formula(bb: BodyBuilder, xs: list[Value]) -> Value:
        return bb.add_(xs[0], bb.mul(scalar(bb, value, ty), bb.div(xs[1], xs[2])))

    return [elementwise(ctx, args, [s, t1, t2], formula, ty)]


def _lerp(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    s, end, weight = args.tensor("self"), args.tensor("end"), required(args, "weight")
    ty = compute_type(args.result_dtype())
    if not is_float(ty):
        raise NoLowering("lerp of ints")

    def formula(bb: BodyBuilder, xs: list[Value]) -> Value:
        a, b, w = xs
        diff = bb.sub(b, a)
        low = bb.add_(a, bb.mul(w, diff))
        high = bb.sub(b, bb.mul(diff, bb.sub(bb.const(1.0, ty), w)))
        return bb.select(bb.cmp("lt", bb.math(xmath.AbsFOp, w), bb.const(0.5, ty)), low, high)

    return [elementwise(ctx, args, [s, end, weight], formula, ty)]


LOWERINGS: dict[str, Lowering] = {
    # ternary
    "where.self": _where,
    "clamp": _clamp("min", "max"),
    "clamp.Tensor": _clamp("min", "max"),
    "clamp_min": _clamp("min", None),
    "clamp_max": _clamp(None, "max"),
    "clamp_min.Tensor": _clamp("min", None),
    "clamp_max.Tensor": _clamp(None, "max"),
    "masked_fill.Scalar": _masked_fill,
    "masked_fill.Tensor": _masked_fill,
    "addcmul": _addcmul,
    "addcdiv": _addcdiv,
    "lerp.Scalar": _lerp,
    "lerp.Tensor": _lerp,
}

__all__ = ["LOWERINGS"]

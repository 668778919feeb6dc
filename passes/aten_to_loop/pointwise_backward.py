"""Backward formulas of elementwise ops (``*_backward`` overloads AOTAutograd emits),
each one ``loop.pointwise`` like the forward ops in :mod:`kiln.passes.aten_to_loop.pointwise`."""

from __future__ import annotations

import math
from collections.abc import Callable

from xdsl.dialects import math as xmath

from kiln.passes.aten_to_loop.body import BodyBuilder
from kiln.passes.aten_to_loop.context import Lowered, Lowering, LoweringContext, OpArgs
from kiln.passes.aten_to_loop.pointwise.common import Formula, Value, elementwise, scalar, sigmoid
from kiln.passes.aten_to_loop.types import NoLowering, compute_type, is_float


def _backward(
    formula: Formula, names: tuple[str, ...]
) -> Callable[[LoweringContext, OpArgs], list[Lowered]]:
    def lower(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
        ty = compute_type(args.result_dtype())
        if not is_float(ty):
            raise NoLowering("backward of ints")
        return [elementwise(ctx, args, [args.tensor(n) for n in names], formula, ty)]

    return lower


def _sigmoid_backward(bb: BodyBuilder, xs: list[Value]) -> Value:
    grad, y = xs
    return bb.mul(bb.mul(grad, bb.sub(bb.const(1.0, y.type), y)), y)


def _tanh_backward(bb: BodyBuilder, xs: list[Value]) -> Value:
    grad, y = xs
    return bb.mul(grad, bb.sub(bb.const(1.0, y.type), bb.mul(y, y)))


def _silu_backward(bb: BodyBuilder, xs: list[Value]) -> Value:
    grad, x = xs
    one = bb.const(1.0, x.type)
    sig = sigmoid(bb, x)
    return bb.mul(bb.mul(grad, sig), bb.add_(one, bb.mul(x, bb.sub(one, sig))))


def _hardswish_backward(bb: BodyBuilder, xs: list[Value]) -> Value:
    grad, x = xs
    t = x.type
    mid = bb.mul(grad, bb.add_(bb.div(x, bb.const(3.0, t)), bb.const(0.5, t)))
    upper = bb.select(bb.cmp("le", x, bb.const(3.0, t)), mid, grad)
    return bb.select(bb.cmp("lt", x, bb.const(-3.0, t)), bb.const(0.0, t), upper)


def _gelu_backward(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    approximate = args.value("approximate")
    ty = compute_type(args.result_dtype())
    if not is_float(ty):
        raise NoLowering("gelu_backward of ints")

    def formula(bb: BodyBuilder, xs: list[Value]) -> Value:
        grad, x = xs
        half, one = bb.const(0.5, ty), bb.const(1.0, ty)
        if approximate == "tanh":
            beta = bb.const(math.sqrt(2.0) * (2.0 / math.sqrt(math.pi)) * 0.5, ty)
            kappa = bb.const(0.044715, ty)
            x_sq = bb.mul(x, x)
            inner = bb.mul(beta, bb.add_(x, bb.mul(kappa, bb.mul(x_sq, x))))
            tanh_inner = bb.math(xmath.TanhOp, inner)
            left = bb.mul(half, x)
            right = bb.add_(one, tanh_inner)
            left_d = bb.mul(half, right)
            tanh_d = bb.sub(one, bb.mul(tanh_inner, tanh_inner))
            inner_d = bb.mul(beta, bb.add_(one, bb.mul(bb.const(3.0 * 0.044715, ty), x_sq)))
            right_d = bb.mul(bb.mul(left, tanh_d), inner_d)
            return bb.mul(grad, bb.add_(left_d, right_d))
        k_alpha = bb.const(math.sqrt(0.5), ty)
        k_beta = bb.const((2.0 / math.sqrt(math.pi)) * math.sqrt(0.5) * 0.5, ty)
        cdf = bb.mul(half, bb.add_(one, bb.math(xmath.ErfOp, bb.mul(x, k_alpha))))
        pdf = bb.mul(bb.exp(bb.mul(bb.const(-0.5, ty), bb.mul(x, x))), k_beta)
        return bb.mul(grad, bb.add_(cdf, bb.mul(x, pdf)))

    return [elementwise(ctx, args, [args.tensor("grad_output"), args.tensor("self")], formula, ty)]


def _threshold_backward(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    grad, x = args.tensor("grad_output"), args.tensor("self")
    threshold = args.value("threshold")
    ty = compute_type(args.result_dtype())

    def formula(bb: BodyBuilder, xs: list[Value]) -> Value:
        g, v = xs
        return bb.select(bb.cmp("le", v, scalar(bb, threshold, ty)), bb.const(0, ty), g)

    return [elementwise(ctx, args, [grad, x], formula, ty)]


def _dropout_backward(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    grad, mask = args.tensor("grad_output"), args.tensor("mask")
    scale = args.value("scale")
    ty = compute_type(args.result_dtype())
    if not is_float(ty):
        raise NoLowering("dropout backward of ints")
    return [
        elementwise(
            ctx,
            args,
            [grad, mask],
            lambda bb, xs: bb.mul(bb.mul(xs[0], xs[1]), scalar(bb, scale, ty)),
            ty,
        )
    ]


LOWERINGS: dict[str, Lowering] = {
    "sigmoid_backward": _backward(_sigmoid_backward, ("grad_output", "output")),
    "tanh_backward": _backward(_tanh_backward, ("grad_output", "output")),
    "silu_backward": _backward(_silu_backward, ("grad_output", "self")),
    "hardswish_backward": _backward(_hardswish_backward, ("grad_output", "self")),
    "gelu_backward": _gelu_backward,
    "threshold_backward": _threshold_backward,
    "native_dropout_backward": _dropout_backward,
}

__all__ = ["LOWERINGS"]

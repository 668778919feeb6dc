"""Elementwise ops of one tensor: math functions, activations, rounding, tests.

Integer inputs of a float function (``exp``, ``sigmoid``, ...) promote to float; where
no exact formula exists for a dtype the op raises :class:`NoLowering` and runs as
``loop.extern``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from xdsl.dialects import math as xmath
from xdsl.dialects.builtin import i1

from kiln.passes.aten_to_loop.body import BodyBuilder
from kiln.passes.aten_to_loop.context import Lowered, Lowering, LoweringContext, OpArgs
from kiln.passes.aten_to_loop.pointwise.common import (
    Formula,
    Value,
    elementwise,
    float_only,
    mul,
    no_lowering,
    scalar,
    sigmoid,
    unary,
)
from kiln.passes.aten_to_loop.types import NoLowering, compute_type, is_bool, is_float


def _unary_math(op_cls: type) -> Formula:
    return float_only(lambda bb, xs: bb.math(op_cls, xs[0]))


def _reciprocal(bb: BodyBuilder, xs: list[Value]) -> Value:
    return bb.div(bb.const(1.0, xs[0].type), xs[0])


def _abs(bb: BodyBuilder, xs: list[Value]) -> Value:
    x = xs[0]
    if is_bool(x.type):
        return x
    return bb.math(xmath.AbsFOp if is_float(x.type) else xmath.AbsIOp, x)


def _sign(bb: BodyBuilder, xs: list[Value]) -> Value:
    x = xs[0]
    if is_bool(x.type):
        return x
    zero = bb.const(0, x.type)
    pos = bb.cast(bb.cmp("gt", x, zero), x.type) if is_float(x.type) else None
    if pos is not None:
        return bb.sub(pos, bb.cast(bb.cmp("lt", x, zero), x.type))
    one, minus = bb.const(1, x.type), bb.const(-1, x.type)
    return bb.select(bb.cmp("gt", x, zero), one, bb.select(bb.cmp("lt", x, zero), minus, zero))


def _relu(bb: BodyBuilder, xs: list[Value]) -> Value:
    if is_bool(xs[0].type):
        raise NoLowering("relu of bool")
    return bb.maximum(xs[0], bb.const(0, xs[0].type))


def _identity_on_ints(op_cls: type) -> Formula:
    def formula(bb: BodyBuilder, xs: list[Value]) -> Value:
        return bb.math(op_cls, xs[0]) if is_float(xs[0].type) else xs[0]

    return formula


def _bitwise_not(bb: BodyBuilder, xs: list[Value]) -> Value:
    x = xs[0]
    if is_float(x.type):
        raise NoLowering("bitwise_not of float")
    return bb.xor(x, bb.const(True if is_bool(x.type) else -1, x.type))


def _gelu(approximate: str) -> Formula:
    def formula(bb: BodyBuilder, xs: list[Value]) -> Value:
        x = xs[0]
        t = x.type
        half, one = bb.const(0.5, t), bb.const(1.0, t)
        if approximate == "tanh":
            beta = bb.const(math.sqrt(2.0) * (2.0 / math.sqrt(math.pi)) * 0.5, t)
            kappa = bb.const(0.044715, t)
            cube = bb.mul(bb.mul(x, x), x)
            inner = bb.mul(beta, bb.add_(x, bb.mul(kappa, cube)))
            return bb.mul(bb.mul(half, x), bb.add_(one, bb.math(xmath.TanhOp, inner)))
        cdf = bb.add_(one, bb.math(xmath.ErfOp, bb.mul(x, bb.const(math.sqrt(0.5), t))))
        return bb.mul(bb.mul(x, half), cdf)

    return float_only(formula)


def _silu(bb: BodyBuilder, xs: list[Value]) -> Value:
    x = xs[0]
    one = bb.const(1.0, x.type)
    return bb.div(x, bb.add_(one, bb.exp(bb.neg(x))))


def _hardswish(bb: BodyBuilder, xs: list[Value]) -> Value:
    x = xs[0]
    t = x.type
    clipped = bb.minimum(
        bb.maximum(bb.add_(x, bb.const(3.0, t)), bb.const(0.0, t)), bb.const(6.0, t)
    )
    return bb.div(bb.mul(x, clipped), bb.const(6.0, t))


def _hardsigmoid(bb: BodyBuilder, xs: list[Value]) -> Value:
    x = xs[0]
    t = x.type
    clipped = bb.minimum(
        bb.maximum(bb.add_(x, bb.const(3.0, t)), bb.const(0.0, t)), bb.const(6.0, t)
    )
    return bb.div(clipped, bb.const(6.0, t))


def _isnan(bb: BodyBuilder, xs: list[Value]) -> Value:
    x = xs[0]
    return bb.isnan(x) if is_float(x.type) else bb.const(False, i1)


def _isinf(bb: BodyBuilder, xs: list[Value]) -> Value:
    x = xs[0]
    if not is_float(x.type):
        return bb.const(False, i1)
    return bb.cmp("eq", bb.math(xmath.AbsFOp, x), bb.const(math.inf, x.type))


def _isfinite(bb: BodyBuilder, xs: list[Value]) -> Value:
    x = xs[0]
    if not is_float(x.type):
        return bb.const(True, i1)
    return bb.cmp("lt", bb.math(xmath.AbsFOp, x), bb.const(math.inf, x.type))


def _square(bb: BodyBuilder, xs: list[Value]) -> Value:
    return mul(bb, xs[0], xs[0])


def _with_scalars(
    formula: Callable[[BodyBuilder, Value, dict[str, Any]], Value], names: Sequence[str]
) -> Callable[[LoweringContext, OpArgs], list[Lowered]]:
    """A one-input op with scalar parameters (leaky_relu's slope, elu's alpha, ...)."""

    def lower(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
        x = args.tensor("self")
        params = {n: args.value(n) for n in names}
        ty = compute_type(args.result_dtype())
        return [elementwise(ctx, args, [x], lambda bb, xs: formula(bb, xs[0], params), ty)]

    return lower


def _leaky_relu(bb: BodyBuilder, x: Value, p: dict[str, Any]) -> Value:
    scaled = bb.mul(x, scalar(bb, p["negative_slope"], x.type))
    return bb.select(bb.cmp("gt", x, bb.const(0, x.type)), x, scaled)


def _elu(bb: BodyBuilder, x: Value, p: dict[str, Any]) -> Value:
    if not is_float(x.type):
        raise NoLowering("elu of ints")
    t = x.type
    neg = bb.mul(
        bb.math(xmath.ExpM1Op, bb.mul(x, scalar(bb, p["input_scale"], t))),
        bb.mul(scalar(bb, p["alpha"], t), scalar(bb, p["scale"], t)),
    )
    pos = bb.mul(x, scalar(bb, p["scale"], t))
    return bb.select(bb.cmp("le", x, bb.const(0.0, t)), neg, pos)


def _hardtanh(bb: BodyBuilder, x: Value, p: dict[str, Any]) -> Value:
    lo, hi = scalar(bb, p["min_val"], x.type), scalar(bb, p["max_val"], x.type)
    return bb.minimum(bb.maximum(x, lo), hi)


def _softplus(bb: BodyBuilder, x: Value, p: dict[str, Any]) -> Value:
    if not is_float(x.type):
        raise NoLowering("softplus of ints")
    beta, threshold = scalar(bb, p["beta"], x.type), scalar(bb, p["threshold"], x.type)
    bx = bb.mul(x, beta)
    soft = bb.div(bb.math(xmath.Log1pOp, bb.exp(bx)), beta)
    return bb.select(bb.cmp("gt", bx, threshold), x, soft)


def _threshold(bb: BodyBuilder, x: Value, p: dict[str, Any]) -> Value:
    keep = bb.cmp("gt", x, scalar(bb, p["threshold"], x.type))
    return bb.select(keep, x, scalar(bb, p["value"], x.type))


def _mish(bb: BodyBuilder, xs: list[Value]) -> Value:
    x = xs[0]
    softplus = bb.math(xmath.Log1pOp, bb.exp(x))
    return bb.mul(x, bb.math(xmath.TanhOp, softplus))


def _round_decimals(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    """ATen: ``nearbyint(x * 10**d) / 10**d`` (``d < 0``: ``nearbyint(x / 10**-d) * 10**-d``)."""
    x = args.tensor("self")
    decimals = args.value("decimals")
    ty = compute_type(args.result_dtype())
    if not isinstance(decimals, int):
        raise NoLowering("symbolic decimals")
    if not is_float(ty):
        return [x]
    ten_pow = 10.0 ** abs(decimals)

    def formula(bb: BodyBuilder, xs: list[Value]) -> Value:
        scale = bb.const(ten_pow, ty)
        if decimals >= 0:
            return bb.div(bb.math(xmath.RoundEvenOp, bb.mul(xs[0], scale)), scale)
        return bb.mul(bb.math(xmath.RoundEvenOp, bb.div(xs[0], scale)), scale)

    return [elementwise(ctx, args, [x], formula, ty)]


def _gelu_op(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    x = args.tensor("self")
    approximate = args.value("approximate")
    ty = compute_type(args.result_dtype())
    return [elementwise(ctx, args, [x], _gelu(approximate), ty)]


def _round(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    return unary(_identity_on_ints(xmath.RoundEvenOp))(ctx, args)


def _logical_not(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    x = args.tensor("self")
    return [
        elementwise(
            ctx, args, [x], lambda bb, xs: bb.not_(bb.cast(xs[0], i1)), compute_type(x.dtype)
        )
    ]


def _math(op_cls: type) -> Callable[[LoweringContext, OpArgs], list[Lowered]]:
    return unary(_unary_math(op_cls))


LOWERINGS: dict[str, Lowering] = {
    # unary math (integer inputs promote to float)
    "exp": _math(xmath.ExpOp),
    "exp2": _math(xmath.Exp2Op),
    "expm1": _math(xmath.ExpM1Op),
    "log": _math(xmath.LogOp),
    "log2": _math(xmath.Log2Op),
    "log10": _math(xmath.Log10Op),
    "log1p": _math(xmath.Log1pOp),
    "sqrt": _math(xmath.SqrtOp),
    "rsqrt": _math(xmath.RsqrtOp),
    "sin": _math(xmath.SinOp),
    "cos": _math(xmath.CosOp),
    "tan": _math(xmath.TanOp),
    "asin": _math(xmath.AsinOp),
    "acos": _math(xmath.AcosOp),
    "atan": _math(xmath.AtanOp),
    "sinh": _math(xmath.SinhOp),
    "cosh": _math(xmath.CoshOp),
    "tanh": _math(xmath.TanhOp),
    "asinh": _math(xmath.AsinhOp),
    "acosh": _math(xmath.AcoshOp),
    "atanh": _math(xmath.AtanhOp),
    "erf": _math(xmath.ErfOp),
    "reciprocal": unary(float_only(_reciprocal)),
    "sigmoid": unary(float_only(lambda bb, xs: sigmoid(bb, xs[0]))),
    "silu": unary(float_only(_silu)),
    "hardswish": unary(float_only(_hardswish)),
    "hardsigmoid": unary(float_only(_hardsigmoid)),
    "mish": unary(float_only(_mish)),
    "round.decimals": _round_decimals,
    "gelu": _gelu_op,
    "leaky_relu": _with_scalars(_leaky_relu, ("negative_slope",)),
    "elu": _with_scalars(_elu, ("alpha", "scale", "input_scale")),
    "hardtanh": _with_scalars(_hardtanh, ("min_val", "max_val")),
    "softplus": _with_scalars(_softplus, ("beta", "threshold")),
    "threshold": _with_scalars(_threshold, ("threshold", "value")),
    # unary, same type
    "abs": unary(_abs),
    "neg": unary(
        lambda bb, xs: bb.neg(xs[0]) if not is_bool(xs[0].type) else no_lowering("neg of bool")
    ),
    "sign": unary(_sign),
    "relu": unary(_relu),
    "ceil": unary(_identity_on_ints(xmath.CeilOp)),
    "floor": unary(_identity_on_ints(xmath.FloorOp)),
    "trunc": unary(_identity_on_ints(xmath.TruncOp)),
    "round": _round,
    "bitwise_not": unary(_bitwise_not),
    "square": unary(_square),
    "isnan": unary(_isnan, compute="input"),
    "isinf": unary(_isinf, compute="input"),
    "isfinite": unary(_isfinite, compute="input"),
    "logical_not": _logical_not,
}

__all__ = ["LOWERINGS"]

"""Elementwise ops of two operands (tensors or scalars): arithmetic, division and
remainder, minimum/maximum, bitwise and logical ops, comparisons, powers.

Integer division, remainder and powers follow torch's rules exactly; where no exact
formula exists here (float ``fmod``/``remainder``/floor division, integer powers with
tensor exponents, unsigned types), the op raises :class:`NoLowering` and runs as
``loop.extern``. Logical ops test each input against zero.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import sympy
from xdsl.dialects import arith
from xdsl.dialects import math as xmath
from xdsl.dialects.builtin import Float16Type, i1

from kiln.passes.aten_to_loop.body import BodyBuilder
from kiln.passes.aten_to_loop.context import Lowered, Lowering, LoweringContext, OpArgs
from kiln.passes.aten_to_loop.pointwise.common import (
    Binary,
    Expr,
    Value,
    add,
    binary,
    broadcast_sizes,
    elementwise,
    mul,
    required,
    scaled,
)
from kiln.passes.aten_to_loop.types import NoLowering, compute_type, is_bool, is_float


def _add_op(sign: int, reverse: bool = False) -> Callable[[LoweringContext, OpArgs], list[Lowered]]:
    """add/sub/rsub: ``self + sign*alpha*other`` (rsub: ``other - alpha*self``)."""

    def lower(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
        a, b = required(args, "self"), required(args, "other")
        if reverse:
            a, b = b, a
        alpha = args.value("alpha")
        ty = compute_type(args.result_dtype())
        if is_bool(ty) and sign < 0:
            raise NoLowering("subtraction of bools")

        def formula(bb: BodyBuilder, xs: list[Value]) -> Value:
            y = scaled(bb, xs[1], alpha)
            return bb.sub(xs[0], y) if sign < 0 else add(bb, xs[0], y)

        return [elementwise(ctx, args, [a, b], formula, ty)]

    return lower


def _true_div(bb: BodyBuilder, a: Value, b: Value) -> Value:
    if not is_float(a.type):
        raise NoLowering("true division in an integer type")
    return bb.div(a, b)


def _div_mode(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    a, b = required(args, "self"), required(args, "other")
    mode = args.value("rounding_mode")
    ty = compute_type(args.result_dtype())
    if mode is None:
        formula: Binary = _true_div
    elif mode == "trunc":
        formula = _trunc_div
    elif mode == "floor":
        formula = _floor_div
    else:
        raise NoLowering(f"rounding_mode {mode!r}")
    return [elementwise(ctx, args, [a, b], lambda bb, xs: formula(bb, xs[0], xs[1]), ty)]


def _trunc_div(bb: BodyBuilder, a: Value, b: Value) -> Value:
    if is_float(a.type):
        return bb.math(xmath.TruncOp, bb.div(a, b))
    if is_bool(a.type):
        raise NoLowering("division of bools")
    return bb.emit(arith.DivSIOp(a, b))


def _floor_div(bb: BodyBuilder, a: Value, b: Value) -> Value:
    if is_float(a.type):
        # ATen's floor division of floats goes through fmod, which arith lacks in xDSL.
        raise NoLowering("floor division of floats")
    if is_bool(a.type):
        raise NoLowering("division of bools")
    return bb.emit(arith.FloorDivSIOp(a, b))


def _int_only(name: str, fn: Binary) -> Binary:
    def formula(bb: BodyBuilder, a: Value, b: Value) -> Value:
        if is_float(a.type) or is_bool(a.type):
            raise NoLowering(f"{name} of {a.type}")
        return fn(bb, a, b)

    return formula


def _fmod_int(bb: BodyBuilder, a: Value, b: Value) -> Value:
    return bb.emit(arith.RemSIOp(a, b))


def _remainder_int(bb: BodyBuilder, a: Value, b: Value) -> Value:
    """Python's ``%``: C's remainder, moved to the divisor's sign."""
    r = bb.emit(arith.RemSIOp(a, b))
    zero = bb.const(0, a.type)
    nonzero = bb.cmp("ne", r, zero)
    signs_differ = bb.xor(bb.cmp("lt", r, zero), bb.cmp("lt", b, zero))
    return bb.select(bb.and_(nonzero, signs_differ), bb.add_(r, b), r)


def _maximum(bb: BodyBuilder, a: Value, b: Value) -> Value:
    return bb.maximum(a, b)


def _minimum(bb: BodyBuilder, a: Value, b: Value) -> Value:
    return bb.minimum(a, b)


def _fmax(bb: BodyBuilder, a: Value, b: Value) -> Value:
    if not is_float(a.type):
        return bb.maximum(a, b)
    return bb.emit(arith.MaxnumfOp(a, b))


def _fmin(bb: BodyBuilder, a: Value, b: Value) -> Value:
    if not is_float(a.type):
        return bb.minimum(a, b)
    return bb.emit(arith.MinnumfOp(a, b))


def _atan2(bb: BodyBuilder, a: Value, b: Value) -> Value:
    if not is_float(a.type):
        raise NoLowering("atan2 of ints")
    return bb.math(xmath.Atan2Op, a, b)


def _copysign(bb: BodyBuilder, a: Value, b: Value) -> Value:
    if not is_float(a.type):
        raise NoLowering("copysign of ints")
    return bb.math(xmath.CopySignOp, a, b)


def _hypot(bb: BodyBuilder, a: Value, b: Value) -> Value:
    if not is_float(a.type):
        raise NoLowering("hypot of ints")
    return bb.math(xmath.SqrtOp, bb.add_(bb.mul(a, a), bb.mul(b, b)))


def _bitwise(op_cls: type) -> Binary:
    def formula(bb: BodyBuilder, a: Value, b: Value) -> Value:
        if is_float(a.type):
            raise NoLowering("bitwise op on floats")
        return bb.emit(op_cls(a, b))

    return formula


def _compare(predicate: str) -> Binary:
    return lambda bb, a, b: bb.cmp(predicate, a, b)


def _logical(op_cls: type) -> Callable[[LoweringContext, OpArgs], list[Lowered]]:
    def lower(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
        a, b = args.tensor("self"), args.tensor("other")
        ty = args.result_dtype()
        sizes = args.result_sizes(0, broadcast_sizes([a.sizes, b.sizes]))
        ea, eb = a.expand(sizes), b.expand(sizes)

        def body(bb: BodyBuilder, idx: Sequence[Expr]) -> Value:
            x = bb.cast(bb.load(ea, idx), i1)
            y = bb.cast(bb.load(eb, idx), i1)
            return bb.emit(op_cls(x, y))

        return [ctx.pointwise(sizes, ty, body)]

    return lower


def _pow_tensor_scalar(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    x = args.tensor("self")
    exponent = args.value("exponent")
    ty = compute_type(args.result_dtype())
    if isinstance(exponent, sympy.Expr):
        raise NoLowering("symbolic exponent")
    if not is_float(ty):
        if is_bool(ty) or not isinstance(exponent, int) or exponent < 0:
            raise NoLowering("integer power with a negative or non-integer exponent")

        def int_pow(bb: BodyBuilder, xs: list[Value]) -> Value:
            return bb.math(xmath.IPowIOp, xs[0], bb.const(exponent, ty))

        return [elementwise(ctx, args, [x], int_pow, ty)]
    # ATen's CPU kernel takes its sqrt/rsqrt shortcuts for float, double and bfloat16,
    # not for float16, which runs std::pow: (-inf) ** 0.5 is inf there, not sqrt's NaN,
    # and (-0.0) ** -0.5 is inf, not rsqrt's -inf. (CUDA's takes them for every dtype.)
    roots = not (ctx.device == "cpu" and isinstance(args.result_dtype(), Float16Type))

    def float_pow(bb: BodyBuilder, xs: list[Value]) -> Value:
        # ATen's own special cases (PowKernel: square, cube, sqrt, reciprocals), in its
        # order of operations: the same roundings, and no libdevice ``pow`` (log + exp),
        # which made GPT-2's GELU kernel 2.3x slower than Inductor's on the H200.
        v = xs[0]
        if exponent == 1:
            return v
        if exponent == 2:
            return bb.mul(v, v)
        if exponent == 3:
            return bb.mul(bb.mul(v, v), v)
        if exponent == 0.5 and roots:
            return bb.math(xmath.SqrtOp, v)
        if exponent == -0.5 and roots:
            return bb.math(xmath.RsqrtOp, v)
        if exponent == -1:
            return bb.div(bb.const(1.0, ty), v)
        if exponent == -2:
            return bb.div(bb.const(1.0, ty), bb.mul(v, v))
        return bb.math(xmath.PowFOp, v, bb.const(float(exponent), ty))

    return [elementwise(ctx, args, [x], float_pow, ty)]


def _pow_float(bb: BodyBuilder, a: Value, b: Value) -> Value:
    if not is_float(a.type):
        raise NoLowering("integer power with a tensor exponent")
    return bb.math(xmath.PowFOp, a, b)


LOWERINGS: dict[str, Lowering] = {
    # binary arithmetic
    "add.Tensor": _add_op(1),
    "add.Scalar": _add_op(1),
    "sub.Tensor": _add_op(-1),
    "sub.Scalar": _add_op(-1),
    "rsub.Tensor": _add_op(-1, reverse=True),
    "rsub.Scalar": _add_op(-1, reverse=True),
    "mul.Tensor": binary(mul),
    "mul.Scalar": binary(mul),
    "div.Tensor": binary(_true_div),
    "div.Scalar": binary(_true_div),
    "div.Tensor_mode": _div_mode,
    "div.Scalar_mode": _div_mode,
    "floor_divide": binary(_floor_div),
    "floor_divide.Scalar": binary(_floor_div),
    "remainder.Tensor": binary(_int_only("remainder", _remainder_int)),
    "remainder.Scalar": binary(_int_only("remainder", _remainder_int)),
    "fmod.Tensor": binary(_int_only("fmod", _fmod_int)),
    "fmod.Scalar": binary(_int_only("fmod", _fmod_int)),
    "maximum": binary(_maximum),
    "minimum": binary(_minimum),
    "fmax": binary(_fmax),
    "fmin": binary(_fmin),
    "atan2": binary(_atan2),
    "copysign.Tensor": binary(_copysign),
    "copysign.Scalar": binary(_copysign),
    "hypot": binary(_hypot),
    "pow.Tensor_Scalar": _pow_tensor_scalar,
    "pow.Tensor_Tensor": binary(_pow_float, ("self", "exponent")),
    "pow.Scalar": binary(_pow_float, ("self", "exponent")),
    "bitwise_and.Tensor": binary(_bitwise(arith.AndIOp)),
    "bitwise_and.Scalar": binary(_bitwise(arith.AndIOp)),
    "bitwise_or.Tensor": binary(_bitwise(arith.OrIOp)),
    "bitwise_or.Scalar": binary(_bitwise(arith.OrIOp)),
    "bitwise_xor.Tensor": binary(_bitwise(arith.XOrIOp)),
    "bitwise_xor.Scalar": binary(_bitwise(arith.XOrIOp)),
    "logical_and": _logical(arith.AndIOp),
    "logical_or": _logical(arith.OrIOp),
    "logical_xor": _logical(arith.XOrIOp),
    # comparisons
    **{
        f"{name}.{kind}": binary(_compare(name), compute="promoted")
        for name in ("eq", "ne", "lt", "le", "gt", "ge")
        for kind in ("Tensor", "Scalar")
    },
}

__all__ = ["LOWERINGS"]

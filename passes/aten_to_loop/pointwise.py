"""Elementwise ops: one ``loop.pointwise`` each, broadcasting through the load index.

Types follow torch: the aten result type already holds the promoted dtype, so
arithmetic computes in it (half and bfloat16 in f32, rounded once at the end, as
Inductor does); comparisons compute in the promoted type of their inputs; logical ops
test each input against zero. Integer division, remainder and powers follow torch's
rules exactly; where no exact formula exists here (float ``fmod``/``remainder``/floor
division, integer powers with tensor exponents, unsigned types), the op raises
:class:`NoLowering` and runs as ``loop.extern``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import sympy
from xdsl.dialects import arith
from xdsl.dialects import math as xmath
from xdsl.dialects.builtin import i1
from xdsl.ir import Attribute, SSAValue

from kiln.passes.aten_to_loop.body import BodyBuilder
from kiln.passes.aten_to_loop.context import Lowered, Lowering, LoweringContext, OpArgs
from kiln.passes.aten_to_loop.tensors import ONE, TensorRef
from kiln.passes.aten_to_loop.types import (
    NoLowering,
    compute_type,
    is_bool,
    is_float,
    promote,
)

Expr = sympy.Expr
Value = SSAValue
Operand = TensorRef | int | float | bool | Expr
"""A tensor, or a Python (or symbolic int) scalar argument."""
Formula = Callable[[BodyBuilder, list[Value]], Value]


def broadcast_sizes(shapes: Sequence[Sequence[Expr]]) -> list[Expr]:
    """torch's broadcast of sizes (a symbolic size is never 1: torch specializes 0 and 1)."""
    rank = max((len(s) for s in shapes), default=0)
    out: list[Expr] = []
    for k in range(rank):
        candidates = [s[len(s) - rank + k] for s in shapes if len(s) - rank + k >= 0]
        pick: Expr = sympy.Integer(1)
        for size in candidates:
            if size != ONE and (pick == ONE or (not pick.is_Integer and size.is_Integer)):
                pick = size
        out.append(pick)
    return out


def scalar(bb: BodyBuilder, value: Any, ty: Attribute) -> Value:
    """A Python or symbolic scalar argument as a value of ``ty``."""
    if isinstance(value, sympy.Expr) and not value.is_Number:
        return bb.index_as(value, ty)
    if isinstance(value, sympy.Expr):
        value = int(value) if value.is_Integer else float(value)
    if isinstance(value, complex):
        raise NoLowering("complex scalar")
    return bb.const(value, ty)


def elementwise(
    ctx: LoweringContext,
    args: OpArgs,
    operands: Sequence[Operand],
    formula: Formula,
    compute: Attribute,
    result_index: int = 0,
) -> TensorRef:
    """A pointwise op: tensors broadcast and converted to ``compute``, scalars constants."""
    tensors = [o for o in operands if isinstance(o, TensorRef)]
    sizes = args.result_sizes(result_index, broadcast_sizes([t.sizes for t in tensors]))
    expanded = [o.expand(sizes) if isinstance(o, TensorRef) else o for o in operands]

    def body(bb: BodyBuilder, idx: Sequence[Expr]) -> Value:
        values = [
            bb.load_as(o, idx, compute) if isinstance(o, TensorRef) else scalar(bb, o, compute)
            for o in expanded
        ]
        return formula(bb, values)

    return ctx.pointwise(sizes, args.result_dtype(result_index), body)


def _promoted(operands: Sequence[Operand]) -> Attribute:
    tensors = tuple((o.dtype, o.rank) for o in operands if isinstance(o, TensorRef))
    scalars = tuple(
        int if isinstance(o, sympy.Expr) else type(o)
        for o in operands
        if not isinstance(o, TensorRef)
    )
    return promote(tensors, scalars)


# --- formulas ------------------------------------------------------------------------


def _add(bb: BodyBuilder, a: Value, b: Value) -> Value:
    return bb.or_(a, b) if is_bool(a.type) else bb.add_(a, b)


def _mul(bb: BodyBuilder, a: Value, b: Value) -> Value:
    return bb.and_(a, b) if is_bool(a.type) else bb.mul(a, b)


def _scaled(bb: BodyBuilder, b: Value, alpha: Any) -> Value:
    if alpha == 1:
        return b
    return _mul(bb, b, scalar(bb, alpha, b.type))


def _float_only(fn: Formula) -> Formula:
    def formula(bb: BodyBuilder, xs: list[Value]) -> Value:
        if not is_float(xs[0].type):
            raise NoLowering("integer inputs")
        return fn(bb, xs)

    return formula


def sigmoid(bb: BodyBuilder, x: Value) -> Value:
    one = bb.const(1.0, x.type)
    return bb.div(one, bb.add_(one, bb.exp(bb.neg(x))))


def _unary_math(op_cls: type) -> Formula:
    return _float_only(lambda bb, xs: bb.math(op_cls, xs[0]))


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

    return _float_only(formula)


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
    return _mul(bb, xs[0], xs[0])


# --- unary lowerings -----------------------------------------------------------------


def unary(
    formula: Formula, compute: str = "result"
) -> Callable[[LoweringContext, OpArgs], list[Lowered]]:
    """A one-input op; ``compute`` is ``result`` (the result dtype) or ``input``."""

    def lower(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
        x = args.tensor("self")
        ty = compute_type(args.result_dtype() if compute == "result" else x.dtype)
        return [elementwise(ctx, args, [x], formula, ty)]

    return lower


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


# --- binary lowerings ----------------------------------------------------------------


def _operand(args: OpArgs, name: str) -> Operand | None:
    """A tensor argument's ref, or a scalar argument's value (None when absent)."""
    values = args.op.tensor_operands().get(name)
    if values is not None:
        return args.ctx.ref(values[0]) if values and values[0] is not None else None
    return args.value(name)


def _required(args: OpArgs, name: str) -> Operand:
    value = _operand(args, name)
    if value is None:
        raise NoLowering(f"argument '{name}' is None")
    return value


Binary = Callable[[BodyBuilder, Value, Value], Value]


def binary(
    formula: Binary, names: tuple[str, str] = ("self", "other"), compute: str = "result"
) -> Callable[[LoweringContext, OpArgs], list[Lowered]]:
    """A two-operand op on tensors or scalars, computing in the result dtype
    (``compute="promoted"``: in the inputs' promoted dtype, for comparisons)."""

    def lower(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
        a, b = _required(args, names[0]), _required(args, names[1])
        ty = compute_type(args.result_dtype() if compute == "result" else _promoted([a, b]))
        return [elementwise(ctx, args, [a, b], lambda bb, xs: formula(bb, xs[0], xs[1]), ty)]

    return lower


def _add_op(sign: int, reverse: bool = False) -> Callable[[LoweringContext, OpArgs], list[Lowered]]:
    """add/sub/rsub: ``self + sign*alpha*other`` (rsub: ``other - alpha*self``)."""

    def lower(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
        a, b = _required(args, "self"), _required(args, "other")
        if reverse:
            a, b = b, a
        alpha = args.value("alpha")
        ty = compute_type(args.result_dtype())
        if is_bool(ty) and sign < 0:
            raise NoLowering("subtraction of bools")

        def formula(bb: BodyBuilder, xs: list[Value]) -> Value:
            y = _scaled(bb, xs[1], alpha)
            return bb.sub(xs[0], y) if sign < 0 else _add(bb, xs[0], y)

        return [elementwise(ctx, args, [a, b], formula, ty)]

    return lower


def _true_div(bb: BodyBuilder, a: Value, b: Value) -> Value:
    if not is_float(a.type):
        raise NoLowering("true division in an integer type")
    return bb.div(a, b)


def _div_mode(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    a, b = _required(args, "self"), _required(args, "other")
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


def _logical_not(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    x = args.tensor("self")
    return [
        elementwise(
            ctx, args, [x], lambda bb, xs: bb.not_(bb.cast(xs[0], i1)), compute_type(x.dtype)
        )
    ]


# --- pow ------------------------------------------------------------------------------


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

    def float_pow(bb: BodyBuilder, xs: list[Value]) -> Value:
        v = xs[0]
        if exponent == 1:
            return v
        if exponent == 2:
            return bb.mul(v, v)
        if exponent == 0.5:
            return bb.math(xmath.SqrtOp, v)
        if exponent == -1:
            return bb.div(bb.const(1.0, ty), v)
        return bb.math(xmath.PowFOp, v, bb.const(float(exponent), ty))

    return [elementwise(ctx, args, [x], float_pow, ty)]


def _pow_float(bb: BodyBuilder, a: Value, b: Value) -> Value:
    if not is_float(a.type):
        raise NoLowering("integer power with a tensor exponent")
    return bb.math(xmath.PowFOp, a, b)


# --- ternary and friends -------------------------------------------------------------


def _where(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    cond, a, b = args.tensor("condition"), _required(args, "self"), _required(args, "other")
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
        lo = _operand(args, min_name) if min_name else None
        hi = _operand(args, max_name) if max_name else None
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
    x, mask, value = args.tensor("self"), args.tensor("mask"), _required(args, "value")
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
        return _add(bb, xs[0], _mul(bb, _scaled(bb, xs[1], value), xs[2]))

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
    s, end, weight = args.tensor("self"), args.tensor("end"), _required(args, "weight")
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


# --- casts ---------------------------------------------------------------------------


def _to_dtype(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    """``_to_copy``/``to``/``type_as``: a view when the dtype stays, else a cast."""
    x = args.tensor("self")
    ty = args.result_dtype()
    if ty == x.dtype:
        return [x]
    return [ctx.pointwise(x.sizes, ty, lambda bb, idx: bb.load(x, idx))]


def _copy(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    x, src = args.tensor("self"), args.tensor("src")
    sizes = args.result_sizes(0, list(x.sizes))
    es = src.expand(sizes)
    return [ctx.pointwise(sizes, args.result_dtype(), lambda bb, idx: bb.load(es, idx))]


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
    "reciprocal": unary(_float_only(_reciprocal)),
    "sigmoid": unary(_float_only(lambda bb, xs: sigmoid(bb, xs[0]))),
    "silu": unary(_float_only(_silu)),
    "hardswish": unary(_float_only(_hardswish)),
    "hardsigmoid": unary(_float_only(_hardsigmoid)),
    "mish": unary(_float_only(_mish)),
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
        lambda bb, xs: bb.neg(xs[0]) if not is_bool(xs[0].type) else _raise("neg of bool")
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
    # binary arithmetic
    "add.Tensor": _add_op(1),
    "add.Scalar": _add_op(1),
    "sub.Tensor": _add_op(-1),
    "sub.Scalar": _add_op(-1),
    "rsub.Tensor": _add_op(-1, reverse=True),
    "rsub.Scalar": _add_op(-1, reverse=True),
    "mul.Tensor": binary(_mul),
    "mul.Scalar": binary(_mul),
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
    # casts
    "_to_copy": _to_dtype,
    "to.dtype": _to_dtype,
    "type_as": _to_dtype,
    "copy": _copy,
}


def _raise(message: str) -> Value:
    raise NoLowering(message)


__all__ = ["LOWERINGS", "broadcast_sizes", "elementwise", "scalar", "sigmoid"]

"""Loop bodies as triton ops: every scalar ``arith``/``math`` op becomes a block op.

A node's body computes one element from its index; here it computes a whole block of
elements at once (the lanes of the kernel's tile), with the same semantics as the loop
interpreter (MLIR's): ``i1`` arithmetic wraps, ``sitofp``/``extsi`` of ``true`` give -1,
``trunci`` keeps the low bit, ``divsi``/``remsi`` truncate (Triton's ``//`` and ``%``),
``floordivsi`` floors, ``maximumf`` propagates NaN and ``maxnumf`` does not, float
comparisons honour ordered/unordered predicates. Unsigned integer ops reinterpret their
operands as unsigned.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from xdsl.dialects import arith
from xdsl.dialects import math as xmath
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    Signedness,
    f32,
    i1,
)
from xdsl.ir import Attribute, Operation, SSAValue

from kiln.dialects.loop.body_ops import CheckIndexOp, IndexOp, LoadOp, YieldOp
from kiln.dialects.triton.literals import literal_value
from kiln.dialects.triton.types import element_of
from kiln.passes.kernel_to_triton.builder import TritonBuilder


class BodyLoweringError(ValueError):
    """A body op that has no Triton lowering."""


class KernelContext(Protocol):
    """What body lowering needs from the kernel being lowered."""

    builder: TritonBuilder

    def element(self, ty: Attribute) -> Attribute:
        """The Triton element type of a body type (``index`` is the kernel's index type)."""
        ...

    def load(self, load: LoadOp, indirect: Sequence[SSAValue], mask: SSAValue | None) -> SSAValue:
        """The value of a ``loop.load`` (a global load or a fused producer's value)."""
        ...

    def index_value(self, op: IndexOp) -> SSAValue:
        """The value of a ``loop.index``."""
        ...

    def check_index(self, op: CheckIndexOp, index: SSAValue) -> SSAValue:
        """``index`` after asserting it lies in ``op``'s size (``loop.check_index``)."""
        ...

    def loop_var(self, arg: SSAValue) -> SSAValue:
        """The value of one of the node's loop variables (a body block argument)."""
        ...


Lowering = Callable[[KernelContext, Operation, list[SSAValue]], SSAValue]


def lower_body(
    ctx: KernelContext, block_ops: Sequence[Operation], args: dict[SSAValue, SSAValue]
) -> list[SSAValue]:
    """Lower the ops of a node's body; returns the yielded values."""
    values = dict(args)

    def get(v: SSAValue) -> SSAValue:
        found = values.get(v)
        if found is None:
            found = values[v] = ctx.loop_var(v)
        return found

    for op in block_ops:
        if isinstance(op, YieldOp):
            return [get(v) for v in op.values]
        if isinstance(op, LoadOp):
            indirect = [get(v) for v in op.indirect]
            mask = get(op.mask) if op.mask is not None else None
            values[op.result] = ctx.load(op, indirect, mask)
            continue
        if isinstance(op, IndexOp):
            values[op.result] = ctx.index_value(op)
            continue
        if isinstance(op, CheckIndexOp):
            values[op.result] = ctx.check_index(op, get(op.index))
            continue
        rule = _RULES.get(type(op))
        if rule is None:
            raise BodyLoweringError(f"no Triton lowering for '{op.name}' in a loop body")
        values[op.results[0]] = rule(ctx, op, [get(v) for v in op.operands])
    raise BodyLoweringError("loop body without loop.yield")


# -- helpers ---------------------------------------------------------------------------


def _is_bool(ty: Attribute) -> bool:
    return isinstance(ty, IntegerType) and ty.width.data == 1


def _unsigned(ty: Attribute) -> IntegerType:
    assert isinstance(ty, IntegerType)
    return IntegerType(ty.width.data, Signedness.UNSIGNED)


def _binary(name: str) -> Lowering:
    return lambda ctx, op, xs: ctx.builder.binary(name, xs[0], xs[1])


def _int_binary(name: str, on_bool: str) -> Lowering:
    def lower(ctx: KernelContext, op: Operation, xs: list[SSAValue]) -> SSAValue:
        return ctx.builder.binary(
            on_bool if _is_bool(element_of(xs[0].type)) else name, xs[0], xs[1]
        )

    return lower


def _unsigned_binary(name: str) -> Lowering:
    def lower(ctx: KernelContext, op: Operation, xs: list[SSAValue]) -> SSAValue:
        b = ctx.builder
        ty = element_of(xs[0].type)
        if _is_bool(ty):
            return b.binary(name, xs[0], xs[1])
        u = _unsigned(ty)
        return b.bitcast(b.binary(name, b.bitcast(xs[0], u), b.bitcast(xs[1], u)), ty)

    return lower


def _math(fn: str) -> Lowering:
    return lambda ctx, op, xs: ctx.builder.math(fn, *xs)


def _signed_div(round_up: bool) -> Lowering:
    """Floor or ceil division from Triton's truncating ``//`` and ``%``: adjust the
    truncated quotient by one where the remainder is non-zero and its sign says the
    truncation went the wrong way (opposite sign of the divisor for floor, same for ceil)."""

    def lower(ctx: KernelContext, op: Operation, xs: list[SSAValue]) -> SSAValue:
        b = ctx.builder
        a, d = xs
        ty = element_of(a.type)
        q = b.binary("floordiv", a, d)
        r = b.binary("mod", a, d)
        zero = b.const(0, ty)
        sign_test = "eq" if round_up else "ne"
        fix = b.binary(
            "and",
            b.cmp("ne", r, zero),
            b.cmp(sign_test, b.cmp("lt", r, zero), b.cmp("lt", d, zero)),
        )
        return b.binary("add" if round_up else "sub", q, b.cast(fix, ty))

    return lower


_floor_div = _signed_div(round_up=False)
_ceil_div = _signed_div(round_up=True)


def _ceil_div_unsigned(ctx: KernelContext, op: Operation, xs: list[SSAValue]) -> SSAValue:
    b = ctx.builder
    ty = element_of(xs[0].type)
    u = _unsigned(ty)
    a, d = b.bitcast(xs[0], u), b.bitcast(xs[1], u)
    q = b.binary("floordiv", a, d)
    fix = b.cast(b.cmp("ne", b.binary("mod", a, d), b.const(0, u)), u)
    return b.bitcast(b.binary("add", q, fix), ty)


_CMPI = {"eq": "eq", "ne": "ne", "slt": "lt", "sle": "le", "sgt": "gt", "sge": "ge"}
_CMPI_UNSIGNED = {"ult": "lt", "ule": "le", "ugt": "gt", "uge": "ge"}


def _cmpi(ctx: KernelContext, op: Operation, xs: list[SSAValue]) -> SSAValue:
    assert isinstance(op, arith.CmpiOp)
    b = ctx.builder
    predicate = arith.CMPI_COMPARISON_OPERATIONS[op.predicate.value.data]
    a, c = xs
    if predicate in _CMPI:
        return b.cmp(_CMPI[predicate], a, c)
    ty = element_of(a.type)
    if not _is_bool(ty):
        a, c = b.bitcast(a, _unsigned(ty)), b.bitcast(c, _unsigned(ty))
    return b.cmp(_CMPI_UNSIGNED[predicate], a, c)


_ORDERED = {"oeq": "eq", "ogt": "gt", "oge": "ge", "olt": "lt", "ole": "le", "une": "ne"}
_UNORDERED_BY_NEGATION = {"ugt": "le", "uge": "lt", "ult": "ge", "ule": "gt"}
"""``u<p>`` is ``not o<q>`` for the opposite ordered predicate ``q``."""


def _cmpf(ctx: KernelContext, op: Operation, xs: list[SSAValue]) -> SSAValue:
    assert isinstance(op, arith.CmpfOp)
    b = ctx.builder
    predicate = arith.CMPF_COMPARISON_OPERATIONS[op.predicate.value.data]
    a, c = xs
    if predicate in _ORDERED:
        return b.cmp(_ORDERED[predicate], a, c)
    if predicate in _UNORDERED_BY_NEGATION:
        return b.not_(b.cmp(_UNORDERED_BY_NEGATION[predicate], a, c))
    ordered = b.binary("and", b.cmp("eq", a, a), b.cmp("eq", c, c))
    if predicate == "ord":
        return ordered
    if predicate == "uno":
        return b.not_(ordered)
    if predicate == "one":
        return b.binary("and", b.cmp("ne", a, c), ordered)
    if predicate == "ueq":
        return b.binary("or", b.cmp("eq", a, c), b.not_(ordered))
    # "true"/"false": a constant mask of the operands' shape.
    same = b.cmp("eq", a, a)
    return (
        b.binary("or", same, b.not_(same))
        if predicate == "true"
        else b.binary("and", same, b.not_(same))
    )


def _select(ctx: KernelContext, op: Operation, xs: list[SSAValue]) -> SSAValue:
    return ctx.builder.where(xs[0], xs[1], xs[2])


def _constant(ctx: KernelContext, op: Operation, xs: list[SSAValue]) -> SSAValue:
    assert isinstance(op, arith.ConstantOp)
    value = op.value
    if not isinstance(value, IntegerAttr | FloatAttr):
        raise BodyLoweringError(f"arith.constant {value} is not a scalar")
    ty = ctx.element(op.result.type)
    v = literal_value(value)
    if _is_bool(ty):
        v = bool(v)
    return ctx.builder.const(v, ty)


def _cast(ctx: KernelContext, op: Operation, xs: list[SSAValue]) -> SSAValue:
    (x,) = xs
    src = element_of(x.type)
    dst = ctx.element(op.results[0].type)
    halves = Float16Type | BFloat16Type
    if isinstance(dst, halves) and not isinstance(src, Float32Type | halves):
        # PyTorch converts to a half type through float32 (c10::Half and c10::BFloat16
        # are built from a float), so an integer or a float64 is rounded twice (int64
        # 2**24 + 2**16 + 1 -> bfloat16 2**24), on CPU and CUDA alike (checked on the
        # H200); Triton's direct cast rounds once, and its CPU interpreter casts integers
        # and float64 to bfloat16's raw bits.
        wide = _cast_to(ctx.builder, op, x, f32)
        if isinstance(dst, BFloat16Type) and not isinstance(src, Float64Type):
            return _float32_bits_to_bfloat16(ctx.builder, wide)
        return ctx.builder.cast(wide, dst)
    return _cast_to(ctx.builder, op, x, dst)


def _float32_bits_to_bfloat16(b: TritonBuilder, x: SSAValue) -> SSAValue:
    """A finite, non-NaN float32 rounded to the nearest bfloat16 (ties to even), in its
    bits. On the H200, Triton compiled ``int -> float32 -> bfloat16`` as one rounding
    (its two casts folded into one), where PyTorch's CUDA kernels round twice; a float64
    source keeps the plain casts, which Triton does not fold (and which handle NaN)."""
    u32, u16 = IntegerType(32, Signedness.UNSIGNED), IntegerType(16, Signedness.UNSIGNED)
    bits = b.bitcast(x, u32)
    sixteen = b.const(16, u32)
    odd = b.binary("and", b.binary("shr", bits, sixteen), b.const(1, u32))
    rounded = b.binary("add", b.binary("add", bits, b.const(0x7FFF, u32)), odd)
    return b.bitcast(b.cast(b.binary("shr", rounded, sixteen), u16), BFloat16Type())


def _cast_to(b: TritonBuilder, op: Operation, x: SSAValue, dst: Attribute) -> SSAValue:
    src = element_of(x.type)
    signed_from_bool = _is_bool(src) and isinstance(
        op, arith.SIToFPOp | arith.ExtSIOp | arith.IndexCastOp
    )
    if signed_from_bool:
        # A signed 1-bit integer: true is -1 (Triton converts booleans as unsigned).
        return b.math("neg", b.cast(x, dst))
    if _is_bool(dst) and isinstance(op, arith.TruncIOp | arith.IndexCastOp):
        # Truncation keeps the low bit (Triton's cast to int1 is "!= 0").
        return b.cmp("ne", b.binary("and", x, b.const(1, src)), b.const(0, src))
    if isinstance(op, arith.UIToFPOp | arith.ExtUIOp | arith.FPToUIOp) and not _is_bool(src):
        if isinstance(op, arith.FPToUIOp):
            return b.bitcast(b.cast(x, _unsigned(dst)), dst)
        return b.cast(b.bitcast(x, _unsigned(src)), dst)
    return b.cast(x, dst)


def _fpowi(ctx: KernelContext, op: Operation, xs: list[SSAValue]) -> SSAValue:
    b = ctx.builder
    base, exponent = xs
    return b.math("pow", base, b.cast(exponent, element_of(base.type)))


def _ipowi(ctx: KernelContext, op: Operation, xs: list[SSAValue]) -> SSAValue:
    # Exponentiation by squaring over the exponent's bits (non-negative exponents).
    b = ctx.builder
    base, exponent = xs
    ty = element_of(base.type)
    bits = ty.width.data if isinstance(ty, IntegerType) else 64
    result = b.const(1, ty)
    one, zero = b.const(1, ty), b.const(0, ty)
    for _ in range(bits - 1):
        bit = b.cmp("ne", b.binary("and", exponent, one), zero)
        result = b.where(bit, b.binary("mul", result, base), result)
        base = b.binary("mul", base, base)
        exponent = b.binary("shr", exponent, one)
    return result


def _neg(ctx: KernelContext, op: Operation, xs: list[SSAValue]) -> SSAValue:
    return ctx.builder.math("neg", xs[0])


_RULES: dict[type[Operation], Lowering] = {
    arith.ConstantOp: _constant,
    arith.AddfOp: _binary("add"),
    arith.SubfOp: _binary("sub"),
    arith.MulfOp: _binary("mul"),
    arith.DivfOp: _binary("truediv"),
    arith.NegfOp: _neg,
    arith.MaximumfOp: _binary("maximum"),
    arith.MinimumfOp: _binary("minimum"),
    arith.MaxnumfOp: _binary("maxnum"),
    arith.MinnumfOp: _binary("minnum"),
    arith.AddiOp: _int_binary("add", "xor"),
    arith.SubiOp: _int_binary("sub", "xor"),
    arith.MuliOp: _int_binary("mul", "and"),
    arith.DivSIOp: _binary("floordiv"),
    arith.RemSIOp: _binary("mod"),
    arith.DivUIOp: _unsigned_binary("floordiv"),
    arith.RemUIOp: _unsigned_binary("mod"),
    arith.FloorDivSIOp: _floor_div,
    arith.CeilDivSIOp: _ceil_div,
    arith.CeilDivUIOp: _ceil_div_unsigned,
    arith.MaxSIOp: _binary("maxnum"),
    arith.MinSIOp: _binary("minnum"),
    arith.MaxUIOp: _unsigned_binary("maxnum"),
    arith.MinUIOp: _unsigned_binary("minnum"),
    arith.AndIOp: _binary("and"),
    arith.OrIOp: _binary("or"),
    arith.XOrIOp: _binary("xor"),
    arith.ShLIOp: _binary("shl"),
    arith.ShRSIOp: _binary("shr"),
    arith.CmpiOp: _cmpi,
    arith.CmpfOp: _cmpf,
    arith.SelectOp: _select,
    arith.ExtFOp: _cast,
    arith.TruncFOp: _cast,
    arith.SIToFPOp: _cast,
    arith.UIToFPOp: _cast,
    arith.FPToSIOp: _cast,
    arith.FPToUIOp: _cast,
    arith.ExtSIOp: _cast,
    arith.ExtUIOp: _cast,
    arith.TruncIOp: _cast,
    arith.IndexCastOp: _cast,
    xmath.AbsFOp: _math("abs"),
    xmath.AbsIOp: _math("abs"),
    xmath.CeilOp: _math("ceil"),
    xmath.FloorOp: _math("floor"),
    xmath.ExpOp: _math("exp"),
    xmath.Exp2Op: _math("exp2"),
    xmath.ExpM1Op: _math("expm1"),
    xmath.LogOp: _math("log"),
    xmath.Log2Op: _math("log2"),
    xmath.Log10Op: _math("log10"),
    xmath.Log1pOp: _math("log1p"),
    xmath.SqrtOp: _math("sqrt"),
    xmath.RsqrtOp: _math("rsqrt"),
    xmath.SinOp: _math("sin"),
    xmath.CosOp: _math("cos"),
    xmath.TanOp: _math("tan"),
    xmath.TanhOp: _math("tanh"),
    xmath.SinhOp: _math("sinh"),
    xmath.CoshOp: _math("cosh"),
    xmath.AsinOp: _math("asin"),
    xmath.AcosOp: _math("acos"),
    xmath.AtanOp: _math("atan"),
    xmath.AsinhOp: _math("asinh"),
    xmath.AcoshOp: _math("acosh"),
    xmath.AtanhOp: _math("atanh"),
    xmath.ErfOp: _math("erf"),
    xmath.CbrtOp: _math("cbrt"),
    xmath.RoundOp: _math("round"),
    xmath.RoundEvenOp: _math("rint"),
    xmath.TruncOp: _math("trunc"),
    xmath.Atan2Op: _math("atan2"),
    xmath.PowFOp: _math("pow"),
    xmath.CopySignOp: _math("copysign"),
    xmath.FmaOp: _math("fma"),
    xmath.FPowIOp: _fpowi,
    xmath.IPowIOp: _ipowi,
}


def supported_ops() -> frozenset[type[Operation]]:
    """The arith/math ops a body may use (besides loop.load, loop.index, loop.yield)."""
    return frozenset(_RULES)


def index_element(ty: Attribute, index_type: IntegerType) -> Attribute:
    return index_type if isinstance(ty, IndexType) else ty


__all__ = [
    "BodyLoweringError",
    "KernelContext",
    "i1",
    "index_element",
    "lower_body",
    "supported_ops",
]

"""``arith`` and ``math`` ops as C expressions, with the IR's (and torch's) semantics.

The semantics follow kiln's loop interpreter (:mod:`kiln.dialects.loop.body_eval`),
which is the reference: ``i1`` arithmetic wraps modulo 2, ``sitofp``/``extsi`` of
``true`` give -1, ``remsi`` takes the dividend's sign, ``divsi`` truncates,
``math.round`` rounds half away from zero, ``maximumf`` propagates NaN. Results of
type half or bfloat16 are computed in float and rounded to their precision.

:func:`scalar_expression` returns the C expression and, for integer divisions, the
condition under which the function must raise its division-by-zero flag.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.dialects import math as xmath
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    IntegerType,
)
from xdsl.ir import Attribute, Operation

from kiln.backends.cpp.c_types import (
    float_literal,
    int_literal,
    is_bool,
    is_narrow_float,
    is_unsigned,
    unsigned_type,
    value_type,
)
from kiln.dialects.loop.casts import CAST_OPS


class UnsupportedOp(ValueError):
    """An op the C++ emitter has no translation for."""


@dataclass(frozen=True)
class Expression:
    text: str
    div_check: str | None = None
    """A C condition that is true when the operation divided by zero."""


def round_result(text: str, ty: Attribute) -> str:
    """Round a float computation to the precision of a half/bfloat16 result."""
    if isinstance(ty, Float16Type):
        return f"kiln_round_half({text})"
    if isinstance(ty, BFloat16Type):
        return f"kiln_round_bf16({text})"
    return text


def constant_text(op: arith.ConstantOp) -> str:
    value = op.value
    ty = op.result.type
    if isinstance(value, FloatAttr):
        return float_literal(float(value.value.data), ty)  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
    if isinstance(value, IntegerAttr):
        return int_literal(int(value.value.data), ty)  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
    raise UnsupportedOp(f"arith.constant {value} is not a scalar")


# --- floats -----------------------------------------------------------------------------

_FLOAT_BINARY: dict[type[Operation], str] = {
    arith.AddfOp: "{0} + {1}",
    arith.SubfOp: "{0} - {1}",
    arith.MulfOp: "{0} * {1}",
    arith.DivfOp: "{0} / {1}",
    arith.MaximumfOp: "kiln_maximumf({0}, {1})",
    arith.MinimumfOp: "kiln_minimumf({0}, {1})",
    arith.MaxnumfOp: "fmax{f}({0}, {1})",
    arith.MinnumfOp: "fmin{f}({0}, {1})",
    xmath.Atan2Op: "atan2{f}({0}, {1})",
    xmath.PowFOp: "pow{f}({0}, {1})",
    xmath.CopySignOp: "copysign{f}({0}, {1})",
}

_FLOAT_UNARY: dict[type[Operation], str] = {
    arith.NegfOp: "-{0}",
    xmath.AbsFOp: "fabs{f}({0})",
    xmath.AcosOp: "acos{f}({0})",
    xmath.AcoshOp: "acosh{f}({0})",
    xmath.AsinOp: "asin{f}({0})",
    xmath.AsinhOp: "asinh{f}({0})",
    xmath.AtanOp: "atan{f}({0})",
    xmath.AtanhOp: "atanh{f}({0})",
    xmath.CbrtOp: "cbrt{f}({0})",
    xmath.CeilOp: "ceil{f}({0})",
    xmath.CosOp: "cos{f}({0})",
    xmath.CoshOp: "cosh{f}({0})",
    xmath.ErfOp: "{erf}({0})",
    xmath.Exp2Op: "exp2{f}({0})",
    xmath.ExpM1Op: "expm1{f}({0})",
    xmath.ExpOp: "exp{f}({0})",
    xmath.FloorOp: "floor{f}({0})",
    xmath.Log10Op: "log10{f}({0})",
    xmath.Log1pOp: "log1p{f}({0})",
    xmath.Log2Op: "log2{f}({0})",
    xmath.LogOp: "log{f}({0})",
    xmath.RoundEvenOp: "nearbyint{f}({0})",
    xmath.RoundOp: "round{f}({0})",
    xmath.RsqrtOp: "{one} / sqrt{f}({0})",
    xmath.SinOp: "sin{f}({0})",
    xmath.SinhOp: "sinh{f}({0})",
    xmath.SqrtOp: "sqrt{f}({0})",
    xmath.TanOp: "tan{f}({0})",
    xmath.TanhOp: "tanh{f}({0})",
    xmath.TruncOp: "trunc{f}({0})",
}

_CMPF: dict[str, str] = {
    "false": "false",
    "true": "true",
    "oeq": "{0} == {1}",
    "ogt": "{0} > {1}",
    "oge": "{0} >= {1}",
    "olt": "{0} < {1}",
    "ole": "{0} <= {1}",
    "one": "({0} < {1} || {0} > {1})",
    "ord": "({0} == {0} && {1} == {1})",
    "ueq": "!({0} < {1} || {0} > {1})",
    "ugt": "!({0} <= {1})",
    "uge": "!({0} < {1})",
    "ult": "!({0} >= {1})",
    "ule": "!({0} > {1})",
    "une": "{0} != {1}",
    "uno": "({0} != {0} || {1} != {1})",
}


def _float_format(template: str, ty: Attribute, args: Sequence[str]) -> str:
    double = isinstance(ty, Float64Type)
    # Float erf is the prelude's inline kiln_erff (vectorizes without a libmvec call).
    erf = "erf" if double else "kiln_erff"
    text = template.format(*args, f="" if double else "f", one="1.0" if double else "1.0f", erf=erf)
    return round_result(text, ty)


# --- integers -------------------------------------------------------------------------------

_INT_HELPERS: dict[type[Operation], str] = {
    arith.AddiOp: "kiln_addi",
    arith.SubiOp: "kiln_subi",
    arith.MuliOp: "kiln_muli",
    arith.ShLIOp: "kiln_shli",
    arith.ShRSIOp: "kiln_shrsi",
    arith.ShRUIOp: "kiln_shrui",
    xmath.IPowIOp: "kiln_ipowi",
}

_BOOL_BINARY: dict[type[Operation], str] = {
    # i1 arithmetic wraps modulo 2.
    arith.AddiOp: "{0} != {1}",
    arith.SubiOp: "{0} != {1}",
    arith.MuliOp: "{0} && {1}",
}

_BITWISE: dict[type[Operation], str] = {
    arith.AndIOp: "&",
    arith.OrIOp: "|",
    arith.XOrIOp: "^",
}

_DIVISIONS: dict[type[Operation], str] = {
    arith.DivSIOp: "kiln_divsi",
    arith.DivUIOp: "kiln_divui",
    arith.RemSIOp: "kiln_remsi",
    arith.RemUIOp: "kiln_remui",
    arith.FloorDivSIOp: "kiln_floordivsi",
    arith.CeilDivSIOp: "kiln_ceildivsi",
    arith.CeilDivUIOp: "kiln_ceildivui",
}

_MINMAX: dict[type[Operation], str] = {
    arith.MaxSIOp: "({0} > {1} ? {0} : {1})",
    arith.MinSIOp: "({0} < {1} ? {0} : {1})",
    arith.MaxUIOp: "(({u}){0} > ({u}){1} ? {0} : {1})",
    arith.MinUIOp: "(({u}){0} < ({u}){1} ? {0} : {1})",
}

_CMPI: dict[str, str] = {
    "eq": "==",
    "ne": "!=",
    "slt": "<",
    "sle": "<=",
    "sgt": ">",
    "sge": ">=",
    "ult": "<",
    "ule": "<=",
    "ugt": ">",
    "uge": ">=",
}


def _cmpi(op: arith.CmpiOp, args: Sequence[str]) -> str:
    predicate = arith.CMPI_COMPARISON_OPERATIONS[op.predicate.value.data]
    symbol = _CMPI[predicate]
    ty = op.lhs.type
    if predicate.startswith("u") and not is_bool(ty):
        u = unsigned_type(ty)
        return f"({u}){args[0]} {symbol} ({u}){args[1]}"
    return f"{args[0]} {symbol} {args[1]}"


def _cast(op: Operation, args: Sequence[str]) -> str:
    source = op.operands[0].type
    target = op.results[0].type
    a = args[0]
    c = value_type(target)
    if isinstance(op, arith.ExtFOp):
        return a if is_narrow_float(source) and c == "float" else f"({c}){a}"
    if isinstance(op, arith.TruncFOp):
        if isinstance(target, Float16Type):
            return f"(float)(kiln_half)({a})"
        if isinstance(target, BFloat16Type):
            return f"kiln_round_bf16((float)({a}))"
        return f"({c})({a})"
    if isinstance(op, arith.SIToFPOp):
        text = f"({a} ? -1.0 : 0.0)" if is_bool(source) else a
        return round_result(f"({c})({text})", target)
    if isinstance(op, arith.UIToFPOp):
        text = a if is_bool(source) else f"({unsigned_type(source)}){a}"
        return round_result(f"({c})({text})", target)
    if isinstance(op, arith.FPToSIOp | arith.FPToUIOp):
        if is_bool(target):
            return f"({c})({a})"
        # Defined for NaN and out-of-range values, as eager on x86 (see the prelude).
        wide = isinstance(target, IntegerType) and target.width.data == 64
        return f"({c})kiln_fptosi{64 if wide else 32}({a})"
    signed_source = not is_unsigned(source) and not isinstance(op, arith.ExtUIOp)
    if is_bool(target):
        return f"(bool)(({a}) & 1)"
    if is_bool(source):
        return f"({a} ? ({c})-1 : ({c})0)" if signed_source else f"({c})({a})"
    if isinstance(op, arith.ExtUIOp):
        return f"({c})({unsigned_type(source)})({a})"
    return f"({c})({a})"


Handler = Callable[[Operation, Sequence[str]], Expression]


def scalar_expression(op: Operation, args: Sequence[str]) -> Expression:
    """The C expression computing ``op``'s (single) result from its operands' C text."""
    cls = type(op)
    ty = op.results[0].type if op.results else None
    if cls in _FLOAT_BINARY:
        return Expression(_float_format(_FLOAT_BINARY[cls], ty, args))  # pyright: ignore[reportArgumentType]
    if cls in _FLOAT_UNARY:
        return Expression(_float_format(_FLOAT_UNARY[cls], ty, args))  # pyright: ignore[reportArgumentType]
    if isinstance(op, arith.CmpfOp):
        predicate = arith.CMPF_COMPARISON_OPERATIONS[op.predicate.value.data]
        return Expression(_CMPF[predicate].format(*args))
    if isinstance(op, arith.CmpiOp):
        return Expression(_cmpi(op, args))
    if isinstance(op, arith.SelectOp):
        return Expression(f"{args[0]} ? {args[1]} : {args[2]}")
    if isinstance(op, xmath.FmaOp):
        double = isinstance(ty, Float64Type)
        text = f"fma{'' if double else 'f'}({args[0]}, {args[1]}, {args[2]})"
        return Expression(round_result(text, ty))  # pyright: ignore[reportArgumentType]
    if isinstance(op, xmath.FPowIOp):
        double = isinstance(ty, Float64Type)
        c = "double" if double else "float"
        text = f"pow{'' if double else 'f'}({args[0]}, ({c})({args[1]}))"
        return Expression(round_result(text, ty))  # pyright: ignore[reportArgumentType]
    if isinstance(op, CAST_OPS):
        return Expression(_cast(op, args))
    assert ty is not None
    if is_bool(ty) and cls in _BOOL_BINARY:
        return Expression(_BOOL_BINARY[cls].format(*args))
    if cls in _BITWISE:
        return Expression(f"{args[0]} {_BITWISE[cls]} {args[1]}")
    if cls in _MINMAX:
        if is_bool(ty):
            return Expression(
                f"{args[0]} {'|' if cls in (arith.MaxSIOp, arith.MaxUIOp) else '&'} {args[1]}"
            )
        return Expression(_MINMAX[cls].format(*args, u=unsigned_type(ty)))
    c = value_type(ty)
    if cls in _INT_HELPERS:
        return Expression(f"{_INT_HELPERS[cls]}<{c}>({args[0]}, {args[1]})")
    if cls in _DIVISIONS:
        return Expression(
            f"{_DIVISIONS[cls]}<{c}>({args[0]}, {args[1]})", div_check=f"{args[1]} == 0"
        )
    if isinstance(op, xmath.AbsIOp):
        return Expression(f"({args[0]} < 0 ? kiln_negi<{c}>({args[0]}) : {args[0]})")
    if isinstance(op, arith.BitcastOp):
        return Expression(f"kiln_bitcast<{c}>({args[0]})")
    raise UnsupportedOp(f"the C++ backend cannot translate {op.name}")


__all__ = ["Expression", "UnsupportedOp", "constant_text", "round_result", "scalar_expression"]

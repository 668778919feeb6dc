"""C types and literals for IR types and constants.

Values live in registers as ``float`` for every float type narrower than f32 (half and
bfloat16, rounded after each operation that produces one) and in memory in their own
format (``kiln_half``, ``kiln_bf16``, see :mod:`kiln.backends.cpp.prelude`).
"""

from __future__ import annotations

import math
import struct

from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IndexType,
    IntegerType,
    Signedness,
)
from xdsl.ir import Attribute


class UnsupportedType(ValueError):
    """A type the C++ backend has no representation for."""


def is_unsigned(ty: Attribute) -> bool:
    return isinstance(ty, IntegerType) and ty.signedness.data == Signedness.UNSIGNED


def is_bool(ty: Attribute) -> bool:
    return isinstance(ty, IntegerType) and ty.width.data == 1


def is_narrow_float(ty: Attribute) -> bool:
    """half and bfloat16: float in registers, rounded after every operation."""
    return isinstance(ty, Float16Type | BFloat16Type)


def value_type(ty: Attribute) -> str:
    """The C type holding a value of ``ty`` in registers."""
    if isinstance(ty, Float32Type) or is_narrow_float(ty):
        return "float"
    if isinstance(ty, Float64Type):
        return "double"
    if isinstance(ty, IndexType):
        return "int64_t"
    if isinstance(ty, IntegerType):
        width = ty.width.data
        if width == 1:
            return "bool"
        if width in (8, 16, 32, 64):
            return f"{'u' if is_unsigned(ty) else ''}int{width}_t"
    raise UnsupportedType(f"the C++ backend has no type for {ty}")


def storage_type(ty: Attribute) -> str:
    """The C type of a buffer element of ``ty``."""
    if isinstance(ty, Float16Type):
        return "kiln_half"
    if isinstance(ty, BFloat16Type):
        return "kiln_bf16"
    return value_type(ty)


def unsigned_type(ty: Attribute) -> str:
    """The unsigned C type of the same width (for unsigned comparisons and casts)."""
    c = value_type(ty)
    if c == "bool":
        return "bool"
    return c if c.startswith("u") else "u" + c


def round_to(value: float, ty: Attribute) -> float:
    """``value`` rounded to the precision of a narrow float type (what C would store)."""
    if math.isnan(value) or math.isinf(value):
        return value
    if isinstance(ty, Float16Type):
        try:
            return struct.unpack("<e", struct.pack("<e", value))[0]
        except OverflowError:
            return math.copysign(math.inf, value)
    if isinstance(ty, BFloat16Type):
        (bits,) = struct.unpack("<I", struct.pack("<f", value))
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
        return struct.unpack("<f", struct.pack("<I", bits))[0]
    if isinstance(ty, Float32Type):
        try:
            return struct.unpack("<f", struct.pack("<f", value))[0]
        except OverflowError:
            return math.copysign(math.inf, value)
    return value


def float_literal(value: float, ty: Attribute) -> str:
    """A C literal of a float value of type ``ty`` (as its register type)."""
    double = isinstance(ty, Float64Type)
    value = round_to(value, ty)
    if math.isnan(value):
        return '__builtin_nan("")' if double else '__builtin_nanf("")'
    if math.isinf(value):
        inf = "__builtin_inf()" if double else "__builtin_inff()"
        return inf if value > 0 else f"(-{inf})"
    text = repr(float(value))
    if "e" not in text and "." not in text:
        text += ".0"
    if text.startswith("-"):
        return f"({text}{'' if double else 'f'})"
    return text + ("" if double else "f")


def int_literal(value: int, ty: Attribute) -> str:
    if is_bool(ty):
        return "true" if value & 1 else "false"
    c = value_type(ty)
    if -(2**31) < value < 2**31:
        return str(value) if c in ("int32_t", "int64_t") else f"(({c}){value})"
    if value == -(2**63):
        return "(-9223372036854775807LL - 1)"
    suffix = "ULL" if value > 0 and c.startswith("u") else "LL"
    return f"(({c}){value}{suffix})"


__all__ = [
    "UnsupportedType",
    "float_literal",
    "int_literal",
    "is_bool",
    "is_narrow_float",
    "is_unsigned",
    "round_to",
    "storage_type",
    "unsigned_type",
    "value_type",
]

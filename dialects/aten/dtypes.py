"""torch dtypes as builtin element types.

Signed integers are signless (``i32``) so that loop bodies can use ``arith`` directly;
unsigned integers are ``ui8``..``ui64``; ``bool`` is ``i1``. This module imports torch
lazily: parsing and printing IR does not need it.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    BFloat16Type,
    ComplexType,
    Float8E4M3FNType,
    Float8E4M3FNUZType,
    Float8E5M2FNUZType,
    Float8E5M2Type,
    Float8E8M0FNUType,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
    Signedness,
    TensorType,
)
from xdsl.ir import Attribute

from kiln.dialects.aten.attributes import OpaqueDtypeType

if TYPE_CHECKING:
    import torch

_NAMES: dict[str, Attribute] = {
    "bool": IntegerType(1),
    "uint8": IntegerType(8, Signedness.UNSIGNED),
    "uint16": IntegerType(16, Signedness.UNSIGNED),
    "uint32": IntegerType(32, Signedness.UNSIGNED),
    "uint64": IntegerType(64, Signedness.UNSIGNED),
    "int8": IntegerType(8),
    "int16": IntegerType(16),
    "int32": IntegerType(32),
    "int64": IntegerType(64),
    "float16": Float16Type(),
    "bfloat16": BFloat16Type(),
    "float32": Float32Type(),
    "float64": Float64Type(),
    "complex32": ComplexType(Float16Type()),
    "complex64": ComplexType(Float32Type()),
    "complex128": ComplexType(Float64Type()),
    "float8_e4m3fn": Float8E4M3FNType(),
    "float8_e4m3fnuz": Float8E4M3FNUZType(),
    "float8_e5m2": Float8E5M2Type(),
    "float8_e5m2fnuz": Float8E5M2FNUZType(),
    "float8_e8m0fnu": Float8E8M0FNUType(),
}
"""dtypes with a builtin element type. Every other torch dtype (quantized ``qint8``, packed
``float4_e2m1fn_x2``, ``bits8``, sub-byte ``int4``) is an :class:`OpaqueDtypeType`. Loop
bodies compute only on bool, integers, f16, bf16, f32 and f64; tensors of the other
types (complex, float8, opaque) run through ATen (see docs/fallback.md)."""


class UnsupportedDtype(ValueError):
    pass


def dtype_to_type(dtype: torch.dtype) -> Attribute:
    """The element type for a torch dtype."""
    name = str(dtype).removeprefix("torch.")
    element = _NAMES.get(name)
    if element is not None:
        return element
    import torch

    if not isinstance(dtype, torch.dtype):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise UnsupportedDtype(f"{dtype!r} is not a torch dtype")
    return OpaqueDtypeType(name)


@cache
def _reverse() -> dict[Attribute, str]:
    return {v: k for k, v in _NAMES.items()}


def type_to_dtype(element_type: Attribute) -> torch.dtype:
    """The torch dtype for an element type."""
    import torch

    if isinstance(element_type, OpaqueDtypeType):
        dtype = getattr(torch, element_type.dtype.data, None)
        if isinstance(dtype, torch.dtype):
            return dtype
        raise UnsupportedDtype(f"torch has no dtype {element_type.dtype.data!r}")
    try:
        return getattr(torch, _reverse()[element_type])
    except KeyError:
        raise UnsupportedDtype(f"element type {element_type} has no torch dtype") from None


def is_element_type(attr: Attribute) -> bool:
    return attr in _reverse() or isinstance(attr, OpaqueDtypeType)


def tensor_type(shape: list[int | None], dtype: torch.dtype) -> TensorType[Attribute]:
    """``tensor<...>``; a dim given as None is dynamic (printed ``?``)."""
    dims = [DYNAMIC_INDEX if d is None else d for d in shape]
    return TensorType(dtype_to_type(dtype), dims)

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
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
    Signedness,
    TensorType,
)
from xdsl.ir import Attribute

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
    "complex64": ComplexType(Float32Type()),
    "complex128": ComplexType(Float64Type()),
}


class UnsupportedDtype(ValueError):
    pass


def dtype_to_type(dtype: torch.dtype) -> Attribute:
    """The element type for a torch dtype."""
    name = str(dtype).removeprefix("torch.")
    try:
        return _NAMES[name]
    except KeyError:
        raise UnsupportedDtype(f"dtype {dtype} has no kiln element type") from None


@cache
def _reverse() -> dict[Attribute, str]:
    return {v: k for k, v in _NAMES.items()}


def type_to_dtype(element_type: Attribute) -> torch.dtype:
    """The torch dtype for an element type."""
    import torch

    try:
        return getattr(torch, _reverse()[element_type])
    except KeyError:
        raise UnsupportedDtype(f"element type {element_type} has no torch dtype") from None


def is_element_type(attr: Attribute) -> bool:
    return attr in _reverse()


def tensor_type(shape: list[int | None], dtype: torch.dtype) -> TensorType[Attribute]:
    """``tensor<...>``; a dim given as None is dynamic (printed ``?``)."""
    dims = [DYNAMIC_INDEX if d is None else d for d in shape]
    return TensorType(dtype_to_type(dtype), dims)

"""Tensors embedded in IR as ``aten.constant`` (dense) values.

```mlir
%c = aten.constant dense<[[0.5, -1.25], [2.0, 0.75]]> : tensor<2x2xf32>
```

The dense attribute's payload is the tensor's bytes in row-major order, which is the
layout xDSL's ``DenseIntOrFPElementsAttr`` uses for every element type kiln maps
(``i1`` stores true as 0xff, so bool tensors are widened first).
"""

from __future__ import annotations

import torch
from xdsl.dialects.builtin import (
    AnyFloat,
    BytesAttr,
    DenseIntOrFPElementsAttr,
    IntegerType,
    TensorType,
)
from xdsl.ir import Attribute

from kiln.dialects.aten import ConstantOp
from kiln.dialects.aten.fx.types import TypeConverter, UnsupportedValue

_EMBEDDABLE = frozenset(
    {
        "bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
        "float16", "bfloat16", "float32", "float64",
    }
)  # fmt: skip
"""dtypes whose elements a ``DenseIntOrFPElementsAttr`` holds exactly (not complex,
float8 or quantized: such constants are passed as run-time arguments instead)."""


def embeddable(dtype: torch.dtype) -> bool:
    return str(dtype).removeprefix("torch.") in _EMBEDDABLE


def dense_attr(value: torch.Tensor, types: TypeConverter) -> DenseIntOrFPElementsAttr:
    """The dense attribute holding ``value`` (a real, CPU-copyable tensor)."""
    if isinstance(value, torch._subclasses.FakeTensor):  # pyright: ignore[reportPrivateUsage]
        raise UnsupportedValue("a fake tensor has no data to embed as a constant")
    tensor_type: TensorType[Attribute] = types.tensor_type(value)
    element = tensor_type.element_type
    if not embeddable(value.dtype) or not isinstance(element, IntegerType | AnyFloat):
        raise UnsupportedValue(f"constants of element type {element} cannot be embedded")
    data = value.detach().to("cpu")
    if data.dtype is torch.bool:
        data = data.to(torch.uint8) * 255
    # clone(): a fresh contiguous storage holding exactly the tensor's elements.
    raw = bytes(data.contiguous().clone().untyped_storage())
    dense_type = TensorType(element, tensor_type.get_shape())
    return DenseIntOrFPElementsAttr(dense_type, BytesAttr(raw))


def constant_op(value: torch.Tensor, types: TypeConverter) -> ConstantOp:
    return ConstantOp(dense_attr(value, types))

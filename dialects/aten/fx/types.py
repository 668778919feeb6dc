"""Types of FX values: ``node.meta["val"]`` (FakeTensor, SymInt, ...) -> xDSL types.

=====================  ===========================================
``meta["val"]``        IR type
=====================  ===========================================
FakeTensor             ``tensor<4x?xf32>`` (``?`` for a symbolic dim)
SymInt / int           ``index``
SymFloat / float       ``f64``
SymBool / bool         ``i1``
an opaque object       ``!aten.object<"class">`` (DTensor's device meshes)
=====================  ===========================================

A symbolic dim the shape environment has since specialised to a constant (a guard
like ``s0 == 8`` was added while tracing) is printed as that constant.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from xdsl.dialects.builtin import DYNAMIC_INDEX, IndexType, NoneType, TensorType, f64, i1
from xdsl.ir import Attribute

from kiln.dialects.aten.attributes import OpaqueObjectType
from kiln.dialects.aten.dtypes import UnsupportedDtype, dtype_to_type

INDEX = IndexType()
NONE_TYPE = NoneType()
"""The type of an absent result (an op's ``output_mask`` switched it off)."""

DYNAMIC = DYNAMIC_INDEX
"""A dim whose size is only known at run time (printed ``?``)."""


class UnsupportedValue(ValueError):
    """A value kind with no IR type (the importer adds the node's name)."""


def static_dim(size: int | torch.SymInt) -> int:
    """The size of one dim, or :data:`DYNAMIC`."""
    if isinstance(size, int):
        return size
    # SymNode.maybe_as_int applies the shape environment's replacements, so a symbol
    # specialised by a guard during tracing comes back as its constant.
    known = size.node.maybe_as_int()
    return DYNAMIC if known is None else known


def opaque_class_name(value: object) -> str | None:
    """The class of a TorchScript or opaque object (what a ``FakeScriptObject`` stands for
    while tracing), or None for anything else."""
    from torch._library.fake_class_registry import FakeScriptObject

    if isinstance(value, FakeScriptObject):
        return str(value.script_class_name)
    if isinstance(value, torch.ScriptObject):
        return str(value._type().qualified_name())  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]
    return None


class TypeConverter:
    """Converts FX metadata to types; caches per (shape, dtype) within one import."""

    def __init__(self) -> None:
        self._tensor_types: dict[tuple[tuple[int, ...], torch.dtype], TensorType[Attribute]] = {}
        self._elements: dict[torch.dtype, Attribute] = {}

    def element_type(self, dtype: torch.dtype) -> Attribute:
        element = self._elements.get(dtype)
        if element is None:
            try:
                element = dtype_to_type(dtype)
            except UnsupportedDtype as e:
                raise UnsupportedValue(str(e)) from None
            self._elements[dtype] = element
        return element

    def tensor_type(self, value: torch.Tensor) -> TensorType[Attribute]:
        if value.layout is not torch.strided:
            raise UnsupportedValue(f"tensors with layout {value.layout} are not supported")
        shape = tuple(static_dim(s) for s in value.shape)
        key = (shape, value.dtype)
        ty = self._tensor_types.get(key)
        if ty is None:
            ty = TensorType(self.element_type(value.dtype), shape)
            self._tensor_types[key] = ty
        return ty

    def value_type(self, value: object) -> Attribute:
        """The type of one FX value (a tensor or a scalar)."""
        if isinstance(value, torch.Tensor):
            return self.tensor_type(value)
        # bool before int: bool is a subclass of int.
        if isinstance(value, bool | torch.SymBool):
            return i1
        if isinstance(value, int | torch.SymInt):
            return INDEX
        if isinstance(value, float | torch.SymFloat):
            return f64
        if (name := opaque_class_name(value)) is not None:
            return OpaqueObjectType(name)
        raise UnsupportedValue(f"values of type {type(value).__name__} have no IR type")

    def result_types(self, value: object) -> list[Attribute]:
        """Types of an op's results: one per element of a tuple/list value.

        ``None`` elements (outputs an ``output_mask`` switched off) get ``none``.
        """
        if isinstance(value, Sequence) and not isinstance(value, str):
            return [NONE_TYPE if v is None else self.value_type(v) for v in value]
        if value is None:
            return []
        return [self.value_type(value)]

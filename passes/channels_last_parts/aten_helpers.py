"""Small aten helpers of ``channels-last``: the overloads it matches, and op and value
queries (elementwise ops, shapes, decoded arguments, 2-D convolutions, layout arguments)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from xdsl.dialects.builtin import StringAttr, TensorType
from xdsl.ir import Attribute, SSAValue

from kiln.dialects.aten.encoding import decode_value
from kiln.dialects.aten.ops import AtenOp
from kiln.dialects.aten.traits import (
    FollowsChannelsLast,
    NondeterministicSeeded,
    Pointwise,
    ViewLike,
    has_aten_trait,
)

CONVOLUTION = "aten::convolution.default"

PERMUTE = "aten::permute.default"
RESHAPES = frozenset({"aten::view.default", "aten::_unsafe_view.default", "aten::reshape.default"})
"""Views that keep a contiguous tensor contiguous (a reshape of a strided one copies)."""
_TO_COPY = "aten::_to_copy.default"
CLONE = "aten::clone.default"
_TO_COPY_LAYOUT_ARGS = ("layout", "device", "pin_memory", "memory_format")
"""``_to_copy`` is elementwise (a dtype cast) unless it also moves or re-lays-out."""


def is_elementwise(op: AtenOp) -> bool:
    """A pure pointwise op (the ``Pointwise`` trait): each output element depends only on
    the same element of each (broadcast) input, so any layout computes the same numbers."""
    if not (has_aten_trait(op, Pointwise) or op.overload_name == _TO_COPY):
        return False
    return not op.op_schema().is_mutable and not has_aten_trait(op, NondeterministicSeeded)


def tensor_shape(value: SSAValue) -> tuple[int, ...] | None:
    ty = value.type
    if not isinstance(ty, TensorType):
        return None
    return tuple(ty.get_shape())  # pyright: ignore[reportUnknownArgumentType, reportUnknownMemberType]


def tensor_rank(value: SSAValue) -> int | None:
    shape = tensor_shape(value)
    return None if shape is None else len(shape)


def arg_value(op: AtenOp, name: str) -> Any:
    spec = next(a for a in op.op_schema().arguments if a.name == name)
    return decode_value(spec, op.arg_attr(name), ())


def is_2d_convolution(op: AtenOp) -> bool:
    if op.overload_name != CONVOLUTION or len(op.results) != 1:
        return False
    spec = next(a for a in op.op_schema().arguments if a.name == "transposed")
    transposed = decode_value(spec, op.arg_attr("transposed"), ())
    tensors = op.tensor_operands()
    weight = tensors["weight"][0]
    return (
        transposed is False
        and tensor_rank(op.operands[0]) == 4
        and weight is not None
        and tensor_rank(weight) == 4
        and tensor_rank(op.results[0]) == 4
    )


def has_layout_args(op: AtenOp) -> bool:
    if op.overload_name == _TO_COPY:
        return any(op.arg_attr(name) is not None for name in _TO_COPY_LAYOUT_ARGS)
    memory_format = op.arg_attr("memory_format") if _has_arg(op, "memory_format") else None
    return isinstance(memory_format, StringAttr) and memory_format.data != "preserve_format"


def _has_arg(op: AtenOp, name: str) -> bool:
    return any(a.name == name for a in op.op_schema().arguments)


def follows_input_layout(op: AtenOp) -> bool:
    """A value computed by ``op`` takes its layout from ``op``'s input: views and ATen ops
    that propagate the memory format, and ``clone`` where it keeps it
    (``preserve_format``). A ``clone(x, memory_format=contiguous_format)`` lays its
    result out whatever ``x``'s layout: ShuffleNet's channel shuffle ends in one, and a
    saved activation behind it kept every ``cat`` before it NCHW."""
    if op.overload_name == CLONE:
        return not has_layout_args(op)
    return has_aten_trait(op, FollowsChannelsLast) or has_aten_trait(op, ViewLike)


def permuted_type(ty: Attribute, dims: Sequence[int]) -> TensorType[Attribute]:
    assert isinstance(ty, TensorType)
    shape: tuple[int, ...] = ty.get_shape()  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    return TensorType(ty.element_type, [shape[d] for d in dims])  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]

"""Strided arguments: a non-contiguous graph input read in place, not copied.

A training step's backward graph takes the activations the forward saved, and many are
views with strides of their own: ``t(x)`` for a weight gradient's ``mm``, the query, key
and value slices of one fused projection, attention's output and log-sum-exp in the
layout its kernel wrote them. Copying each to a contiguous buffer on entry cost a kernel
launch apiece (18 per GPT-2 training step). The FX importer records the static strides
of such an argument (``kiln.arg_strides`` on the ``func.func`` argument); ``lower-aten``
then indexes its buffer through those strides (loads and extern views alike), and the
wrappers and interpreters hand the tensor over as it is when its strides are the
recorded ones, or copy it into that layout when they are not (so the program is never
wrong, only slower, for an input laid out differently from the traced one)::

    func.func @backward(%t : tensor<128x32xf32> {kiln.arg_strides = [1, 128]}, ...)

Only static shapes and strides are recorded, and ``lower-aten`` ignores the attribute on
an argument that an op writes (an in-place update addresses a contiguous buffer).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, IntegerAttr, i64
from xdsl.ir import Attribute

ARG_STRIDES_ATTR = "kiln.arg_strides"
"""On a tensor argument: the element strides it is read through (static, not contiguous)."""


def _contiguous(shape: Sequence[int], strides: Sequence[int]) -> bool:
    expected = 1
    for size, stride in zip(reversed(shape), reversed(strides), strict=True):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


def arg_strides_attrs(value: object) -> dict[str, Attribute]:
    """``{kiln.arg_strides: [...]}`` for a FakeTensor placeholder value whose static
    strides are not contiguous (and non-negative); ``{}`` otherwise."""
    if not isinstance(value, torch.Tensor) or value.layout is not torch.strided:
        return {}
    shape, strides = value.shape, value.stride()
    if not all(isinstance(s, int) for s in (*shape, *strides)):
        return {}
    shape_i = [int(s) for s in shape]
    strides_i = [int(s) for s in strides]
    if 0 in shape_i or any(s < 0 for s in strides_i) or _contiguous(shape_i, strides_i):
        return {}
    return {ARG_STRIDES_ATTR: ArrayAttr([IntegerAttr(s, i64) for s in strides_i])}


def arg_strides(attrs: Attribute | None) -> tuple[int, ...] | None:
    """The recorded strides in an argument's attribute dictionary (None: contiguous)."""
    if not isinstance(attrs, DictionaryAttr):
        return None
    found = attrs.data.get(ARG_STRIDES_ATTR)
    if not isinstance(found, ArrayAttr):
        return None
    out: list[int] = []
    for item in found.data:  # pyright: ignore[reportUnknownVariableType]
        if not isinstance(item, IntegerAttr):
            return None
        out.append(int(item.value.data))  # pyright: ignore[reportUnknownArgumentType, reportUnknownMemberType]
    return tuple(out)


def program_arg_strides(arg_attrs: ArrayAttr | None, count: int) -> list[tuple[int, ...] | None]:
    """Per argument of a function or program: its recorded strides or None."""
    attrs = list(arg_attrs.data) if arg_attrs is not None else []  # pyright: ignore[reportUnknownArgumentType]
    return [arg_strides(attrs[k]) if k < len(attrs) else None for k in range(count)]


def same_strides(value: torch.Tensor, strides: Sequence[int]) -> bool:
    """Whether ``value`` is laid out with ``strides`` (dims of size 1 are free)."""
    return all(
        size == 1 or got == want
        for size, got, want in zip(value.shape, value.stride(), strides, strict=True)
    )


def in_layout(value: torch.Tensor, strides: Sequence[int]) -> torch.Tensor:
    """``value`` itself when it has ``strides``, else a copy laid out with them."""
    if len(strides) == value.dim() and same_strides(value, strides):
        return value
    out = torch.empty_strided(
        tuple(value.shape), tuple(strides), dtype=value.dtype, device=value.device
    )
    out.copy_(value)
    return out


def storage_extent(value: torch.Tensor) -> int:
    """Elements from ``value``'s first element to one past its last, through its strides."""
    if value.numel() == 0:
        return 0
    return 1 + sum((n - 1) * s for n, s in zip(value.shape, value.stride(), strict=True))


def flat_storage(value: torch.Tensor) -> torch.Tensor:
    """The 1-D view a kernel indexes: ``value``'s memory from its first element (the
    row-major elements for a contiguous tensor; the strided span for a strided argument)."""
    if value.is_contiguous():
        return value.reshape(-1)
    return value.as_strided((storage_extent(value),), (1,))


__all__ = [
    "ARG_STRIDES_ATTR",
    "arg_strides",
    "arg_strides_attrs",
    "flat_storage",
    "in_layout",
    "program_arg_strides",
    "same_strides",
    "storage_extent",
]

"""``kiln.storage``: the eager storage layout a storage-dependent op reads.

Most ATen ops depend on a tensor's elements only; a few read its *storage*:
``as_strided`` (and ``as_strided_copy``, ``_reshape_alias``) index the storage
directly, ``as_strided_scatter`` writes through a strided view of a clone that keeps
its input's strides. At loop level a value is an index map over a kiln buffer whose
layout need not be eager's (``clone``/``contiguous``/``_to_copy`` are aliases there,
kernel outputs are contiguous), so these ops must know eager's layout.

The FX importer records it on the op (it knows each value's FakeTensor)::

    aten.as_strided.default(%clone, size = [2, 2], stride = [3, 1], storage_offset = 0)
        {kiln.storage = [0, 2, 1]} : ...

``[offset, stride_0, ..., stride_n-1]``: the storage offset and strides, in eager, of
the op's ``self`` operand (for ``as_strided`` the importer makes ``self`` the tensor
that owns the storage, which ``as_strided`` reads regardless of the view it is given).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, i64
from xdsl.ir import Operation

STORAGE_ATTR = "kiln.storage"


def storage_attr(offset: int, strides: Sequence[int]) -> ArrayAttr[IntegerAttr]:
    return ArrayAttr([IntegerAttr(int(v), i64) for v in (offset, *strides)])


def storage_layout(op: Operation) -> tuple[int, tuple[int, ...]] | None:
    """``(offset, strides)`` of the op's ``self`` in eager, when recorded."""
    attr = op.attributes.get(STORAGE_ATTR)
    if not isinstance(attr, ArrayAttr) or not attr.data:
        return None
    values = [int(v.value.data) for v in attr.data if isinstance(v, IntegerAttr)]  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
    if len(values) != len(attr.data):
        return None
    return values[0], tuple(values[1:])


def dense_dims(sizes: Sequence[int], strides: Sequence[int]) -> list[int] | None:
    """The dims that address distinct storage (size > 1, stride != 0), innermost first,
    when they tile their storage range without gaps or overlap; None otherwise."""
    dims = sorted(
        (k for k, s in enumerate(sizes) if s > 1 and strides[k] != 0), key=lambda k: strides[k]
    )
    expected = 1
    for k in dims:
        if strides[k] != expected:
            return None
        expected *= sizes[k]
    return dims


__all__ = ["STORAGE_ATTR", "dense_dims", "storage_attr", "storage_layout"]

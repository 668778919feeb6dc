"""Storage-dependent ops: give them eager's storage layout (see :mod:`kiln.dialects.aten.storage`).

``as_strided(v, size, stride, offset)`` reads the storage that ``v`` views, whatever
view ``v`` is: the importer passes the tensor that owns that storage instead (its
*base*: found by walking back through the nodes whose FakeTensors share the storage,
as Inductor's lowering unwraps views), makes the storage offset explicit, and records
the base's eager strides and offset. The lowering then indexes the base's elements by
storage position, whatever layout kiln chose for them. ``_reshape_alias`` with strides
that a plain ``view`` would not give is the same ``as_strided`` call; with the strides
``view`` gives, it is a reshape and stays one.

Only static layouts are recorded; with symbolic sizes the op is left as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torch.fx
from torch.multiprocessing.reductions import StorageWeakRef
from xdsl.ir import Attribute, SSAValue

from kiln.dialects.aten.storage import storage_attr

aten = torch.ops.aten

STORAGE_READS = frozenset(
    {aten.as_strided.default, aten.as_strided_copy.default, aten._reshape_alias.default}
)
STORAGE_WRITES = frozenset({aten.as_strided_scatter.default})


def _static(*values: Any) -> bool:
    for value in values:
        if isinstance(value, list | tuple | torch.Size):
            if not _static(*value):  # pyright: ignore[reportUnknownArgumentType]
                return False
        elif not isinstance(value, int) or isinstance(value, bool):
            return False
    return True


def _tensor_val(node: object) -> torch.Tensor | None:
    if not isinstance(node, torch.fx.Node):
        return None
    val = node.meta.get("val")
    return val if isinstance(val, torch.Tensor) else None


def _layout_static(val: torch.Tensor) -> bool:
    return _static(tuple(val.shape), val.stride(), val.storage_offset())


def _storage(val: torch.Tensor) -> StorageWeakRef:
    return StorageWeakRef(val.untyped_storage())


def storage_base(node: torch.fx.Node) -> torch.fx.Node:
    """The earliest node whose tensor shares ``node``'s storage (and dtype)."""
    val = _tensor_val(node)
    assert val is not None
    key, dtype = _storage(val), val.dtype
    current = node
    seen: set[torch.fx.Node] = set()
    while current not in seen:
        seen.add(current)
        parent = _sharing_parent(current, key, dtype)
        if parent is None:
            break
        current = parent
    return current


def _sharing_parent(
    node: torch.fx.Node, key: StorageWeakRef, dtype: torch.dtype
) -> torch.fx.Node | None:
    pending = list(node.all_input_nodes)
    visited: set[torch.fx.Node] = set()
    while pending:
        candidate = pending.pop(0)
        if candidate in visited:
            continue
        visited.add(candidate)
        val = candidate.meta.get("val")
        if isinstance(val, torch.Tensor):
            if val.dtype == dtype and _layout_static(val) and _storage(val) == key:
                return candidate
        elif isinstance(val, list | tuple):
            # split/unbind: a list of views; look through to what they view.
            tensors = [v for v in val if isinstance(v, torch.Tensor)]  # pyright: ignore[reportUnknownVariableType]
            if any(_storage(v) == key for v in tensors):
                pending.extend(candidate.all_input_nodes)
    return None


def _view_strides(val: torch.Tensor, size: list[int]) -> tuple[int, ...] | None:
    """The strides ``val.view(size)`` would have, or None if it cannot be viewed."""
    meta = torch.empty_strided(tuple(val.shape), val.stride(), dtype=val.dtype, device="meta")
    try:
        return tuple(meta.view(size).stride())
    except RuntimeError:
        return None


def storage_operands(
    node: torch.fx.Node,
    target: torch._ops.OpOverload,  # pyright: ignore[reportPrivateUsage]
    args: dict[str, Any],
    values: Mapping[torch.fx.Node, object],
) -> tuple[torch._ops.OpOverload, Attribute | None]:  # pyright: ignore[reportPrivateUsage]
    """For a storage-dependent op: the overload to import it as (``_reshape_alias`` may
    become ``as_strided``) and its ``kiln.storage`` attribute; ``args`` is updated
    (``self`` replaced by the storage's base, the storage offset made explicit)."""
    if target in STORAGE_WRITES:
        out = _tensor_val(node)
        if out is None or not _layout_static(out):
            return target, None
        # as_strided_scatter clones ``self`` keeping its (dense) strides, offset 0, and
        # writes through the strided view of that clone: the result's layout.
        return target, storage_attr(0, out.stride())
    if target not in STORAGE_READS:
        return target, None
    source = node.args[0] if node.args else node.kwargs.get("self")
    val = _tensor_val(source)
    size, stride = args.get("size"), args.get("stride")
    offset = args.get("storage_offset")
    if val is None or not _layout_static(val) or not _static(size, stride):
        return target, None
    if offset is not None and not _static(offset):
        return target, None
    assert isinstance(source, torch.fx.Node)
    assert isinstance(size, list)
    assert isinstance(stride, list)
    if target == aten._reshape_alias.default:
        if _view_strides(val, size) == tuple(stride):  # pyright: ignore[reportUnknownArgumentType]
            return target, None  # a plain reshape of the elements
        target = aten.as_strided.default
    base = storage_base(source)
    base_value = values.get(base)
    base_val = _tensor_val(base)
    if not isinstance(base_value, SSAValue) or base_val is None:
        base, base_val = source, val
    else:
        args["self"] = base_value
    if offset is None:
        args["storage_offset"] = val.storage_offset()
    return target, storage_attr(int(base_val.storage_offset()), [int(s) for s in base_val.stride()])


__all__ = ["STORAGE_READS", "STORAGE_WRITES", "storage_base", "storage_operands"]

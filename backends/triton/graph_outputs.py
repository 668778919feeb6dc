"""How a CUDA graph's outputs are handed over at each replay, and how the runner tells
that the caller no longer holds them (:mod:`kiln.backends.triton.cudagraphs`).

An output alone in its storage (not a view) is *kept*: handed over as the same tensor at
every replay, as Inductor's CUDA-graph trees keep such outputs (``cached_tensor_outputs``),
which saves a ``detach`` per output and per replay (~1 us: a training forward returns
hundreds, its saved activations). Whether the caller still holds a kept tensor is read
from its Python reference count and its ``TensorImpl`` use count, compared with those
taken when only the runner held it; every other output goes out as a fresh alias, whose
references raise its storage's use count.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch

storage_use_count: Callable[[int], int] = torch._C._storage_Use_Count  # pyright: ignore[reportPrivateUsage, reportAttributeAccessIssue]
"""The use count of the storage at a ``StorageImpl`` address (``storage._cdata``)."""

_use_count: Callable[[torch.Tensor], int] = torch.Tensor._use_count  # pyright: ignore[reportAttributeAccessIssue]
"""A tensor's ``TensorImpl`` use count (C++ references: autograd's saved tensors)."""


def positions_by_storage(outputs: Sequence[Any]) -> dict[int, list[int]]:
    """The tensor outputs' positions, by the address of the storage they lie in."""
    by_storage: dict[int, list[int]] = {}
    for i, o in enumerate(outputs):
        if isinstance(o, torch.Tensor):
            by_storage.setdefault(o.untyped_storage().data_ptr(), []).append(i)
    return by_storage


def kept_positions(
    outputs: Sequence[Any], groups: Iterable[list[int]]
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The outputs a replay hands over as themselves (the only tensor in its storage,
    not a view), by the first position each is at, and the positions handed over as
    fresh aliases. A tensor returned at several positions (a training forward's result
    that is also saved, a batch norm's new running statistic that is also a write-back
    value) is one tensor: kept, as the program without a graph returns it twice."""
    kept: list[int] = []
    fresh: list[int] = []
    for group in groups:
        first = outputs[group[0]]
        if not first._is_view() and all(outputs[i] is first for i in group):
            kept.append(group[0])
        else:
            fresh.extend(group)
    return tuple(sorted(kept)), tuple(sorted(fresh))


def kept_counts(kept: list[torch.Tensor]) -> tuple[list[int], list[int]]:
    """The Python reference counts and ``TensorImpl`` use counts of ``kept`` (the same
    expression when settling and at every idle check, so that the counts compare)."""
    return list(map(sys.getrefcount, kept)), list(map(_use_count, kept))


def mark_cached(owner: object, kept: list[torch.Tensor]) -> None:
    """Tell autograd that the runner's reference to each kept output is a cache's
    (``torch._C._add_cached_tensor``, as Inductor's CUDA-graph trees do): a gradient
    the backward returns is then taken over by ``AccumulateGrad`` (``.grad`` aliases
    it, as it aliases a fresh output) instead of copied into a new ``.grad`` at every
    step. Unmarked when ``owner`` goes (the mark is keyed on the tensor's address)."""
    torch._C._set_cached_tensors_enabled(True)  # pyright: ignore[reportAttributeAccessIssue]
    for t in kept:
        torch._C._add_cached_tensor(t)  # pyright: ignore[reportAttributeAccessIssue]
    weakref.finalize(owner, _unmark_cached, kept)


def _unmark_cached(kept: list[torch.Tensor]) -> None:
    # ``torch._dynamo.reset()`` turns the marks off process-wide (Inductor's CUDA-graph
    # trees' reset), and removing one then fails: on again, as every marking does.
    torch._C._set_cached_tensors_enabled(True)  # pyright: ignore[reportAttributeAccessIssue]
    for t in kept:
        torch._C._remove_cached_tensor(t)  # pyright: ignore[reportAttributeAccessIssue]


View = tuple[tuple[int, ...], tuple[int, ...], int]
"""An output's sizes, strides and element offset from the borrowed input it lies in."""


def view_in(output: torch.Tensor, value: torch.Tensor) -> View | None:
    """Where ``output`` lies in ``value``'s memory, if it can be rebuilt from ``value``."""
    if output.dtype != value.dtype:
        return None
    offset, rest = divmod(output.data_ptr() - value.data_ptr(), output.element_size())
    if rest or value.storage_offset() + offset < 0:
        return None
    return tuple(output.shape), output.stride(), offset


def lying_in_borrowed(
    outputs: Sequence[Any], args: Sequence[Any], borrowed: dict[int, int], static: Sequence[Any]
) -> dict[int, tuple[int, View | None]]:
    """The outputs lying in a borrowed input's memory: output position -> the input's
    position and where the output lies in it (None: the input itself; see
    ``cudagraphs._Instance.returned``)."""
    by_storage = {args[k].untyped_storage().data_ptr(): k for k in borrowed}
    returned: dict[int, tuple[int, View | None]] = {}
    for i, o in enumerate(outputs):
        if not isinstance(o, torch.Tensor):
            continue
        same = [k for k in borrowed if o is static[k]]
        if same:
            returned[i] = same[0], None
            continue
        k = by_storage.get(o.untyped_storage().data_ptr())
        if k is not None and (view := view_in(o, args[k])) is not None:
            returned[i] = k, view
    return returned


def rebuilt(args: Sequence[Any], k: int, view: View | None) -> Any:
    """The output ``lying_in_borrowed`` found in argument ``k``, from this call's argument."""
    if view is None:
        return args[k]
    shape, stride, offset = view
    value = args[k].detach()
    return value.as_strided(shape, stride, value.storage_offset() + offset)


__all__ = [
    "View",
    "kept_counts",
    "kept_positions",
    "lying_in_borrowed",
    "mark_cached",
    "positions_by_storage",
    "rebuilt",
    "storage_use_count",
    "view_in",
]

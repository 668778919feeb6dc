"""Which device a graph runs on, hence which executor runs it.

The device is read from the whole graph, never from the inputs alone: a graph whose
tensors are all made inside it (``torch.ones(..., device="cuda")``, windows, ``arange``)
or that moves a CPU input to the GPU has no CUDA input, yet eager returns CUDA tensors.
Every node's FakeTensor (``meta['val']``: inputs, factory results, outputs), every
``device`` argument and the real inputs count. A CPU 0-dim tensor mixed into a CUDA
graph (legal in eager) does not make the graph a CPU one: the Triton wrapper moves it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch
import torch.fx
import torch.utils._pytree as pytree
from torch.fx.immutable_collections import immutable_list

_PLAIN = (type(None), bool, int, float, str, torch.fx.Node, torch.dtype)
"""Leaves that hold no device (most FX arguments)."""
_SEQUENCES = (list, tuple, immutable_list)
"""Containers pytree flattens into their items (exact types, as pytree matches them)."""


def _devices_in(value: Any) -> Iterable[torch.device]:
    # The common values directly: pytree's generic walk was most of this function's
    # time, which every compile pays (a warm start's largest share at 48 GPT-2 layers).
    if isinstance(value, torch.Tensor):
        yield value.device
    elif isinstance(value, torch.device):
        yield value
    elif type(value) in _SEQUENCES:
        for item in value:
            yield from _devices_in(item)
    elif not isinstance(value, _PLAIN):
        for leaf in pytree.tree_leaves(value):
            if isinstance(leaf, torch.Tensor):
                yield leaf.device
            elif isinstance(leaf, torch.device):
                yield leaf


def graph_devices(gm: torch.fx.GraphModule, inputs: Sequence[Any] = ()) -> set[torch.device]:
    """The devices the graph's tensors live on (``meta`` excluded)."""
    found: set[torch.device] = set(_devices_in(list(inputs)))
    for node in gm.graph.nodes:
        found.update(_devices_in(node.meta.get("val")))
        if node.op == "call_function":
            found.update(_devices_in((node.args, node.kwargs)))
    return {d for d in found if d.type != "meta"}


def gpu_device(devices: Iterable[torch.device]) -> torch.device | None:
    """The graph's CUDA device (the first by index), or None for a CPU graph."""
    cuda = sorted((d for d in devices if d.type == "cuda"), key=lambda d: d.index or 0)
    return cuda[0] if cuda else None


def choose_executor(requested: str, devices: Iterable[torch.device], available: set[str]) -> str:
    """``requested`` unless ``auto``: then Triton for a graph with any CUDA tensor, C++
    otherwise, and the reference interpreter where that backend is not built."""
    if requested != "auto":
        return requested
    wanted = "triton" if gpu_device(devices) is not None else "cpp"
    return wanted if wanted in available else "interpret"


def output_devices(gm: torch.fx.GraphModule) -> list[torch.device | None]:
    """The device eager gives each output leaf (None: not a tensor, or unknown)."""
    output = next(iter(gm.graph.find_nodes(op="output")), None)
    if output is None:
        return []
    leaves = pytree.tree_leaves(output.args[0], is_leaf=lambda v: v is None)
    out: list[torch.device | None] = []
    for leaf in leaves:
        val = leaf.meta.get("val") if isinstance(leaf, torch.fx.Node) else None
        out.append(val.device if isinstance(val, torch.Tensor) else None)
    return out


def device_fixer(
    gm: torch.fx.GraphModule, program_device: torch.device | None, count: int | None = None
) -> Callable[[Any], Any] | None:
    """For a GPU program whose graph returns CPU tensors (``torch.tensor(2.0)`` made in
    a CUDA graph), a function moving those outputs back to the CPU; None when every
    output is on the program's device (the common case costs nothing). ``count``: the
    compiled graph returns the first ``count`` outputs only (the others are written into
    inputs)."""
    if program_device is None:
        return None
    devices = output_devices(gm)[:count]
    moved = [k for k, d in enumerate(devices) if d is not None and d.type == "cpu"]
    if not moved:
        return None

    def fix(result: Any) -> Any:
        leaves, spec = pytree.tree_flatten(result, is_leaf=lambda v: v is None)
        if len(leaves) != len(devices):
            return result
        for k in moved:
            if isinstance(leaves[k], torch.Tensor):
                leaves[k] = leaves[k].cpu()
        return pytree.tree_unflatten(leaves, spec)

    return fix


__all__ = ["choose_executor", "device_fixer", "gpu_device", "graph_devices", "output_devices"]

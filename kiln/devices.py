"""Which device a graph runs on, hence which executor runs it.

The device is read from the whole graph, never from the inputs alone: a graph whose
tensors are all made inside it (``torch.ones(..., device="cuda")``, windows, ``arange``)
or that moves a CPU input to the GPU has no CUDA input, yet eager returns CUDA tensors.
Every node's FakeTensor (``meta['val']``: inputs, factory results, outputs), every
``device`` argument and the real inputs count. A CPU 0-dim tensor mixed into a CUDA
graph (legal in eager) does not make the graph a CPU one: the Triton wrapper moves it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import torch
import torch.fx
import torch.utils._pytree as pytree


def _devices_in(value: Any) -> Iterable[torch.device]:
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


__all__ = ["choose_executor", "gpu_device", "graph_devices"]

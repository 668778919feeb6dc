"""CUDA-graphs mode: replay a program's whole launch sequence as one CUDA graph.

The first call with a given input signature (shapes, strides, dtypes, device) runs the
program normally (compiling and autotuning), then captures a second run into a
``torch.cuda.CUDAGraph`` reading from static copies of the inputs; later calls copy the
inputs into those copies (skipping an input that is the very tensor seen last time,
unmodified, such as a parameter) and replay the graph: one launch instead of one per
kernel, and no Python per kernel.

As with Inductor's CUDA graphs, the returned tensors live in the graph's memory pool
and are overwritten by the next replay of the same graph; clone them to keep them
(``clone_outputs=True`` does it for every call).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch


class Program(Protocol):
    source: str

    def __call__(self, args: Sequence[Any]) -> tuple[Any, ...]: ...


@dataclass
class _Graph:
    graph: torch.cuda.CUDAGraph
    inputs: list[Any]
    """Static copies of the tensor inputs (other values as they were at capture)."""
    outputs: tuple[Any, ...]
    last: list[tuple[weakref.ref[torch.Tensor], int] | None]
    """Per input: the tensor last copied in and its version counter then."""


def _signature(args: Sequence[Any]) -> tuple[object, ...]:
    return tuple(
        (tuple(a.shape), a.stride(), a.dtype, a.device) if isinstance(a, torch.Tensor) else a
        for a in args
    )


@dataclass
class CudaGraphRunner:
    """Wraps a compiled program (see the module docstring)."""

    program: Program
    clone_outputs: bool = False
    graphs: dict[tuple[object, ...], _Graph] = field(
        default_factory=dict[tuple[object, ...], _Graph]
    )
    pool: Any = None

    @property
    def source(self) -> str:
        return self.program.source

    def __call__(self, args: Sequence[Any]) -> tuple[Any, ...]:
        key = _signature(args)
        entry = self.graphs.get(key)
        if entry is None:
            outputs = self.program(args)  # compiles, autotunes, and warms up allocations
            self.graphs[key] = self._capture(args)
            return outputs
        for k, value in enumerate(args):
            static = entry.inputs[k]
            if not isinstance(value, torch.Tensor):
                continue
            seen = entry.last[k]
            if seen is not None and seen[0]() is value and seen[1] == value._version:
                continue
            static.copy_(value)
            entry.last[k] = (weakref.ref(value), value._version)
        entry.graph.replay()
        if self.clone_outputs:
            return tuple(o.clone() if isinstance(o, torch.Tensor) else o for o in entry.outputs)
        return entry.outputs

    def boxed_call(self, args: list[Any]) -> tuple[Any, ...]:
        """AOTAutograd's boxed convention: the list is emptied (replays read the static
        copies, so nothing else is held)."""
        outputs = self(args)
        args.clear()
        return outputs

    def _capture(self, args: Sequence[Any]) -> _Graph:
        static = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            self.program(static)  # warm-up on a side stream, as torch.cuda.graphs requires
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        if self.pool is None:
            self.pool = torch.cuda.graph_pool_handle()
        with torch.cuda.graph(graph, pool=self.pool):
            outputs = self.program(static)
        last: list[tuple[weakref.ref[torch.Tensor], int] | None] = [
            (weakref.ref(a), a._version) if isinstance(a, torch.Tensor) else None for a in args
        ]
        # The static copies already hold the capture-time arguments.
        return _Graph(graph, static, tuple(outputs), last)


__all__ = ["CudaGraphRunner"]

"""Recording a program into a CUDA graph (:mod:`kiln.backends.triton.cudagraphs`): the
recorder protocol the runner calls (tests substitute CPU stand-ins) and the CUDA one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import torch

Replay = Callable[[], None]
Epilogue = Callable[[tuple[Any, ...]], None]


class Recorder(Protocol):
    """Records ``run`` into a graph, followed by ``epilogue`` (given the outputs), which
    runs at replays only (not at the recording's warm-up: it writes the caller's
    buffers, once per call); returns the replay and the outputs of the recording (the
    tensors every replay writes into)."""

    def __call__(
        self, run: Callable[[], tuple[Any, ...]], epilogue: Epilogue | None = None
    ) -> tuple[Replay, tuple[Any, ...]]: ...


def record_cuda_graph(
    run: Callable[[], tuple[Any, ...]], epilogue: Epilogue | None = None
) -> tuple[Replay, tuple[Any, ...]]:
    """A CUDA graph of ``run`` and ``epilogue`` in a memory pool of its own, after a
    warm-up of ``run`` on a side stream (as ``torch.cuda.graphs`` requires)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        run()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=torch.cuda.graph_pool_handle()):
        outputs = tuple(run())
        if epilogue is not None:
            epilogue(outputs)
    return graph.replay, outputs


__all__ = ["Epilogue", "Recorder", "Replay", "record_cuda_graph"]

"""A CPU stand-in for a CUDA graph, for tests of the CUDA-graph runner."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import torch


def fixed_memory_recorder(
    run: Callable[[], tuple[Any, ...]],
    epilogue: Callable[[tuple[Any, ...]], None] | None = None,
) -> tuple[Callable[[], None], tuple[Any, ...]]:
    """A "graph" whose replays write every output where the recording put it, then run
    ``epilogue`` on them (not at the recording, as a CUDA graph's capture runs nothing).
    It holds the outputs weakly, as a CUDA graph holds no tensor (an output the runner
    drops, one lying in a borrowed input, is not kept alive), and writes them without
    moving their version counters, as a replay does not (autograd checks the saved
    ones)."""
    outputs = tuple(run())
    refs = [weakref.ref(o) if isinstance(o, torch.Tensor) else None for o in outputs]

    def replay() -> None:
        written: list[Any] = []
        for ref, new in zip(refs, run(), strict=True):
            old = ref() if ref is not None else None
            if old is not None:
                old.data.copy_(new)
            written.append(old if old is not None else new)
        if epilogue is not None:
            epilogue(tuple(written))

    return replay, outputs

"""Live bytes over a wrapper's run: what the program really holds, op by op.

:func:`run_counting_live_bytes` runs a generated wrapper function (``forward(args)`` /
``call(args)``) and samples, before each of its lines and at its return, the bytes of
every tensor storage created during the call that is still alive: storages are found
through a ``TorchDispatchMode`` (each ATen op's results: allocations, extern results)
and among the wrapper's local variables, and dropped when they die
(``weakref.finalize``). The arguments' own storages are not
counted, as ``buffer-reuse`` does not count them; the peak over the samples is then
comparable with the planned peak (``memory_timeline(program).peak``). Temporaries that
live and die within one line (inside an extern call) are not sampled.

```python
assert run_counting_live_bytes(program.run, args).peak == planned_peak(program_op)
```

:func:`step_peak_bytes` measures a whole step instead (a compiled model's forward and
backward, or eager's), from the CPU allocator's own records.
"""

from __future__ import annotations

import gc
import sys
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import CodeType, FrameType
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from kiln.dialects.kernel.lifetimes import is_buffer
from kiln.dialects.kernel.liveness import buffer_bytes, liveness, memory_timeline
from kiln.dialects.kernel.program_ops import ProgramOp


class _StorageTracker(TorchDispatchMode):
    """Bytes of the storages ATen ops created that are still alive."""

    def __init__(self, arguments: Sequence[torch.Tensor], count_arguments: bool) -> None:
        super().__init__()
        # Keyed by the storage object's id: the key is dropped by the storage's
        # finalizer, before the id can be reused.
        self.live: dict[int, int] = {}
        self.ignored: set[int] = set()
        for tensor in arguments:
            storage = tensor.untyped_storage()
            if count_arguments:
                self.track(storage)
            else:
                self.ignored.add(id(storage))

    def track(self, storage: torch.UntypedStorage) -> None:
        key = id(storage)
        if key not in self.live and key not in self.ignored and storage.nbytes():
            self.live[key] = storage.nbytes()
            weakref.finalize(storage, self.live.pop, key, None)

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: Sequence[Any] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        out = func(*args, **(kwargs or {}))
        for value in pytree.tree_leaves(out):
            if isinstance(value, torch.Tensor):
                self.track(value.untyped_storage())
        return out

    def bytes(self) -> int:
        return sum(self.live.values())


@dataclass
class LiveBytes:
    outputs: Any
    samples: list[tuple[int, int]] = field(default_factory=list[tuple[int, int]])
    """(line number in the wrapper's source, live bytes before that line runs)."""

    @property
    def peak(self) -> int:
        return max((b for _, b in self.samples), default=0)


def run_counting_live_bytes(
    function: Callable[[list[Any]], Any],
    args: list[Any],
    *,
    code: CodeType | None = None,
    collect_cycles: bool = False,
    count_arguments: bool = False,
) -> LiveBytes:
    """Run ``function(args)`` sampling live bytes at each line of ``code`` (default: the
    function's own code). ``collect_cycles`` runs the garbage collector before each
    sample: Triton's interpreter leaves a launch's arguments in reference cycles.
    ``count_arguments`` counts the argument tensors' storages too, while they live
    (pass a list nothing else refers to, to see a boxed wrapper release them)."""
    code = code or getattr(function, "__code__", None)
    assert code is not None, "pass the generated wrapper function or its code"
    tracker = _StorageTracker([a for a in args if isinstance(a, torch.Tensor)], count_arguments)
    result = LiveBytes(None)

    def local(frame: FrameType, event: str, _arg: Any) -> Any:
        if event in ("line", "return"):
            # Tensors the wrapper names, also those allocated without the dispatcher
            # seeing it (Inductor's ``_empty_strided_cpu``, ``_reinterpret_tensor``).
            for value in frame.f_locals.values():
                if isinstance(value, torch.Tensor):
                    tracker.track(value.untyped_storage())
            if collect_cycles:
                gc.collect()
            result.samples.append((frame.f_lineno, tracker.bytes()))
        return local

    def calls(frame: FrameType, event: str, _arg: Any) -> Any:
        return local if event == "call" and frame.f_code is code else None

    if collect_cycles:
        gc.freeze()  # what exists now is never garbage here: collections skip it
    previous = sys.gettrace()
    sys.settrace(calls)
    try:
        with tracker:
            result.outputs = function(args)
    finally:
        sys.settrace(previous)
        if collect_cycles:
            gc.unfreeze()
    return result


def planned_peak(program: ProgramOp, *, arguments: bool = False) -> int:
    """``buffer-reuse``'s peak for ``program``; with ``arguments``, plus the argument
    buffers, each held until its last use (returned ones to the end)."""
    timeline = memory_timeline(program)
    if not arguments:
        return timeline.peak
    info = liveness(program)
    held: list[tuple[int, int]] = []  # (position of the last use, bytes)
    for arg in program.body.block.args:
        if is_buffer(arg):
            last = len(info.ops) if arg in info.returned else info.last_use.get(arg, -1)
            held.append((last, buffer_bytes(arg) or 0))
    return max(
        live + sum(size for last, size in held if last >= position)
        for position, live in enumerate(timeline.live)
    )


def step_peak_bytes(step: Callable[[], object]) -> int:
    """The most bytes ``step()`` holds on the CPU beyond what was allocated before it:
    the running sum, in time order, of every allocation and free the profiler records
    (its raw ``[memory]`` events: the per-op figures of ``prof.events()`` net an op's
    allocations against its frees, which hides the peak inside a compiled region, one
    op to the profiler). What benchmarks/dashboard_measure.py reports on the CPU."""
    from torch._C._autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    results = prof.profiler.kineto_results if prof.profiler is not None else None
    assert results is not None
    records = sorted(
        (event.start_ns(), event.nbytes())  # pyright: ignore[reportAttributeAccessIssue]
        for event in results.events()
        if event.name() == "[memory]" and event.device_type() == DeviceType.CPU
    )
    live = top = 0
    for _, size in records:
        live += size
        top = max(top, live)
    return top


__all__ = ["LiveBytes", "planned_peak", "run_counting_live_bytes", "step_peak_bytes"]

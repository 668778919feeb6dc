"""The dashboard's measurements, independent of any model: compiling with a backend,
timeouts, cold caches, step time, peak memory, kernel profiles, errors against a reference,
and how an exception is summarised in a row."""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import math
import os
import signal
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
from dashboard_backends import BACKENDS
from torch import nn

# -- timeouts, caches, synchronization -----------------------------------------------------


class TaskTimeout(Exception):
    pass


@contextlib.contextmanager
def time_limit(
    seconds: int, paused: Callable[[float, float], float] | None = None
) -> Iterator[None]:
    """Raise :class:`TaskTimeout` in this (main) thread after ``seconds`` (0: no limit).
    ``paused(start, end)``: epoch seconds in that interval when this process was paused
    (``--jobs``: :meth:`TimingLock.paused_s`), which do not count."""
    if seconds <= 0 or not hasattr(signal, "SIGALRM"):
        yield
        return
    start = time.time()

    def expire(_signum: int, _frame: Any) -> None:
        if paused is not None:
            left = seconds - (time.time() - start - paused(start, time.time()))
            if left >= 1:
                signal.alarm(math.ceil(left))
                return
        raise TaskTimeout(f"timed out after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


TRACE = "KILN_DASHBOARD_LOCK_TRACE"
"""A file each :class:`TimingLock` appends ``pid enter exit`` to (epoch seconds) after each
of its holds: tests/test_bench_jobs.py checks with it that no two workers ever time at
once."""

SETTLE_S = 0.25
"""After pausing the other workers, how long the holder waits before timing: GPU work they
queued before they stopped still runs (their launch queues drain), and their CPU caches
cool. Their kernels are short next to this (a step of the largest model is ~50 ms)."""


def workers_folder(lock_path: str) -> Path:
    """Where the parent registers each ``--jobs`` worker (a file named by its pid, which is
    also its process group: workers start in their own session)."""
    return Path(lock_path).with_name("workers")


def register_worker(lock_path: str) -> None:
    """Make this process one the :class:`TimingLock` at ``lock_path`` pauses while another
    process holds it (for scripts started side by side, each with the same lock, as
    ``train_step_profile.py --lock``): the leader of its own session (its process group is
    its pid, as a ``--jobs`` worker's), named in :func:`workers_folder` until it exits."""
    with contextlib.suppress(PermissionError):  # already a group leader: its pid is its group
        os.setsid()
    entry = workers_folder(lock_path) / str(os.getpid())
    entry.parent.mkdir(exist_ok=True)
    entry.touch()
    atexit.register(entry.unlink, missing_ok=True)
    # ``timeout``'s SIGTERM ends the process through atexit too: a stale entry would have a
    # later holder stop whatever process group reuses the pid.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


def holds_file(lock_path: str) -> Path:
    """Every hold of the timing lock, ``pid enter exit`` (epoch seconds), one per line."""
    return Path(lock_path).with_name("holds")


def signal_workers(lock_path: str, signum: int, exclude: int | None = None) -> list[int]:
    """Send ``signum`` to every registered worker's process group but ``exclude``; the pids
    signalled."""
    sent = []
    folder = workers_folder(lock_path)
    for entry in folder.iterdir() if folder.is_dir() else ():
        pid = int(entry.name)
        if pid == exclude:
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signum)
            sent.append(pid)
    return sent


class TimingLock:
    """``--jobs``: the machine-wide exclusive lock every timed measurement runs under
    (``fcntl.flock`` on a file in the run's temporary folder), so that no two workers time at
    once; without a path (one worker) it does nothing. While it is held, every other worker
    is paused (``SIGSTOP`` to its process group, ``SIGCONT`` after), so that the timed steps
    have the machine to themselves: no compile competes for cores, memory bandwidth or the
    GPU. Each hold is appended to :func:`holds_file`, from which a worker subtracts the time
    it was paused from its compile times (:meth:`paused_s`). Waiting for the lock does not
    count against the backend's ``--timeout`` (the alarm is paused), and ``on_wait``/
    ``on_held`` tell the parent, whose watchdog then does not take a waiting worker for a
    hung one."""

    def __init__(
        self,
        path: str | None = None,
        on_wait: Callable[[], None] | None = None,
        on_held: Callable[[], None] | None = None,
        pause_others: bool = True,
    ) -> None:
        self.path, self.on_wait, self.on_held = path, on_wait, on_held
        self.pause_others = pause_others
        self.waited_s: float | None = None
        """Seconds the last hold waited for the lock (None: no lock)."""

    def paused_s(self, start: float, end: float, pid: int | None = None) -> float:
        """Seconds between the epoch times ``start`` and ``end`` during which another worker
        held the lock (this worker, or worker ``pid``, was paused then)."""
        if self.path is None:
            return 0.0
        try:
            lines = holds_file(self.path).read_text().splitlines()
        except OSError:
            return 0.0
        me, total = pid or os.getpid(), 0.0
        for line in lines:
            holder, enter, leave = line.split()
            if int(holder) != me:
                total += max(0.0, min(end, float(leave)) - max(start, float(enter)))
        return total

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        if self.path is None:
            yield
            return
        with open(self.path, "a") as lock_file:
            remaining = signal.alarm(0) if hasattr(signal, "SIGALRM") else 0
            if self.on_wait is not None:
                self.on_wait()
            start = time.perf_counter()
            fcntl.flock(lock_file, fcntl.LOCK_EX)
            self.waited_s = time.perf_counter() - start
            if remaining:
                signal.alarm(remaining)
            if self.on_held is not None:
                self.on_held()
            enter = time.time()
            paused = []
            try:
                if self.pause_others:
                    paused = signal_workers(self.path, signal.SIGSTOP, exclude=os.getpid())
                    time.sleep(SETTLE_S)
                yield
            finally:
                for pid in paused:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(pid, signal.SIGCONT)
                line = f"{os.getpid()} {enter!r} {time.time()!r}\n"
                with open(holds_file(self.path), "a") as holds:
                    holds.write(line)
                if os.environ.get(TRACE):
                    with open(os.environ[TRACE], "a") as trace:
                        trace.write(line)
                fcntl.flock(lock_file, fcntl.LOCK_UN)


_CACHE_ROOT = Path(tempfile.mkdtemp(prefix="kiln-dashboard-"))


def fresh_caches(label: str) -> None:
    """Point kiln's, Inductor's and Triton's on-disk caches at new empty folders, so that
    the next compile is cold (in-process caches of identical kernels may still hit)."""
    folder = Path(tempfile.mkdtemp(prefix=label.replace("/", "_") + "-", dir=_CACHE_ROOT))
    for var, sub in (
        ("KILN_CACHE_DIR", "kiln"),
        ("TORCHINDUCTOR_CACHE_DIR", "inductor"),
        ("TRITON_CACHE_DIR", "triton"),
    ):
        path = folder / sub
        path.mkdir(mode=0o700)
        os.environ[var] = str(path)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


# -- compiling -----------------------------------------------------------------------------


def compile_with(backend: str, model: nn.Module, dynamic: bool = False) -> Callable[..., Any]:
    """``model`` compiled by ``backend`` (``dynamic``: ``torch.compile(dynamic=True)``;
    otherwise Dynamo's default, static shapes first)."""
    if backend == "eager":
        return model
    if backend in ("inductor", "inductor-ro"):
        mode = "reduce-overhead" if backend == "inductor-ro" else None
        return torch.compile(model, backend="inductor", mode=mode, dynamic=dynamic or None)
    if backend in ("kiln", "kiln-static", "kiln-cg", "kiln-at", "kiln-cublas"):
        from kiln.frontends.dynamo import kiln_backend

        # kiln-static: Dynamo's default in a --dynamic task too, timed beside kiln's
        # dynamic=True compile (issue 21: dynamic within 1.1x of static).
        dynamic = dynamic and backend != "kiln-static"
        options: dict[str, Any] = {"verbose": False}
        if backend == "kiln-cg":
            options["cuda_graphs"] = True
        if backend == "kiln-at":
            options["autotune"] = True
        if backend == "kiln-cublas":
            from kiln.compile_options import DEFAULT_PIPELINE

            # every product on cuBLAS: what the default's dot kernels (bfloat16/float16
            # products with their epilogues, docs/benchmarks/dot-kernels.md) are judged by
            options["pipeline"] = DEFAULT_PIPELINE.replace("dot-kernels", "dot-kernels{mode=none}")
        return torch.compile(model, backend=kiln_backend, options=options, dynamic=dynamic or None)
    raise ValueError(f"unknown backend {backend!r}; known: {', '.join(BACKENDS)}")


def inductor_launches(code: str) -> int:
    """Kernel launches per call in one Inductor output module (benchmarks/suite.py)."""
    from suite import inductor_launches as count

    return count(code)


# -- outputs and errors ---------------------------------------------------------------------


def flatten(out: Any) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, tuple | list):
        return [t for o in out for t in flatten(o)]
    if isinstance(out, dict):
        return [t for o in out.values() for t in flatten(o)]
    return []


SCALE_FLOOR = 1e-3
"""A tensor's error is relative to its largest magnitude, but to no less than this fraction of
the largest over all compared tensors: a gradient that is zero in exact arithmetic (an
attention key bias's: softmax ignores a constant added to every score) is rounding noise,
and relative to itself any two computations of it differ by 100%."""


def rel_errors(outs: Sequence[torch.Tensor], refs: Sequence[torch.Tensor]) -> list[float]:
    """Per tensor: max |out - ref| / max |ref| (floored, see :data:`SCALE_FLOOR`; inf on NaN
    or a shape mismatch); ``[inf]`` when the counts differ."""
    if len(outs) != len(refs):
        return [math.inf]
    pairs: list[tuple[float, float] | None] = []
    for o, r in zip(outs, refs, strict=True):
        if o.shape != r.shape:
            pairs.append(None)
        elif r.numel():
            o64, r64 = o.detach().double(), r.detach().double()
            pairs.append(((o64 - r64).abs().max().item(), r64.abs().max().item()))
        else:
            pairs.append((0.0, 0.0))
    floor = SCALE_FLOOR * max((p[1] for p in pairs if p is not None), default=0.0)
    errors = []
    for pair in pairs:
        if pair is None or math.isnan(pair[0]):
            errors.append(math.inf)
            continue
        diff, scale = pair[0], max(pair[1], floor)
        errors.append(diff / scale if scale > 0 else (0.0 if diff < 1e-6 else math.inf))
    return errors


def rel_error(outs: Sequence[torch.Tensor], refs: Sequence[torch.Tensor]) -> float:
    """The worst of :func:`rel_errors`."""
    return max(rel_errors(outs, refs), default=0.0)


def clone_all(xs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    # Cloned at once: CUDA-graph backends overwrite their outputs on the next replay.
    return [x.detach().clone() for x in xs]


# -- measurements --------------------------------------------------------------------------


def median_ms(run: Callable[[], Any], device: torch.device, iters: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        run()
    sync(device)
    samples = []
    for _ in range(iters):
        start = time.perf_counter()
        run()
        sync(device)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def paired_ms(
    run: Callable[[], Any],
    baseline: Callable[[], Any],
    device: torch.device,
    iters: int,
    rounds: int = 5,
    warmup: int = 3,
    min_burst_s: float = 0.05,
) -> tuple[float, float]:
    """Median ms per call of ``run`` and of ``baseline`` (eager), timed in alternating
    bursts (``rounds`` of each): a machine whose speed drifts over minutes (a shared VM,
    clocks) slows both alike, so their ratio holds where two separate medians do not.
    A burst is ``iters / rounds`` calls, or more where that would take less than
    ``min_burst_s`` (a 1-ms language model at ``--iters 10`` was timed over 2 calls a
    burst, and its rows swung 0.86-1.16x between runs of the same code)."""
    times = interleaved_ms(
        {"baseline": baseline, "run": run}, device, iters, rounds, warmup, min_burst_s
    )
    return times["run"], times["baseline"]


def interleaved_ms(
    runs: dict[str, Callable[[], Any]],
    device: torch.device,
    iters: int,
    rounds: int = 7,
    warmup: int = 2,
    min_burst_s: float = 0.05,
) -> dict[str, float]:
    """Median ms per call of every function of ``runs``, timed in one window: ``rounds``
    rounds, each a burst of every function in turn, in ``runs``' order (``paired_ms`` is
    the case of one backend and eager; bursts sized as it says). Two compilers' rows timed
    this way see the same machine: on a VM whose speed swings by 20-30 % over seconds,
    separate windows (each paired with eager) left ~1-ms rows anywhere between 0.9 and
    1.1 of a tie (docs/benchmarks/dashboard-cpu-infer-s32.md)."""
    slowest = 0.0
    for fn in runs.values():
        for _ in range(warmup):
            fn()
        sync(device)
        start = time.perf_counter()
        fn()
        sync(device)
        slowest = max(slowest, time.perf_counter() - start)
    burst = max(2, -(-iters // rounds), math.ceil(min_burst_s / max(slowest, 1e-6)))
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, fn in runs.items():
            for _ in range(burst):
                start = time.perf_counter()
                fn()
                sync(device)
                samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(times) * 1000 for name, times in samples.items()}


def peak_mb(run: Callable[[], Any], device: torch.device) -> float:
    """Memory one step allocates beyond what was live before it, at its peak."""
    if device.type == "cuda":
        sync(device)
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        run()
        sync(device)
        return (torch.cuda.max_memory_allocated() - before) / 2**20
    from torch._C._autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        run()
    # Every allocation and free, in time order, from the profiler's raw "[memory]" records:
    # prof.events() charges an op its allocations net of its frees, which hides the peak
    # inside a compiled region (one op to the profiler: "Torch-Compiled Region",
    # "CompiledFunction").
    results = prof.profiler.kineto_results if prof.profiler is not None else None
    records = sorted(
        (event.start_ns(), event.nbytes())  # pyright: ignore[reportAttributeAccessIssue]
        for event in (results.events() if results is not None else [])
        if event.name() == "[memory]" and event.device_type() == DeviceType.CPU
    )
    live = top = 0
    for _, size in records:
        live += size
        top = max(top, live)
    return top / 2**20


TOP_KERNELS = 30
"""Kernels a CUDA row keeps by name (``Row.top_kernels``)."""


def profile_kernels(
    run: Callable[[], Any], steps: int = 5, rounds: int = 2
) -> Callable[[], tuple[float, float, list[tuple[str, float, float]]]]:
    """CUDA: profiles ``rounds`` times ``steps`` runs; returns what sums the device's kernels
    (kernels, copies, memsets) into (kernel ms per step, kernels per step, the
    :data:`TOP_KERNELS` costliest by name as ``(name, us per step, launches per step)``) for
    the round of least kernel time. Another process's kernels on the GPU (a worker the lock
    paused still drains what it queued; a compile's benchmarking) only ever lengthen the
    kernels they overlap, by 2x for GPT-2's attention backward on an H100: the quietest round
    is the estimate. Summing parses every profiler event in Python (seconds for a training
    step's thousands): call it after releasing the timing lock, which only the runs need."""
    from torch.profiler import ProfilerActivity, profile

    profiles = []
    for _ in range(rounds):
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(steps):
                run()
            torch.cuda.synchronize()
        profiles.append(prof)

    def round_totals(prof: Any) -> dict[str, list[float]]:
        by_name: dict[str, list[float]] = {}
        for event in prof.events() or []:
            if getattr(event.device_type, "name", "") == "CUDA":
                entry = by_name.setdefault(event.name, [0.0, 0.0])
                entry[0] += event.time_range.elapsed_us()
                entry[1] += 1
        return by_name

    def totals() -> tuple[float, float, list[tuple[str, float, float]]]:
        by_name = min(
            (round_totals(prof) for prof in profiles),
            key=lambda kernels: sum(us for us, _ in kernels.values()),
        )
        total_us = sum(us for us, _ in by_name.values())
        count = sum(n for _, n in by_name.values())
        top = sorted(by_name.items(), key=lambda kv: -kv[1][0])[:TOP_KERNELS]
        kept = [(name[:160], round(us / steps, 2), n / steps) for name, (us, n) in top]
        return total_us / 1000 / steps, count / steps, kept

    return totals


def describe(e: BaseException) -> str:
    """The exception's type and first line, and its root cause's (Dynamo wraps a backend's
    error as ``BackendCompilerFailed: backend='...' raised:`` with the cause below)."""
    root = e
    while True:
        inner = getattr(root, "inner_exception", None) or root.__cause__
        if not isinstance(inner, BaseException) or inner is root:
            break
        root = inner

    def first(x: BaseException) -> str:
        lines = [line for line in str(x).strip().splitlines() if line.strip()]
        if isinstance(x, type(e)) and x is e and len(lines) > 1 and lines[0].endswith(":"):
            return lines[1].strip()[:300]
        return lines[0].strip()[:300] if lines else ""

    text = f"{type(e).__name__}: {first(e)}"
    if root is not e:
        text += f" <- {type(root).__name__}: {first(root)}"
    return text


def raised_at(e: BaseException, frames: int = 10) -> str:
    """Where the root cause of ``e`` (see :func:`describe`) was raised: its innermost
    ``frames`` frames as ``file:line function``, outermost first, so that a failure row
    says where without a rerun."""
    root = e
    while isinstance(
        inner := getattr(root, "inner_exception", None) or root.__cause__, BaseException
    ):
        if inner is root:
            break
        root = inner
    stack = traceback.extract_tb(root.__traceback__)[-frames:]
    return " > ".join(f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in stack)

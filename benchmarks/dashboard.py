"""The benchmark dashboard: eager vs TorchInductor vs kiln on real architectures.

Models come from benchmarks/zoo/ (torchvision, timm, transformers, built offline from
configs with random weights; plus the hand-written benchmarks/models.py). Needs the
``bench`` extra (``pip install -e .[bench]``). Every (model, size, mode, dtype) runs every
backend in this process; a failure is a row with its reason, never a crash of the run.

    python benchmarks/dashboard.py --json docs/benchmarks/dashboard-cpu.json
    python benchmarks/dashboard.py --models hf_gpt2,tv_resnet18 --modes infer --iters 2
    python benchmarks/dashboard.py --check-only --dtypes float32   # correctness sweep, no timing
    python benchmarks/dashboard.py --device cuda --scaling --layers 1,4,16,48 --no-zoo
    python benchmarks/dashboard.py --render-only --merge a.json b.json --json all.json \\
        --markdown docs/benchmarks/dashboard-h200.md

Backends: ``eager``, ``inductor`` (default mode), ``inductor-ro`` (``mode="reduce-overhead"``,
CUDA only), ``kiln`` (default options), ``kiln-cg`` (``options={"cuda_graphs": True}``, CUDA
only). Modes: ``infer`` (forward under no_grad, eval mode) and ``train`` (train mode,
forward + backward of the compiled model with a fixed random output gradient; the AdamW
step is timed separately, in eager, on the eager row). Dtypes: float32, bfloat16, float16
(CUDA only).

Per row (see docs/benchmarks/README of the rendered dashboard for the definitions):
status and reason; the error against eager (max abs difference over outputs and gradients,
relative to each reference tensor's largest magnitude) and, where that exceeds the dtype's
bound, against a float64 run of the same model (passing when the backend's float64 error is
at most 3x eager's own plus a floor); median step ms over ``--iters``; cold compile time
(first call, with fresh kiln/Inductor/Triton cache directories, minus one eager step) and warm
compile time (after ``torch._dynamo.reset()``, caches kept); the step's peak memory beyond
what was allocated before it (CUDA: ``max_memory_allocated``; CPU: from the profiler's
allocation events); kernel launches per step (CPU: kiln's ``kernel.launch`` ops, Inductor's
kernel calls in its generated ``call()``; CUDA: device kernels the profiler saw, any
backend) and, on CUDA, the summed kernel time per step from ``torch.profiler``.

Results are merged into ``--json`` after every task (``--resume`` skips tasks already
there), so a long run can be split over several invocations and rendered once.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import gc
import json
import math
import os
import platform
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))

from zoo import SIZES, ModelSpec, registry

BACKENDS = ("eager", "inductor", "inductor-ro", "kiln", "kiln-cg")
CUDA_ONLY = {"inductor-ro", "kiln-cg"}
MODES = ("infer", "train")
DTYPES = ("float32", "bfloat16", "float16")

BOUND = {"float32": 2e-3, "bfloat16": 3e-2, "float16": 3e-2}
"""Relative error against eager (same dtype) below which a row passes outright."""
FP64_MULTIPLIER = 3.0
FP64_FLOOR = {"float32": 1e-4, "bfloat16": 1e-2, "float16": 2e-3}
"""Otherwise: error against float64 at most 3x eager's own error plus this floor."""


@dataclass
class Row:
    model: str
    source: str
    family: str
    size: str
    mode: str
    dtype: str
    backend: str
    device: str
    status: str = "pass"
    """pass, fail (with ``reason``)."""
    reason: str | None = None
    ms: float | None = None
    opt_ms: float | None = None
    """train, eager row: one AdamW step (eager, foreach)."""
    cold_compile_s: float | None = None
    warm_compile_s: float | None = None
    peak_mb: float | None = None
    launches: float | None = None
    """Kernel launches per step (see the module docstring for how, per device)."""
    kernel_ms: float | None = None
    """CUDA: summed device time of the kernels of one step (torch.profiler)."""
    graphs: int | None = None
    externs: int | None = None
    """kiln: ATen fallback calls per step."""
    err_eager: float | None = None
    err_fp64: float | None = None
    eager_err_fp64: float | None = None
    notes: str | None = None
    """Measurements that failed on a passing row (memory, profiler, optimizer)."""

    def key(self) -> tuple[str, ...]:
        return (self.model, self.size, self.mode, self.dtype, self.backend)


def row_key(row: dict[str, Any]) -> tuple[str, ...]:
    return (row["model"], row["size"], row["mode"], row["dtype"], row["backend"])


# -- timeouts, caches, synchronization -----------------------------------------------------


class TaskTimeout(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    """Raise :class:`TaskTimeout` in this (main) thread after ``seconds`` (0: no limit)."""
    if seconds <= 0 or not hasattr(signal, "SIGALRM"):
        yield
        return

    def expire(_signum: int, _frame: Any) -> None:
        raise TaskTimeout(f"timed out after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


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


def compile_with(backend: str, model: nn.Module) -> Callable[..., Any]:
    if backend == "eager":
        return model
    if backend in ("inductor", "inductor-ro"):
        mode = "reduce-overhead" if backend == "inductor-ro" else None
        return torch.compile(model, backend="inductor", mode=mode)
    if backend in ("kiln", "kiln-cg"):
        from kiln.frontends.dynamo import kiln_backend

        options: dict[str, Any] = {"verbose": False}
        if backend == "kiln-cg":
            options["cuda_graphs"] = True
        return torch.compile(model, backend=kiln_backend, options=options)
    raise ValueError(f"unknown backend {backend!r}; known: {', '.join(BACKENDS)}")


def inductor_launches(code: str) -> int:
    """Kernel launches per call in one Inductor output module (benchmarks/suite.py)."""
    from suite import inductor_launches as count

    return count(code)


# -- one step: inference or forward + backward ---------------------------------------------


def _flat(out: Any) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, tuple | list):
        return [t for o in out for t in _flat(o)]
    if isinstance(out, dict):
        return [t for o in out.values() for t in _flat(o)]
    return []


@dataclass
class Task:
    """One (model, size, mode, dtype) on a device: the inputs and the step to run."""

    spec: ModelSpec
    size: str
    mode: str
    dtype: str
    device: torch.device
    base: nn.Module
    base_inputs: tuple[torch.Tensor, ...]
    grads: dict[tuple[int, ...], torch.Tensor] = field(default_factory=dict)

    @property
    def torch_dtype(self) -> torch.dtype:
        return getattr(torch, self.dtype)

    def instance(
        self, dtype: torch.dtype | None = None
    ) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
        """A fresh copy of the model and inputs on the device in ``dtype``."""
        dtype = dtype or self.torch_dtype
        model = copy.deepcopy(self.base).to(device=self.device, dtype=dtype)
        model.train(self.mode == "train")
        train_inputs = self.mode == "train" and not any(p.requires_grad for p in model.parameters())
        inputs = []
        for x in self.base_inputs:
            x = x.to(self.device, dtype=dtype) if x.is_floating_point() else x.to(self.device)
            if train_inputs and x.is_floating_point():
                x.requires_grad_(True)  # a model without parameters: train its inputs
            inputs.append(x)
        return model, tuple(inputs)

    def output_grad(self, out: torch.Tensor) -> torch.Tensor:
        """The fixed random gradient of one output (same values in every dtype)."""
        shape = tuple(out.shape)
        if shape not in self.grads:
            gen = torch.Generator().manual_seed(7)
            self.grads[shape] = torch.randn(shape, generator=gen).to(self.device)
        return self.grads[shape].to(out.dtype)

    def step(
        self,
        fn: Callable[..., Any],
        model: nn.Module,
        inputs: tuple[torch.Tensor, ...],
        before: Callable[[], None] | None = None,
    ) -> list[torch.Tensor]:
        """Run one step; return the outputs (and, training, the gradients) to compare."""
        if before is not None:
            before()
        if self.mode == "infer":
            with torch.no_grad():
                return _flat(fn(*inputs))
        model.zero_grad(set_to_none=True)
        for x in inputs:
            x.grad = None
        outs = [o for o in _flat(fn(*inputs)) if o.requires_grad]
        torch.autograd.backward(outs, [self.output_grad(o) for o in outs])
        params = [p for p in model.parameters() if p.requires_grad]
        leaves = [x for x in inputs if x.requires_grad]
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params + leaves]
        return [o.detach() for o in outs] + grads


SCALE_FLOOR = 1e-3
"""A tensor's error is relative to its largest magnitude, but to no less than this fraction of
the largest over all compared tensors: a gradient that is zero in exact arithmetic (an
attention key bias's: softmax ignores a constant added to every score) is rounding noise,
and relative to itself any two computations of it differ by 100%."""


def rel_error(outs: Sequence[torch.Tensor], refs: Sequence[torch.Tensor]) -> float:
    """Worst over tensors of max |out - ref| / max |ref| (floored, see :data:`SCALE_FLOOR`;
    inf on NaN or a shape mismatch)."""
    if len(outs) != len(refs):
        return math.inf
    pairs = []
    for o, r in zip(outs, refs, strict=True):
        if o.shape != r.shape:
            return math.inf
        if r.numel():
            o64, r64 = o.detach().double(), r.detach().double()
            pairs.append(((o64 - r64).abs().max().item(), r64.abs().max().item()))
    floor = SCALE_FLOOR * max((scale for _, scale in pairs), default=0.0)
    worst = 0.0
    for diff, scale in pairs:
        if math.isnan(diff):
            return math.inf
        scale = max(scale, floor)
        worst = max(worst, diff / scale if scale > 0 else (0.0 if diff < 1e-6 else math.inf))
    return worst


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


def peak_mb(run: Callable[[], Any], device: torch.device) -> float:
    """Memory one step allocates beyond what was live before it, at its peak."""
    if device.type == "cuda":
        sync(device)
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        run()
        sync(device)
        return (torch.cuda.max_memory_allocated() - before) / 2**20
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        run()
    # Allocations inside an op are charged to the op (its self usage), frees outside any op
    # to "[memory]" events; ordered by start time, their running sum peaks with the step.
    points = []
    for event in prof.events() or []:
        usage = event.cpu_memory_usage if event.name == "[memory]" else event.self_cpu_memory_usage
        if usage:
            points.append((event.time_range.start, usage))
    live = top = 0
    for _, usage in sorted(points):
        live += usage
        top = max(top, live)
    return top / 2**20


def profile_kernels(run: Callable[[], Any], steps: int = 5) -> tuple[float, float]:
    """CUDA: (kernel ms per step, kernels per step) summed over the device's kernels."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            run()
        torch.cuda.synchronize()
    total_us, count = 0.0, 0
    for event in prof.events() or []:
        if getattr(event.device_type, "name", "") == "CUDA":  # kernels, copies, memsets
            total_us += event.time_range.elapsed_us()
            count += 1
    return total_us / 1000 / steps, count / steps


def optimizer_ms(task: Task, iters: int) -> float:
    """One eager AdamW step (foreach) over the model's gradients."""
    model, inputs = task.instance()
    task.step(model, model, inputs)
    params = [p for p in model.parameters() if p.requires_grad and p.grad is not None]
    if not params:
        return 0.0
    opt = torch.optim.AdamW(params, lr=1e-4, foreach=True)
    return median_ms(opt.step, task.device, iters)


# -- one backend on one task ---------------------------------------------------------------


@dataclass
class Reference:
    eager: list[torch.Tensor]
    eager_first_s: float
    fp64: list[torch.Tensor] | None = None
    fp64_error: str | None = None


def fp64_reference(task: Task, ref: Reference) -> list[torch.Tensor] | None:
    if ref.fp64 is None and ref.fp64_error is None:
        try:
            model, inputs = task.instance(torch.float64)
            ref.fp64 = clone_all(task.step(model, model, inputs))
        except Exception as e:  # a model that has no float64 path: say so in the row
            ref.fp64_error = f"float64 reference failed: {_reason(e)}"
    return ref.fp64


def judge(row: Row, task: Task, out: list[torch.Tensor], ref: Reference) -> None:
    row.err_eager = rel_error(out, ref.eager)
    if row.err_eager <= BOUND[task.dtype]:
        return
    fp64 = fp64_reference(task, ref)
    if fp64 is None:
        row.status, row.reason = "fail", f"error {row.err_eager:.1e} vs eager; {ref.fp64_error}"
        return
    row.err_fp64 = rel_error(out, fp64)
    row.eager_err_fp64 = rel_error(ref.eager, fp64)
    if row.err_fp64 <= FP64_MULTIPLIER * row.eager_err_fp64 + FP64_FLOOR[task.dtype]:
        return
    row.status = "fail"
    row.reason = (
        f"accuracy: {row.err_eager:.1e} vs eager; {row.err_fp64:.1e} vs float64 "
        f"(eager's {row.eager_err_fp64:.1e})"
    )


def _reason(e: BaseException) -> str:
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


def run_backend(
    task: Task, backend: str, ref: Reference, args: argparse.Namespace, eager_ms: float | None
) -> Row:
    spec = task.spec
    row = Row(
        spec.name,
        spec.source,
        spec.family,
        task.size,
        task.mode,
        task.dtype,
        backend,
        str(task.device),
    )
    device = task.device
    model, inputs = task.instance()
    from kiln.compiler import compile_history, reset_compile_history

    before = torch.compiler.cudagraph_mark_step_begin if backend == "inductor-ro" else None
    eager_s = (eager_ms or ref.eager_first_s * 1000) / 1000

    def first_call(fn: Callable[..., Any]) -> tuple[list[torch.Tensor], float]:
        start = time.perf_counter()
        out = clone_all(task.step(fn, model, inputs, before))
        sync(device)
        return out, time.perf_counter() - start

    try:
        with time_limit(args.timeout):
            torch._dynamo.reset()
            fresh_caches(f"{spec.name}-{backend}")
            if backend.startswith("kiln"):
                reset_compile_history()
            fn = compile_with(backend, model)
            if backend.startswith("inductor") and device.type == "cpu":
                from torch._inductor.utils import run_and_get_code

                (out, first_s), sources = run_and_get_code(first_call, fn)
                row.launches = sum(inductor_launches(code) for code in sources)
                row.graphs = len(sources)
            else:
                out, first_s = first_call(fn)
            if backend != "eager":
                row.cold_compile_s = max(first_s - eager_s, 0.0)
            if backend.startswith("kiln"):
                history = compile_history()
                row.graphs = len(history)
                row.externs = sum(sum(s.externs.values()) for s in history)
                if device.type == "cpu":
                    row.launches = sum(s.launches for s in history)
            if backend != "eager":
                judge(row, task, out, ref)
            if args.check_only or row.status == "fail":
                return row
            if backend != "eager" and not args.no_warm:
                del fn
                torch._dynamo.reset()
                fn = compile_with(backend, model)
                _, warm_s = first_call(fn)
                row.warm_compile_s = max(warm_s - eager_s, 0.0)

            def run() -> Any:
                return task.step(fn, model, inputs, before)

            row.ms = median_ms(run, device, args.iters)
            # Secondary measurements: a failure there is a note, the row still passes.
            notes = []
            try:
                row.peak_mb = peak_mb(run, device)
            except TaskTimeout:
                raise
            except Exception as e:
                notes.append(f"peak memory: {_reason(e)}")
            if device.type == "cuda":
                try:
                    row.kernel_ms, row.launches = profile_kernels(run)
                except TaskTimeout:
                    raise
                except Exception as e:
                    notes.append(f"profiler: {_reason(e)}")
            if backend == "eager" and task.mode == "train":
                try:
                    row.opt_ms = optimizer_ms(task, args.iters)
                except TaskTimeout:
                    raise
                except Exception as e:
                    notes.append(f"optimizer: {_reason(e)}")
            row.notes = "; ".join(notes) or None
    except Exception as e:  # a failure is a row, never a crash of the run
        row.status, row.reason = "fail", _reason(e)
    return row


def run_task(task: Task, backends: Sequence[str], args: argparse.Namespace) -> list[Row]:
    """Eager first (the reference and the baseline), then every other backend."""
    rows: list[Row] = []
    try:
        with time_limit(args.timeout):
            model, inputs = task.instance()
            sync(task.device)
            start = time.perf_counter()
            eager = clone_all(task.step(model, model, inputs))
            sync(task.device)
            ref = Reference(eager, time.perf_counter() - start)
            del model, inputs
        if not all(torch.isfinite(t).all() for t in eager):
            raise ValueError(f"eager {task.dtype} output or gradient is not finite")
    except Exception as e:
        reason = f"eager reference: {_reason(e)}"
        spec = task.spec
        return [
            Row(
                spec.name,
                spec.source,
                spec.family,
                task.size,
                task.mode,
                task.dtype,
                b,
                str(task.device),
                "fail",
                reason,
            )
            for b in backends
        ]
    eager_ms = None
    for backend in backends:
        row = run_backend(task, backend, ref, args, eager_ms)
        gc.collect()  # the backend's model copy and compiled code, before the next one
        if task.device.type == "cuda":
            torch.cuda.empty_cache()
        if backend == "eager":
            eager_ms = row.ms
        rows.append(row)
    return rows


# -- compile-time scaling ------------------------------------------------------------------


def scaling_child(backend: str, layers: int, device_name: str) -> None:
    """In a fresh process: cold compile time of GPT-2 (width 128) with ``layers`` layers."""
    from zoo.language import gpt2_layers

    device = torch.device(device_name)
    fresh_caches(f"scaling-{backend}-{layers}")
    model, (ids,) = gpt2_layers(layers)
    model, ids = model.to(device), ids.to(device)
    result: dict[str, Any] = {"backend": backend, "layers": layers}
    try:
        with torch.no_grad():
            model(ids)
            sync(device)
            start = time.perf_counter()
            model(ids)
            sync(device)
            eager_s = time.perf_counter() - start
            fn = compile_with(backend, model)
            start = time.perf_counter()
            fn(ids)
            sync(device)
            result["compile_s"] = max(time.perf_counter() - start - eager_s, 0.0)
    except Exception as e:
        result["error"] = _reason(e)
    print("SCALING " + json.dumps(result), flush=True)


def run_scaling(
    backends: Sequence[str], layers: Sequence[int], device: str, timeout: int
) -> list[dict[str, Any]]:
    results = []
    for n in layers:
        for backend in backends:
            command = [
                sys.executable,
                str(Path(__file__).resolve()),
                "--scaling-child",
                f"{backend}:{n}",
                "--device",
                device,
            ]
            print(f"compile-time scaling: {backend}, {n} layers ...", file=sys.stderr, flush=True)
            try:
                proc = subprocess.run(
                    command, capture_output=True, text=True, timeout=timeout or None, check=False
                )
                line = next((x for x in proc.stdout.splitlines() if x.startswith("SCALING ")), None)
                if line is None:
                    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
                    result = {
                        "backend": backend,
                        "layers": n,
                        "error": f"exit {proc.returncode}: {tail[:300]}",
                    }
                else:
                    result = json.loads(line.removeprefix("SCALING "))
            except subprocess.TimeoutExpired:
                result = {"backend": backend, "layers": n, "error": f"timed out after {timeout} s"}
            result["device"] = device
            print(f"  -> {result}", file=sys.stderr, flush=True)
            results.append(result)
    return results


# -- results files -------------------------------------------------------------------------


def load_results(paths: Sequence[Path]) -> dict[str, Any]:
    """Merge results files: runs concatenated; rows and scaling points, later files win."""
    merged: dict[str, Any] = {"runs": [], "rows": [], "scaling": []}
    rows: dict[tuple[str, ...], dict[str, Any]] = {}
    scaling: dict[tuple[Any, ...], dict[str, Any]] = {}
    for path in paths:
        data = json.loads(path.read_text())
        merged["runs"] += data.get("runs", [])
        for row in data.get("rows", []):
            rows[row_key(row)] = row
        for point in data.get("scaling", []):
            scaling[(point["backend"], point["layers"])] = point
    merged["rows"] = list(rows.values())
    merged["scaling"] = sorted(scaling.values(), key=lambda p: (p["backend"], p["layers"]))
    return merged


def save_results(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(path)


def _finite(row: dict[str, Any]) -> dict[str, Any]:
    # JSON has no infinity: an infinite error (NaN output, shape mismatch) is stored as null.
    return {
        k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()
    }


def machine(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name()
    name = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    return f"{name}, {torch.get_num_threads()} threads"


def commit() -> str:
    if os.environ.get("KILN_COMMIT"):
        return os.environ["KILN_COMMIT"]
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        return head + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown (set KILN_COMMIT)"


def versions() -> dict[str, str]:
    out = {"python": platform.python_version(), "torch": torch.__version__}
    for name in ("torchvision", "timm", "transformers", "triton", "xdsl"):
        with contextlib.suppress(Exception):
            from importlib.metadata import version

            out[name] = version(name)
    return out


# -- command line --------------------------------------------------------------------------


def _csv(value: str) -> list[str]:
    return [v for v in value.split(",") if v]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=(__doc__ or "").splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join((__doc__ or "").splitlines()[1:12]),
    )
    p.add_argument("--device", default="cpu")
    p.add_argument("--models", default="", help="comma-separated names (default: the whole zoo)")
    p.add_argument(
        "--sources", default="", help="only these sources (torchvision,timm,transformers,kiln)"
    )
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--dtypes", default="", help="default: float32,bfloat16 (+float16 on CUDA)")
    p.add_argument("--sizes", default="small", help="small, large or small,large")
    p.add_argument(
        "--backends", default="", help="default: eager,inductor,kiln (+ -ro/-cg on CUDA)"
    )
    p.add_argument("--iters", type=int, default=20, help="timed steps per row (median)")
    p.add_argument(
        "--timeout", type=int, default=900, help="seconds per backend per task (0: none)"
    )
    p.add_argument("--check-only", action="store_true", help="compile and compare; no timing")
    p.add_argument("--no-warm", action="store_true", help="skip the warm recompile")
    p.add_argument("--no-zoo", action="store_true", help="run no zoo tasks (e.g. only --scaling)")
    p.add_argument("--scaling", action="store_true", help="also run the compile-time scaling")
    p.add_argument("--layers", default="1,4,16,48", help="scaling: GPT-2 layer counts")
    p.add_argument("--json", type=Path, default=None, help="results file (merged into)")
    p.add_argument("--resume", action="store_true", help="skip tasks already in --json/--merge")
    p.add_argument(
        "--deadline",
        type=int,
        default=0,
        help="start no task after this many seconds (0: none); rerun with --resume for the rest",
    )
    p.add_argument("--merge", type=Path, nargs="*", default=[], help="more results files to merge")
    p.add_argument("--markdown", type=Path, default=None, help="render the dashboard here")
    p.add_argument("--render-only", action="store_true", help="render --json/--merge; run nothing")
    p.add_argument("--list", action="store_true", help="list the zoo and exit")
    p.add_argument("--scaling-child", default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def select(args: argparse.Namespace) -> list[ModelSpec]:
    zoo = registry()
    names = _csv(args.models) or list(zoo)
    unknown = [n for n in names if n not in zoo]
    if unknown:
        raise SystemExit(f"unknown model(s) {unknown}; known: {', '.join(zoo)}")
    sources = _csv(args.sources)
    return [zoo[n] for n in names if not sources or zoo[n].source in sources]


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.scaling_child:
        backend, layers = args.scaling_child.split(":")
        scaling_child(backend, int(layers), args.device)
        return 0
    from dashboard_render import render

    device = torch.device(args.device)
    cuda = device.type == "cuda"
    if args.list:
        for spec in registry().values():
            print(f"{spec.name:<28} {spec.source:<12} {spec.family}")
        return 0
    if args.render_only:
        paths = [*([args.json] if args.json and args.json.exists() else []), *args.merge]
        if not paths:
            raise SystemExit("--render-only needs --json and/or --merge files")
        data = load_results(paths)
        if args.json and args.merge:
            save_results(args.json, data)
        if args.markdown:
            render(data, args.markdown)
            print(f"wrote {args.markdown}")
        return 0

    specs = select(args)
    modes = _csv(args.modes)
    sizes = _csv(args.sizes)
    dtypes = _csv(args.dtypes) or ["float32", "bfloat16", *(["float16"] if cuda else [])]
    backends = _csv(args.backends) or [b for b in BACKENDS if cuda or b not in CUDA_ONLY]
    for values, known, what in (
        (modes, MODES, "mode"),
        (sizes, SIZES, "size"),
        (dtypes, DTYPES, "dtype"),
        (backends, BACKENDS, "backend"),
    ):
        bad = [v for v in values if v not in known]
        if bad:
            raise SystemExit(f"unknown {what}(s) {bad}; known: {', '.join(known)}")
    if not cuda:
        dtypes = [d for d in dtypes if d != "float16"]  # no float16 matmuls worth timing on CPU
        backends = [b for b in backends if b not in CUDA_ONLY]
    if "eager" not in backends:
        backends.insert(0, "eager")  # the reference and the baseline
    else:
        backends.remove("eager")
        backends.insert(0, "eager")

    paths = [*([args.json] if args.json and args.json.exists() else []), *args.merge]
    data = load_results(paths) if paths else {"runs": [], "rows": [], "scaling": []}
    run_info = {
        "commit": commit(),
        "command": "python " + " ".join(shlex.quote(a) for a in sys.argv),
        "device": device.type,
        "machine": machine(device),
        "started": f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        "check_only": args.check_only,
        "iters": args.iters,
        "versions": versions(),
    }
    data["runs"].append(run_info)
    done = {row_key(r) for r in data["rows"]}
    rows_by_key = {row_key(r): r for r in data["rows"]}

    def store(rows: Sequence[Row]) -> None:
        for r in rows:
            rows_by_key[r.key()] = _finite(asdict(r))
        data["rows"] = list(rows_by_key.values())
        if args.json:
            save_results(args.json, data)

    tasks = [
        (spec, size, mode, dtype)
        for spec in ([] if args.no_zoo else specs)
        for size in sizes
        for mode in modes
        for dtype in dtypes
        if not (args.resume and all((spec.name, size, mode, dtype, b) in done for b in backends))
    ]
    progress = _progress(len(tasks))
    failures = 0
    built: dict[tuple[str, str], Any] = {}
    started = time.monotonic()
    stopped = 0
    for spec, size, mode, dtype in tasks:
        if args.deadline and time.monotonic() - started > args.deadline:
            stopped += 1  # left for the next invocation (--resume)
            continue
        progress.set_description(f"{spec.name} {size} {mode} {dtype}")
        key = (spec.name, size)
        try:
            if key not in built:
                built.clear()
                with time_limit(args.timeout):
                    built[key] = spec.build(size)
            base, inputs = built[key]
            task = Task(spec, size, mode, dtype, device, base, inputs)
            rows = run_task(task, backends, args)
        except Exception as e:  # the model itself did not build
            rows = [
                Row(
                    spec.name,
                    spec.source,
                    spec.family,
                    size,
                    mode,
                    dtype,
                    b,
                    str(device),
                    "fail",
                    f"build: {_reason(e)}",
                )
                for b in backends
            ]
        store(rows)
        for r in rows:
            failures += r.status == "fail"
            progress.write(_line(r))
        progress.update(1)
    progress.close()
    if args.scaling:
        points = run_scaling(
            ["inductor", "kiln"], [int(n) for n in _csv(args.layers)], args.device, args.timeout
        )
        by_key = {(p["backend"], p["layers"]): p for p in data["scaling"]}
        by_key.update({(p["backend"], p["layers"]): p for p in points})
        data["scaling"] = sorted(by_key.values(), key=lambda p: (p["backend"], p["layers"]))
        if args.json:
            save_results(args.json, data)
    run_info["finished"] = f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
    if args.json:
        save_results(args.json, data)
    if args.markdown:
        render(data, args.markdown)
        print(f"wrote {args.markdown}")
    print(
        f"{len(tasks) - stopped} tasks run, {failures} failed rows"
        + (f"; {stopped} tasks left after the --deadline (rerun with --resume)" if stopped else ""),
        file=sys.stderr,
    )
    return 0


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _line(r: Row) -> str:
    text = (
        f"{r.model:<26} {r.size:<5} {r.mode:<5} {r.dtype:<8} {r.backend:<11} "
        f"{r.status:<4} ms {_fmt(r.ms, '9.3f')}  compile {_fmt(r.cold_compile_s, '6.1f')}s "
        f"err {_fmt(r.err_eager, '.1e')}"
    )
    return text + (f"  {r.reason}" if r.reason else "")


class _NoProgress:
    def set_description(self, _text: str) -> None: ...
    def update(self, _n: int) -> None: ...
    def close(self) -> None: ...
    def write(self, text: str) -> None:
        print(text, flush=True)


def _progress(total: int) -> Any:
    try:
        from tqdm import tqdm
    except ImportError:
        return _NoProgress()
    return tqdm(total=total, unit="task", dynamic_ncols=True, mininterval=5.0)


if __name__ == "__main__":
    raise SystemExit(main())

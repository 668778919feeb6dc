"""CPU latency and compile time of kiln's C++ backend against eager and TorchInductor.

    python benchmarks/cpu.py                         # kernels and models, small sizes
    python benchmarks/cpu.py --only kernels --repeat 200
    python benchmarks/cpu.py --models gpt2,llama_block --markdown docs/benchmarks-cpu.md

Two groups, measured in one process, each backend on the same inputs:

* ``kernels``: single fused kernels (pointwise chains, softmax, layer norm, row and
  column reductions, a transpose, an embedding gather, a large full reduction) at sizes
  where the kernel, not the call overhead, dominates;
* ``models``: the benchmark suite's models (``benchmarks/suite_models.py``), through
  ``torch.compile``.

Latency is the minimum over ``--repeat`` calls after warm-up (the better estimate on a
shared machine; the median is kept in the JSON-like rows too). On a busy 2-core machine
two-thread timings are dominated by the other load (an OpenMP barrier waits for a
descheduled thread); ``--threads 1 --cpu-time`` measures one thread's CPU time instead
(``time.thread_time``), which a neighbour's load barely moves:

    python benchmarks/cpu.py --only kernels --threads 1 --cpu-time --repeat 200

Compile time is the first
call minus an eager call, with both compilers' on-disk caches empty (``KILN_CACHE_DIR``
and ``TORCHINDUCTOR_CACHE_DIR`` point at fresh temporary directories, Inductor's FX graph
cache is off) so that it includes the C++ compiler for both. Outputs are checked against
eager before anything is timed.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Thread count for OpenMP (kiln's kernels, Inductor's) before anything loads libgomp.
if "--threads" in sys.argv[1:-1]:
    os.environ["OMP_NUM_THREADS"] = sys.argv[sys.argv.index("--threads") + 1]

# Cold caches for both compilers (before torch._inductor reads its configuration).
os.environ["KILN_CACHE_DIR"] = tempfile.mkdtemp(prefix="kiln-bench-cache-")
os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor-bench-cache-")
os.environ["TORCHINDUCTOR_FX_GRAPH_CACHE"] = "0"
os.environ["TORCHINDUCTOR_AUTOGRAD_CACHE"] = "0"

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))

Fn = Callable[..., Any]


def _kernels() -> dict[str, tuple[Fn, Callable[[], tuple[torch.Tensor, ...]]]]:
    r = torch.randn
    return {
        "gelu_bias_mul (4096x1024)": (
            lambda x, b, y: F.gelu(x + b) * y,
            lambda: (r(4096, 1024), r(1024), r(4096, 1024)),
        ),
        "relu_add_mul (16M)": (lambda x, y: (x.relu() + y) * 2, lambda: (r(1 << 24), r(1 << 24))),
        "softmax rows (4096x1024)": (lambda x: F.softmax(x, -1), lambda: (r(4096, 1024),)),
        "layer_norm (4096x1024)": (
            lambda x, w, b: F.layer_norm(x, (1024,), w, b),
            lambda: (r(4096, 1024), r(1024), r(1024)),
        ),
        "sum rows (4096x1024)": (lambda x: x.sum(-1), lambda: (r(4096, 1024),)),
        "sum columns (4096x1024)": (lambda x: x.sum(0), lambda: (r(4096, 1024),)),
        "sum all (16M)": (lambda x: x.sum(), lambda: (r(1 << 24),)),
        "argmax rows (4096x1024)": (lambda x: x.argmax(-1), lambda: (r(4096, 1024),)),
        "transpose add (2048x2048)": (lambda x: x.t() + x, lambda: (r(2048, 2048),)),
        "embedding (50k x 256, 8k ids)": (
            lambda w, i: F.embedding(i, w) * 2,
            lambda: (r(50000, 256), torch.randint(0, 50000, (8192,))),
        ),
        "small softmax (64x64)": (lambda x: F.softmax(x, -1), lambda: (r(64, 64),)),
    }


@dataclass
class Timing:
    name: str
    backend: str
    min_ms: float | None = None
    median_ms: float | None = None
    compile_s: float | None = None
    error: str | None = None


CLOCK: list[Callable[[], float]] = [time.perf_counter]
"""The clock latencies are read from (``--cpu-time``: the thread's CPU time)."""


def _time(fn: Callable[[], Any], repeat: int) -> tuple[float, float]:
    clock = CLOCK[0]
    for _ in range(3):
        fn()
    samples: list[float] = []
    for _ in range(repeat):
        start = clock()
        fn()
        samples.append(clock() - start)
    return min(samples) * 1000, statistics.median(samples) * 1000


def _compile(backend: str, fn: Fn) -> Fn:
    if backend == "eager":
        return fn
    torch._dynamo.reset()  # pyright: ignore[reportPrivateImportUsage]
    if backend == "kiln":
        return torch.compile(fn, backend="kiln", options={"verbose": False})
    return torch.compile(fn, backend=backend)


def measure(
    name: str, fn: Fn, inputs: tuple[Any, ...], backends: list[str], repeat: int
) -> list[Timing]:
    out: list[Timing] = []
    with torch.no_grad():
        reference = fn(*inputs)
        eager_once = _time(lambda: fn(*inputs), 3)[0] / 1000
        for backend in backends:
            timing = Timing(name, backend)
            try:
                compiled = _compile(backend, fn)
                start = time.perf_counter()
                result = compiled(*inputs)
                first = time.perf_counter() - start
                torch.testing.assert_close(result, reference, atol=1e-3, rtol=1e-3)
                if backend != "eager":
                    timing.compile_s = max(first - eager_once, 0.0)
                timing.min_ms, timing.median_ms = _time(lambda c=compiled: c(*inputs), repeat)
            except Exception as e:  # report it, keep measuring the others
                timing.error = (
                    f"{type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"
                )
            out.append(timing)
    return out


def _fmt(value: float | None, spec: str = ".3f") -> str:
    return "—" if value is None else format(value, spec)


def table(title: str, timings: list[Timing]) -> str:
    rows: dict[str, dict[str, Timing]] = {}
    for t in timings:
        rows.setdefault(t.name, {})[t.backend] = t
    lines = [
        f"### {title}",
        "",
        "| workload | eager ms | inductor ms | kiln ms | kiln speedup vs eager | vs inductor | "
        "inductor compile s | kiln compile s | notes |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    speedups: list[float] = []
    ratios: list[float] = []
    for name, by in rows.items():
        e, i, k = by.get("eager"), by.get("inductor"), by.get("kiln")
        e_ms = e.min_ms if e else None
        i_ms = i.min_ms if i else None
        k_ms = k.min_ms if k else None
        speed = e_ms / k_ms if e_ms and k_ms else None
        ratio = i_ms / k_ms if i_ms and k_ms else None
        if speed:
            speedups.append(speed)
        if ratio:
            ratios.append(ratio)
        notes = "; ".join(f"{t.backend}: {t.error}" for t in by.values() if t.error)
        lines.append(
            f"| {name} | {_fmt(e_ms)} | {_fmt(i_ms)} | {_fmt(k_ms)} | {_fmt(speed, '.2f')} | "
            f"{_fmt(ratio, '.2f')} | {_fmt(i.compile_s if i else None, '.2f')} | "
            f"{_fmt(k.compile_s if k else None, '.2f')} | {notes} |"
        )

    def geomean(xs: list[float]) -> str:
        return _fmt(math.exp(sum(map(math.log, xs)) / len(xs)), ".2f") if xs else "—"

    lines += [
        "",
        f"geomean kiln speedup over eager {geomean(speedups)}, over inductor {geomean(ratios)} "
        "(min latency; > 1 means kiln is faster)",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--only", choices=("kernels", "models"), default=None)
    parser.add_argument(
        "--kernels", default=None, help="comma-separated substrings of kernel workloads"
    )
    parser.add_argument(
        "--models", default=None, help="comma-separated suite models (default: all)"
    )
    parser.add_argument("--backends", default="eager,inductor,kiln")
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--markdown", type=Path, default=None)
    parser.add_argument(
        "--threads", type=int, default=None, help="threads for eager, Inductor and kiln"
    )
    parser.add_argument(
        "--cpu-time", action="store_true", help="time the thread's CPU time (needs --threads 1)"
    )
    args = parser.parse_args(argv)
    backends = args.backends.split(",")
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.cpu_time:
        if args.threads != 1:
            parser.error("--cpu-time measures one thread: pass --threads 1 too")
        CLOCK[0] = time.thread_time
    torch.manual_seed(0)
    clock = "thread CPU time" if args.cpu_time else "wall clock"
    sections: list[str] = [
        f"## CPU: {torch.get_num_threads()} threads, torch {torch.__version__}, float32, {clock}",
        "",
    ]
    if args.only in (None, "kernels"):
        timings: list[Timing] = []
        wanted = args.kernels.split(",") if args.kernels else None
        for name, (fn, make) in _kernels().items():
            if wanted and not any(w in name for w in wanted):
                continue
            timings += measure(name, fn, make(), backends, args.repeat)
            print(
                f"  {name}: "
                + ", ".join(f"{t.backend} {_fmt(t.min_ms)} ms" for t in timings[-len(backends) :]),
                file=sys.stderr,
            )
        sections.append(table("Kernels", timings))
    if args.only in (None, "models"):
        from suite_models import SUITE  # pyright: ignore[reportMissingImports]

        timings = []
        names = args.models.split(",") if args.models else list(SUITE)
        for name in names:
            model, inputs = SUITE[name](torch.device("cpu"), torch.float32, "small")
            timings += measure(name, model, inputs, backends, max(args.repeat // 5, 10))
            print(
                f"  {name}: "
                + ", ".join(f"{t.backend} {_fmt(t.min_ms)} ms" for t in timings[-len(backends) :]),
                file=sys.stderr,
            )
        sections.append(table("Models (benchmarks/suite_models.py, size small)", timings))
    text = "\n".join(sections)
    print(text)
    if args.markdown:
        args.markdown.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

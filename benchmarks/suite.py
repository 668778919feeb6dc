"""Eager vs TorchInductor vs kiln on the benchmark models, in one process.

    python benchmarks/suite.py                       # CPU, small sizes
    python benchmarks/suite.py --device cuda --size large --dtype float16
    python benchmarks/suite.py --models mlp,softmax --json out.json --markdown docs/benchmarks-cpu.md

For each model: compile time (first call, minus one eager call), median latency over
``--iters`` calls after warm-up, speedup over eager, kiln/Inductor ratio, peak memory
(GPU: ``torch.cuda.max_memory_allocated``; CPU: not measured) and the generated kernel
launches per call (Inductor: calls of its kernels in its wrapper's ``call()``; kiln:
``kernel.launch`` ops; a kernel launched twice counts twice; ATen calls not counted). Compiled outputs are checked against eager before timing; a mismatch or a
failure is reported in the table, never timed.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import re
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from suite_models import SUITE


@dataclass
class Result:
    model: str
    backend: str
    compile_s: float | None = None
    latency_ms: float | None = None
    peak_mb: float | None = None
    kernels: int | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def _time(fn: Callable[[], Any], device: torch.device, iters: int) -> float:
    for _ in range(3):
        fn()
    _sync(device)
    samples = []
    for _ in range(iters):
        start = time.perf_counter()
        fn()
        _sync(device)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def _compiled(backend: str, model: torch.nn.Module) -> Callable[..., Any]:
    if backend == "eager":
        return model
    torch._dynamo.reset()
    if backend == "inductor":
        import torch._inductor.config as inductor_config

        inductor_config.fx_graph_cache = False  # cold compiles, like kiln's
        return torch.compile(model, backend="inductor")
    if backend == "kiln":
        import kiln
        from kiln.compiler import reset_compile_history

        reset_compile_history()
        return kiln.compile(model, verbose=False)  # the same as backend="kiln", no install needed
    return torch.compile(model, backend=backend)


def _first_call(
    backend: str, fn: Callable[..., Any], inputs: tuple[Any, ...]
) -> tuple[Any, int | None]:
    """The first (compiling) call's output, and Inductor's kernel launches from its code."""
    if backend != "inductor":
        return fn(*inputs), None
    from torch._inductor.utils import run_and_get_code

    out, sources = run_and_get_code(fn, *inputs)
    return out, sum(inductor_launches(code) for code in sources)


def inductor_launches(code: str) -> int:
    """Kernel launches per call in one Inductor output module: calls, inside its
    ``call()``, of the kernels it defines (``name = async_compile.triton(...)`` /
    ``cpp_pybinding``), so a kernel launched twice counts twice."""
    kernels = re.findall(r"^(\w+) = async_compile\.(?:cpp_pybinding|triton)\(", code, re.MULTILINE)
    lines = code.splitlines()
    start = next((k for k, line in enumerate(lines) if line.lstrip().startswith("def call(")), None)
    if not kernels or start is None:
        return 0
    indent = len(lines[start]) - len(lines[start].lstrip())
    body: list[str] = []
    for line in lines[start + 1 :]:
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            break
        body.append(line)
    text = "\n".join(body)
    return sum(len(re.findall(rf"\b{re.escape(name)}(?:\.run)?\(", text)) for name in kernels)


def run_one(
    name: str,
    backend: str,
    device: torch.device,
    dtype: torch.dtype,
    size: str,
    iters: int,
    eager_ms: float | None,
    reference: Any,
) -> Result:
    result = Result(name, backend)
    model, inputs = SUITE[name](device, dtype, size)
    try:
        fn = _compiled(backend, model)
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats()
        with torch.no_grad():
            start = time.perf_counter()
            out, inductor_kernels = _first_call(backend, fn, inputs)
            _sync(device)
            first = time.perf_counter() - start
            if reference is not None:
                result.extra["rel_error"] = _check(out, reference, dtype)
            result.latency_ms = _time(lambda: fn(*inputs), device, iters)
        if backend != "eager":
            result.compile_s = max(first - (eager_ms or 0.0) / 1000, 0.0)
        if device.type == "cuda":
            result.peak_mb = torch.cuda.max_memory_allocated() / 2**20
        if backend == "inductor":
            result.kernels = inductor_kernels
        elif backend == "kiln":
            result.kernels = _kiln_kernels()
    except Exception as e:  # report, never crash the whole suite
        result.error = f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
    return result


def _check(out: Any, reference: Any, dtype: torch.dtype) -> float:
    """Max abs error relative to the output's magnitude; raise if above the dtype's bound.

    Elementwise ``assert_close`` tolerances do not fit whole models: a 4096-deep matmul
    accumulated in another order (or with TF32) moves single elements more than 1e-3.
    """
    bound = 3e-2 if dtype in (torch.float16, torch.bfloat16) else 2e-3
    outs = out if isinstance(out, tuple | list) else (out,)
    refs = reference if isinstance(reference, tuple | list) else (reference,)
    worst = 0.0
    for o, r in zip(outs, refs, strict=True):
        scale = r.float().abs().max().clamp_min(1e-6)
        worst = max(worst, ((o.float() - r.float()).abs().max() / scale).item())
    if not worst <= bound:  # also catches NaN
        raise AssertionError(f"relative error {worst:.2e} exceeds {bound:.0e}")
    return worst


def _kiln_kernels() -> int | None:
    """Kernel launches per call (``kernel.launch`` ops) over the graphs kiln compiled."""
    from kiln.compiler import compile_history

    history = compile_history()
    return sum(stats.launches for stats in history) if history else None


def _fmt(value: float | None, spec: str) -> str:
    return (
        "—"
        if value is None or (isinstance(value, float) and math.isnan(value))
        else format(value, spec)
    )


def markdown(results: list[Result], header: str) -> str:
    by_model: dict[str, dict[str, Result]] = {}
    for r in results:
        by_model.setdefault(r.model, {})[r.backend] = r
    lines = [
        header,
        "",
        "| model | eager ms | inductor ms | kiln ms | kiln/eager speedup | kiln/inductor | "
        "inductor compile s | kiln compile s | kernel launches (inductor / kiln) | peak MB (eager / inductor / kiln) | notes |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    speedups, ratios, compile_ratios = [], [], []
    for model, rs in by_model.items():
        e, i, k = rs.get("eager"), rs.get("inductor"), rs.get("kiln")
        e_ms = e.latency_ms if e else None
        i_ms = i.latency_ms if i and not i.error else None
        k_ms = k.latency_ms if k and not k.error else None
        speed = e_ms / k_ms if e_ms and k_ms else None
        ratio = i_ms / k_ms if i_ms and k_ms else None
        if speed:
            speedups.append(speed)
        if ratio:
            ratios.append(ratio)
        if i and k and i.compile_s and k.compile_s:
            compile_ratios.append(k.compile_s / i.compile_s)
        notes = "; ".join(f"{r.backend}: {r.error}" for r in rs.values() if r.error)
        peak = " / ".join(_fmt(r.peak_mb if r else None, ".0f") for r in (e, i, k))
        kernels = (
            f"{_fmt(float(i.kernels) if i and i.kernels is not None else None, '.0f')} / "
            f"{_fmt(float(k.kernels) if k and k.kernels is not None else None, '.0f')}"
        )
        lines.append(
            f"| {model} | {_fmt(e_ms, '.3f')} | {_fmt(i_ms, '.3f')} | {_fmt(k_ms, '.3f')} | "
            f"{_fmt(speed, '.2f')} | {_fmt(ratio, '.2f')} | {_fmt(i.compile_s if i else None, '.2f')} | "
            f"{_fmt(k.compile_s if k else None, '.2f')} | {kernels} | {peak} | {notes} |"
        )

    def geomean(xs: list[float]) -> float | None:
        return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None

    lines += [
        "",
        f"geomean kiln/eager speedup: {_fmt(geomean(speedups), '.2f')} over {len(speedups)} models; "
        f"kiln vs inductor (inductor ms / kiln ms): {_fmt(geomean(ratios), '.2f')}; "
        f"compile time kiln/inductor: {_fmt(geomean(compile_ratios), '.2f')}",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--size", choices=("small", "large"), default=None)
    parser.add_argument("--models", default=",".join(SUITE))
    parser.add_argument("--backends", default="eager,inductor,kiln")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--markdown", type=Path, default=None)
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    dtype = getattr(torch, args.dtype)
    size = args.size or ("large" if device.type == "cuda" else "small")
    backends = args.backends.split(",")
    results: list[Result] = []
    for name in args.models.split(","):
        eager_ms, reference = None, None
        for backend in backends:
            if backend == "eager" or reference is None:
                model, inputs = SUITE[name](device, dtype, size)
                with torch.no_grad():
                    reference = model(*inputs)
            r = run_one(
                name,
                backend,
                device,
                dtype,
                size,
                args.iters,
                eager_ms,
                None if backend == "eager" else reference,
            )
            if backend == "eager":
                eager_ms = r.latency_ms
            results.append(r)
            print(
                f"{name:<14} {backend:<9} latency {_fmt(r.latency_ms, '9.3f')} ms  compile "
                f"{_fmt(r.compile_s, '7.2f')} s  launches {r.kernels if r.kernels is not None else '—':>4}"
                f"{'  ERROR ' + r.error if r.error else ''}",
                flush=True,
            )
    machine = (
        torch.cuda.get_device_name()
        if device.type == "cuda"
        else f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads"
    )
    header = (
        f"## {device.type.upper()} — {machine}\n\n{datetime.now(UTC):%Y-%m-%d}, torch {torch.__version__}, "
        f"{args.dtype}, size {size}, median of {args.iters}"
    )
    table = markdown(results, header)
    print()
    print(table)
    if args.json:
        args.json.write_text(
            json.dumps({"header": header, "results": [asdict(r) for r in results]}, indent=2)
        )
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The Triton backend on a GPU: kernel bandwidth, launch overhead, model latency.

One run prints, against numbers measured in the same process:

1. the device's copy bandwidth (a large device-to-device copy, bytes read + written);
2. per kernel of memory-bound programs (pointwise, persistent/looped/split reductions,
   softmax, layer norm, a transpose): its time and achieved bandwidth (each buffer it
   touches counted once: inputs read, outputs written) as a fraction of the copy
   bandwidth, next to the same program's eager and TorchInductor times;
3. the per-launch overhead of kiln's launcher and wrapper, of Triton's ``kernel[grid]``
   and of Inductor's compiled graph, on a one-kernel program;
4. per-model latency (benchmarks/suite_models.py, "large" sizes): eager, TorchInductor and
   kiln (capture, kiln's pipeline, the Triton backend), with compile times.

    python benchmarks/gpu.py [--models mlp,gpt2] [--skip-models] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).parent))

MIN_MBYTES = 16.0
"""Kernels touching less memory are launch-bound and left out of the bandwidth table."""


def _pipeline() -> tuple[str, ...]:
    from kiln.compiler import DEFAULT_PIPELINE

    return tuple(DEFAULT_PIPELINE.split(","))


def bench(fn: Callable[[], Any], rep_ms: int = 200) -> float:
    """Median time in milliseconds (CUDA events, after warm-up)."""
    from triton.testing import do_bench

    return cast(float, do_bench(fn, warmup=25, rep=rep_ms, return_mode="median"))


def copy_bandwidth(gib: float = 1.0) -> float:
    """Device-to-device copy bandwidth in GB/s (bytes read + bytes written)."""
    n = int(gib * 2**30) // 4
    src = torch.randn(n, device="cuda")
    dst = torch.empty_like(src)
    ms = bench(lambda: dst.copy_(src))
    return 2 * n * 4 / (ms * 1e-3) / 1e9


# -- kiln ---------------------------------------------------------------------------------


def kiln_compile(
    fn: Callable[..., Any],
    inputs: Sequence[torch.Tensor],
    autotune: bool = False,
    cuda_graphs: bool = False,
) -> tuple[Any, list[Any], float]:
    """(program, its arguments, compile seconds) through capture + kiln's pipeline."""
    from kiln.backends.triton.runtime import TritonOptions
    from kiln.dialects.kernel.program_ops import find_program
    from kiln.frontends.capture import capture_make_fx
    from kiln.frontends.fx import GET_ATTR_ATTR, import_graph
    from kiln.registry import default_registry
    from kiln.targets import build_triton_program

    start = time.perf_counter()
    with torch.no_grad():
        capture = capture_make_fx(fn, *inputs)
    module = import_graph(capture.gm)
    registry = default_registry()
    ctx = registry.make_context()
    for name in _pipeline():
        registry.get_pass(name)().apply(ctx, module)
    options = TritonOptions(autotune=autotune, cuda_graphs=cuda_graphs)
    program = build_triton_program(module, options=options)
    args: list[Any] = list(capture.example_inputs)
    attrs = find_program(module).arg_attrs
    for attr in attrs.data[len(args) :] if attrs is not None else ():
        value: Any = capture.gm
        for part in attr.data[GET_ATTR_ATTR].data.split("."):  # pyright: ignore
            value = getattr(value, part)
        args.append(value.detach())
    with torch.no_grad():
        program(args)
    torch.cuda.synchronize()
    return program, args, time.perf_counter() - start


@dataclass
class KernelRow:
    program: str
    kernel: str
    kind: str
    ms: float
    mbytes: float
    gbps: float
    fraction: float


@dataclass
class ProgramRow:
    program: str
    kiln_ms: float
    eager_ms: float
    inductor_ms: float | None
    max_error: float
    kernels: list[KernelRow] = field(default_factory=list[KernelRow])


def _touched_bytes(args: Sequence[Any], n_pointers: int) -> int:
    seen: set[int] = set()
    total = 0
    for a in args[:n_pointers]:
        key = a.data_ptr()
        if key not in seen:
            seen.add(key)
            total += a.numel() * a.element_size()
    return total


def record_launches(program: Any, args: list[Any]) -> list[tuple[Any, tuple[Any, ...]]]:
    """Run ``program`` once, recording each kernel launch (runner and arguments)."""
    calls: list[tuple[Any, tuple[Any, ...]]] = []
    module = program.module
    saved: dict[str, Any] = {}
    for name, runner in program.runners.items():
        attr = f"run_{name}"
        saved[attr] = getattr(module, attr)

        def record(stream: int, *a: Any, r: Any = runner) -> None:
            calls.append((r, a))
            r(stream, *a)

        setattr(module, attr, record)
    try:
        with torch.no_grad():
            program(args)
    finally:
        for attr, value in saved.items():
            setattr(module, attr, value)
    torch.cuda.synchronize()
    return calls


def profile_kernels(name: str, program: Any, args: list[Any], copy_gbps: float) -> list[KernelRow]:
    """Time each kernel of ``program`` alone on the arguments it received."""
    rows: list[KernelRow] = []
    stream = torch.cuda.current_stream().cuda_stream
    for runner, kernel_args in record_launches(program, args):
        ms = bench(lambda r=runner, a=kernel_args: r(stream, *a))
        nbytes = _touched_bytes(kernel_args, runner.spec.n_pointers)
        gbps = nbytes / (ms * 1e-3) / 1e9
        rows.append(
            KernelRow(
                name, runner.spec.name, runner.spec.kind, ms, nbytes / 1e6, gbps, gbps / copy_gbps
            )
        )
    return rows


def inductor(fn: Callable[..., Any]) -> Callable[..., Any]:
    torch._dynamo.reset()
    return torch.compile(fn)


MEMORY_BOUND: dict[str, tuple[Callable[..., Any], Callable[[], list[torch.Tensor]]]] = {
    "add_relu_f32": (
        lambda x, y: torch.relu(x + y),
        lambda: [torch.randn(2**26, device="cuda"), torch.randn(2**26, device="cuda")],
    ),
    "gelu_bf16": (
        lambda x: F.gelu(x) * 2,
        lambda: [torch.randn(2**27, device="cuda", dtype=torch.bfloat16)],
    ),
    "bias_add_broadcast": (
        lambda x, b: x * 0.5 + b,
        lambda: [torch.randn(16384, 4096, device="cuda"), torch.randn(4096, device="cuda")],
    ),
    "sum_rows_1024": (
        lambda x: x.sum(-1),
        lambda: [torch.randn(65536, 1024, device="cuda")],
    ),
    "sum_rows_16384": (
        lambda x: x.sum(-1),
        lambda: [torch.randn(4096, 16384, device="cuda")],
    ),
    "sum_all_split": (
        lambda x: x.sum(),
        lambda: [torch.randn(2**26, device="cuda")],
    ),
    "amax_cols": (
        lambda x: x.amax(0),
        lambda: [torch.randn(16384, 4096, device="cuda")],
    ),
    "softmax_1024": (
        lambda x: torch.softmax(x, -1),
        lambda: [torch.randn(65536, 1024, device="cuda")],
    ),
    "softmax_4096": (
        lambda x: torch.softmax(x, -1),
        lambda: [torch.randn(16384, 4096, device="cuda")],
    ),
    "layer_norm_4096": (
        lambda x, w, b: F.layer_norm(x, (4096,), w, b),
        lambda: [
            torch.randn(16384, 4096, device="cuda"),
            torch.randn(4096, device="cuda"),
            torch.randn(4096, device="cuda"),
        ],
    ),
    "var_mean_2048": (
        lambda x: torch.var_mean(x, -1),
        lambda: [torch.randn(32768, 2048, device="cuda")],
    ),
    # ResNet's global average pool over NHWC activations: an outer reduction (channels
    # contiguous) with 64 x 128 outputs, each over 56 x 56 rows.
    "mean_nhwc": (
        lambda x, y: torch.relu(x + y).mean((1, 2)),
        lambda: [
            torch.randn(64, 56, 56, 128, device="cuda"),
            torch.randn(64, 56, 56, 128, device="cuda"),
        ],
    ),
    "transpose_copy": (
        lambda x: x.t().contiguous() + 1,
        lambda: [torch.randn(8192, 8192, device="cuda")],
    ),
}


def run_memory_bound(copy_gbps: float, names: Sequence[str]) -> list[ProgramRow]:
    rows: list[ProgramRow] = []
    for label in names:
        name = label.removesuffix("+autotune")
        fn, make = MEMORY_BOUND[name]
        inputs = make()
        try:
            program, args, _ = kiln_compile(fn, inputs, autotune=label.endswith("+autotune"))
            with torch.no_grad():
                expected = fn(*inputs)
                got = program(args)
            flat_expected = expected if isinstance(expected, tuple) else (expected,)
            error = max(
                float((g.float() - e.float()).abs().max())
                for g, e in zip(got, flat_expected, strict=True)
            )
            kernels = profile_kernels(label, program, args, copy_gbps)
            kiln_ms = bench(lambda p=program, a=args: p(a))
            eager_ms = bench(lambda f=fn, x=inputs: f(*x))
            try:
                compiled = inductor(fn)
                compiled(*inputs)
                inductor_ms: float | None = bench(lambda c=compiled, x=inputs: c(*x))
            except Exception as e:  # report, never stop the run
                print(f"inductor failed on {name}: {type(e).__name__}: {e}", file=sys.stderr)
                inductor_ms = None
            rows.append(ProgramRow(label, kiln_ms, eager_ms, inductor_ms, error, kernels))
            best = max((k.fraction for k in kernels), default=0.0)
            print(
                f"[gpu.py] {label}: kiln {kiln_ms:.4f} ms, eager {eager_ms:.4f}, inductor "
                f"{_f(inductor_ms, '.4f')}; best kernel {best:.0%} of copy BW",
                file=sys.stderr,
                flush=True,
            )
        except Exception as e:
            print(f"kiln failed on {label}: {type(e).__name__}: {str(e)[:300]}", file=sys.stderr)
        del inputs
        torch.cuda.empty_cache()
    return rows


# -- launch overhead ------------------------------------------------------------------------


def launch_overhead(calls: int = 3000) -> dict[str, float]:
    """Microseconds of host time per call for a one-kernel program on 1024 elements."""

    def fn(x: torch.Tensor) -> torch.Tensor:
        return x * 2 + 1

    x = torch.randn(1024, device="cuda")
    program, args, _ = kiln_compile(fn, [x])
    (runner,) = program.runners.values()
    out = torch.empty_like(x)
    stream = torch.cuda.current_stream().cuda_stream

    def per_call(call: Callable[[], Any]) -> float:
        for _ in range(50):
            call()
        torch.cuda.synchronize()
        samples = []
        for _ in range(3):
            start = time.perf_counter()
            for _ in range(calls):
                call()
            torch.cuda.synchronize()
            samples.append((time.perf_counter() - start) / calls * 1e6)
        return min(samples)

    result = {
        "kiln launcher (KernelRunner)": per_call(lambda: runner(stream, x, out)),
        "triton kernel[grid](...)": per_call(
            lambda: runner.fn[runner.grid(())](x, out, **runner.constexpr_kwargs)
        ),
        "kiln program(args) (wrapper: alloc + launch)": per_call(lambda: program(args)),
        "eager x * 2 + 1 (2 ATen kernels)": per_call(lambda: fn(x)),
    }
    try:
        from torch._inductor.compile_fx import compile_fx_inner
        from torch.fx.experimental.proxy_tensor import make_fx

        gm = make_fx(lambda t: (fn(t),))(x)  # Inductor compiles graphs that return tuples
        compiled = compile_fx_inner(gm, [x])
        compiled([x])
        result["inductor compiled graph (compile_fx_inner, wrapper: alloc + launch)"] = per_call(
            lambda: compiled([x])
        )
    except Exception as e:
        print(f"compile_fx_inner unavailable: {type(e).__name__}: {e}", file=sys.stderr)
    compiled_fn = inductor(fn)
    compiled_fn(x)
    result["inductor torch.compile(fn) (dynamo guards + wrapper)"] = per_call(
        lambda: compiled_fn(x)
    )
    return result


# -- models ------------------------------------------------------------------------------------


@dataclass
class ModelRow:
    model: str
    eager_ms: float
    inductor_ms: float | None
    kiln_ms: float | None
    inductor_compile_s: float | None
    kiln_compile_s: float | None
    kiln_kernels: int | None
    max_error: float | None
    kiln_graphs_ms: float | None = None
    note: str = ""


def run_models(names: Sequence[str], dtype: torch.dtype) -> list[ModelRow]:
    from suite_models import SUITE

    rows: list[ModelRow] = []
    device = torch.device("cuda")
    for name in names:
        model, inputs = SUITE[name](device, dtype, "large")
        with torch.no_grad():
            expected = model(*inputs)
            eager_ms = bench(lambda m=model, x=inputs: m(*x))
            row = ModelRow(name, eager_ms, None, None, None, None, None, None)
            try:
                start = time.perf_counter()
                compiled = inductor(model)
                compiled(*inputs)
                torch.cuda.synchronize()
                row.inductor_compile_s = time.perf_counter() - start
                row.inductor_ms = bench(lambda c=compiled, x=inputs: c(*x))
            except Exception as e:
                row.note += f"inductor: {type(e).__name__} "
            try:
                program, args, seconds = kiln_compile(model, inputs)
                row.kiln_compile_s = seconds
                row.kiln_kernels = len(program.runners)
                got = program(args)[0]
                row.max_error = float((got.float() - expected.float()).abs().max())
                row.kiln_ms = bench(lambda p=program, a=args: p(a))
                graphed, graph_args, _ = kiln_compile(model, inputs, cuda_graphs=True)
                graphed(graph_args)
                row.kiln_graphs_ms = bench(lambda p=graphed, a=graph_args: p(a))
            except Exception as e:
                row.note += f"kiln: {type(e).__name__}: {str(e)[:120]}"
        rows.append(row)
        print(f"[gpu.py] model {name}: {row}", file=sys.stderr, flush=True)
        del model, inputs
        torch.cuda.empty_cache()
    return rows


# -- report -----------------------------------------------------------------------------------


def _f(value: float | None, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec)


def report(
    copy_gbps: float, programs: list[ProgramRow], overhead: dict[str, float], models: list[ModelRow]
) -> str:
    lines = [
        f"# kiln Triton backend on {torch.cuda.get_device_name()} "
        f"(torch {torch.__version__}, triton {__import__('triton').__version__})",
        "",
        f"device copy bandwidth: {copy_gbps:.0f} GB/s (read + write, 1 GiB copy)",
        "",
        "## memory-bound kernels",
        "",
        "| program | kernel | kind | ms | MB | GB/s | of copy BW |",
        "|---|---|---|---|---|---|---|",
    ]
    for p in programs:
        for k in p.kernels:
            if k.mbytes < MIN_MBYTES:
                continue  # a split reduction's second stage: too small to be bandwidth-bound
            lines.append(
                f"| {p.program} | {k.kernel} | {k.kind} | {k.ms:.4f} | {k.mbytes:.0f} | {k.gbps:.0f} | {k.fraction:.0%} |"
            )
    lines += [
        "",
        "| program | kiln ms | eager ms | inductor ms | kiln vs eager | kiln vs inductor | max abs error |",
        "|---|---|---|---|---|---|---|",
    ]
    for p in programs:
        vs_inductor = None if p.inductor_ms is None else p.inductor_ms / p.kiln_ms
        lines.append(
            f"| {p.program} | {p.kiln_ms:.4f} | {p.eager_ms:.4f} | {_f(p.inductor_ms, '.4f')} | "
            f"{p.eager_ms / p.kiln_ms:.2f}x | {_f(vs_inductor, '.2f')}x | {p.max_error:.2e} |"
        )
    lines += ["", "## per-launch overhead (host microseconds per call, 1024 elements)", ""]
    lines += [f"- {k}: {v:.1f} us" for k, v in overhead.items()]
    if models:
        lines += [
            "",
            "## models (benchmarks/suite_models.py, large)",
            "",
            "| model | eager ms | inductor ms | kiln ms | kiln vs eager | kiln vs inductor | kiln + CUDA graphs ms | compile s (inductor / kiln) | kiln kernels | max abs error | note |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for m in models:
            vs_eager = None if m.kiln_ms is None else m.eager_ms / m.kiln_ms
            vs_ind = (
                None if m.kiln_ms is None or m.inductor_ms is None else m.inductor_ms / m.kiln_ms
            )
            lines.append(
                f"| {m.model} | {m.eager_ms:.3f} | {_f(m.inductor_ms)} | {_f(m.kiln_ms)} | {_f(vs_eager, '.2f')}x | "
                f"{_f(vs_ind, '.2f')}x | {_f(m.kiln_graphs_ms)} | "
                f"{_f(m.inductor_compile_s, '.1f')} / {_f(m.kiln_compile_s, '.1f')} | "
                f"{m.kiln_kernels} | {_f(m.max_error, '.2e')} | {m.note} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--programs",
        default=",".join([*MEMORY_BOUND, "amax_cols+autotune"]),
        help="names from MEMORY_BOUND; NAME+autotune benchmarks the tile pass's candidates",
    )
    parser.add_argument("--models", default="layer_norm,softmax,cross_entropy,mlp,gpt2,llama_block")
    parser.add_argument("--skip-models", action="store_true")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--json", default=None, help="also write the numbers as JSON here")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("benchmarks/gpu.py needs a CUDA GPU", file=sys.stderr)
        return 1
    copy_gbps = copy_bandwidth()
    programs = run_memory_bound(copy_gbps, [p for p in args.programs.split(",") if p])
    overhead = launch_overhead()
    models = (
        []
        if args.skip_models
        else run_models([m for m in args.models.split(",") if m], getattr(torch, args.dtype))
    )
    text = report(copy_gbps, programs, overhead, models)
    print(text)
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "copy_gbps": copy_gbps,
                    "programs": [asdict(p) for p in programs],
                    "overhead_us": overhead,
                    "models": [asdict(m) for m in models],
                },
                indent=1,
            )
        )
    fractions = [k.fraction for p in programs for k in p.kernels if k.mbytes >= MIN_MBYTES]
    if fractions:
        print(f"\nmedian kernel bandwidth: {statistics.median(fractions):.0%} of copy bandwidth")
    return 0


if __name__ == "__main__":
    sys.exit(main())

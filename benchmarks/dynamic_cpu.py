"""Speed of ``torch.compile(dynamic=True)`` on the CPU: kiln dynamic vs kiln static vs
Inductor dynamic, per model at 2-3 sizes (issue 21: run time within 1.1x of kiln's own
static compile and at least Inductor's dynamic speed; compile within 1.5x static).

Every model is compiled once dynamic (kiln, Inductor) and once static per size (kiln,
``dynamic=False``: dynamo recompiles at each new size), each compile cold (fresh on-disk
caches); the dynamic compile time is its first call's. A throwaway compile of a tiny model
per variant comes first, so that no model's figure pays the process's one-time costs.
Run times are measured interleaved (one short burst of every variant in turn, ``--rounds``
times) so that load from other processes on a shared machine hits all variants alike;
the figure is the median over rounds of each burst's per-call median. Every output is
checked against eager first.

    PYTHONPATH=. python benchmarks/dynamic_cpu.py                  # all models
    PYTHONPATH=. python benchmarks/dynamic_cpu.py --models bert gpt2 --rounds 7
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dashboard_measure import fresh_caches
from recompiles import benchmark_models  # benchmarks/suite_models.py, by path

_models = benchmark_models()
GPT2 = _models.GPT2
MLP = _models.MLP
BERTEncoder = _models.BERTEncoder
LlamaBlock = _models.LlamaBlock
ResNet = _models.ResNet


@dataclass(frozen=True)
class Model:
    name: str
    build: Callable[[], nn.Module]
    inputs: Callable[[int], tuple[torch.Tensor, ...]]
    """The inputs at one size (the dim that varies: batch or sequence length)."""
    sizes: tuple[int, ...]
    varies: str


def _randn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(1))


MODELS: dict[str, Model] = {
    m.name: m
    for m in (
        Model("mlp", lambda: MLP(256, 1024), lambda b: (_randn(b, 256),), (32, 64, 128), "batch"),
        Model(
            "bert",
            lambda: BERTEncoder(128, 4, 2),
            lambda s: (_randn(2, s, 128),),
            (32, 64, 128),
            "seq",
        ),
        Model(
            "gpt2",
            lambda: GPT2(1024, 128, 4, 2, 256),
            lambda s: (torch.randint(0, 1024, (2, s), generator=torch.Generator().manual_seed(2)),),
            (32, 64, 128),
            "seq",
        ),
        Model(
            "llama",
            lambda: LlamaBlock(128, 4, 352, 256),
            lambda s: (_randn(2, s, 128),),
            (32, 64, 128),
            "seq",
        ),
        Model(
            "resnet", lambda: ResNet(32, 2), lambda b: (_randn(b, 3, 32, 32),), (2, 4, 8), "batch"
        ),
    )
}

VARIANTS = ("kiln-static", "kiln-dynamic", "inductor-dynamic")


def _compile(variant: str, module: nn.Module) -> Callable[..., Any]:
    """``dynamic=False``: every new size recompiles, static (no automatic dynamic)."""
    backend, _, mode = variant.partition("-")
    dynamic = mode == "dynamic"
    if backend == "kiln":
        from kiln.frontends.dynamo import kiln_backend

        return torch.compile(
            module, backend=kiln_backend, options={"verbose": False}, dynamic=dynamic
        )
    return torch.compile(module, backend="inductor", dynamic=dynamic)


def _burst_ms(fn: Callable[[], Any], iters: int) -> float:
    samples = []
    for _ in range(iters):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def measure(model: Model, rounds: int, iters: int) -> list[dict[str, Any]]:
    torch.manual_seed(0)
    module = model.build().eval()
    rows: list[dict[str, Any]] = []
    with torch.no_grad(), torch._dynamo.config.patch(cache_size_limit=64):
        compiled: dict[tuple[str, int], Callable[..., Any]] = {}
        compile_s: dict[tuple[str, int], float] = {}
        shared: dict[str, Callable[..., Any]] = {}
        for size in model.sizes:
            inputs = model.inputs(size)
            want = module(*inputs)
            for variant in VARIANTS:
                if variant in shared:  # static: dynamo recompiles it for every new size
                    fn = shared[variant]
                else:
                    fn = shared[variant] = _compile(variant, module)
                fresh_caches(f"{variant}-{size}")
                start = time.perf_counter()
                have = fn(*inputs)
                compile_s[variant, size] = time.perf_counter() - start
                if not torch.allclose(have, want, rtol=2e-3, atol=2e-3):
                    err = (have - want).abs().max().item()
                    raise AssertionError(f"{model.name} {variant} size {size}: max error {err}")
                compiled[variant, size] = fn
        times: dict[tuple[str, int], list[float]] = {k: [] for k in compiled}
        for _ in range(rounds):  # interleaved: A, B, C, A, B, C, ...
            for size in model.sizes:
                inputs = model.inputs(size)
                for variant in VARIANTS:
                    fn = compiled[variant, size]
                    burst = _burst_ms(lambda fn=fn, inputs=inputs: fn(*inputs), iters)
                    times[variant, size].append(burst)
    for size in model.sizes:
        row: dict[str, Any] = {"model": model.name, "varies": model.varies, "size": size}
        for variant in VARIANTS:
            row[f"{variant} ms"] = statistics.median(times[variant, size])
            row[f"{variant} compile s"] = compile_s[variant, size]
        rows.append(row)
    return rows


def warm_up() -> None:
    """One throwaway compile of a tiny model per variant: the first compile in a process
    pays one-time costs (imports, dynamo's and AOTAutograd's first traces, kiln's
    decomposition table) that would otherwise land on whichever model and variant is
    measured first (llama's static compile read 26 s at seq 32, 11-15 s at 64 and 128)."""
    module = MLP(16, 32).eval()
    with torch.no_grad():
        for variant in VARIANTS:
            fresh_caches(f"warm-{variant}")
            _compile(variant, module)(_randn(4, 16))
    torch._dynamo.reset()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument(
        "--threads", type=int, default=2, help="intra-op threads (1: steadier on a loaded machine)"
    )
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    warm_up()
    print(
        "| model | size | kiln static ms | kiln dynamic ms | inductor dynamic ms | dyn/static"
        " | dyn/inductor | compile static s | compile dynamic s |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name in args.models:
        for r in measure(MODELS[name], args.rounds, args.iters):
            ks, kd, ind = r["kiln-static ms"], r["kiln-dynamic ms"], r["inductor-dynamic ms"]
            print(
                f"| {r['model']} | {r['varies']} {r['size']} | {ks:.3f} | {kd:.3f} | {ind:.3f}"
                f" | {kd / ks:.2f} | {kd / ind:.2f} | {r['kiln-static compile s']:.1f}"
                f" | {r['kiln-dynamic compile s']:.1f} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

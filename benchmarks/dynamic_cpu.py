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
from zoo import registry  # the dashboard's models; vision needs the bench extra

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
    """The sizes measured (one static compile each)."""
    varies: str
    warm_sizes: tuple[int, ...] = ()
    """Sizes the dynamic variants are called at (and checked against eager) before the
    measured ones, the way a serving loop varies the batch: batch 1 is a graph of its own
    (dynamo specialises 0/1), the others reuse the dynamic one."""


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


def _zoo_vision(name: str, sizes: tuple[int, ...]) -> Model:
    """A vision model of the dashboard's zoo (small: 64x64 images) with the batch varying:
    called at batch 1, 2, 4, 8, timed at ``sizes``."""

    def build() -> nn.Module:
        return registry()[name].build("small")[0]

    def inputs(batch: int) -> tuple[torch.Tensor, ...]:
        return (_randn(batch, 3, 64, 64),)

    return Model(name, build, inputs, sizes, "batch", warm_sizes=(1, 2, 4, 8))


for _vision in (
    "tv_resnet18",
    "tv_mobilenet_v2",
    "tv_mobilenet_v3_small",
    "tv_shufflenet_v2_x1_0",
    "timm_convnext_atto",
    "timm_vit_tiny",
):
    MODELS[_vision] = _zoo_vision(_vision, (2, 8))


def _zoo_language(name: str, sizes: tuple[int, ...]) -> Model:
    """A language model of the dashboard's zoo (small: batch 1, width 128, 2 layers) with
    the sequence length varying: token ids below 100 (every zoo vocabulary is larger),
    one tensor per input the model takes (an encoder-decoder takes two)."""

    def build() -> nn.Module:
        return registry()[name].build("small")[0]

    count: list[int] = []

    def inputs(seq: int) -> tuple[torch.Tensor, ...]:
        if not count:
            count.append(len(registry()[name].build("small")[1]))
        generator = torch.Generator().manual_seed(2)
        return tuple(torch.randint(0, 100, (1, seq), generator=generator) for _ in range(count[0]))

    return Model(name, build, inputs, sizes, "seq", warm_sizes=(16, 24))


for _language in ("hf_distilbert", "hf_gpt2", "hf_llama", "hf_mistral", "hf_opt", "hf_bart"):
    MODELS[_language] = _zoo_language(_language, (32, 48))

VARIANTS = ("kiln-static", "kiln-dynamic", "inductor-static", "inductor-dynamic")


class BackendClock:
    """Seconds spent in the backends' own compilers, so far: kiln's ``compile_graph``
    (wrapped here) and Inductor's ``compile_fx_inner`` (dynamo's own timer); the rest of a
    first call is dynamo's and AOTAutograd's tracing."""

    def __init__(self) -> None:
        import kiln.frontends.dynamo as kiln_dynamo

        self._kiln: list[float] = []
        inner = kiln_dynamo.compile_graph

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self._kiln.append(time.perf_counter() - start)

        kiln_dynamo.compile_graph = timed

    def seconds(self, variant: str) -> float:
        if variant.startswith("kiln"):
            return sum(self._kiln)
        from torch._dynamo.utils import compilation_time_metrics

        return sum(compilation_time_metrics.get("compile_fx_inner", []))


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


def _check(model: Model, variant: str, size: int, have: Any, want: Any) -> None:
    """Within 2e-3 of eager relative to the output's scale: an absolute bound passes
    anything for a model whose outputs are tiny (the zoo's small MobileNet-v2 gives
    logits of ~1e-9)."""
    scale = want.abs().max().item()
    if not torch.allclose(have, want, rtol=2e-3, atol=2e-3 * scale):
        err = (have - want).abs().max().item()
        raise AssertionError(f"{model.name} {variant} size {size}: max error {err} (scale {scale})")


def measure(model: Model, rounds: int, iters: int, clock: BackendClock) -> list[dict[str, Any]]:
    """Per measured size: run time of every variant, and the compile time (whole first
    call, and the backend's own part) of the graph that size runs. The dynamic compile is
    the first call that compiled the dynamic graph (at the first size other than 1)."""
    torch.manual_seed(0)
    module = model.build().eval()
    compiled = {variant: _compile(variant, module) for variant in VARIANTS}
    compile_s: dict[tuple[str, int], tuple[float, float]] = {}

    def first_call(variant: str, size: int, inputs: tuple[torch.Tensor, ...], want: Any) -> None:
        fresh_caches(f"{variant}-{size}")
        own = clock.seconds(variant)
        start = time.perf_counter()
        have = compiled[variant](*inputs)
        compile_s[variant, size] = (time.perf_counter() - start, clock.seconds(variant) - own)
        _check(model, variant, size, have, want)

    with torch.no_grad(), torch._dynamo.config.patch(cache_size_limit=64):
        for size in dict.fromkeys((*model.warm_sizes, *model.sizes)):
            inputs = model.inputs(size)
            want = module(*inputs)
            for variant in VARIANTS:
                if size in model.sizes or variant.endswith("dynamic"):
                    first_call(variant, size, inputs, want)
        times: dict[tuple[str, int], list[float]] = {
            (v, size): [] for v in VARIANTS for size in model.sizes
        }
        for _ in range(rounds):  # interleaved: A, B, C, A, B, C, ...
            for size in model.sizes:
                inputs = model.inputs(size)
                for variant in VARIANTS:
                    fn = compiled[variant]
                    burst = _burst_ms(lambda fn=fn, inputs=inputs: fn(*inputs), iters)
                    times[variant, size].append(burst)
    dynamic_size = next(s for s in (*model.warm_sizes, *model.sizes) if s != 1)
    rows: list[dict[str, Any]] = []
    for size in model.sizes:
        row: dict[str, Any] = {"model": model.name, "varies": model.varies, "size": size}
        for variant in VARIANTS:
            row[f"{variant} ms"] = statistics.median(times[variant, size])
            compiled_at = dynamic_size if variant.endswith("dynamic") else size
            row[f"{variant} compile s"], row[f"{variant} own s"] = compile_s[variant, compiled_at]
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
    clock = BackendClock()
    warm_up()
    print(
        "| model | size | kiln static ms | kiln dynamic ms | inductor static ms"
        " | inductor dynamic ms | kiln dyn/static | kiln dyn/inductor dyn | inductor dyn/static"
        " | compile s: kiln static | kiln dynamic | inductor static | inductor dynamic"
        " | own s: kiln static | kiln dynamic | inductor static | inductor dynamic |"
    )
    print("|---" * 17 + "|")
    for name in args.models:
        for r in measure(MODELS[name], args.rounds, args.iters, clock):
            ks, kd = r["kiln-static ms"], r["kiln-dynamic ms"]
            ist, idy = r["inductor-static ms"], r["inductor-dynamic ms"]
            compiles = " | ".join(f"{r[f'{v} compile s']:.1f}" for v in VARIANTS)
            owns = " | ".join(f"{r[f'{v} own s']:.1f}" for v in VARIANTS)
            print(
                f"| {r['model']} | {r['varies']} {r['size']} | {ks:.3f} | {kd:.3f} | {ist:.3f}"
                f" | {idy:.3f} | {kd / ks:.2f} | {kd / idy:.2f} | {idy / ist:.2f}"
                f" | {compiles} | {owns} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

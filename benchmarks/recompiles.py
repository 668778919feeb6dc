"""How often a model recompiles as batch size and sequence length vary: kiln vs Inductor.

Each model is compiled once per backend and called over a sweep of shapes (batch 1..64
at a fixed sequence length, then sequence length 7..512 at a fixed batch), the way a
user's serving loop changes them; the backend's compile function is wrapped to count
the graphs dynamo hands it (every recompile is one). ``dynamic=None`` is torch's
default (static first, a dim made dynamic when it changes: "automatic dynamic");
``dynamic=True`` marks every dim dynamic from the first call; ``aot_eager`` (dynamo and
AOTAutograd without a compiler) is the floor: a backend above it added guards of its own
(specialised a size at compile time). Outputs are checked
against eager at every call. Issue 21 asks for no more recompiles than Inductor.

    python benchmarks/recompiles.py                      # all models, both modes, cpu
    python benchmarks/recompiles.py --models bert --device cuda

:func:`count_recompiles` counts one model, backend and mode; :func:`dashboard_recompiles`
is the dashboard's ``--dynamic`` hook (the "recompiles" column).
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))


def benchmark_models() -> Any:
    """benchmarks/suite_models.py (named apart from tests/models.py, which pytest also
    puts on the path)."""
    import suite_models  # pyright: ignore[reportMissingImports]

    return suite_models


_models = benchmark_models()
GPT2 = _models.GPT2
MLP = _models.MLP
BERTEncoder = _models.BERTEncoder

BATCHES = (1, 2, 3, 8, 17, 64)
SEQS = (7, 16, 33, 128, 512)


@dataclass(frozen=True)
class Model:
    """A model and how to make its input for (batch, seq)."""

    name: str
    build: Callable[[], nn.Module]
    inputs: Callable[[int, int], tuple[torch.Tensor, ...]]
    has_seq: bool = True


def _randn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape)


MODELS: dict[str, Model] = {
    "mlp": Model("mlp", lambda: MLP(64, 128), lambda b, s: (_randn(b, 64),), has_seq=False),
    "bert": Model("bert", lambda: BERTEncoder(64, 4, 1), lambda b, s: (_randn(b, s, 64),)),
    "gpt2": Model(
        "gpt2",
        lambda: GPT2(256, 64, 4, 1, 512),
        lambda b, s: (torch.randint(0, 256, (b, s)),),
    ),
}


@dataclass
class Row:
    model: str
    backend: str
    dynamic: str
    calls: int
    compiles: int
    wrong: int
    """Calls whose output differed from eager."""
    seconds: float


def shapes(model: Model) -> list[tuple[int, int]]:
    """Batch sweep at seq 64, then (for sequence models) seq sweep at batch 4."""
    out = [(b, 64) for b in BATCHES]
    if model.has_seq:
        out += [(4, s) for s in SEQS]
    return out


def _backend(name: str, device: str) -> Callable[..., Any]:
    if name == "aot_eager":  # dynamo + AOTAutograd alone: the guards no backend adds
        from torch._dynamo.backends.debugging import aot_eager

        return aot_eager
    if name == "kiln":
        from kiln.frontends.dynamo import kiln_backend

        executor = "triton" if device == "cuda" else "cpp"
        return functools.partial(kiln_backend, options={"verbose": False, "executor": executor})
    from torch._inductor.compile_fx import compile_fx

    return compile_fx


def count_recompiles(model: Model, backend: str, dynamic: bool | None, device: str = "cpu") -> Row:
    """Compile ``model`` with ``backend`` and run it over :func:`shapes`; count the
    graphs the backend compiled."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    module = model.build().to(device).eval()
    compiled_graphs = 0
    real = _backend(backend, device)

    def counting(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], **kw: Any) -> Any:
        nonlocal compiled_graphs
        compiled_graphs += 1
        return real(gm, example_inputs, **kw)

    compiled = torch.compile(module, backend=counting, dynamic=dynamic)
    wrong = 0
    start = time.perf_counter()
    with torch.no_grad(), torch._dynamo.config.patch(cache_size_limit=64):
        for batch, seq in shapes(model):
            inputs = tuple(t.to(device) for t in model.inputs(batch, seq))
            have, want = compiled(*inputs), module(*inputs)
            if have.shape != want.shape or not torch.allclose(have, want, rtol=1e-3, atol=1e-3):
                wrong += 1
    return Row(
        model.name,
        backend,
        {None: "auto", True: "true", False: "false"}[dynamic],
        len(shapes(model)),
        compiled_graphs,
        wrong,
        round(time.perf_counter() - start, 1),
    )


def resized(x: torch.Tensor, dims: dict[int, int]) -> torch.Tensor:
    """A fresh random tensor like ``x`` with the sizes of ``dims`` changed."""
    shape = [dims.get(d, n) for d, n in enumerate(x.shape)]
    gen = torch.Generator().manual_seed(3)
    if x.is_floating_point():
        out = torch.randn(shape, generator=gen).to(x.dtype)
    else:  # token ids and the like: values from the original's range
        high = max(int(x.max().item()) + 1, 1) if x.numel() else 1
        out = torch.randint(0, high, shape, generator=gen).to(x.dtype)
    return out.to(x.device).requires_grad_(x.requires_grad)


def other_sizes(inputs: Sequence[torch.Tensor]) -> list[tuple[torch.Tensor, ...]]:
    """The dashboard task's inputs at other batch sizes (dim 0: +1 and 2x+1) and, for
    token inputs (integer, rank 2), other sequence lengths (dim 1: +7)."""
    variants: list[dict[int, int]] = []
    first = next((x for x in inputs if x.dim() > 0), None)
    if first is None:
        return []
    batch = first.shape[0]
    variants += [{0: batch + 1}, {0: 2 * batch + 1}]
    if first.dim() == 2 and not first.is_floating_point():
        variants.append({1: first.shape[1] + 7})
    return [
        tuple(resized(x, dims) if x.dim() > 0 and x.shape[0] == batch else x for x in inputs)
        for dims in variants
    ]


def dashboard_recompiles(task: Any, fn: Callable[..., Any], model: nn.Module) -> int | None:
    """The dashboard's ``--dynamic`` hook (benchmarks/dashboard_task.py): graphs dynamo
    compiles for ``fn`` (already compiled and run once) over :func:`other_sizes` of the
    task's inputs, each call a full step (training too: outputs and gradients) compared
    with eager's step at the same inputs by the dashboard's own rule; a mismatch raises
    ``dashboard_task.WrongOutputs`` (the row fails). None: the model cannot take other
    sizes (eager fails on them), so there is nothing to count."""
    # Imported here: the dashboard imports this module (and the standalone sweep of
    # main() needs none of it).
    from dashboard_measure import clone_all  # pyright: ignore[reportMissingImports]
    from dashboard_task import Reference, WrongOutputs, accuracy  # pyright: ignore[reportMissingImports]

    _, inputs = task.instance()
    counters = torch._dynamo.utils.counters["stats"]
    before = counters["unique_graphs"]
    ran = 0
    with torch._dynamo.config.patch(cache_size_limit=64):
        for variant in other_sizes(inputs):
            try:
                want = clone_all(task.step(model, model, variant))
            except Exception:  # eager cannot run this size: not the backend's concern
                continue
            have = clone_all(task.step(fn, model, variant))
            verdict = accuracy(task, have, Reference(want, 0.0), variant)
            if verdict.reason is not None:
                shapes = ", ".join(str(list(x.shape)) for x in variant)
                raise WrongOutputs(f"inputs {shapes}: {verdict.reason}")
            ran += 1
    return counters["unique_graphs"] - before if ran else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="kiln vs Inductor recompiles")
    parser.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--backends", nargs="*", default=["kiln", "inductor", "aot_eager"])
    parser.add_argument("--dynamic", nargs="*", default=["auto", "true"])
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    modes = {"auto": None, "true": True, "false": False}
    print("model  backend   dynamic  calls  compiles  wrong  seconds")
    rows: list[Row] = []
    for name in args.models:
        for mode in args.dynamic:
            for backend in args.backends:
                row = count_recompiles(MODELS[name], backend, modes[mode], args.device)
                rows.append(row)
                print(
                    f"{row.model:6} {row.backend:9} {row.dynamic:8} {row.calls:5} "
                    f"{row.compiles:9} {row.wrong:6} {row.seconds:8}",
                    flush=True,
                )
    print([asdict(r) for r in rows])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

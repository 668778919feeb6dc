"""kiln's main job (``python -m kiln``): compile an example model and check its numbers.

Captures the model with ``make_fx`` (parameters lifted to inputs), imports it to aten
IR, runs a pass pipeline, prints the final IR and a per-step summary, then runs the
result in kiln's reference interpreter(s) and compares it with eager PyTorch.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import torch
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipeline

from kiln.registry import Registry, default_registry

DEFAULT_PIPELINE = "decompose,canonicalize,cse,dce"


def _examples() -> dict[str, Callable[[], tuple[torch.nn.Module, tuple[torch.Tensor, ...]]]]:
    from kiln import examples

    def mlp() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
        gen = torch.Generator().manual_seed(1)
        return examples.MLP().eval(), (torch.randn(8, 64, generator=gen),)

    return {"gpt_block": examples.gpt_block, "mlp": mlp}


def _op_histogram(module: ModuleOp) -> Counter[str]:
    counts: Counter[str] = Counter()
    for op in module.walk():
        if op.name in ("builtin.module", "func.func", "func.return"):
            continue
        counts[op.name] += 1
    return counts


def _summary_line(step: str, module: ModuleOp, seconds: float) -> str:
    hist = _op_histogram(module)
    return f"  {step:<14} {sum(hist.values()):>6} ops  {seconds * 1000:>8.1f} ms"


def _run_reference(module: ModuleOp, inputs: Sequence[Any]) -> tuple[Any, ...]:
    """Interpret the IR at whatever level it is (aten, or loop when lowered)."""
    if any(op.name.startswith("loop.") for op in module.walk()):
        from kiln.dialects.loop.interpreter import run_function as run_loop  # pyright: ignore

        return tuple(run_loop(module, list(inputs)))
    from kiln.dialects.aten.interpreter import run_function

    return run_function(module, list(inputs))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kiln", description=__doc__)
    parser.add_argument("--model", choices=sorted(_examples()), default="gpt_block")
    parser.add_argument(
        "-p",
        "--pipeline",
        default=None,
        help=f"pass pipeline (default: {DEFAULT_PIPELINE}, then lower-aten when available)",
    )
    parser.add_argument("--quiet", action="store_true", help="print the summary only")
    args = parser.parse_args(argv)

    from kiln.frontends.capture import capture_make_fx
    from kiln.frontends.fx import import_graph

    registry: Registry = default_registry()
    pipeline_text = args.pipeline
    if pipeline_text is None:
        pipeline_text = DEFAULT_PIPELINE + (",lower-aten" if "lower-aten" in registry.passes else "")

    model, user_inputs = _examples()[args.model]()
    print(f"kiln main job: {args.model} ({type(model).__name__}), inputs "
          + ", ".join(f"{tuple(t.shape)} {t.dtype}" for t in user_inputs))

    start = time.perf_counter()
    captured = capture_make_fx(model, *user_inputs)
    capture_s = time.perf_counter() - start
    fx_nodes = sum(1 for n in captured.gm.graph.nodes if n.op == "call_function")

    start = time.perf_counter()
    module = import_graph(captured.gm)
    import_s = time.perf_counter() - start

    ctx = registry.make_context()
    steps: list[str] = [_summary_line("import", module, import_s)]
    timings: dict[str, float] = {}
    last = [time.perf_counter()]

    def callback(prev: ModulePass | None, mod: ModuleOp, nxt: ModulePass | None) -> None:
        now = time.perf_counter()
        if prev is not None:
            timings[prev.name] = now - last[0]
            steps.append(_summary_line(prev.name, mod, now - last[0]))
        last[0] = now

    pipeline = PassPipeline.parse_spec(registry.passes, pipeline_text, callback)
    last[0] = time.perf_counter()
    pipeline.apply(ctx, module)
    module.verify()

    if not args.quiet:
        print(module)

    start = time.perf_counter()
    outputs = _run_reference(module, captured.example_inputs)
    interp_s = time.perf_counter() - start
    with torch.no_grad():
        expected = model(*user_inputs)
    max_err = (outputs[0] - expected).abs().max().item()  # pyright: ignore
    torch.testing.assert_close(outputs[0], expected, atol=1e-4, rtol=1e-4)

    print("\nsummary")
    print(f"  {'capture':<14} {fx_nodes:>6} FX nodes {capture_s * 1000:>7.1f} ms")
    print("\n".join(steps))
    hist = _op_histogram(module)
    top = ", ".join(f"{name} x{n}" for name, n in hist.most_common(8))
    print(f"  final ops: {top}")
    print(
        f"  interpreter vs eager: max abs error {max_err:.2e} "
        f"(output {tuple(expected.shape)}, {interp_s * 1000:.0f} ms)  OK"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

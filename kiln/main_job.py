"""kiln's main job (``python -m kiln``): compile an example model and check its numbers.

Captures the model with ``make_fx`` (parameters lifted to inputs), imports it to aten
IR, runs the default pipeline (decompose ... fuse, tile, buffer-reuse), builds it with
the C++/OpenMP backend, prints the final IR and a per-step summary, then runs it and
compares it with eager PyTorch (numbers and time per call).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import torch
from xdsl.dialects.builtin import ModuleOp

from kiln.compile_options import CompileError
from kiln.compiler import DEFAULT_PIPELINE, CompileOptions, compile_graph


def _examples() -> dict[str, Callable[[], tuple[torch.nn.Module, tuple[torch.Tensor, ...]]]]:
    from kiln import examples

    def mlp() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
        gen = torch.Generator().manual_seed(1)
        return examples.MLP().eval(), (torch.randn(8, 64, generator=gen),)

    return {"gpt_block": examples.gpt_block, "mlp": mlp}


def _op_histogram(module: ModuleOp) -> Counter[str]:
    counts: Counter[str] = Counter()
    for op in module.walk():
        if op.name not in ("builtin.module", "func.func", "func.return"):
            counts[op.name] += 1
    return counts


def _median_ms(fn: Callable[[], Any], repeats: int = 20) -> float:
    fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kiln", description=__doc__)
    parser.add_argument("--model", choices=sorted(_examples()), default="gpt_block")
    parser.add_argument(
        "-p", "--pipeline", default=DEFAULT_PIPELINE, help="pass pipeline (kiln-opt -p syntax)"
    )
    parser.add_argument(
        "--executor",
        choices=("auto", "cpp", "triton", "interpret"),
        default="auto",
        help="auto: C++ for CPU tensors (the default here), Triton for CUDA tensors",
    )
    parser.add_argument(
        "--debug-dir", default=None, help="write the IR after every pass and the generated code"
    )
    parser.add_argument(
        "--quiet", action="store_true", help="print the summary only, not the final IR"
    )
    args = parser.parse_args(argv)

    from kiln.frontends.capture import capture_make_fx

    model, user_inputs = _examples()[args.model]()
    print(
        f"kiln main job: {args.model} ({type(model).__name__}), inputs "
        + ", ".join(f"{tuple(t.shape)} {t.dtype}" for t in user_inputs)
    )

    start = time.perf_counter()
    captured = capture_make_fx(model, *user_inputs)
    capture_s = time.perf_counter() - start

    options = CompileOptions(
        pipeline=args.pipeline, executor=args.executor, debug_dir=args.debug_dir, verbose=False
    )
    try:
        compiled = compile_graph(captured.gm, captured.example_inputs, options, name=args.model)
    except CompileError as e:
        # A user's mistake (a Triton executor without a GPU, a bad pipeline): the
        # message says what to do; a traceback would bury it.
        print(f"kiln: {e}", file=sys.stderr)
        return 2
    stats = compiled.stats
    if not args.quiet:
        print(compiled.module)

    with torch.no_grad():
        outputs = compiled(*captured.example_inputs)
        expected = model(*user_inputs)
    actual = outputs[0] if isinstance(outputs, tuple | list) else outputs
    max_err = (actual - expected).abs().max().item()
    torch.testing.assert_close(actual, expected, atol=1e-4, rtol=1e-4)
    with torch.no_grad():
        kiln_ms = _median_ms(lambda: compiled(*captured.example_inputs))
        eager_ms = _median_ms(lambda: model(*user_inputs))

    print("\nsummary")
    print(f"  {'capture':<14} {stats.fx_nodes:>6} FX nodes  {capture_s * 1000:>8.1f} ms")
    for step, ops in stats.pass_ops.items():
        seconds = stats.pass_seconds.get(step)
        timing = f"{seconds * 1000:>8.1f} ms" if seconds is not None else ""
        print(f"  {step:<14} {ops:>6} ops       {timing}")
    hist = _op_histogram(compiled.module)
    top = ", ".join(f"{name} x{n}" for name, n in hist.most_common(6))
    print(f"  final IR: {top}")
    externs = ", ".join(f"{k} x{n}" for k, n in stats.externs.most_common()) or "none"
    print(f"  {stats.kernels} fused kernels, ATen fallback: {externs}")
    print(
        f"  executor {stats.executor}: compiled in {stats.seconds:.2f} s, "
        f"{kiln_ms:.3f} ms per call (eager {eager_ms:.3f} ms)"
    )
    print(f"  kiln vs eager: max abs error {max_err:.2e} (output {tuple(expected.shape)})  OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""CPU training steps with and without channels-last saved activations (``channels-last``'s
``saved-nhwc-cpu`` option), kiln against itself, with every gradient checked against eager.

Each (model, size, variant) runs in its own process (one compile per process: a second
variant compiled in the same process would time against the first's leftovers), and the
variants alternate over ``--rounds`` rounds, so that a drift of the machine's speed hits
both alike; the graph cache makes later rounds' compiles warm. Per process: the cold or
warm compile time, the median wall time of ``--steps`` steps after two warm ones (the
dashboard's step: forward, backward with a fixed output gradient), and the largest
relative error of any parameter gradient against float64 eager's from the same weights
and inputs, beside float32 eager's own.

    python benchmarks/cpu_train_layout.py --models tv_resnet18,tv_resnet50 --sizes small,large
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).parent))

VARIANTS = {
    "nchw": "channels-last{saved-nhwc-cpu-min-elements=1000000000000}",
    "saved-nhwc": "channels-last{saved-nhwc-cpu=true}",
}
"""Saved activations NCHW whatever the sizes, and channels-last whatever the sizes."""


def _output(out: Any) -> torch.Tensor:
    return out.logits if hasattr(out, "logits") else out


def _gradients(
    model: torch.nn.Module,
    state: dict[str, torch.Tensor],
    inputs: tuple[torch.Tensor, ...],
    grad: torch.Tensor,
    dtype: torch.dtype,
) -> dict[str, torch.Tensor]:
    """Eager's parameter gradients of one step from ``state`` in ``dtype``."""
    model.load_state_dict(state)
    model.zero_grad(set_to_none=True)
    cast = [x.to(dtype) if x.is_floating_point() else x for x in inputs]
    _output(model(*cast)).backward(grad.to(dtype))
    return {n: p.grad.double() for n, p in model.named_parameters() if p.grad is not None}


def _error(got: dict[str, torch.Tensor], exact: dict[str, torch.Tensor]) -> float:
    """The largest relative error (Frobenius norms) of any parameter's gradient against
    float64's, over the parameters whose exact gradient is not negligible (a convolution
    bias before a batch norm has a true gradient of 0, and rounding noise for both)."""
    largest = max(g.norm().item() for g in exact.values())
    worst = 0.0
    for name, want in exact.items():
        norm = want.norm().item()
        if name in got and norm > 1e-6 * largest:
            worst = max(worst, (got[name].double() - want).norm().item() / norm)
    return worst


def _child(name: str, size: str, variant: str, steps: int) -> dict[str, Any]:
    import zoo

    from kiln.compiler import DEFAULT_PIPELINE
    from kiln.frontends.dynamo import kiln_backend

    torch.manual_seed(0)
    model, inputs = zoo.registry()[name].build(size)
    model = model.train()
    reference = {k: v.clone() for k, v in model.state_dict().items()}
    grad = torch.randn_like(_output(model(*inputs)))
    exact = _gradients(copy.deepcopy(model).double(), reference, inputs, grad, torch.float64)
    eager = _gradients(model, reference, inputs, grad, torch.float32)
    model.load_state_dict(reference)
    model.zero_grad(set_to_none=True)

    pipeline = DEFAULT_PIPELINE.replace("channels-last", VARIANTS[variant])
    fn = torch.compile(
        model, backend=kiln_backend, options={"pipeline": pipeline, "verbose": False}
    )
    start = time.perf_counter()
    _output(fn(*inputs)).backward(grad)
    compile_s = time.perf_counter() - start
    compiled = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    times = []
    for k in range(steps + 2):
        model.zero_grad(set_to_none=True)
        start = time.perf_counter()
        _output(fn(*inputs)).backward(grad)
        if k >= 2:
            times.append(time.perf_counter() - start)
    return {
        "model": name,
        "size": size,
        "variant": variant,
        "compile_s": compile_s,
        "step_ms": statistics.median(times) * 1e3 if times else float("nan"),
        "grad_rel_error": _error(compiled, exact),
        "eager_rel_error": _error(eager, exact),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--models", default="tv_resnet18")
    p.add_argument("--sizes", default="small")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--child", nargs=3, default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(_child(*args.child, steps=args.steps)), flush=True)
        return
    for name in args.models.split(","):
        for size in args.sizes.split(","):
            rows: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
            for _ in range(args.rounds):
                for variant in VARIANTS:
                    command = [sys.executable, __file__, "--steps", str(args.steps)]
                    command += ["--child", name, size, variant]
                    done = subprocess.run(command, capture_output=True, text=True, check=False)
                    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
                    if done.returncode or not lines:
                        print(f"{name} {size} {variant}: failed\n{done.stderr[-2000:]}", flush=True)
                        continue
                    rows[variant].append(json.loads(lines[-1]))
            summary = []
            for variant, runs in rows.items():
                if runs:
                    steps = " / ".join(f"{r['step_ms']:.0f}" for r in runs)
                    compiles = " / ".join(f"{r['compile_s']:.1f}" for r in runs)
                    error = max(r["grad_rel_error"] for r in runs)
                    eager = max(r["eager_rel_error"] for r in runs)
                    summary.append(
                        f"{variant} {steps} ms (compile {compiles} s, grad error {error:.1e}"
                        f" against float64, eager's {eager:.1e})"
                    )
            print(f"{name} {size}: " + "; ".join(summary), flush=True)


if __name__ == "__main__":
    main()

"""Are kiln's CUDA-graph training steps right once they replay? Each zoo model (eval mode:
no dropout, so eager is an exact reference) is trained side by side, eager and compiled
by kiln (default ``cuda_graphs``), for ``--steps`` SGD steps on fresh random inputs each
step (so the step's inputs are copied into the graphs' buffers, and the parameters the
graphs borrow change in place between replays). Per step: the largest error of the output
and of every parameter's gradient, relative to the eager tensor's largest magnitude, and
at the end the runners' counters (graphs recorded, plain calls).

    HF_HUB_OFFLINE=1 PYTHONPATH=. \\
        python benchmarks/cuda_graph_grads.py --models hf_bart,hf_opt --steps 14

Needs a GPU and the ``bench`` extra. Exits 1 when any step's error exceeds ``--tol``.
"""

from __future__ import annotations

import argparse
import copy
import gc
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).parent))
import zoo.compat  # noqa: F401  (zoo import order: compat first)
from zoo import registry

from kiln.backends.triton.cudagraphs import CudaGraphRunner
from kiln.frontends.dynamo import kiln_backend


def _output(out: Any) -> torch.Tensor:
    out = out[0] if isinstance(out, (tuple, list)) else out
    return getattr(out, "logits", out)


def _fresh(example: Any) -> Any:
    if not isinstance(example, torch.Tensor):
        return example
    if example.is_floating_point():
        return torch.randn_like(example)
    high = int(example.max()) + 1
    return torch.randint(0, max(high, 2), example.shape, dtype=example.dtype, device=example.device)


def _relative(actual: torch.Tensor | None, expected: torch.Tensor | None, floor: float) -> float:
    """The largest error relative to the largest magnitude of ``expected``, or to ``floor``
    where that is smaller: some gradients are zero in exact arithmetic (an attention key
    projection's bias) and hold only rounding noise in both."""
    if actual is None or expected is None:
        return 0.0 if actual is expected else float("inf")
    scale = max(expected.abs().max().item(), floor) or 1.0
    return (actual.float() - expected.float()).abs().max().item() / scale


def _runner_counts() -> tuple[int, int, int]:
    # type(), not isinstance(): gc also lists dead weak proxies.
    runners = [o for o in gc.get_objects() if type(o) is CudaGraphRunner]
    graphs = sum(sum(len(v) for v in r.graphs.values()) for r in runners)
    return len(runners), graphs, sum(r.plain_calls for r in runners)


def check(name: str, steps: int, tol: float, device: str) -> bool:
    torch.manual_seed(0)
    eager, examples = registry()[name].build("small")
    eager = eager.to(device).eval()
    examples = tuple(e.to(device) if isinstance(e, torch.Tensor) else e for e in examples)
    compiled_model = copy.deepcopy(eager)
    torch._dynamo.reset()
    compiled = torch.compile(compiled_model, backend=kiln_backend)
    optimizers = [torch.optim.SGD(m.parameters(), lr=1e-3) for m in (eager, compiled_model)]
    params = list(zip(eager.named_parameters(), compiled_model.parameters(), strict=True))
    worst = 0.0
    for step in range(steps):
        inputs = tuple(_fresh(e) for e in examples)
        expected = _output(eager(*inputs))
        actual = _output(compiled(*inputs))
        grad = torch.randn_like(expected)
        expected.backward(grad)
        actual.backward(grad)
        grads = [e.grad.abs().max().item() for (_, e), _ in params if e.grad is not None]
        floor = 1e-3 * max(grads, default=0.0)
        errors = {"output": _relative(actual, expected, 0.0)}
        errors |= {pname: _relative(p.grad, e.grad, floor) for (pname, e), p in params}
        where, error = max(errors.items(), key=lambda item: item[1])
        worst = max(worst, error)
        print(f"{name} step {step:2d}: max relative error {error:.2e} ({where})", flush=True)
        for optimizer in optimizers:
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    runners, graphs, plain = _runner_counts()
    ok = worst <= tol
    print(
        f"{name}: {'ok' if ok else 'WRONG'}, worst {worst:.2e} over {steps} steps; "
        f"{runners} runners, {graphs} graphs recorded, {plain} plain calls",
        flush=True,
    )
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="hf_bart,hf_opt,hf_t5,tv_resnet18")
    parser.add_argument("--steps", type=int, default=14)
    parser.add_argument("--tol", type=float, default=1e-3)
    parser.add_argument("--device", default="cuda", help="cpu: the same check, no graphs")
    args = parser.parse_args()
    results = [check(name, args.steps, args.tol, args.device) for name in args.models.split(",")]
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()

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


def _relative(actual: torch.Tensor | None, reference: torch.Tensor | None, floor: float) -> float:
    """The largest error relative to the largest magnitude of ``reference``, or to ``floor``
    where that is smaller: some gradients are zero in exact arithmetic (an attention key
    projection's bias) and hold only rounding noise. NaN counts as infinite."""
    if actual is None or reference is None:
        return 0.0 if actual is reference else float("inf")
    scale = max(reference.abs().max().item(), floor) or 1.0
    error = (actual.double() - reference).abs().max().item() / scale
    return float("inf") if error != error else error


def _runner_counts() -> tuple[int, int, int]:
    # type(), not isinstance(): gc also lists dead weak proxies.
    runners = [o for o in gc.get_objects() if type(o) is CudaGraphRunner]
    graphs = sum(sum(len(v) for v in r.graphs.values()) for r in runners)
    return len(runners), graphs, sum(r.plain_calls for r in runners)


def _errors(
    reference: torch.nn.Module, model: torch.nn.Module, out: torch.Tensor, ref_out: torch.Tensor
) -> dict[str, float]:
    pairs = list(zip(reference.named_parameters(), model.parameters(), strict=True))
    grads = [r.grad.abs().max().item() for (_, r), _ in pairs if r.grad is not None]
    floor = 1e-3 * max(grads, default=0.0)
    errors = {"output": _relative(out, ref_out, 0.0)}
    return errors | {name: _relative(p.grad, r.grad, floor) for (name, r), p in pairs}


def check(name: str, steps: int, tol: float, device: str, graphs: bool) -> bool:
    torch.manual_seed(0)
    eager, examples = registry()[name].build("small")
    eager = eager.to(device).eval()
    examples = tuple(e.to(device) if isinstance(e, torch.Tensor) else e for e in examples)
    reference = copy.deepcopy(eager).double()
    compiled_model = copy.deepcopy(eager)
    torch._dynamo.reset()
    options = {} if graphs else {"cuda_graphs": False}
    compiled = torch.compile(compiled_model, backend=kiln_backend, options=options)
    worst = 0.0
    for step in range(steps):
        inputs = tuple(_fresh(e) for e in examples)
        grad = None
        outs = []
        for model, fn in ((reference, reference), (eager, eager), (compiled_model, compiled)):
            model.zero_grad(set_to_none=True)
            args = inputs
            if model is reference:
                args = tuple(
                    a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                    for a in inputs
                )
            out = _output(fn(*args))
            grad = torch.randn_like(out) if grad is None else grad.to(out.dtype)
            out.backward(grad)
            outs.append(out)
        eager_errors = _errors(reference, eager, outs[1], outs[0])
        kiln_errors = _errors(reference, compiled_model, outs[2], outs[0])
        # kiln is wrong where it is off by more than tol and by more than 10x eager float32.
        excess = {k: e / max(eager_errors[k] * 10, tol) for k, e in kiln_errors.items()}
        where = max(excess, key=lambda k: excess[k])
        worst = max(worst, excess[where])
        print(
            f"{name} step {step:2d}: kiln {kiln_errors[where]:.2e}, eager float32 "
            f"{eager_errors[where]:.2e} ({where}; errors against float64)",
            flush=True,
        )
        # One update for all three (a bounded sign step from the float64 gradients), so
        # they stay on one trajectory while the parameters the graphs read change in place.
        with torch.no_grad():
            for r, e, k in zip(
                reference.parameters(), eager.parameters(), compiled_model.parameters(), strict=True
            ):
                if r.grad is not None:
                    r.sub_(r.grad.sign() * 1e-3 * r.abs().mean())
                e.copy_(r)
                k.copy_(r)
    runners, recorded, plain = _runner_counts()
    ok = worst <= 1.0
    print(
        f"{name}: {'ok' if ok else 'WRONG'} over {steps} steps (cuda_graphs "
        f"{'default' if graphs else 'off'}); {runners} runners, {recorded} graphs recorded, "
        f"{plain} plain calls",
        flush=True,
    )
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="hf_bart,hf_opt,hf_t5,tv_resnet18")
    parser.add_argument("--steps", type=int, default=14)
    parser.add_argument("--tol", type=float, default=1e-3)
    parser.add_argument("--device", default="cuda", help="cpu: the same check, no graphs")
    parser.add_argument("--no-graphs", action="store_true", help="kiln with cuda_graphs=False")
    args = parser.parse_args()
    # Float32 as eager computes it by default, without TF32 in convolutions either, so
    # that float32 errors are rounding only.
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    results = [
        check(name, args.steps, args.tol, args.device, not args.no_graphs)
        for name in args.models.split(",")
    ]
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()

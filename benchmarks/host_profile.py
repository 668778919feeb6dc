"""Where the host's time goes in a compiled call: per model, backend and mode, the wall
time per call of back-to-back calls (synchronised at both ends, as a user's loop sees
it), then a cProfile of as many calls listing the functions with the most self time
per call, in microseconds. Issue 16 asks small models' default-mode wall time to be
within 1.3x of their summed kernel time: on a GPU with CUDA graphs, what is left is the
host's path (Dynamo's guards, AOTAutograd's wrappers, kiln's wrapper and graph runner).

    HF_HUB_OFFLINE=1 PYTHONPATH=. python benchmarks/host_profile.py \\
        --models hf_bert,tv_resnet18 --backends kiln,inductor-ro --dtype bfloat16

Backends: ``kiln`` (default options), ``kiln-nocg`` (``cuda_graphs=False``),
``inductor``, ``inductor-ro`` (``mode="reduce-overhead"``), ``eager``.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).parent))
import zoo.compat  # noqa: F401  (zoo import order: compat first)
from train_step_profile import _infer, _output, _step  # pyright: ignore[reportPrivateUsage]
from zoo import registry

from kiln.frontends.dynamo import kiln_backend


def _compiled(backend: str, model: torch.nn.Module) -> Callable[..., Any]:
    torch._dynamo.reset()
    if backend == "eager":
        return model
    if backend.startswith("inductor"):
        mode = "reduce-overhead" if backend == "inductor-ro" else None
        return torch.compile(model, mode=mode)
    options = {"cuda_graphs": False} if backend == "kiln-nocg" else {}
    return torch.compile(model, backend=kiln_backend, options=options)


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def profile(name: str, backend: str, args: argparse.Namespace) -> None:
    dtype = getattr(torch, args.dtype)
    model, inputs = registry()[name].build(args.size)
    model = model.to(args.device, dtype).train(args.mode == "train")
    inputs = tuple(i.to(args.device, dtype if i.is_floating_point() else i.dtype) for i in inputs)
    fn = _compiled(backend, model)
    # The dashboard's step (train_step_profile's): a fixed output gradient.
    step = _step if args.mode == "train" else _infer
    with torch.no_grad():
        grad = torch.randn_like(_output(fn(*inputs)))
    for _ in range(args.warm):
        step(model, fn, inputs, grad)
    _sync(args.device)
    start = time.perf_counter()
    for _ in range(args.calls):
        step(model, fn, inputs, grad)
    _sync(args.device)
    wall = (time.perf_counter() - start) / args.calls * 1e6
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(args.calls):
        step(model, fn, inputs, grad)
    _sync(args.device)
    profiler.disable()
    stats = pstats.Stats(profiler)
    rows = sorted(
        stats.stats.items(),  # pyright: ignore[reportAttributeAccessIssue]
        key=lambda item: item[1][2],
        reverse=True,
    )
    print(f"## {name} {args.size} {args.mode} {args.dtype} {backend}: {wall:.1f} us a call")
    for (path, line, func), (_, ncalls, tottime, cumtime, _) in rows[: args.top]:
        where = f"{Path(path).parent.name}/{Path(path).name}:{line}" if line else path
        print(
            f"  {tottime / args.calls * 1e6:8.1f} us self {cumtime / args.calls * 1e6:8.1f} "
            f"us cum {ncalls / args.calls:6.1f}x  {func}  {where}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="hf_bert")
    parser.add_argument("--backends", default="kiln,inductor-ro")
    parser.add_argument("--size", default="small")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--mode", choices=("infer", "train"), default="infer")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--warm", type=int, default=20)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    for name in args.models.split(","):
        for backend in args.backends.split(","):
            profile(name, backend, args)


if __name__ == "__main__":
    main()

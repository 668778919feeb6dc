"""Where a training step's (or, with ``--mode infer``, an inference call's) time goes:
on the GPU, summed CUDA kernel time per step, kiln against Inductor, with the top kernels
by time; on the CPU (``--device cpu``), the step's wall time and the CPU self time per
operator: kiln's kernels (its wrapper's ``kiln::<kernel> (<fx nodes>)`` profiler ranges),
Inductor's (``torch._inductor.config.cpp.enable_kernel_profile``) and the ATen ops.

The step is the dashboard's (``benchmarks/dashboard_task.py``): gradients set to None,
every parameter's version counter moved (as the optimizer step it stands for moves it),
forward, backward with a fixed output gradient. ``--mode infer`` times the dashboard's
inference call instead: eval mode, ``torch.no_grad()``, forward only. Backends:
``inductor``, ``kiln``, and kiln variants by suffix: ``-nocg`` (``cuda_graphs=False``), ``-nopack``
(``prepack_weights=False``: ATen copies each weight channels-last at every convolution),
``-autotune`` (``autotune=True``: each kernel's candidate configs timed on its first call);
``-dynamic`` (last, on either compiler) compiles with ``dynamic=True``; after a ``:``,
passes of the default pipeline with options, ``+``-separated, replace those passes
(``kiln-nocg:channels-last{gpu-copy-nchw-inputs=true}``: an A/B of a pass option).
Each ``##`` line ends with the compiled output's largest difference from eager's (over
eager's largest magnitude, :func:`output_error`). ``--tiling NAME=VALUE,...`` sets
constants of ``kiln.passes.scheduling.tiling`` before compiling (with the graph cache
off), for sweeps of the tiling heuristics. ``--launched-by REGEX`` (CUDA) lists, for the kernels
whose name matches, the CPU operators that launched them, innermost first with their
input shapes (``Memcpy`` found OPT's copies into the CUDA-graph runner's static inputs).

    python benchmarks/train_step_profile.py --models tv_resnet18,tv_mobilenet_v2 \\
        --backends kiln,kiln-nocg,inductor --top 20
"""

from __future__ import annotations

import argparse
import collections
import copy
import functools
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch.autograd.graph import increment_version
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).parent))

import zoo
from dashboard_measure import TimingLock, register_worker

from kiln.frontends.dynamo import kiln_backend


def _output(out: Any) -> torch.Tensor:
    return out.logits if hasattr(out, "logits") else out


def _step(model: torch.nn.Module, fn: Any, inputs: tuple[Any, ...], grad: torch.Tensor) -> None:
    model.zero_grad(set_to_none=True)
    with torch.no_grad():
        for param in model.parameters():
            increment_version(param)
    _output(fn(*inputs)).backward(grad)


def _infer(model: torch.nn.Module, fn: Any, inputs: tuple[Any, ...], grad: torch.Tensor) -> None:
    del model, grad
    with torch.no_grad():
        fn(*inputs)


def output_error(
    output: torch.Tensor, reference: torch.nn.Module, inputs: tuple[Any, ...]
) -> float:
    """The compiled first call's output against eager's on a copy of the model (largest
    difference over eager's largest magnitude): a variant that computes other numbers
    shows here, not only in its time. Same seed for both calls; in train mode a model
    with dropout draws differently in each, so only inference reads exactly."""
    with torch.no_grad():
        torch.manual_seed(1)
        want = _output(reference(*inputs)).detach().double()
        got = output.detach().double()
        if got.shape != want.shape:
            return float("inf")
        return (got - want).abs().max().item() / max(want.abs().max().item(), 1e-30)


def _set_tiling(spec: str) -> None:
    from kiln.passes.scheduling import tiling

    for item in filter(None, spec.split(",")):
        name, value = item.split("=")
        if not isinstance(getattr(tiling, name, None), int):
            raise SystemExit(f"--tiling: {name} is not an integer constant of tiling.py")
        setattr(tiling, name, int(value))


def with_pass_options(spec: str) -> str:
    """The default pipeline with each ``pass{options}`` of ``spec`` (``+``-separated) in
    place of that pass."""
    from kiln.compile_options import DEFAULT_PIPELINE

    passes = DEFAULT_PIPELINE.split(",")
    for item in filter(None, spec.split("+")):
        name = item.split("{", 1)[0]
        if name not in passes:
            raise SystemExit(f"{name} is not a pass of the default pipeline")
        passes[passes.index(name)] = item
    return ",".join(passes)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--models", default="tv_resnet18")
    p.add_argument("--size", default="small")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--mode", choices=("train", "infer"), default="train")
    p.add_argument("--backends", default="kiln,inductor")
    p.add_argument("--steps", type=int, default=5, help="profiled steps (after --warm ones)")
    p.add_argument(
        "--rounds",
        type=int,
        default=2,
        help="CUDA: profiled rounds of --steps; the quietest counts",
    )
    p.add_argument(
        "--warm",
        type=int,
        default=3,
        help="unprofiled steps first (CUDA graphs record a further call site when it recurs)",
    )
    p.add_argument("--top", type=int, default=15)
    p.add_argument(
        "--launched-by",
        default="",
        metavar="REGEX",
        help="for CUDA kernels whose name matches REGEX (e.g. Memcpy), the CPU operators "
        "that launched them, with their enclosing ranges and input shapes",
    )
    p.add_argument("--device", default="cuda", help="cuda, or cpu: CPU self time per operator")
    p.add_argument(
        "--tiling",
        default="",
        help="NAME=INT,... constants of kiln.passes.scheduling.tiling to set (a sweep)",
    )
    p.add_argument(
        "--lock",
        default=None,
        help="a file to flock while stepping and profiling: several of these processes "
        "compile at once on one machine but never profile at once (the holder pauses the "
        "others: their kernels would lengthen the ones it profiles)",
    )
    args = p.parse_args()
    if args.lock:
        register_worker(args.lock)
    timing_lock = TimingLock(args.lock)
    dtype = getattr(torch, args.dtype)
    _set_tiling(args.tiling)
    for name in args.models.split(","):
        for backend in args.backends.split(","):
            torch._dynamo.reset()
            torch.manual_seed(0)
            model, inputs = zoo.registry()[name].build(args.size)
            device = torch.device(args.device)
            model = model.to(device).to(dtype)
            model = model.train() if args.mode == "train" else model.eval()
            step = _step if args.mode == "train" else _infer
            inputs = tuple(
                x.to(device, dtype) if x.is_floating_point() else x.to(device) for x in inputs
            )
            variant, _, pass_options = backend.partition(":")
            dynamic = True if variant.endswith("-dynamic") else None
            if backend.startswith("inductor"):
                if device.type == "cpu":  # its C++ kernels as named profiler ranges
                    import torch._inductor.config as inductor_config

                    inductor_config.cpp.enable_kernel_profile = True
                fn = torch.compile(model, dynamic=dynamic)
            else:
                options: dict[str, Any] = {"verbose": False, "graph_cache": not args.tiling}
                if pass_options:
                    options["pipeline"] = with_pass_options(pass_options)
                if "-nocg" in variant:
                    options["cuda_graphs"] = False
                if "-nopack" in variant:
                    options["prepack_weights"] = False
                if "-autotune" in variant:
                    options["autotune"] = True
                fn = torch.compile(model, backend=kiln_backend, options=options, dynamic=dynamic)
            reference = copy.deepcopy(model)
            with torch.set_grad_enabled(args.mode == "train"):
                torch.manual_seed(1)
                first = _output(fn(*inputs))
                grad = torch.randn_like(first)
            error = output_error(first, reference, inputs)

            step(model, fn, inputs, grad)  # compiles the backward, outside the lock
            with timing_lock():
                for _ in range(args.warm - 1):
                    step(model, fn, inputs, grad)
                if device.type == "cpu":
                    _cpu_profile(
                        name, args, backend, functools.partial(step, model, fn, inputs, grad), error
                    )
                    continue
                kernels, launchers = _cuda_kernels(
                    args, functools.partial(step, model, fn, inputs, grad)
                )
            total = sum(v[0] for v in kernels.values()) / 1e3
            launches = sum(v[1] for v in kernels.values()) / args.steps
            copies = sum(v[1] for k, v in kernels.items() if k.startswith("Memcpy")) / args.steps
            print(
                f"## {name} {args.size} {args.mode} {args.dtype} {backend}: kernels {total:.3f} ms a step, "
                f"{launches:.0f} launches ({copies:.0f} memcpy), output vs eager {error:.1e}",
                flush=True,
            )
            ranked = sorted(kernels.items(), key=lambda kv: -kv[1][0])
            for kernel, (us, count) in ranked[: args.top]:
                print(f"   {us:8.1f} us {count // args.steps:4d}x {kernel[:110]}")
            for chain, count in launchers.most_common():
                print(f"   launched {count // args.steps:4d}x by {chain}")


def _cuda_kernels(
    args: argparse.Namespace, step: Any
) -> tuple[dict[str, list[float]], collections.Counter[str]]:
    """Per CUDA kernel name: microseconds a step and launches in ``args.steps`` steps, of
    the quietest of ``args.rounds`` profiled rounds (least kernel time: another process's
    kernels only lengthen the ones they overlap); and with ``--launched-by``, the launching
    operators' chains (innermost first, with input shapes) of the kernels it matches,
    counted over that round's steps."""
    rounds = []
    for _ in range(args.rounds):
        torch.cuda.synchronize()
        with profile(
            activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU],
            record_shapes=bool(args.launched_by),
        ) as prof:
            for _ in range(args.steps):
                step()
            torch.cuda.synchronize()
        kernels: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0])
        for event in prof.events():
            if event.device_type == torch.autograd.DeviceType.CUDA:
                kernels[event.name][0] += event.device_time_total / args.steps
                kernels[event.name][1] += 1
        rounds.append((sum(us for us, _ in kernels.values()), kernels, prof))
    _, kernels, prof = min(rounds, key=lambda r: r[0])
    launchers: collections.Counter[str] = collections.Counter()
    if args.launched_by:
        pattern = re.compile(args.launched_by)
        for event in prof.events():
            if event.device_type != torch.autograd.DeviceType.CPU:
                continue
            hits = [k for k in event.kernels if pattern.search(k.name)]
            if not hits:
                continue
            chain, parent = [f"{event.name}{list(event.input_shapes)}"], event.cpu_parent
            while parent is not None:
                chain.append(parent.name)
                parent = parent.cpu_parent
            launchers[" < ".join(chain)] += len(hits)
    return kernels, launchers


def _cpu_profile(
    name: str, args: argparse.Namespace, backend: str, step: Any, error: float
) -> None:
    """The step's wall time (median of ``args.steps``, unprofiled), then the CPU self time
    per operator of ``args.steps`` profiled steps."""
    times: list[float] = []
    for _ in range(args.steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(args.steps):
            step()
    rows = [
        (e.self_cpu_time_total / args.steps, e.count // args.steps, e.key)
        for e in prof.key_averages()
    ]
    total = sum(r[0] for r in rows) / 1e3
    print(
        f"## {name} {args.size} {args.mode} {args.dtype} {backend}: wall "
        f"{statistics.median(times) * 1e3:.1f} ms a step, profiled self time {total:.1f} ms, "
        f"output vs eager {error:.1e}",
        flush=True,
    )
    for us, count, key in sorted(rows, key=lambda r: -r[0])[: args.top]:
        print(f"   {us / 1e3:9.2f} ms {count:4d}x {key[:110]}")


if __name__ == "__main__":
    main()

"""Cold compile of one training step of a zoo model: where the seconds go.

One model per process (run it once per backend): the model is built and run once in
eager, the caches are pointed at fresh folders (kiln's, Inductor's, Triton's), then the
first forward + backward of the compiled model is timed: wall seconds, CPU seconds of
this process and of its finished children (the C++ compilers), and the collector's own
seconds by generation (a ``gc.callbacks`` hook). For kiln it then prints each graph's
profile (:meth:`kiln.compiler.GraphStats.profile`: AOTAutograd, import, every pass, the
C++ lowering, the build). On a loaded machine wall seconds mostly measure the load; the
CPU seconds compare better (docs/benchmarks/dashboard.md, "Session 11").

    python benchmarks/train_compile.py tv_mobilenet_v2 --backend kiln
    python benchmarks/train_compile.py tv_resnet50 --backend inductor --json /tmp/r50.json
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dashboard_measure import compile_with, fresh_caches
from zoo import registry


def cpu_seconds() -> tuple[float, float]:
    """CPU seconds (user + system) of this process and of its finished children."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, children.ru_utime + children.ru_stime


class CollectorClock:
    """Collections and seconds spent in them, by generation, while installed."""

    def __init__(self) -> None:
        self.counts = [0, 0, 0]
        self.seconds = [0.0, 0.0, 0.0]
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        generation = int(info["generation"])
        self.counts[generation] += 1
        self.seconds[generation] += time.perf_counter() - self._started


def train_step(fn: Any, inputs: Sequence[torch.Tensor]) -> None:
    out = fn(*inputs)
    outs = [o for o in (out if isinstance(out, tuple | list) else [out]) if o.requires_grad]
    torch.autograd.backward(outs, [torch.ones_like(o) for o in outs])


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("model", help="a zoo model (benchmarks/dashboard.py --list)")
    parser.add_argument("--backend", default="kiln", choices=("kiln", "inductor"))
    parser.add_argument("--size", default="small")
    parser.add_argument("--json", help="also write the result here")
    args = parser.parse_args(argv)

    model, inputs = registry()[args.model].build(args.size)
    model.train()
    train_step(model, inputs)  # eager once: lazy initialisation is not the compiler's
    model.zero_grad(set_to_none=True)
    fresh_caches(f"train-compile-{args.model}-{args.backend}")
    from kiln.compiler import compile_history, reset_compile_history

    reset_compile_history()
    compiled = compile_with(args.backend, model)
    clock = CollectorClock()
    gc.callbacks.append(clock)
    cpu_before = cpu_seconds()
    start = time.perf_counter()
    try:
        train_step(compiled, inputs)
    finally:
        gc.callbacks.remove(clock)
    wall = time.perf_counter() - start
    cpu_after = cpu_seconds()
    result: dict[str, Any] = {
        "model": args.model,
        "backend": args.backend,
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu_after[0] - cpu_before[0], 2),
        "children_cpu_s": round(cpu_after[1] - cpu_before[1], 2),
        "gc_collections": clock.counts,
        "gc_s": [round(s, 2) for s in clock.seconds],
        "graphs": [],
    }
    print(
        f"{args.model} {args.backend} train step, cold: wall {result['wall_s']} s, "
        f"CPU {result['cpu_s']} s + children {result['children_cpu_s']} s; "
        f"collections by generation {clock.counts}, {result['gc_s']} s"
    )
    for stats in compile_history():
        print(stats.profile())
        print(stats.summary())
        result["graphs"].append(
            {
                "name": stats.name,
                "fx_nodes": stats.fx_nodes,
                "kernels": stats.kernels,
                "seconds": round(stats.seconds, 3),
                "stages": {k: round(v, 3) for k, v in stats.stage_seconds.items()},
                "passes": {k: round(v, 3) for k, v in stats.pass_seconds.items()},
            }
        )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    main()

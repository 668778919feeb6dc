"""Compile time of ``torch.compile(dynamic=True)`` against the static compile, kiln's own
part (issue 21: the dynamic compile within 1.5x of the static one).

Per model of the dashboard's zoo (``small``, batch 2: batch 1 is a graph of its own under
``dynamic=True``, dynamo's 0/1 specialisation): one static and one dynamic compile, each
cold (fresh on-disk caches) and in a process of its own (in one process a compile reuses
what earlier ones cached in memory: ResNet-18's static compile read 4.8 s after
MobileNet-v2's, 12 s alone), ``--rounds`` times. Reported: the first call's wall clock,
kiln's own seconds (``GraphStats.seconds``, summed over the graphs), and the passes and
stages that took most of them. A throwaway compile of a tiny model per variant comes
first in each process (the process's one-time costs).

    PYTHONPATH=. /work/bench-venv/bin/python benchmarks/dynamic_compile.py \\
        --models tv_resnet18 tv_mobilenet_v2 timm_vit_tiny hf_bert hf_llama
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dashboard_measure import fresh_caches
from zoo import registry

from kiln.compiler import compile_history, reset_compile_history


def _batch_two(inputs: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    """The zoo's small inputs (batch 1) at batch 2."""
    return tuple(torch.cat([x, x]) if x.dim() > 0 else x for x in inputs)


def compile_once(name: str, dynamic: bool) -> dict[str, Any]:
    """Compile the model cold at batch 2; the first call's seconds and kiln's own."""
    module, inputs = registry()[name].build("small")
    inputs = _batch_two(inputs)
    torch._dynamo.reset()
    reset_compile_history()
    fresh_caches(f"{name}-{'dynamic' if dynamic else 'static'}")
    compiled = torch.compile(module, backend="kiln", dynamic=dynamic, options={"verbose": False})
    start = time.perf_counter()
    with torch.no_grad():
        compiled(*inputs)
    wall = time.perf_counter() - start
    stats = compile_history()
    passes: Counter[str] = Counter()
    stages: Counter[str] = Counter()
    for graph in stats:
        passes.update(graph.pass_seconds)
        stages.update(graph.stage_seconds)
    return {
        "wall": wall,
        "kiln": sum(g.seconds for g in stats),
        "graphs": len(stats),
        "passes": passes,
        "stages": stages,
    }


def _top(counter: Counter[str], n: int = 4) -> str:
    return ", ".join(f"{k} {v:.1f}" for k, v in counter.most_common(n))


def _one(name: str, dynamic: bool) -> None:
    """The child process: warm up, compile once, print the result as JSON."""
    torch.set_num_threads(1)
    for warm in (False, True):  # the process's one-time costs
        compile_once("mlp", warm)
    print(json.dumps(compile_once(name, dynamic)))


def _in_child(name: str, dynamic: bool) -> dict[str, Any]:
    command = [sys.executable, __file__, "--one", name, "dynamic" if dynamic else "static"]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    result["passes"], result["stages"] = Counter(result["passes"]), Counter(result["stages"])
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--models", nargs="*", default=["tv_resnet18", "tv_mobilenet_v2"])
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--one", nargs=2, metavar=("MODEL", "MODE"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.one:
        _one(args.one[0], args.one[1] == "dynamic")
        return 0
    print(
        "| model | kiln static s | kiln dynamic s | dyn/static | first call static s"
        " | first call dynamic s | static: top passes/stages s | dynamic: top passes/stages s |"
    )
    print("|---" * 8 + "|")
    for name in args.models:
        for _ in range(args.rounds):
            s, d = _in_child(name, False), _in_child(name, True)
            print(
                f"| {name} | {s['kiln']:.2f} | {d['kiln']:.2f} | {d['kiln'] / s['kiln']:.2f}"
                f" | {s['wall']:.1f} | {d['wall']:.1f}"
                f" | {_top(s['passes'])}; {_top(s['stages'], 3)}"
                f" | {_top(d['passes'])}; {_top(d['stages'], 3)} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

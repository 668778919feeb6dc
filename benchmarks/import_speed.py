"""Speed of importing a large FX graph, and of verify and CSE on the result.

Builds a ~10k-node ATen graph (a long chain of add/mul/relu/view, traced with make_fx)
and prints nodes/s for :func:`kiln.frontends.fx.import_graph`, ops/s for
``ModuleOp.verify`` and for xDSL's common-subexpression elimination.

    python benchmarks/import_speed.py [--nodes 10000] [--dynamic] [--repeat 3]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch
from torch.fx.experimental.proxy_tensor import make_fx
from xdsl.transforms.common_subexpression_elimination import cse

from kiln.frontends.fx import import_graph

NODES_PER_STEP = 5


def chain(steps: int) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    def program(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        rows = x.shape[0]
        for i in range(steps):
            x = torch.relu(x + y) * 0.5
            x = x.view(rows, 2, -1).view(rows, -1)
            if i % 10 == 0:
                # A repeated subexpression, so that CSE has something to remove.
                x = x + (y * 0.5) + (y * 0.5)
        return x

    return program


def best_of(repeat: int, run: Callable[[], object]) -> float:
    times: list[float] = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description="Speed of FX import, verify and CSE.")
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--dynamic", action="store_true", help="trace with symbolic shapes")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    x, y = torch.randn(4, 16), torch.randn(4, 16)
    start = time.perf_counter()
    mode = "symbolic" if args.dynamic else "fake"
    gm = make_fx(chain(args.nodes // NODES_PER_STEP), tracing_mode=mode)(x, y)
    trace_s = time.perf_counter() - start
    nodes = len(gm.graph.nodes)
    print(f"traced {nodes} FX nodes ({mode}) in {trace_s:.2f} s")

    import_s = best_of(args.repeat, lambda: import_graph(gm))
    module = import_graph(gm)
    ops = sum(1 for _ in module.walk())
    print(f"import : {import_s:.3f} s  {nodes / import_s:>9,.0f} nodes/s  ({ops} ops)")

    verify_s = best_of(args.repeat, module.verify)
    print(f"verify : {verify_s:.3f} s  {ops / verify_s:>9,.0f} ops/s")

    copies = [module.clone() for _ in range(args.repeat)]
    cse_s = best_of(args.repeat, lambda: cse(copies.pop()))
    print(f"cse    : {cse_s:.3f} s  {ops / cse_s:>9,.0f} ops/s")
    cleaned = module.clone()
    cse(cleaned)
    print(f"(cse removed {ops - sum(1 for _ in cleaned.walk())} duplicate ops)")


if __name__ == "__main__":
    main()

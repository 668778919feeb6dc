"""Lowering throughput of ``lower-aten`` (source aten ops per second).

Builds a stack of GPT blocks (about 5k aten ops after ``decompose``), keeps the IR in
memory (no printing or parsing) and times ``lower-aten`` alone, best of a few runs:

    python benchmarks/lower_aten_throughput.py [--layers 60]
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn

from kiln.dialects.aten import AtenOp
from kiln.examples import GPTBlock
from kiln.frontends.capture import capture_make_fx
from kiln.frontends.fx import import_graph
from kiln.passes.decompose import DecomposePass
from kiln.passes.lower_aten import LowerAtenPass
from kiln.registry import make_context


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--layers", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    model = nn.Sequential(*[GPTBlock(dim=32, heads=2, seed=k) for k in range(args.layers)]).eval()
    capture = capture_make_fx(model, torch.randn(2, 8, 32))
    source = import_graph(capture.gm)
    DecomposePass().apply(make_context(), source)
    count = sum(1 for op in source.walk() if isinstance(op, AtenOp))
    best = float("inf")
    module = source.clone()
    for _ in range(args.repeats):
        module = source.clone()
        start = time.perf_counter()
        LowerAtenPass().apply(make_context(), module)
        best = min(best, time.perf_counter() - start)
    created = sum(1 for _ in module.walk())
    print(
        f"lower-aten: {count} aten ops in {best:.2f} s = {count / best:,.0f} source ops/s "
        f"({created} ops created, {created / best:,.0f} ops/s)"
    )


if __name__ == "__main__":
    main()

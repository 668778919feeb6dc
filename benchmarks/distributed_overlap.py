"""Communication/compute overlap from ``reorder-collectives``, on CPU with gloo.

    python benchmarks/distributed_overlap.py                  # 2 ranks
    python benchmarks/distributed_overlap.py --ranks 4 --mb 8 --layers 6 --rounds 30

Each rank runs one step of a data-parallel-like program: an all-reduce of a gradient
bucket (``--mb`` megabytes) and, independent of it, a chain of ``--layers`` matrix
products with tanh (``--size`` square). As traced graphs hold it, the ``wait_tensor``
follows the all-reduce at once. The program is compiled twice with kiln, with the default
pipeline and with the same pipeline without ``reorder-collectives``; the two are timed
interleaved, ``--rounds`` rounds of ``--repeat`` calls each (every rank in lockstep,
a barrier before each round), and rank 0 reports the medians, the compute ops that run
between collectives and their waits in each program, and the compile times.

On CPU, gloo moves the data on its own threads while the program's kernels run on the
calling thread: with the wait sunk past the independent products, the two overlap. The
machine's other load moves the absolute numbers; compare the two columns of one run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _program(group_name: str, layers: int) -> Any:
    import torch

    c10d = torch.ops._c10d_functional

    def step(grad: Any, x: Any, w: Any) -> tuple[Any, Any]:
        reduced = c10d.wait_tensor(c10d.all_reduce(grad, "sum", group_name))
        h = x
        for _ in range(layers):
            h = torch.tanh(h @ w)
        return reduced * 0.5, h

    return step


def _rank(rank: int, world: int, init: str, args: argparse.Namespace) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(args.threads)
    dist.init_process_group(
        "gloo", init_method=init, rank=rank, world_size=world, timeout=timedelta(seconds=120)
    )
    from kiln.compiler import DEFAULT_PIPELINE, CompileOptions, compile_graph
    from kiln.dialects.kernel import ProgramOp
    from kiln.frontends.capture import capture_make_fx
    from kiln.passes.reorder_collectives import overlapping_compute

    world_group = dist.group.WORLD
    assert world_group is not None
    step = _program(world_group.group_name, args.layers)
    generator = torch.Generator().manual_seed(rank)
    inputs = [
        torch.randn(args.mb * 262144, generator=generator),
        torch.randn(args.size, args.size, generator=generator),
        torch.randn(args.size, args.size, generator=generator) / args.size**0.5,
    ]
    without = ",".join(p for p in DEFAULT_PIPELINE.split(",") if p != "reorder-collectives")
    variants: dict[str, Any] = {}
    report: list[str] = []
    for label, pipeline in (("reordered", DEFAULT_PIPELINE), ("in order", without)):
        capture = capture_make_fx(step, *inputs)
        start = time.perf_counter()
        compiled = compile_graph(
            capture.gm, inputs, CompileOptions(pipeline=pipeline, verbose=False)
        )
        seconds = time.perf_counter() - start
        program = next(op for op in compiled.module.ops if isinstance(op, ProgramOp))
        overlap = overlapping_compute(program.body.block)
        variants[label] = compiled
        report.append(
            f"{label}: {overlap} compute ops between collective and wait, compiled in {seconds:.2f} s"
        )
    expected = [t.clone() for t in step(*inputs)]
    for compiled in variants.values():
        for got, want in zip(compiled(*inputs), expected, strict=True):
            torch.testing.assert_close(got, want)
    times: dict[str, list[float]] = {label: [] for label in variants}
    for _ in range(args.warmup):
        for compiled in variants.values():
            compiled(*inputs)
    for _ in range(args.rounds):
        for label, compiled in variants.items():
            dist.barrier()
            start = time.perf_counter()
            for _ in range(args.repeat):
                compiled(*inputs)
            times[label].append((time.perf_counter() - start) / args.repeat)
    if rank == 0:
        medians = {label: statistics.median(t) * 1e3 for label, t in times.items()}
        print(
            f"distributed_overlap: {world} gloo ranks, {args.threads} thread(s) each; "
            f"all_reduce of {args.mb} MB + {args.layers} x (matmul {args.size}x{args.size}, tanh)"
        )
        for line in report:
            print(f"  {line}")
        print(
            f"  step time, median of {args.rounds} rounds x {args.repeat}: "
            f"reordered {medians['reordered']:.2f} ms, in order {medians['in order']:.2f} ms "
            f"(in order / reordered = {medians['in order'] / medians['reordered']:.2f})"
        )
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--mb", type=int, default=4, help="all-reduced megabytes")
    parser.add_argument("--size", type=int, default=256, help="matrix size")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads per rank")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as folder:
        init = f"file://{folder}/rendezvous"
        mp.start_processes(  # pyright: ignore[reportUnknownMemberType]
            _rank, args=(args.ranks, init, args), nprocs=args.ranks, start_method="spawn"
        )


if __name__ == "__main__":
    main()

"""Sweep Triton launch configs of one memory-bound program on the GPU (how the tile
pass's defaults were chosen).

    python3 benchmarks/gpu_sweep.py amax_cols            # split outer reduction: shapes x splits
    python3 benchmarks/gpu_sweep.py --warps var_mean_2048 softmax_4096

Each line: the program's time (CUDA events, median) and its bandwidth as a fraction of
the device copy bandwidth, with the largest error against eager. ``--warps`` keeps the
tile pass's block sizes and varies ``num_warps`` of every kernel; otherwise the first
kernel's XBLOCK x RBLOCK x num_warps are swept for several ``tile{sm-count=...}`` values
(which move the split decision) and chunk sizes.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from xdsl.dialects.builtin import ArrayAttr

sys.path.insert(0, str(Path(__file__).parent))
import gpu as G  # the memory-bound programs and copy bandwidth

from kiln.dialects.kernel.attributes import ConfigAttr
from kiln.dialects.kernel.kernel_ops import KernelOp
from kiln.passes.scheduling import tiling
from kiln.passes.tile import TilePass

Mutate = Callable[[list[KernelOp]], None]


def build(
    fn: Callable[..., Any], inputs: Sequence[torch.Tensor], sm_count: int, mutate: Mutate
) -> Any:
    from xdsl.dialects.builtin import ModuleOp

    from kiln.frontends.capture import capture_make_fx
    from kiln.frontends.fx import import_graph
    from kiln.registry import default_registry
    from kiln.targets import build_triton_program

    with torch.no_grad():
        capture = capture_make_fx(fn, *inputs)
    module: ModuleOp = import_graph(capture.gm)
    registry = default_registry()
    ctx = registry.make_context()
    passes = G._pipeline()  # pyright: ignore[reportPrivateUsage]
    for name in passes[: passes.index("tile")]:
        registry.get_pass(name)().apply(ctx, module)
    TilePass(sm_count=sm_count).apply(ctx, module)
    mutate([k for k in module.ops if isinstance(k, KernelOp)])
    for name in passes[passes.index("tile") + 1 :]:
        registry.get_pass(name)().apply(ctx, module)
    return build_triton_program(module), list(capture.example_inputs)


def config(**values: int) -> ConfigAttr:
    return ConfigAttr.of({**values, "num_stages": 1})


def first_kernel(c: ConfigAttr) -> Mutate:
    def mutate(kernels: list[KernelOp]) -> None:
        kernels[0].tiling = c
        kernels[0].configs = ArrayAttr([c])

    return mutate


def warps(w: int) -> Mutate:
    def mutate(kernels: list[KernelOp]) -> None:
        for k in kernels:
            assert k.tiling is not None
            c = ConfigAttr.of({**k.tiling.as_dict(), "num_warps": w})
            k.tiling, k.configs = c, ArrayAttr([c])

    return mutate


def run(label: str, name: str, sm_count: int, mutate: Mutate, copy_gbps: float) -> None:
    from triton.testing import do_bench

    fn, make = G.MEMORY_BOUND[name]
    inputs = make()
    try:
        program, args = build(fn, inputs, sm_count, mutate)
        with torch.no_grad():
            got = program(args)
            want = fn(*inputs)
        wants = want if isinstance(want, tuple) else (want,)
        error = max(
            float((g.float() - w.float()).abs().max()) for g, w in zip(got, wants, strict=True)
        )
        nbytes = sum(t.numel() * t.element_size() for t in [*inputs, *wants])
        ms = do_bench(lambda: program(args), warmup=25, rep=100, return_mode="median")
        fraction = nbytes / (ms * 1e-3) / 1e9 / copy_gbps
        print(f"{label:56s} {ms:.4f} ms {fraction:6.1%} err {error:.1e}", flush=True)
    except Exception as e:  # a config the kernel cannot take: report, go on
        print(f"{label:56s} failed: {type(e).__name__}: {str(e)[:160]}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("programs", nargs="+", choices=sorted(G.MEMORY_BOUND))
    parser.add_argument("--warps", action="store_true", help="only vary num_warps")
    parser.add_argument(
        "--split-min-rnumel",
        type=int,
        default=tiling.SPLIT_MIN_RNUMEL,
        help="split inner reductions longer than this (tiling.SPLIT_MIN_RNUMEL)",
    )
    parser.add_argument(
        "--chunks",
        default="1024,256",
        help="tiling.SPLIT_MIN_CHUNK (and OUTER_SPLIT_MIN_CHUNK) values",
    )
    parser.add_argument("--sm-counts", default="132,264", help="tile{sm-count} values")
    args = parser.parse_args()
    tiling.SPLIT_MIN_RNUMEL = args.split_min_rnumel
    copy_gbps = G.copy_bandwidth()
    print(f"copy bandwidth {copy_gbps:.0f} GB/s")
    for name in args.programs:
        run(f"{name} default", name, 132, lambda kernels: None, copy_gbps)
        if args.warps:
            for w in (2, 4, 8, 16):
                run(f"{name} num_warps={w}", name, 132, warps(w), copy_gbps)
            continue
        chunks = [int(c) for c in args.chunks.split(",")]
        sm_counts = [int(c) for c in args.sm_counts.split(",")]
        for chunk, sm_count in itertools.product(chunks, sm_counts):
            tiling.SPLIT_MIN_CHUNK = tiling.OUTER_SPLIT_MIN_CHUNK = chunk
            for x, r, w in itertools.product((16, 32, 64, 128), (8, 16, 32), (2, 4, 8)):
                if not 256 <= x * r <= 8192:
                    continue
                label = f"{name} chunk={chunk} sm={sm_count} X{x} R{r} w{w}"
                run(
                    label,
                    name,
                    sm_count,
                    first_kernel(config(XBLOCK=x, RBLOCK=r, num_warps=w)),
                    copy_gbps,
                )
        tiling.SPLIT_MIN_CHUNK, tiling.OUTER_SPLIT_MIN_CHUNK = 1024, 256


if __name__ == "__main__":
    main()

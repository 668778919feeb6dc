"""Code generation choices of ``lower-to-cpp`` and the parallelization rule."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import sympy

from kiln.passes.kernel_to_cpp.space import substitute

SIZE_HINT = 8192
"""Assumed value of a symbolic size when choosing how to parallelize (Inductor's)."""


@dataclass(frozen=True)
class CppOptions:
    """Code generation choices (``lower-to-cpp``'s options)."""

    threads: int = 1
    """Threads the code is tuned for (parallel depth, split reductions)."""
    lanes: int = 64
    """Per-lane accumulators of a reduction (at most; see :func:`reduction_lanes`):
    several vectors' worth, so that the adds of consecutive blocks do not wait for each
    other (64 lanes measured faster than 16 on row sums and layer norm:
    docs/benchmarks/design-notes.md)."""
    min_chunk: int = 512
    """Least work (elements) per thread worth a parallel loop (Inductor's)."""
    split_threshold: int = 4096
    """Least reduction size worth splitting across threads when the pointwise space
    alone cannot keep them busy."""
    outer_reductions: bool = True
    """Vectorize reductions across outputs when that makes their loads contiguous."""
    tile: int = 32
    """Side of the 2-D tiles of transposing pointwise kernels (1: no tiling)."""
    stash: bool = True
    """Keep expensive values a later r-loop needs in an output (see :mod:`.stash`)."""
    cascade: int = 64
    """Block of the reduction that such a reduction sums into fresh partials (precision)."""
    outer_lanes: int = 64
    """Outputs per block of such a reduction (several vectors: whole cache lines, and
    enough independent accumulators to hide the adds' latency)."""


@cache
def default_lanes() -> int:
    """Four vectors of f32: 64 lanes with AVX-512, 32 otherwise (16 vector registers
    hold no more accumulators than that)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return 32
    flags = next((line for line in text.splitlines() if line.startswith("flags")), "")
    return 64 if "avx512f" in flags.split() else 32


def reduction_lanes(options: CppOptions, inner_size: sympy.Expr) -> int:
    """The lanes of a reduction whose innermost reduction dim is ``inner_size``: the
    largest power of two not above it, between 16 and ``options.lanes`` (a short
    reduction gains nothing from more accumulators, and pays for combining them)."""
    hint = max(size_hint(inner_size), 1)
    lanes = 1 << (hint.bit_length() - 1)
    return max(min(lanes, options.lanes), min(16, options.lanes))


def size_hint(expr: sympy.Expr) -> int:
    expr = sympy.sympify(expr)
    if expr.is_Integer:
        return int(expr)
    return int(substitute(expr, {s: sympy.Integer(SIZE_HINT) for s in expr.free_symbols}))  # pyright: ignore[reportArgumentType]


def parallel_depth(sizes: Sequence[sympy.Expr], inner_work: int, options: CppOptions) -> int:
    """How many outer dims to share out among threads (Inductor's rule): stop once
    there are enough parallel iterations, or when a thread would get too little work."""
    threads = options.threads
    hints = [size_hint(s) for s in sizes]
    seq = math.prod(hints) * inner_work
    par, depth = 1, 0
    for hint in hints:
        if par >= 2 * threads or par == threads:
            break
        if seq // threads < options.min_chunk:
            break
        depth += 1
        par *= hint
        seq //= max(hint, 1)
    return depth


__all__ = [
    "SIZE_HINT",
    "CppOptions",
    "default_lanes",
    "parallel_depth",
    "reduction_lanes",
    "size_hint",
]

"""Code generation choices of ``lower-to-cpp`` and the parallelization rule."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import sympy

from kiln.passes.cpp_lowering.space import substitute

SIZE_HINT = 8192
"""Assumed value of a symbolic size when choosing how to parallelize (Inductor's)."""


@dataclass(frozen=True)
class CppOptions:
    """Code generation choices (``lower-to-cpp``'s options)."""

    threads: int = 1
    """Threads the code is tuned for (parallel depth, split reductions)."""
    lanes: int = 16
    """Per-lane accumulators of a reduction: the vector width in elements."""
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


__all__ = ["SIZE_HINT", "CppOptions", "parallel_depth", "size_hint"]

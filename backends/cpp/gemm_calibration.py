"""Which float32 GEMM is faster on this CPU: ATen's ``mm`` or oneDNN's packed linear.

ATen's CPU ``mm`` calls MKL's ``sgemm`` (in the x86 wheels). MKL picks its kernels by
CPU vendor: on an AMD EPYC (Zen 4, AVX-512) VM here it ran at 125-150 GFLOP/s where
oneDNN's ``mkldnn._linear_pointwise`` on a weight packed by
``mkldnn._reorder_linear_weight`` ran at 175-207 (4096 x 768 x 3072: 118.5 against 101.0
ms; DistilBERT at batch 8 x 512 ran 1.3x faster end to end with every linear layer
packed). On the Intel Xeon VMs of earlier sessions the packed GEMM lost (DistilBERT 4 %
slower end to end). So ``prepack-weights`` asks, in its default ``linear=auto`` mode,
what this machine measures: each product of :data:`SHAPES` each way, alternated, the
median of :data:`ROUNDS` per product (about 0.15 s here), and packs linear layers only
where oneDNN wins by :data:`MIN_GAIN` or more (the geometric mean over the products).

The first process on a machine measures and stores the result in kiln's cache
(``calibration/``, keyed on the CPU, torch's version and the thread count); later
processes read it. Measuring in every process let two processes decide differently
where the two GEMMs were close (a loaded 2-core CI machine): the verdict is in the graph
cache's key, so a second process missed the first one's entries.

The measurement is what :func:`calibration` returns (``describe()`` reads it out);
:func:`packed_linear_faster` is its verdict, which the driver writes on the module as
``kiln.packed_linear``.
"""

from __future__ import annotations

import functools
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

SHAPES = ((1024, 768, 768), (32, 768, 3072))
"""Rows, inner size, columns of the measured products: linear layers of a base-width
transformer at a thousand tokens and at a few (``prepack-weights`` packs large weights
from a single row). The first alone was a coin toss here: MKL's time is bimodal on the
AMD VM, and one dashboard process read 6.32 ms against oneDNN's 6.31 (no packing for its
whole run) where others read 1.09-1.38x; the second ran 1.8-1.9x faster packed."""
ROUNDS = 9
MIN_GAIN = 1.05
"""oneDNN must be this much faster to be chosen: below it, run-to-run noise could flip
the choice between processes, and MKL's ``mm`` needs no packed copy of the weight. (The
medians here: 1.14-1.38x in favour of oneDNN in five processes.)"""


@dataclass(frozen=True)
class GemmCalibration:
    mm_ms: float
    """ATen ``mm(x, w.t())``: the geometric mean over :data:`SHAPES` of each product's
    median of the rounds."""
    packed_ms: float
    """oneDNN ``_linear_pointwise`` on the packed weight, likewise."""

    @property
    def packed_faster(self) -> bool:
        return self.mm_ms >= MIN_GAIN * self.packed_ms

    def describe(self) -> str:
        shapes = ", ".join("x".join(map(str, shape)) for shape in SHAPES)
        verdict = "packs linear layers" if self.packed_faster else "keeps ATen's mm"
        return (
            f"float32 GEMMs {shapes} (geometric mean): ATen mm {self.mm_ms:.2f} ms, "
            f"oneDNN packed {self.packed_ms:.2f} ms ({verdict})"
        )


def linear_available() -> bool:
    """Whether this torch runs oneDNN linear layers on prepacked weights. (Here, not in
    :mod:`kiln.backends.cpp.prepack`: the driver asks before a graph-cache hit, which must
    import none of kiln's IR modules.)"""
    return bool(
        torch.backends.mkldnn.is_available()
        and hasattr(torch.ops.mkldnn, "_linear_pointwise")
        and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")
    )


def _median_ms(times: list[float]) -> float:
    # The median, not the best: MKL's time here was bimodal between rounds (12 or 16 ms
    # at 2048 rows), and its best alone sometimes came within 10 % of oneDNN's.
    return statistics.median(times) * 1e3


def _measure() -> GemmCalibration:
    generator = torch.Generator().manual_seed(0)
    linear = torch.ops.mkldnn._linear_pointwise
    runs: list[tuple[Callable[[], object], list[float]]] = []
    with torch.no_grad():
        for rows, inner, cols in SHAPES:
            x = torch.randn(rows, inner, generator=generator)
            weight = torch.randn(cols, inner, generator=generator)
            packed = torch.ops.mkldnn._reorder_linear_weight(weight, rows)
            runs.append((functools.partial(torch.mm, x, weight.t()), []))
            runs.append((functools.partial(linear, x, packed, None, "none", [], ""), []))
        for run, _ in runs:
            run()
        for _ in range(ROUNDS):
            for run, times in runs:
                start = time.perf_counter()
                run()
                times.append(time.perf_counter() - start)
    medians = [_median_ms(times) for _, times in runs]
    return GemmCalibration(_geomean(medians[0::2]), _geomean(medians[1::2]))


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def stored_path() -> Path:
    """Where this machine's measurement is kept: one entry per CPU, torch build, thread
    count and measured shape (any of them changes the verdict)."""
    from kiln.backends.cache import cache_root, content_hash, usable_dir
    from kiln.backends.cpp.compiler import cpu_identity

    key = content_hash(
        cpu_identity(),
        f"torch {torch.__version__} {torch.version.git_version}",
        f"threads {torch.get_num_threads()}",
        f"shapes {SHAPES} rounds {ROUNDS}",
    )
    return usable_dir(cache_root() / "calibration", "calibration") / f"gemm-{key}.json"


def _read(path: Path) -> GemmCalibration | None:
    from kiln.backends.cache import load_timings

    times = load_timings(path, "mm_ms", "packed_ms")
    return GemmCalibration(*times) if times is not None else None


def calibration() -> GemmCalibration | None:
    """The measurement (None where this torch has no oneDNN linear): this machine's
    stored one, else measured now and stored (an unwritable cache only warns)."""
    if not linear_available():
        return None
    try:
        path: Path | None = stored_path()
    except OSError:
        path = None
    return _calibration_at(path)


@functools.cache
def _measured_once() -> GemmCalibration:
    return _measure()


@functools.cache
def _calibration_at(path: Path | None) -> GemmCalibration:
    """The measurement stored at ``path``, else this process's (measured once), stored
    there: a process that switches caches (``KILN_CACHE_DIR``, a test's private cache)
    leaves its verdict in each, so that a second process on that cache decides alike
    (the verdict is part of the graph cache's key)."""
    from kiln.backends.cache import store_json

    stored = _read(path) if path is not None else None
    if stored is not None:
        return stored
    measured = _measured_once()
    if path is not None:
        try:
            store_json(path, {"mm_ms": measured.mm_ms, "packed_ms": measured.packed_ms})
        except OSError:
            pass  # the next process measures again
    return measured


def forget_calibration() -> None:
    """Drop this process's measurement and what it read (tests)."""
    _measured_once.cache_clear()
    _calibration_at.cache_clear()


def packed_linear_faster() -> bool:
    """Whether oneDNN's packed GEMM beats ATen's ``mm`` here (measured once per machine)."""
    measured = calibration()
    return measured is not None and measured.packed_faster


__all__ = [
    "MIN_GAIN",
    "SHAPES",
    "GemmCalibration",
    "calibration",
    "forget_calibration",
    "linear_available",
    "packed_linear_faster",
    "stored_path",
]

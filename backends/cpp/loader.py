"""Building a graph's kernels into shared libraries and loading them in-process.

The kernels are split into translation units and the units compiled in parallel (one
compiler process each, through the disk cache), then loaded with ``ctypes``: every
kernel gets its argument types once, so a launch costs a plain ``ctypes`` call. Why
several units: the compiler has a fixed cost per unit (the prelude and ``<cmath>``), so
small graphs compile fastest as one unit and large ones as one unit per core (figures:
docs/benchmarks/design-notes.md).
"""

from __future__ import annotations

import ctypes
import os
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xdsl.dialects.builtin import IndexType

from kiln.backends.cpp.cache import cache_key, load_or_build
from kiln.backends.cpp.compiler import compile_library
from kiln.backends.cpp.emit import emit_function, emit_functions
from kiln.dialects.cpp.func_ops import FuncOp

LINES_PER_UNIT = 800
"""Kernel source lines a unit should hold at least before another unit pays off."""

_LOADED: dict[str, ctypes.CDLL] = {}
"""Libraries this process loaded, by cache key (a second build of the same graph skips
re-reading and re-verifying the file)."""


def worker_count() -> int:
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def translation_units(
    functions: Sequence[FuncOp],
    workers: int | None = None,
    emitted: Mapping[FuncOp, str] | None = None,
) -> list[list[FuncOp]]:
    """The kernels grouped into units of similar size in lines (kernels keep their
    order); ``emitted``: their C++ where already emitted."""
    workers = workers or worker_count()
    texts = emitted if emitted is not None else {f: emit_function(f) for f in functions}
    sizes = [texts[f].count("\n") for f in functions]
    total = sum(sizes)
    count = max(1, min(workers, len(functions), total // LINES_PER_UNIT))
    units: list[list[FuncOp]] = [[] for _ in range(count)]
    loads = [0] * count
    # Largest first onto the least loaded unit: balanced compile times.
    for index in sorted(range(len(functions)), key=lambda i: -sizes[i]):
        unit = loads.index(min(loads))
        units[unit].append(functions[index])
        loads[unit] += sizes[index]
    order = {f: i for i, f in enumerate(functions)}
    return [sorted(u, key=order.__getitem__) for u in units if u]


def set_signature(handle: Any, func: FuncOp) -> Callable[..., int]:
    argtypes: list[type[Any]] = []
    for arg in (*func.input_args(), *func.output_args()):
        argtypes.append(ctypes.c_int64 if isinstance(arg.type, IndexType) else ctypes.c_void_p)
    handle.argtypes = argtypes
    handle.restype = ctypes.c_int
    return handle


@dataclass
class LoadedKernels:
    """A graph's kernels, compiled and loaded."""

    functions: dict[str, Callable[..., int]] = field(default_factory=dict[str, Callable[..., int]])
    sources: list[str] = field(default_factory=list[str])
    paths: list[Path] = field(default_factory=list[Path])
    cache_hits: int = 0
    emit_seconds: float = 0.0
    """Emitting the C++ and grouping it into units."""
    build_seconds: float = 0.0
    """Compiling the units (in parallel) or finding them in the cache, and loading them."""


def _load_unit(source: str) -> tuple[ctypes.CDLL, Path, bool]:
    key = cache_key(source)
    if key in _LOADED:
        library = _LOADED[key]
        return library, Path(library._name), True  # pyright: ignore[reportPrivateUsage, reportUnknownMemberType, reportUnknownArgumentType]
    library, path, hit = load_or_build(source, compile_library)
    _LOADED[key] = library
    return library, path, hit


def load_kernels(
    functions: Sequence[FuncOp], emitted: Mapping[FuncOp, str] | None = None
) -> LoadedKernels:
    """Compile (or find in the cache) and load every kernel (``emitted``: the C++ of
    those already emitted, :func:`~kiln.backends.cpp.emit.emit_function`)."""
    loaded = LoadedKernels()
    if not functions:
        return loaded
    start = time.perf_counter()
    texts = {f: (emitted or {}).get(f) or emit_function(f) for f in functions}
    units = translation_units(functions, emitted=texts)
    loaded.sources = [emit_functions(unit, texts) for unit in units]
    built = time.perf_counter()
    loaded.emit_seconds = built - start
    if len(units) == 1:
        results = [_load_unit(loaded.sources[0])]
    else:
        with ThreadPoolExecutor(max_workers=len(units)) as pool:
            results = list(pool.map(_load_unit, loaded.sources))
    for unit, (library, path, hit) in zip(units, results, strict=True):
        loaded.paths.append(path)
        loaded.cache_hits += hit
        for func in unit:
            loaded.functions[func.sym_name.data] = set_signature(
                getattr(library, func.sym_name.data), func
            )
    loaded.build_seconds = time.perf_counter() - built
    return loaded


__all__ = ["LoadedKernels", "load_kernels", "set_signature", "translation_units", "worker_count"]

"""Building a graph's kernels into shared libraries and loading them in-process.

The kernels are split into translation units and the units compiled in parallel (one
compiler process each, through the disk cache), then loaded with ``ctypes``; each kernel
is called through its Python entry (:mod:`.python_entry`: a built-in function, half the
cost of a ``ctypes`` call), or, in a library without entries, as a ``ctypes`` function
with its argument types set once. Why
several units: the compiler has a fixed cost per unit (the prelude and ``<cmath>``), so
small graphs compile fastest as one unit and large ones as one unit per core (figures:
docs/benchmarks/design-notes.md).
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kiln.backends.cpp.cache import (
    cache_dir,
    cache_key,
    is_intact,
    kernel_key,
    load_or_build,
    lookup_kernel,
    record_kernel,
)
from kiln.backends.cpp.compiler import compile_library
from kiln.backends.cpp.prelude import unit_source
from kiln.backends.cpp.python_entry import bind, entry
from kiln.cores import usable_cores

if TYPE_CHECKING:
    from kiln.dialects.cpp.func_ops import FuncOp

LINES_PER_UNIT = 800
"""Kernel source lines a unit should hold at least before another unit pays off."""

_LOADED: dict[str, ctypes.CDLL] = {}
"""Libraries this process loaded, by cache key (a second build of the same graph skips
re-reading and re-verifying the file)."""


def worker_count() -> int:
    return usable_cores()


def _grouped(sizes: Sequence[int], workers: int) -> list[list[int]]:
    """Indices grouped into units of similar size in lines (in their order)."""
    total = sum(sizes)
    count = max(1, min(workers, len(sizes), total // LINES_PER_UNIT))
    units: list[list[int]] = [[] for _ in range(count)]
    loads = [0] * count
    # Largest first onto the least loaded unit: balanced compile times.
    for index in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        unit = loads.index(min(loads))
        units[unit].append(index)
        loads[unit] += sizes[index]
    return [sorted(u) for u in units if u]


def translation_units(
    functions: Sequence[FuncOp],
    workers: int | None = None,
    emitted: Mapping[FuncOp, str] | None = None,
) -> list[list[FuncOp]]:
    """The kernels grouped into units of similar size in lines (kernels keep their
    order); ``emitted``: their C++ where already emitted."""
    from kiln.backends.cpp.emit import emit_function

    texts = emitted if emitted is not None else {f: emit_function(f) for f in functions}
    sizes = [texts[f].count("\n") for f in functions]
    return [[functions[i] for i in u] for u in _grouped(sizes, workers or worker_count())]


def argument_kinds(func: FuncOp) -> str:
    """Per argument of ``func``: ``i`` (an index, ``int64_t``) or ``p`` (a pointer)."""
    from xdsl.dialects.builtin import IndexType

    return "".join(
        "i" if isinstance(arg.type, IndexType) else "p"
        for arg in (*func.input_args(), *func.output_args())
    )


def _signed(handle: Any, kinds: str) -> Callable[..., int]:
    handle.argtypes = [ctypes.c_int64 if k == "i" else ctypes.c_void_p for k in kinds]
    handle.restype = ctypes.c_int
    return handle


def set_signature(handle: Any, func: FuncOp) -> Callable[..., int]:
    return _signed(handle, argument_kinds(func))


def _callable(library: ctypes.CDLL, symbol: str, kinds: str) -> Callable[..., int]:
    """Kernel ``symbol`` as its Python entry (a built-in function, :mod:`.python_entry`),
    or as a ``ctypes`` call where the library has no entry for it."""
    return entry(library, symbol) or _signed(getattr(library, symbol), kinds)


def _bound(library: ctypes.CDLL) -> ctypes.CDLL:
    bind(library)
    return library


def _unit(kernels: Sequence[KernelText]) -> str:
    return unit_source([k.text for k in kernels], [(k.name, k.kinds) for k in kernels])


@dataclass(frozen=True)
class KernelText:
    """One kernel as the loader needs it: its symbol, its C++ (:func:`emit_function`) and
    its argument kinds (:func:`argument_kinds`). Plain data (a graph cache entry holds it)."""

    name: str
    text: str
    kinds: str


@dataclass
class LoadedKernels:
    """A graph's kernels, compiled and loaded."""

    functions: dict[str, Callable[..., int]] = field(default_factory=dict[str, Callable[..., int]])
    sources: list[str] = field(default_factory=list[str])
    """The translation units' sources (all the graph's kernels, whatever was compiled)."""
    paths: list[Path] = field(default_factory=list[Path])
    cache_hits: int = 0
    """Units of :attr:`sources` that needed no compiler run: found in the library cache,
    or every kernel found in libraries other graphs built (the kernel index)."""
    emit_seconds: float = 0.0
    """Emitting the C++ and grouping it into units."""
    build_seconds: float = 0.0
    """Compiling the units (in parallel) or finding them in the cache, and loading them."""
    kernels: list[KernelText] = field(default_factory=list[KernelText])
    reused: int = 0
    """Kernels found through the kernel index in a library another graph built."""


def _load_unit(source: str) -> tuple[ctypes.CDLL, Path, bool]:
    key = cache_key(source)
    if key in _LOADED:
        library = _LOADED[key]
        return library, Path(library._name), True  # pyright: ignore[reportPrivateUsage, reportUnknownMemberType, reportUnknownArgumentType]
    library, path, hit = load_or_build(source, compile_library)
    _LOADED[key] = _bound(library)
    return library, path, hit


def _unit_cached(source: str) -> bool:
    key = cache_key(source)
    return key in _LOADED or (cache_dir() / f"{key}.so").exists()


def _indexed(kernel: KernelText) -> Callable[..., int] | None:
    """The kernel from a library another graph built, through the kernel index."""
    key = kernel_key(kernel.name, kernel.text)
    found = lookup_kernel(key) if key is not None else None
    if found is None:
        return None
    library_key, symbol = found
    library = _LOADED.get(library_key)
    if library is None:
        path = cache_dir() / f"{library_key}.so"
        if not is_intact(path):
            return None
        try:
            library = _bound(ctypes.CDLL(str(path)))
        except OSError:
            return None
        _LOADED[library_key] = library
    try:
        return _callable(library, symbol, kernel.kinds)
    except AttributeError:
        return None


def load_kernels(
    functions: Sequence[FuncOp], emitted: Mapping[FuncOp, str] | None = None
) -> LoadedKernels:
    """Compile (or find in the cache) and load every kernel (``emitted``: the C++ of
    those already emitted, :func:`~kiln.backends.cpp.emit.emit_function`)."""
    from kiln.backends.cpp.emit import emit_function  # the IR side: not for saved programs

    start = time.perf_counter()
    kernels = [
        KernelText(f.sym_name.data, (emitted or {}).get(f) or emit_function(f), argument_kinds(f))
        for f in functions
    ]
    emitting = time.perf_counter() - start
    loaded = load_kernel_texts(kernels)
    loaded.emit_seconds += emitting
    return loaded


def load_kernel_texts(kernels: Sequence[KernelText]) -> LoadedKernels:
    """Load every kernel: a unit from the library cache when it was built before; else
    each kernel from the library of any graph that built the same C++ (the kernel index,
    :func:`~kiln.backends.cpp.cache.kernel_key`: names and comments aside); the kernels
    left are compiled, in parallel units, and indexed for later graphs."""
    loaded = LoadedKernels(kernels=list(kernels))
    if not kernels:
        return loaded
    start = time.perf_counter()
    units = [
        [kernels[i] for i in u]
        for u in _grouped([k.text.count("\n") for k in kernels], worker_count())
    ]
    loaded.sources = [_unit(unit) for unit in units]
    built = time.perf_counter()
    loaded.emit_seconds = built - start
    # What to load: whole units found in the library cache, and units of the kernels that
    # no library holds yet.
    plan: list[tuple[list[KernelText], str]] = []
    for unit, source in zip(units, loaded.sources, strict=True):
        if _unit_cached(source):
            plan.append((unit, source))
            continue
        missing: list[KernelText] = []
        for kernel in unit:
            handle = _indexed(kernel)
            if handle is None:
                missing.append(kernel)
            else:
                loaded.functions[kernel.name] = handle
                loaded.reused += 1
        if len(missing) == len(unit):
            plan.append((unit, source))
        elif missing:
            plan.append((missing, _unit(missing)))
        else:
            loaded.cache_hits += 1
    if len(plan) <= 1:
        results = [_load_unit(source) for _, source in plan]
    else:
        with ThreadPoolExecutor(max_workers=len(plan)) as pool:
            results = list(pool.map(_load_unit, [source for _, source in plan]))
    for (unit, _), (library, path, hit) in zip(plan, results, strict=True):
        loaded.paths.append(path)
        loaded.cache_hits += hit
        for kernel in unit:
            loaded.functions[kernel.name] = _callable(library, kernel.name, kernel.kinds)
            key = kernel_key(kernel.name, kernel.text)
            if key is not None:
                record_kernel(key, path.stem, kernel.name, replace=not hit)
    loaded.build_seconds = time.perf_counter() - built
    return loaded


__all__ = [
    "KernelText",
    "LoadedKernels",
    "argument_kinds",
    "load_kernel_texts",
    "load_kernels",
    "set_signature",
    "translation_units",
    "worker_count",
]

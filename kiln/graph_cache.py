"""The graph cache: a second process compiling the same graph skips the pipeline (warm start).

Like Inductor's FX graph cache. :func:`kiln.compiler.compile_graph` looks the graph up
here before importing it or running any pass:

* **Key**: SHA-256 of the FX graph's description (:func:`kiln.fx_key.describe_graph`:
  every node's target and arguments, the traced tensors' shapes, strides, dtypes and
  storage sharing, the data of traced constants: everything the import reads) with what
  the driver adds to the imported module (its device, whether it is an inference graph
  that ``prepack-weights`` may prepack); a graph that cannot be described exactly
  (symbolic sizes, unknown objects) is imported first and keyed on its aten IR's text
  (ops, types with shapes and dtypes, symbolic sizes and their ranges, argument
  attributes). Then the options that change the program (pipeline, executor), and the
  environment that does: kiln's own source (a hash of every module of the ``kiln``
  package, so an edited checkout never reuses an old entry), the torch, xDSL, sympy and
  Python versions, the C++ compiler's identity (version, flags, CPU), the thread count
  the loops are lowered for, torch's default dtype, and the ``KILN_*`` settings that
  reach the compiler. Any difference is a miss.
* **Value**: the compiled program as data (:mod:`kiln.backends.cpp.saved`: the wrapper's
  source, its namespace, the kernels' C++ per translation unit) plus what the driver
  adds around it (how outputs are rebuilt, which traced constants to pass, the
  statistics). A hit executes the wrapper and loads the kernels' libraries from the C++
  cache (a missing library is rebuilt from the saved source); it imports none of kiln's
  IR modules (the wrapper's helpers live in :mod:`kiln.backends.host.runtime` and
  :mod:`kiln.backends.cpp.runtime`).
* **Scope**: the C++ executor. A graph whose program cannot be rebuilt from data
  (kernels left to the interpreter, externs run by the aten interpreter or through call
  plans) is not stored and compiles every time. Graphs compiled with plugins or a debug
  directory bypass the cache (a plugin's code is not in the key; a debug directory
  asks for the IR after every pass).
* **Safety**: entries live in ``<cache root>/graphs`` (private, pruned like the other
  caches, :mod:`kiln.backends.cache`), written to a temporary file and renamed into
  place (concurrent writers both succeed, a reader never sees half a file), and carry a
  SHA-256 of their content: an entry that is truncated, corrupted, of another format or
  another key, or that fails to load, is deleted with a warning and the graph compiles
  as if it had missed, never crashes the compile, never runs.
* **Off**: ``KILN_GRAPH_CACHE=0`` in the environment, or the ``graph_cache=False`` option.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kiln.backends.cpp.saved import SavedProgram
    from kiln.compiler import CompileOptions

ENV = "KILN_GRAPH_CACHE"
ENTRY_FORMAT = 2
MAGIC = b"KILN-GRAPH-v1\x00\x00\x00"
DIGEST_SIZE = 32

_KEY_ENV = ("KILN_MAX_KERNEL_LINES", "KILN_CXX", "KILN_CXX_TIMEOUT")
"""Settings read while compiling that change the program (the compiler and its limits)."""


@dataclass
class GraphEntry:
    """What a hit needs besides the program: the driver's side of a compiled graph."""

    program: SavedProgram
    output_structure: str | None
    kernels: int
    launches: int
    externs: dict[str, int] = field(default_factory=dict[str, int])
    lifted: tuple[str, ...] = ()
    """The ``get_attr`` targets of the traced constants passed after the placeholders, in
    argument order (a hit fetches them from the graph without importing it)."""
    output_strides: list[tuple[int, ...] | None] | None = None
    """:attr:`kiln.compiler.CompiledGraph.output_strides`."""
    format: int = ENTRY_FORMAT


def enabled(options: CompileOptions) -> bool:
    """Whether ``options`` use the graph cache (``KILN_GRAPH_CACHE=0`` turns it off)."""
    if os.environ.get(ENV, "1").strip().lower() in ("0", "false", "off", "no", ""):
        return False
    return options.graph_cache and not options.plugins and not options.debug_dir


def cache_dir() -> Path:
    from kiln.backends.cache import cache_root, usable_dir

    return usable_dir(cache_root() / "graphs", "graphs")


@cache
def kiln_source_hash() -> str:
    """SHA-256 of every Python module of the ``kiln`` package (paths and contents)."""
    import kiln

    package = Path(kiln.__file__).parent
    digest = hashlib.sha256()
    files: list[tuple[str, Path]] = []
    for folder, dirs, names in os.walk(package, followlinks=True):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in names:
            if name.endswith(".py"):
                path = Path(folder) / name
                files.append((path.relative_to(package).as_posix(), path))
    for relative, path in sorted(files):
        digest.update(relative.encode() + b"\x00")
        digest.update(path.read_bytes() + b"\x00")
    return digest.hexdigest()


def _version(distribution: str) -> str:
    """A distribution's version from its metadata (importing sympy only to read its
    version cost a second in a process that had not imported it); a package that is not
    installed as a distribution is told by its path."""
    try:
        from importlib.metadata import version

        return version(distribution)
    except Exception:
        import importlib

        return str(Path(importlib.import_module(distribution).__file__ or distribution).parent)


@cache
def _environment() -> str:
    import torch

    from kiln.backends.cpp.compiler import compiler_identity

    return "\n".join(
        [
            f"kiln {kiln_source_hash()}",
            f"torch {torch.__version__} {torch.version.git_version}",
            f"xdsl {_version('xdsl')}",
            f"sympy {_version('sympy')}",
            f"python {sys.version}",
            f"compiler {compiler_identity()}",
        ]
    )


def _threads() -> str:
    """What lower-to-cpp's default thread count is made of (its ``default_threads``: the
    CPUs this process may use), without importing the pass (a second off the warm path)."""
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return f"threads {affinity} of {os.cpu_count()}"


def graph_key(
    module_text: str, options: CompileOptions, executor: str, context: Sequence[str] = ()
) -> str | None:
    """The graph's key, or None when there is no C++ compiler to identify (the graph
    then runs in the interpreter, uncached). ``module_text``: the imported aten IR's
    text, or the FX graph's description (:func:`kiln.fx_key.describe_graph`), with
    ``context`` then saying what the driver adds to the imported module (its device,
    inference graph or not)."""
    import torch

    from kiln.backends.cpp.compiler import CompilerNotFound

    try:
        environment = _environment()
    except CompilerNotFound:
        return None
    digest = hashlib.sha256()
    for part in (
        f"entry format {ENTRY_FORMAT}",
        environment,
        _threads(),
        # Decompositions make Python scalars into tensors of the default dtype.
        f"default dtype {torch.get_default_dtype()}",
        # Lowering keeps scatters in ATen under deterministic algorithms.
        f"deterministic {torch.are_deterministic_algorithms_enabled()}",
        *(f"{name}={os.environ.get(name)}" for name in _KEY_ENV),
        f"pipeline {options.pipeline}",
        f"executor {executor} (option {options.executor})",
        f"autotune {options.autotune} cuda_graphs {options.cuda_graphs}",
        *context,
        module_text,
    ):
        digest.update(part.encode())
        digest.update(b"\x00")
    return digest.hexdigest()


def _path(key: str) -> Path:
    return cache_dir() / f"{key}.graph"


def _warn(path: Path, why: str) -> None:
    warnings.warn(
        f"kiln: ignoring the graph cache entry {path} ({why}); compiling the graph again",
        RuntimeWarning,
        stacklevel=3,
    )


def load(
    key: str, stages: dict[str, float] | None = None
) -> tuple[GraphEntry, Callable[[list[Any]], tuple[Any, ...]]] | None:
    """The entry for ``key`` and its program's wrapper, or None on a miss. A bad entry
    (corrupt, unloadable) is deleted with a warning and is a miss. ``stages`` receives
    the seconds spent reading the entry (``graph-cache``) and loading its program
    (``load``: kernel libraries, the wrapper; :attr:`kiln.compiler.GraphStats.stage_seconds`)."""
    from kiln.backends.cache import remove_entry
    from kiln.backends.cpp.saved import load_program

    stages = stages if stages is not None else {}
    start = time.perf_counter()

    try:
        path = _path(key)
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        warnings.warn(f"kiln: graph cache unusable ({e}); compiling", RuntimeWarning, stacklevel=2)
        return None
    try:
        if data[: len(MAGIC)] != MAGIC:
            raise ValueError("not a kiln graph entry")
        digest = data[len(MAGIC) : len(MAGIC) + DIGEST_SIZE]
        payload = data[len(MAGIC) + DIGEST_SIZE :]
        if hashlib.sha256(payload).digest() != digest:
            raise ValueError("checksum mismatch")
        stored_key, entry = pickle.loads(payload)
        if stored_key != key or not isinstance(entry, GraphEntry):
            raise ValueError("entry of another key")
        if entry.format != ENTRY_FORMAT:
            raise ValueError(f"entry format {entry.format}")
        loading = time.perf_counter()
        stages["graph-cache"] = stages.get("graph-cache", 0.0) + loading - start
        run = load_program(entry.program)
        stages["load"] = time.perf_counter() - loading
    except Exception as e:
        remove_entry(path)
        _warn(path, f"{type(e).__name__}: {e}")
        return None
    with contextlib.suppress(OSError):
        os.utime(path)  # recently used: pruned last
    return entry, run


def store(key: str, entry: GraphEntry) -> Path | None:
    """Write ``entry`` atomically; None (silently) when the cache cannot be written."""
    from kiln.backends.cache import prune

    try:
        directory = cache_dir()
        payload = pickle.dumps((key, entry), protocol=pickle.HIGHEST_PROTOCOL)
        data = MAGIC + hashlib.sha256(payload).digest() + payload
        path = directory / f"{key}.graph"
        fd, temp = tempfile.mkstemp(dir=directory, prefix=f".{key[:16]}-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(temp, path)
        except BaseException:
            try:
                os.unlink(temp)
            except OSError:
                pass
            raise
        prune(directory)
    except OSError as e:
        warnings.warn(
            f"kiln: cannot write the graph cache ({e}); the next process compiles again",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
    return path


__all__ = ["ENV", "GraphEntry", "cache_dir", "enabled", "graph_key", "load", "store"]

"""The on-disk cache of compiled kernel libraries, keyed by content hash.

* Where: ``$KILN_CACHE_DIR`` or ``$XDG_CACHE_HOME/kiln/cpp`` (``~/.cache/kiln/cpp``),
  created with mode 0700. A directory that another user owns or that others may write
  to is refused: loading a library runs its code. One that cannot be written moves to a
  private temp directory; old entries are pruned (:mod:`kiln.backends.cache`).
* Key: SHA-256 of the source and of :func:`~kiln.backends.cpp.compiler.compiler_identity`
  (compiler version, flags, CPU), so a changed compiler or machine rebuilds.
* Atomic: a library is built into a unique temporary file in the same directory and
  renamed into place, so two processes building the same source both succeed and a
  reader never sees half a file.
* Built once: a build holds an exclusive ``flock`` on a lock file next to the entry
  (``.<key>.lock``), so that a second process missing the same entry at the same time
  (the ranks of a distributed job, parallel test workers) waits for the first and loads
  its library instead of running the compiler again. The lock only saves work: where
  ``fcntl`` or file locks are missing, builds run concurrently and stay correct.
* Kernel index (``kernels/``): per kernel, keyed by its C++ without its name and comment
  header (:func:`kernel_key`), the library and symbol that hold it, so that an identical
  kernel of another graph (forward and backward, another model) is loaded from there
  instead of compiled again. An entry carries a checksum and names a library that is
  verified like any other; a damaged or dangling entry is a miss.
* Never trusted blindly: each file ends with a trailer holding the SHA-256 of the bytes
  before it; a file whose trailer does not match (truncated, corrupted, not ours), or that
  fails to load, is deleted and rebuilt.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from kiln.backends.cache import (
    CacheError,
    atomic_write,
    cache_root,
    private_dir,
    prune,
    remove_entry,
    usable_dir,
)
from kiln.backends.cpp.compiler import CompileTimeout, CppCompileError, compiler_identity

MAGIC = b"KILN-CPP-SO-v1\x00\x00"
TRAILER_SIZE = len(MAGIC) + 32


def cache_dir() -> Path:
    """The C++ cache directory (``$KILN_CACHE_DIR``, else ``<cache root>/cpp``), private,
    or a private temp directory when that one cannot be written (see kiln.backends.cache)."""
    configured = os.environ.get("KILN_CACHE_DIR")
    path = Path(configured) if configured else cache_root() / "cpp"
    return usable_dir(path, "cpp")


def cache_key(source: str) -> str:
    digest = hashlib.sha256()
    digest.update(compiler_identity().encode())
    digest.update(b"\x00")
    digest.update(source.encode())
    return digest.hexdigest()


KERNEL_INDEX = "kernels"
"""Subdirectory of the C++ cache: per kernel (:func:`kernel_key`), the library holding it."""


def _unit_identity() -> str:
    """What every unit's kernels depend on besides their own text: the compiler and the
    prelude (a fixed helper must not be reused from an old library)."""
    from kiln.backends.cpp.prelude import unit_source

    return compiler_identity() + "\x00" + unit_source([])


def kernel_key(name: str, text: str) -> str | None:
    """A kernel's C++ without its name and its comment header (which names the graph's
    FX nodes): identical kernels of any graphs (forward and backward, other models, the
    layers of a deeper model) share the key. None if ``text`` is not ``name``'s."""
    signature = f'extern "C" int {name}('
    at = text.find(signature)
    if at < 0:
        return None
    digest = hashlib.sha256()
    digest.update(_unit_identity().encode())
    digest.update(b"\x00kernel\x00")
    digest.update(text[at + len(signature) :].encode())
    return digest.hexdigest()


def _index_line(key: str, library: str, symbol: str) -> str:
    check = hashlib.sha256(f"{key}\x00{library}\x00{symbol}".encode()).hexdigest()[:32]
    return f"{library} {symbol} {check}\n"


def lookup_kernel(key: str) -> tuple[str, str] | None:
    """(library key, symbol) of a library that holds the kernel, or None. A damaged index
    entry is a miss (the kernel is built again and the entry rewritten)."""
    try:
        text = (cache_dir() / KERNEL_INDEX / key[:2] / key).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    parts = text.split()
    if len(parts) != 3 or _index_line(key, parts[0], parts[1]) != text:
        return None
    return parts[0], parts[1]


def record_kernel(key: str, library: str, symbol: str, replace: bool = True) -> None:
    """Index the kernel ``key`` as ``symbol`` of library ``library`` (best effort)."""
    try:
        folder = cache_dir() / KERNEL_INDEX / key[:2]
        path = folder / key
        if not replace and path.exists():
            return
        private_dir(folder)
        atomic_write(path, _index_line(key, library, symbol))
    except OSError:
        pass  # an index entry is an optimisation only


def _seal(path: Path) -> None:
    """Append the checksum trailer to a freshly built library."""
    data = path.read_bytes()
    with path.open("ab") as f:
        f.write(MAGIC + hashlib.sha256(data).digest())


def is_intact(path: Path) -> bool:
    """Whether a cached library carries a trailer matching its contents."""
    try:
        data = path.read_bytes()
    except OSError:
        return False
    if len(data) <= TRAILER_SIZE:
        return False
    body, trailer = data[:-TRAILER_SIZE], data[-TRAILER_SIZE:]
    return trailer[: len(MAGIC)] == MAGIC and trailer[len(MAGIC) :] == hashlib.sha256(body).digest()


def _remove(path: Path) -> None:
    remove_entry(path)


@contextlib.contextmanager
def build_lock(directory: Path, key: str) -> Iterator[None]:
    """Hold the exclusive build lock of entry ``key`` in ``directory`` (blocking).

    The lock file is removed by its holder once the entry is built, so none is left
    behind; a waiter that then gets the lock of the removed file re-checks the entry (it
    is there) and loads it. A third process meanwhile locking a new file can only cost a
    duplicate build, never a wrong entry (entries are renamed into place atomically)."""
    try:
        import fcntl
    except ImportError:  # no flock (Windows): concurrent builds, still correct
        yield
        return
    path = directory / f".{key[:32]}.lock"
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        yield  # cannot create it (read-only directory, odd file system): build unlocked
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            pass  # file system without locks (some NFS): build unlocked
        yield
    finally:
        with contextlib.suppress(OSError):
            if os.fstat(fd).st_ino == os.stat(path).st_ino:
                os.unlink(path)  # still ours: no lock file left behind
        os.close(fd)  # releases the lock


def _load_intact(path: Path) -> ctypes.CDLL | None:
    """The cached library at ``path`` if it is there, intact and loadable; a damaged
    one is deleted (to be rebuilt)."""
    if not path.exists():
        return None
    if is_intact(path):
        try:
            return ctypes.CDLL(str(path))
        except OSError:
            pass
    _remove(path)  # corrupt or unloadable: rebuild it
    return None


def load_or_build(
    source: str,
    build: Callable[[str, Path, Path], None],
    directory: Path | None = None,
) -> tuple[ctypes.CDLL, Path, bool]:
    """The loaded library for ``source``: from the cache, else built with
    ``build(source, source_path, output_path)`` and cached. Returns (library, path, hit).
    A process that misses while another builds the same entry waits for that build and
    loads its result (a hit): see :func:`build_lock`."""
    directory = directory or cache_dir()
    key = cache_key(source)
    path = directory / f"{key}.so"
    library = _load_intact(path)
    if library is not None:
        return library, path, True
    with build_lock(directory, key):
        library = _load_intact(path)  # built by the process we waited for
        if library is not None:
            return library, path, True
        return _build(source, build, directory, key, path), path, False


def _build(
    source: str, build: Callable[[str, Path, Path], None], directory: Path, key: str, path: Path
) -> ctypes.CDLL:
    prune(directory)  # on a miss only: a hit costs no directory scan
    fd, temp = tempfile.mkstemp(prefix=f".{key[:16]}-", suffix=".so", dir=directory)
    os.close(fd)
    temp_path = Path(temp)
    source_path = temp_path.with_suffix(".cpp")
    try:
        build(source, source_path, temp_path)
        _seal(temp_path)
        os.replace(temp_path, path)
    except CompileTimeout:  # nothing to show: the source is the caller's to fall back from
        _remove(temp_path)
        _remove(source_path)
        raise
    except CppCompileError as e:
        _remove(temp_path)
        kept = _keep_failed(source_path, directory, key)
        raise CppCompileError(str(e).replace(str(source_path), str(kept)), e.kernel, kept) from None
    except BaseException:
        _remove(temp_path)
        _remove(source_path)
        raise
    _remove(source_path)
    return ctypes.CDLL(str(path))


def _keep_failed(source_path: Path, directory: Path, key: str) -> Path:
    """Keep a source the compiler rejected, for the user to read."""
    failed = directory / "failed"
    failed.mkdir(mode=0o700, exist_ok=True)
    kept = failed / f"{key[:16]}.cpp"
    os.replace(source_path, kept)
    return kept


__all__ = [
    "CacheError",
    "build_lock",
    "cache_dir",
    "cache_key",
    "is_intact",
    "kernel_key",
    "load_or_build",
    "lookup_kernel",
    "record_kernel",
]

"""Where both backends keep their on-disk caches, and how the caches stay healthy.

* Root: ``$KILN_CACHE_DIR``, else ``$XDG_CACHE_HOME/kiln``, else ``~/.cache/kiln``.
* Private: a directory is created with mode 0700; one that another user owns or that
  others may write is refused (:class:`CacheError`): loading a cached library runs its code.
* Never fatal for the environment: when the preferred directory cannot be created or
  written (no HOME, a read-only HOME, ``KILN_CACHE_DIR`` naming a file), the cache moves to
  a private directory under the system temp dir, with one warning, as Inductor does.
* Bounded: :func:`prune` deletes the least recently used entries beyond
  ``$KILN_CACHE_MAX_MB`` (default 2048) and temporary files a killed build left behind.
* Atomic: text entries (generated modules, autotuning results) are named by the SHA-256
  of their content's key and written to a temporary file in the same directory, then
  ``os.replace``-d (:func:`store_source`, :func:`store_json`), so two processes writing
  the same entry both succeed and a reader never sees half a file. A read is never
  trusted blindly: callers compare or validate what they read and rewrite an entry that
  does not match. (C++ libraries carry a checksum trailer, :mod:`kiln.backends.cpp.cache`;
  compiled GPU binaries are cached by Triton itself.)
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import stat
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

DEFAULT_MAX_MB = 2048
STALE_TEMP_SECONDS = 3600.0
"""A build's temporary file older than this belongs to a build that died."""


class CacheError(OSError):
    """The cache directory is unsafe (another user's, or writable by others)."""


def cache_root() -> Path:
    if env := os.environ.get("KILN_CACHE_DIR"):
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kiln"


def private_dir(path: Path) -> Path:
    """``path`` created if needed (mode 0700) and checked to be ours and not shared."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = path.stat()
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise CacheError(f"kiln cache directory {path} belongs to another user")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise CacheError(
            f"kiln cache directory {path} is writable by other users "
            f"(mode {oct(info.st_mode & 0o777)}); fix with: chmod 700 {path}"
        )
    if not os.access(path, os.W_OK | os.X_OK):
        raise PermissionError(f"kiln cache directory {path} is not writable")
    return path


_warned: set[str] = set()


def usable_dir(preferred: Path, subdir: str = "") -> Path:
    """``preferred`` as a private directory, or a private one under the temp dir when
    ``preferred`` cannot be created or written. Unsafe directories still raise."""
    try:
        return private_dir(preferred)
    except CacheError:
        raise
    except OSError as e:
        uid = os.getuid() if hasattr(os, "getuid") else 0
        fallback = Path(tempfile.gettempdir()) / f"kiln-{uid}" / subdir
        if str(preferred) not in _warned:
            _warned.add(str(preferred))
            warnings.warn(
                f"kiln: cannot use the cache directory {preferred} ({e.strerror or e}); "
                f"using {fallback} (set KILN_CACHE_DIR to choose another)",
                RuntimeWarning,
                stacklevel=2,
            )
        return private_dir(fallback)


def remove_entry(path: Path) -> None:
    """Delete a cache entry, whatever it has become (a file, a directory, a link)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError, IsADirectoryError, PermissionError):
            path.unlink()


def max_bytes() -> int:
    try:
        return int(float(os.environ.get("KILN_CACHE_MAX_MB", DEFAULT_MAX_MB)) * 2**20)
    except ValueError:
        return DEFAULT_MAX_MB * 2**20


def prune(directory: Path, limit: int | None = None, now: float | None = None) -> int:
    """Delete stale temporaries, then the least recently used files of ``directory`` (not
    recursive) until it holds at most ``limit`` bytes. Returns the number deleted."""
    limit = max_bytes() if limit is None else limit
    now = time.time() if now is None else now
    entries: list[tuple[float, int, Path]] = []
    deleted = 0
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(directory):
            if not entry.is_file(follow_symlinks=False):
                continue
            info = entry.stat(follow_symlinks=False)
            path = Path(entry.path)
            if entry.name.startswith("."):
                if now - info.st_mtime > STALE_TEMP_SECONDS:
                    remove_entry(path)
                    deleted += 1
                continue
            entries.append((max(info.st_atime, info.st_mtime), info.st_size, path))
    total = sum(size for _, size, _ in entries)
    for _, size, path in sorted(entries, key=lambda e: e[0]):
        if total <= limit:
            break
        remove_entry(path)
        total -= size
        deleted += 1
    return deleted


def content_hash(*parts: str) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the new one."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def store_source(root: Path, kind: str, text: str, suffix: str = ".py") -> Path:
    """The file holding ``text`` in ``root/kind``, written unless an identical one exists."""
    key = content_hash(kind, text)
    folder = private_dir(root / kind / key[:2])
    path = folder / f"{key}{suffix}"
    try:
        if path.read_text(encoding="utf-8") == text:
            return path
    except (OSError, UnicodeDecodeError):
        pass  # missing or corrupt: (re)write it
    atomic_write(path, text)
    return path


def load_json(path: Path) -> Any | None:
    """A JSON entry, or None when missing or corrupt (callers validate its content)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None


def load_timings(path: Path, *names: str) -> list[float] | None:
    """The fields ``names`` of a stored measurement (JSON), or None when it is missing,
    corrupt or hand-edited (any of them not a positive float): measure again."""
    value = load_json(path)
    if not isinstance(value, dict):
        return None
    times = [value.get(name) for name in names]  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    if not all(type(t) is float and t > 0 for t in times):  # pyright: ignore[reportUnknownVariableType]
        return None
    return times  # pyright: ignore[reportUnknownVariableType, reportReturnType]


def store_json(path: Path, value: Any) -> None:
    private_dir(path.parent)
    atomic_write(path, json.dumps(value, sort_keys=True))


__all__ = [
    "CacheError",
    "atomic_write",
    "cache_root",
    "content_hash",
    "load_json",
    "load_timings",
    "max_bytes",
    "private_dir",
    "prune",
    "remove_entry",
    "store_json",
    "store_source",
    "usable_dir",
]

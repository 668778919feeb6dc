"""kiln's per-user disk cache for generated modules and autotuning results.

Entries are files named by the SHA-256 of their content's key, under
``$KILN_CACHE_DIR`` or ``$XDG_CACHE_HOME/kiln`` or ``~/.cache/kiln``. The directory is
created private (``0700``); a directory another user owns, or that others may write, is
refused. Writes are atomic (a temporary file in the same directory, then
``os.replace``), so two processes compiling the same graph both succeed and a reader
never sees half a file. A read is never trusted blindly: callers compare or validate
what they read and rewrite an entry that does not match. Compiled GPU binaries are
cached by Triton itself (its own content-hashed, per-user cache).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from kiln.backends.cache import CacheError, cache_root, private_dir, usable_dir


def default_cache_dir() -> Path:
    return usable_dir(cache_root(), "triton")


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


def store_json(path: Path, value: Any) -> None:
    private_dir(path.parent)
    atomic_write(path, json.dumps(value, sort_keys=True))


__all__ = [
    "CacheError",
    "atomic_write",
    "content_hash",
    "default_cache_dir",
    "load_json",
    "private_dir",
    "store_json",
    "store_source",
]

"""The ``debug_dir`` option's files: one directory per graph, written best-effort (a debug
dump is never worth failing a compile for)."""

from __future__ import annotations

import warnings
from pathlib import Path


def debug_dir_for(root: str | None, name: str) -> Path | None:
    """The graph's debug directory; None, with a warning, when it cannot be created (a
    debug dump is never worth failing the compile for)."""
    if not root:
        return None
    path = Path(root) / name
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".kiln-write-check"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        warnings.warn(
            f"kiln: cannot write the debug directory {path} ({e.strerror or e}); "
            "compiling without debug output",
            RuntimeWarning,
            stacklevel=3,
        )
        return None
    return path


def dump(debug: Path | None, name: str, text: str) -> None:
    if debug is not None:
        try:
            (debug / name).write_text(text)
        except OSError as e:
            warnings.warn(f"kiln: cannot write {debug / name}: {e}", RuntimeWarning, stacklevel=2)


__all__ = ["debug_dir_for", "dump"]

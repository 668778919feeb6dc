"""How many CPU cores this process may use: the ones its affinity allows (a pinned
benchmark worker, a container's cpuset, ``taskset``), not the machine's count. Every
pool and thread count kiln sizes (C++ compile units, OpenMP threads, Triton's parallel
precompile) asks here."""

from __future__ import annotations

import os


def usable_cores() -> int:
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


__all__ = ["usable_cores"]

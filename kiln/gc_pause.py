"""Keep Python's garbage collector off the heap kiln did not build while it compiles.

A compile allocates hundreds of thousands of IR objects, so the collector runs often, and
every generation-2 (full) collection traverses the whole heap: the ~600k objects that torch,
sympy, Dynamo's caches and earlier graphs keep alive, 0.7-0.8 s each on the 2-core CPU
machine. Measured (session 9, ``docs/benchmarks/compile-time.md``) that was ~40 % of a cold
16-layer GPT-2 compile's CPU time, landing in whichever pass tripped it.

:func:`frozen_heap` moves the objects that exist when a compile starts to the collector's
permanent generation (``gc.freeze()``), so collections during the compile only traverse what
the compile made, and gives them back at the end (``gc.unfreeze()``), exceptions included.
Cyclic garbage made during the compile is still collected as usual; garbage among the frozen
objects waits for the first full collection after the compile. Nested and concurrent compiles
freeze once: the outermost one unfreezes.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0  # compiles inside frozen_heap, over all threads
_saved_threshold: tuple[int, ...] | None = None
NO_FULL_COLLECTIONS = True
"""Also hold back automatic full collections during the compile (generation 2's threshold
raised out of reach; young collections still run and free the compile's short-lived
cycles): with the old heap frozen, each one still traverses everything the compile keeps."""


@contextmanager
def frozen_heap() -> Iterator[None]:
    """Freeze the pre-existing heap for the duration of the block (see the module doc).
    Does nothing when the collector is disabled (the caller chose that) or already frozen
    by someone else (their ``gc.unfreeze()`` is theirs to call)."""
    global _depth, _saved_threshold
    with _lock:
        outermost = _depth == 0
        act = not outermost or (gc.isenabled() and gc.get_freeze_count() == 0)
        if act:
            if outermost:
                gc.freeze()
                if NO_FULL_COLLECTIONS:
                    _saved_threshold = gc.get_threshold()
                    gc.set_threshold(*_saved_threshold[:2], 1 << 30)
            _depth += 1
    try:
        yield
    finally:
        if act:
            with _lock:
                _depth -= 1
                if _depth == 0:
                    if _saved_threshold is not None:
                        gc.set_threshold(*_saved_threshold)
                        _saved_threshold = None
                    gc.unfreeze()

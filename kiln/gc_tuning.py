"""Fewer garbage collections while kiln compiles a graph.

Compiling allocates millions of short-lived objects (IR ops, sympy expressions) on top of
a heap that torch, Dynamo and the model already fill with long-lived ones; with Python's
default thresholds (a young collection every 700 allocations) the collector runs hundreds
of times per graph: 15-20 % of a deep model's compile CPU time (issue 19,
docs/benchmarks/compile-time.md). Inside :func:`fewer_collections` young collections run
less often; the threshold is restored on exit.

Not ``gc.freeze()``: with the old heap frozen, Python's guard against frequent full
collections (only when the objects added since the last one exceed a quarter of the old
generation) no longer holds them back, and full collections over the growing IR ran
dozens of times: slower than the defaults (measured).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

YOUNG_THRESHOLD = 50_000
"""Allocations between young collections while compiling (Python's default: 700)."""


@contextmanager
def fewer_collections(young: int = YOUNG_THRESHOLD) -> Iterator[None]:
    threshold = gc.get_threshold()
    if not gc.isenabled() or threshold[0] == 0 or threshold[0] >= young:
        yield  # collection off, or already rarer than this: the user's choice
        return
    gc.set_threshold(young, *threshold[1:])
    try:
        yield
    finally:
        gc.set_threshold(*threshold)


__all__ = ["YOUNG_THRESHOLD", "fewer_collections"]

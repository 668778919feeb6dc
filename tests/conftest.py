"""Settings shared by the whole test suite.

Triton kernels run in Triton's interpreter unless ``KILN_TRITON_DEVICE=cuda``. Every
test builds into one private kiln cache under pytest's temporary directory, per
session: the user's cache stays untouched, a run never depends on what an earlier run
left behind, and a kernel that several tests compile (the C++ and Triton backend tests,
the OpInfo groups, torch.compile tests) is built once.

The graph cache (warm start, :mod:`kiln.graph_cache`) is off for the suite: a test that
compiles a graph another test compiled before would otherwise get the stored program
and skip the passes, patches and statistics it checks. Its own tests
(``tests/test_graph_cache.py``) turn it on.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

# Triton reads TRITON_INTERPRET when it decorates a kernel: set it before any test module
# imports kiln's Triton backend (tests/backends/test_host_walker.py runs it too), or its
# helpers are real JIT functions that the interpreted kernels cannot call.
if os.environ.get("KILN_TRITON_DEVICE") != "cuda":
    os.environ["TRITON_INTERPRET"] = "1"
os.environ["KILN_GRAPH_CACHE"] = "0"


def pytest_configure(config: pytest.Config) -> None:
    """``backend="kiln"`` also where kiln runs from a checkout on ``PYTHONPATH`` without
    being installed (the GPU machine): its entry point is then missing."""
    del config
    from torch._dynamo.backends.registry import list_backends, register_backend

    if "kiln" in list_backends(exclude_tags=()):
        return
    from kiln.frontends.dynamo import kiln_backend

    register_backend(kiln_backend, name="kiln")


@pytest.fixture(scope="session", autouse=True)
def kiln_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    path = str(tmp_path_factory.mktemp("kiln-cache"))
    previous = os.environ.get("KILN_CACHE_DIR")
    os.environ["KILN_CACHE_DIR"] = path
    yield path
    if previous is None:
        os.environ.pop("KILN_CACHE_DIR", None)
    else:
        os.environ["KILN_CACHE_DIR"] = previous


@pytest.fixture(autouse=True)
def fresh_dynamo() -> Iterator[None]:
    """Dynamo reset before and after every test: each test compiles afresh, whatever ran
    before it. Dynamo's state outlives a test otherwise: it counts compiles of
    ``Module._call_impl`` across modules and makes a later test's shapes dynamic
    (automatic dynamic shapes), keeps guards and cached frames, and a test's outcome
    depends on the order the suite runs in. The reset costs a third of a millisecond
    (session 48: ``tests/frontends`` and ``tests/backends/cpp``, 484 tests, 1,081 resets
    in 0.33 s; the run took 430-540 s with or without, within this VM's noise)."""
    import torch

    torch._dynamo.reset()
    yield
    torch._dynamo.reset()

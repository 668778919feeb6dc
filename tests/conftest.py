"""Suite-wide set-up.

Every test builds into one private kiln cache under pytest's temporary directory, per
session: the user's cache stays untouched, a run never depends on what an earlier run
left behind, and a kernel that several tests compile (the C++ and Triton backend tests,
the OpInfo groups, torch.compile tests) is built once.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


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

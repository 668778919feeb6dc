"""The C++ backend's tests build into a private cache under pytest's temporary directory
(one per session: each library compiles once, and the user's cache stays untouched)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session", autouse=True)
def cpp_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    path = str(tmp_path_factory.mktemp("kiln-cpp-cache"))
    previous = os.environ.get("KILN_CACHE_DIR")
    os.environ["KILN_CACHE_DIR"] = path
    yield path
    if previous is None:
        os.environ.pop("KILN_CACHE_DIR", None)
    else:
        os.environ["KILN_CACHE_DIR"] = previous

"""Triton backend tests: kernels run in Triton's interpreter on the CPU.

``TRITON_INTERPRET=1`` must be set before triton decorates a kernel, so it is set when
this conftest is imported (unless ``KILN_TRITON_DEVICE=cuda`` asks for a real GPU).
Generated modules and autotuning results go to a private cache under pytest's
temporary directory, one per session.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

if os.environ.get("KILN_TRITON_DEVICE") != "cuda":
    os.environ["TRITON_INTERPRET"] = "1"

pytest.importorskip("triton", reason="Triton is installed with kiln's dev extra on x86-64")
sys.path.insert(0, str(Path(__file__).parent))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The interpreter computes masked-off lanes too (a division by the 0 a masked load
    # gave); NumPy warns about them, but their values are never stored.
    for item in items:
        if Path(str(item.fspath)).parent == Path(__file__).parent:
            item.add_marker(pytest.mark.filterwarnings("ignore::RuntimeWarning:triton"))


@pytest.fixture(scope="session", autouse=True)
def triton_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    path = str(tmp_path_factory.mktemp("kiln-triton-cache"))
    previous = os.environ.get("KILN_CACHE_DIR")
    os.environ["KILN_CACHE_DIR"] = path
    yield path
    if previous is None:
        os.environ.pop("KILN_CACHE_DIR", None)
    else:
        os.environ["KILN_CACHE_DIR"] = previous

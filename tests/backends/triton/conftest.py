"""Triton backend tests: kernels run in Triton's interpreter on the CPU.

``TRITON_INTERPRET=1`` must be set before triton decorates a kernel, so it is set when
this conftest is imported (unless ``KILN_TRITON_DEVICE=cuda`` asks for a real GPU).
Generated modules and autotuning results go to the session's private cache
(tests/conftest.py).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

if os.environ.get("KILN_TRITON_DEVICE") != "cuda":
    os.environ["TRITON_INTERPRET"] = "1"

pytest.importorskip("triton", reason="Triton is installed with kiln's dev extra on x86-64")
sys.path.insert(0, str(Path(__file__).parent))


if os.environ.get("TRITON_INTERPRET") == "1":
    # bfloat16 dots and casts as a GPU computes them (also applied by the runtime when it
    # loads a program; here for the tests that launch kernels of their own).
    from kiln.backends.triton import interpreter_fixes

    interpreter_fixes.apply()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The interpreter computes masked-off lanes too (a division by the 0 a masked load
    # gave); NumPy warns about them, but their values are never stored.
    for item in items:
        if Path(str(item.fspath)).parent == Path(__file__).parent:
            item.add_marker(pytest.mark.filterwarnings("ignore::RuntimeWarning:triton"))

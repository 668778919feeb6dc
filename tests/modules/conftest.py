"""ModuleInfo tests: PyTorch's module database through ``torch.compile(backend="kiln")``
on the CPU (``module_runner.py``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The samples' own inputs warn (reductions deprecated, lazy modules); eager warns
    # the same way.
    for item in items:
        if Path(str(item.fspath)).parent == Path(__file__).parent:
            item.add_marker(pytest.mark.filterwarnings("ignore::UserWarning"))

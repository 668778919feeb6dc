"""OpInfo tests: Triton runs in its interpreter on the CPU (unless
``KILN_OPINFO_DEVICE=cuda``); kernels build into the session's private cache
(tests/conftest.py)."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

if os.environ.get("KILN_OPINFO_DEVICE", "cpu") != "cuda":
    os.environ["TRITON_INTERPRET"] = "1"
    # The interpreter rounds float32 -> bfloat16 as a GPU does: the Triton tests' patch.
    if importlib.util.find_spec("triton") is not None:
        _path = Path(__file__).parent.parent / "backends" / "triton" / "conftest.py"
        _spec = importlib.util.spec_from_file_location("_kiln_triton_conftest", _path)
        assert _spec is not None
        assert _spec.loader is not None
        _module = importlib.util.module_from_spec(_spec)
        _spec.loader.exec_module(_module)
        _module._round_bfloat16_to_nearest_even()

sys.path.insert(0, str(Path(__file__).parent))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Samples divide by zero and take logs of negatives on purpose; the interpreter also
    # computes masked-off lanes. Eager warns the same way; not kiln's concern here.
    for item in items:
        if Path(str(item.fspath)).parent == Path(__file__).parent:
            item.add_marker(pytest.mark.filterwarnings("ignore::RuntimeWarning"))
            item.add_marker(pytest.mark.filterwarnings("ignore::UserWarning"))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    from runner import TALLY

    for config, counts in sorted(TALLY.items()):
        line = ", ".join(f"{n} {what}" for what, n in sorted(counts.items()))
        terminalreporter.write_line(f"opinfo {config}: {line}")

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
    # The interpreter's bfloat16 dots and casts as a GPU's (the runtime applies the same
    # fixes when it loads a program).
    if importlib.util.find_spec("triton") is not None:
        from kiln.backends.triton import interpreter_fixes

        interpreter_fixes.apply()

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

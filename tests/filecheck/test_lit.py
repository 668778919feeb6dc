"""Runs every FileCheck test under tests/filecheck through lit, one pytest item per file.

Each ``.mlir`` file holds ``// RUN:`` lines (``kiln-opt %s --cse | filecheck %s``); see
lit.cfg.py for the substitutions. Run one alone with ``lit -v tests/filecheck/passes/cse.mlir``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
TESTS = sorted(HERE.rglob("*.mlir"))


@pytest.mark.parametrize("test", TESTS, ids=[str(t.relative_to(HERE)) for t in TESTS])
def test_lit(test: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from lit.main import main; sys.exit(main())",
            "-v",
            str(test),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr

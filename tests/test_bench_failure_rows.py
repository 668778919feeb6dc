"""A dashboard failure row says what failed and where (benchmarks/dashboard_measure.py):
the root cause's type and first line, and the innermost frames that raised it. No bench
extra: CI runs it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from dashboard_measure import describe, raised_at


def _inner_copy() -> None:
    raise RuntimeError("unsupported operation: more than one element\nsecond line")


def _backend() -> None:
    try:
        _inner_copy()
    except RuntimeError as e:
        raise ValueError("backend='kiln' raised:\nRuntimeError: ...") from e


def test_a_wrapped_failure_names_the_root_cause_and_where_it_was_raised() -> None:
    with pytest.raises(ValueError, match="backend=") as info:
        _backend()
    assert describe(info.value) == (
        "ValueError: RuntimeError: ... <- RuntimeError: unsupported operation: more than one element"
    )
    where = raised_at(info.value)
    assert where.endswith(" _inner_copy"), where
    assert where.startswith("test_bench_failure_rows.py:"), where
    assert "_backend" in where

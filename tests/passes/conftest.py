"""Fixtures shared by the pass tests."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import pytest

from kiln.dialects.aten import AtenOp
from kiln.passes import decompose


@pytest.fixture
def traced(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The overloads ``decompose`` traces from here on (an empty trace cache)."""
    calls: list[str] = []
    real = decompose._trace_graph

    def counting(op: AtenOp, *args: Any) -> Any:
        calls.append(op.overload_name)
        return real(op, *args)

    monkeypatch.setattr(decompose, "_trace_graph", counting)
    monkeypatch.setattr(decompose, "_TRACE_CACHE", OrderedDict())
    return calls

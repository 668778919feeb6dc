"""Externs whose optional outputs ATen leaves undefined (None), in the Triton wrapper (the
case is in tests/optional_outputs_cases.py, shared with the C++ backend)."""

from __future__ import annotations

import pytest
from optional_outputs_cases import check_undefined_optional_output
from triton_checks import DEVICE


def test_extern_with_an_undefined_optional_output(monkeypatch: pytest.MonkeyPatch) -> None:
    check_undefined_optional_output(monkeypatch, "triton", DEVICE)

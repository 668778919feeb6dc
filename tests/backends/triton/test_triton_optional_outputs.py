"""Externs whose optional outputs ATen leaves undefined (None), in the Triton wrapper (the
case is in tests/optional_outputs_cases.py, shared with the C++ backend)."""

from __future__ import annotations

import pytest
import torch
from optional_outputs_cases import check_undefined_optional_output
from triton_checks import DEVICE

from kiln.backends.triton.runtime import fresh_buffer


def test_extern_with_an_undefined_optional_output(monkeypatch: pytest.MonkeyPatch) -> None:
    check_undefined_optional_output(monkeypatch, "triton", DEVICE)


def test_fresh_buffer_passes_none_through() -> None:
    assert fresh_buffer(None, [torch.randn(2), None]) is None

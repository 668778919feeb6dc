"""Externs whose optional outputs ATen leaves undefined (None), in the C++ wrapper (the
case is in tests/optional_outputs_cases.py, shared with the Triton backend)."""

from __future__ import annotations

import pytest
import torch
from optional_outputs_cases import check_undefined_optional_output


def test_extern_with_an_undefined_optional_output(monkeypatch: pytest.MonkeyPatch) -> None:
    check_undefined_optional_output(monkeypatch, "cpp", torch.device("cpu"))


def test_as_buffer_passes_none_through() -> None:
    from kiln.backends.host.externs import as_buffer

    assert as_buffer(None, ()) is None

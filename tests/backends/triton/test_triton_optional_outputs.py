"""Externs whose optional outputs ATen leaves undefined (None), in the Triton wrapper
(see tests/backends/cpp/test_cpp_optional_outputs.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from triton_checks import capture, compile_capture

from kiln.backends.host.externs import as_buffer
from kiln.dialects.aten import interpreter

aten = torch.ops.aten
TOPK = "aten::topk.default"


def values_and_indices(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    values, indices = aten.topk(x, 2)
    return values * 2.0, indices


def test_extern_with_an_undefined_optional_output(monkeypatch: pytest.MonkeyPatch) -> None:
    lookup = interpreter.torch_overload

    def patched(overload: str) -> Callable[..., Any]:
        real = lookup(overload)
        if overload != TOPK:
            return real
        return lambda *args, **kwargs: (real(*args, **kwargs)[0], None)

    monkeypatch.setattr(interpreter, "torch_overload", patched)
    compiled = compile_capture(capture(values_and_indices, torch.randn(3, 5)))
    values, indices = compiled.run()
    torch.testing.assert_close(values.cpu(), compiled.expected[0])
    assert indices is None  # as ATen returned it


def test_extern_buffers_pass_none_through() -> None:
    assert as_buffer(None, [torch.randn(2), None]) is None

"""Externs whose optional outputs ATen leaves undefined (None) at run time, shared by the
C++ (``tests/backends/cpp/test_cpp_optional_outputs.py``) and the Triton
(``tests/backends/triton/test_triton_optional_outputs.py``) wrapper tests.

cuDNN attention returns ``None`` for ``cum_seq_q``/``cum_seq_k`` where its FakeTensor
(what the graph was traced with) is a tensor; the wrapper must pass the None through
(it called ``None.is_contiguous()``). On the CPU an op's binding is patched to do so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from kiln.compiler import CompileOptions, compile_graph, last_compile_stats
from kiln.dialects.aten import call_plan
from kiln.frontends.capture import capture_make_fx

aten = torch.ops.aten
TOPK = "aten::topk.default"


def values_and_indices(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    values, indices = aten.topk(x, 2)
    return values * 2.0, indices


def undefined_indices(monkeypatch: pytest.MonkeyPatch) -> None:
    """ATen's topk binding (as the call plans look it up) returns None for
    its indices."""
    lookup = call_plan.torch_overload

    def patched(overload: str) -> Callable[..., Any]:
        real = lookup(overload)
        if overload != TOPK:
            return real
        return lambda *args, **kwargs: (real(*args, **kwargs)[0], None)

    monkeypatch.setattr(call_plan, "torch_overload", patched)


def check_undefined_optional_output(
    monkeypatch: pytest.MonkeyPatch, executor: str, device: torch.device
) -> None:
    """The extern's None output comes back as None; its defined output as eager's."""
    x = torch.randn(3, 5, device=device)
    cap = capture_make_fx(values_and_indices, x)
    undefined_indices(monkeypatch)
    compiled = compile_graph(
        cap.gm,
        cap.example_inputs,
        CompileOptions(executor=executor, verbose=False),  # pyright: ignore[reportArgumentType]
    )
    assert last_compile_stats().executor == executor
    values, indices = compiled(x)
    torch.testing.assert_close(values, values_and_indices(x)[0])
    assert indices is None  # as ATen returned it

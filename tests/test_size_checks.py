"""Compiled programs check the size equalities their shared size symbols assume
(issue 21): a graph traced with two inputs of one symbolic size, called with sizes
that differ, raises a clear error instead of reading out of bounds."""

from __future__ import annotations

import pytest
import torch

from kiln.backends.host.size_checks import SizeMismatch
from kiln.compiler import CompileOptions, compile_graph
from kiln.frontends.capture import capture_make_fx


def _add_rows(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x + y.sum(1, keepdim=True)


def check_sizes_traced_as_one_symbol(executor: str, device: str | torch.device = "cpu") -> None:
    x, y = torch.randn(5, 3, device=device), torch.randn(5, 4, device=device)
    cap = capture_make_fx(_add_rows, x, y, dynamic=True)
    options = CompileOptions(executor=executor, verbose=False)  # pyright: ignore[reportArgumentType]
    compiled = compile_graph(cap.gm, cap.example_inputs, options)
    for rows, cols in ((5, 3), (9, 2)):  # equal rows at other sizes: still right
        a = torch.randn(rows, cols, device=device)
        b = torch.randn(rows, cols + 1, device=device)
        torch.testing.assert_close(compiled(a, b), _add_rows(a, b))
    with pytest.raises(SizeMismatch, match=r"shape\[0\] = 6.*shape\[0\] = 2"):
        compiled(torch.randn(6, 3, device=device), torch.randn(2, 4, device=device))


def test_sizes_traced_as_one_symbol_are_checked_cpp() -> None:
    check_sizes_traced_as_one_symbol("cpp")


@pytest.mark.parametrize("pipeline", [None, "decompose,lower-aten"])
def test_sizes_traced_as_one_symbol_are_checked_interpret(pipeline: str | None) -> None:
    """The reference interpreters (executor ``interpret``, at kernel level or at the level
    a shorter pipeline stops) make the wrappers' checks too."""
    x, y = torch.randn(5, 3), torch.randn(5, 4)
    cap = capture_make_fx(_add_rows, x, y, dynamic=True)
    extra = {} if pipeline is None else {"pipeline": pipeline}
    options = CompileOptions(executor="interpret", verbose=False, **extra)  # pyright: ignore[reportArgumentType]
    compiled = compile_graph(cap.gm, cap.example_inputs, options)
    a, b = torch.randn(9, 2), torch.randn(9, 3)
    torch.testing.assert_close(compiled(a, b), _add_rows(a, b))
    with pytest.raises(SizeMismatch, match=r"shape\[0\] = 6.*shape\[0\] = 2"):
        compiled(torch.randn(6, 3), torch.randn(2, 4))

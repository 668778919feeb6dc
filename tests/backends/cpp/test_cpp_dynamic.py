"""``torch.compile(..., backend="kiln", dynamic=True)`` on the C++ executor against eager
(cases in ``tests/dynamic_cases.py``): views with symbolic sizes, host arithmetic on
sizes, and the size of index expressions through long chains of views."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from dynamic_cases import ARITH_CASES, SIZES_2D, VIEW_CASES, run_dynamic, sdpa


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> None:
    torch._dynamo.reset()


@pytest.mark.parametrize("name", list(VIEW_CASES))
def test_views_with_symbolic_sizes(name: str) -> None:
    run_dynamic(VIEW_CASES[name], SIZES_2D)


def test_symbolic_chunk_and_split_lower_to_views() -> None:
    """Uneven chunk/split of a symbolic dim are index maps, not ATen fallbacks."""
    from kiln.compiler import compile_history, reset_compile_history

    reset_compile_history()
    run_dynamic(VIEW_CASES["chunk_cat"], SIZES_2D[:2])
    run_dynamic(VIEW_CASES["split_symbolic"], SIZES_2D[:2])
    assert compile_history() and all(not stats.externs for stats in compile_history())


@pytest.mark.parametrize("name", list(ARITH_CASES))
def test_host_arithmetic_on_sizes(name: str) -> None:
    run_dynamic(ARITH_CASES[name], SIZES_2D)


def test_sdpa_scale_from_a_symbolic_head_dim() -> None:
    """SDPA's default scale is 1/sqrt(head_dim): a SymFloat computed on the host."""
    run_dynamic(
        sdpa, [[(2, 3, 5, 8)] * 3, [(2, 3, 7, 16)] * 3, [(1, 2, 9, 4)] * 3], check_strides=False
    )


@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
def test_interpolate_with_symbolic_sizes(mode: str) -> None:
    """``interpolate`` computes its output size as ``trunc(sym_float(h) * scale)``."""
    run_dynamic(
        lambda x: F.interpolate(x, scale_factor=1.5, mode=mode) * 2,
        [(1, 2, 5, 6), (2, 2, 7, 3), (1, 3, 4, 9)],
    )

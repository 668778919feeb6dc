"""``torch.compile(..., backend="kiln", dynamic=True)`` through the Triton executor (in
Triton's interpreter on the CPU) against eager: the cases of ``tests/dynamic_cases.py``
that exercise the Triton wrapper's host arithmetic and views of inputs."""

from __future__ import annotations

import pytest
import torch
from dynamic_cases import ARITH_CASES, SIZES_2D, VIEW_CASES, run_dynamic
from hypothesis import given
from test_dynamic_fuzz import EXAMPLES, Program, check, fuzz, programs
from triton_checks import DEVICE

VIEWS = ["chunk_view", "chunk_math", "split_symbolic", "narrow_symbolic_view"]
ARITH = ["floor_ceil", "trunc", "pow_int", "pow_neg_half", "float_size_to_view"]


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> None:
    torch._dynamo.reset()


@pytest.mark.parametrize("name", VIEWS)
def test_views_with_symbolic_sizes(name: str) -> None:
    run_dynamic(VIEW_CASES[name], SIZES_2D[:3], executor="triton", device=DEVICE)


@pytest.mark.parametrize("name", ARITH)
def test_host_arithmetic_on_sizes(name: str) -> None:
    run_dynamic(ARITH_CASES[name], SIZES_2D[:3], executor="triton", device=DEVICE)


@fuzz(EXAMPLES // 20)
@given(programs())
def test_random_dynamic_view_chains(program: Program) -> None:
    """The fuzzer of ``tests/test_dynamic_fuzz.py`` through the Triton executor."""
    check(program, "triton", DEVICE)

"""``torch.compile(..., backend="kiln", dynamic=True)`` through the Triton executor (in
Triton's interpreter on the CPU) against eager: the cases of ``tests/dynamic_cases.py``
that exercise the Triton wrapper's host arithmetic and views of inputs."""

from __future__ import annotations

from unittest import mock

import pytest
import torch
from dynamic_cases import ARITH_CASES, SIZES_2D, VIEW_CASES, run_dynamic
from hypothesis import given
from test_dynamic_fuzz import EXAMPLES, Program, check, fuzz, programs
from triton_checks import DEVICE

VIEWS = ["chunk_view", "chunk_math", "split_symbolic", "narrow_symbolic_view"]
ARITH = ["floor_ceil", "trunc", "pow_int", "pow_neg_half", "float_size_to_view"]


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


@fuzz(EXAMPLES // 20)
@given(programs())
def test_random_dynamic_view_chains_scheduled_for_a_gpu(program: Program) -> None:
    """The same, scheduled as for a GPU wherever the kernels run (the program marked
    ``cuda:0``: the GPU's inlining and fusion rules under symbolic sizes)."""
    with mock.patch("kiln.compiler.gpu_device", return_value=torch.device("cuda", 0)):
        check(program, "triton", DEVICE)


class _RotaryHeads(torch.nn.Module):
    """LLaMA's rotary embedding on a head view: ``cat([-x2, x1])`` under the cat's mask,
    a static table sliced by the symbolic length, a float attribute (a 0-d float64
    input under ``dynamic=True``) and the ``[s0*s1, c]`` copy of the transposed heads."""

    table: torch.Tensor

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("table", torch.randn(64, 8), persistent=False)
        self.eps = 1e-6

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        q = x.view(b, t, 4, 8).transpose(1, 2)
        q1, q2 = q.chunk(2, dim=-1)
        q = q * self.table[:t] + torch.cat([-q2, q1], dim=-1)
        return q.transpose(1, 2).reshape(b * t, c) * 2


def test_rotary_heads_with_symbolic_sizes() -> None:
    torch.manual_seed(0)
    module = _RotaryHeads().to(DEVICE)
    run_dynamic(module, [(2, 5, 32), (3, 7, 32)], executor="triton", device=DEVICE)

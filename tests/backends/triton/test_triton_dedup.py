"""``dedup-kernels`` with the Triton backend: identical layers share their Triton kernels
and the program still computes eager's numbers (Triton's interpreter on the CPU, or the GPU with ``KILN_TRITON_DEVICE=cuda``)."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from triton_checks import DEVICE

import kiln
from kiln.compiler import last_compile_stats


class _Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # No residual: on a GPU, inline-producers recomputes a residual ``x + gelu(...)``
        # of up to 1 MB in the next layer's kernel (inline_cost.GPU_LAUNCH_BYTES), which
        # makes each layer's kernels differ from the previous one's.
        return torch.nn.functional.gelu(self.fc(self.norm(x)))


@pytest.mark.parametrize("dynamic", [False, True])
def test_repeated_layers_share_triton_kernels(dynamic: bool) -> None:
    # Static or dynamic as asked: this test passed only when an earlier test of its
    # process made dynamo compile the next module dynamic (torch.compile of modules
    # shares nn.Module's call frame). Rows of 8 KB: below 4 KB, inline-producers
    # recomputes the residual in the next layer's kernel (inline_cost.TINY_INLINE_BYTES),
    # and the layers' kernels differ.
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = nn.Sequential(*[_Block(64) for _ in range(3)]).eval().to(DEVICE)
    x = torch.randn(32, 64, device=DEVICE)
    with torch.no_grad():
        expected = model(x)
        got = kiln.compile(model, executor="triton", verbose=False, dynamic=dynamic)(x)
    torch.testing.assert_close(got, expected)
    stats = last_compile_stats()
    assert stats.executor == "triton"
    assert stats.kernels < stats.launches  # later layers launch the first layers' kernels

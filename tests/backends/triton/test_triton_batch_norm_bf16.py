"""bf16 BatchNorm training running statistics through the Triton backend (see
tests/backends/cpp/test_cpp_batch_norm_bf16.py)."""

from __future__ import annotations

import copy

import pytest
import torch
from triton_checks import DEVICE

import kiln


def _stat(bn: torch.nn.BatchNorm2d, name: str) -> torch.Tensor:
    value = getattr(bn, name)
    assert isinstance(value, torch.Tensor)
    return value


def test_bf16_batch_norm_running_stats_triton() -> None:
    torch.manual_seed(0)
    bn = torch.nn.BatchNorm2d(16).to(torch.bfloat16).to(DEVICE).train()
    compiled = kiln.compile(bn, verbose=False, executor="triton")
    mean, var = _stat(bn, "running_mean").double().cpu(), _stat(bn, "running_var").double().cpu()
    for _ in range(3):
        x = (torch.randn(4, 16, 5, 5) * 20 + 300).to(torch.bfloat16)
        with torch.no_grad():
            compiled(x.to(DEVICE))
        xd = x.double()
        mean = (0.9 * mean + 0.1 * xd.mean((0, 2, 3))).bfloat16().double()
        var = (0.9 * var + 0.1 * xd.var((0, 2, 3), unbiased=True)).bfloat16().double()
    torch.testing.assert_close(
        _stat(bn, "running_mean").double().cpu(), mean, atol=0.0, rtol=2**-10
    )
    torch.testing.assert_close(_stat(bn, "running_var").double().cpu(), var, atol=0.0, rtol=2**-10)


@pytest.mark.skipif(DEVICE.type != "cuda", reason="needs KILN_TRITON_DEVICE=cuda and a GPU")
def test_gpu_bf16_batch_norm_running_stats_match_eager() -> None:
    # Eager's CUDA kernel updates the statistics in float32, as kiln now does.
    torch.manual_seed(0)
    eager = torch.nn.BatchNorm2d(16).to(torch.bfloat16).cuda().train()
    ours = copy.deepcopy(eager)
    compiled = kiln.compile(ours, verbose=False)
    for _ in range(3):
        x = (torch.randn(8, 16, 7, 7, device="cuda") * 20 + 300).to(torch.bfloat16)
        with torch.no_grad():
            torch.testing.assert_close(compiled(x), eager(x), atol=5e-2, rtol=5e-2)
    for a, e in (
        (_stat(ours, "running_mean"), _stat(eager, "running_mean")),
        (_stat(ours, "running_var"), _stat(eager, "running_var")),
    ):
        torch.testing.assert_close(a.double(), e.double(), atol=0.0, rtol=2**-8)

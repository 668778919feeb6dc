"""bf16 BatchNorm training: the running statistics are updated in float32 and rounded
once, as eager's CUDA kernels (and Inductor) do; PyTorch's decomposition rounded
``(1 - momentum) * running_mean`` to bf16 first (off by up to an ulp: 2.2 on a GPU).

The reference is that update computed in float64 and rounded to bf16 once per step
(eager on the CPU rounds differently itself, so it is no reference here).
"""

from __future__ import annotations

import torch

import kiln


def _stat(bn: torch.nn.BatchNorm2d, name: str) -> torch.Tensor:
    value = getattr(bn, name)
    assert isinstance(value, torch.Tensor)
    return value


def check_running_stats(executor: str) -> None:
    torch.manual_seed(0)
    bn = torch.nn.BatchNorm2d(16).to(torch.bfloat16).train()
    compiled = kiln.compile(bn, verbose=False, executor=executor)
    mean, var = _stat(bn, "running_mean").double(), _stat(bn, "running_var").double()
    for _ in range(3):
        x = (torch.randn(4, 16, 5, 5) * 20 + 300).to(torch.bfloat16)
        with torch.no_grad():
            compiled(x)
        xd = x.double()
        mean = (0.9 * mean + 0.1 * xd.mean((0, 2, 3))).bfloat16().double()
        var = (0.9 * var + 0.1 * xd.var((0, 2, 3), unbiased=True)).bfloat16().double()
    # Half a bf16 ulp: a second rounding shows as a whole one.
    torch.testing.assert_close(_stat(bn, "running_mean").double(), mean, atol=0.0, rtol=2**-10)
    torch.testing.assert_close(_stat(bn, "running_var").double(), var, atol=0.0, rtol=2**-10)


def test_bf16_batch_norm_running_stats_cpp() -> None:
    check_running_stats("cpp")


def test_decomposition_updates_running_stats_in_float() -> None:
    from kiln.passes.decompose_parts.tables import base_table

    decompose = base_table("kiln")[torch.ops.aten._native_batch_norm_legit_functional.default]
    x = torch.randn(2, 3, 4).bfloat16()
    stats = [torch.full((3,), 255.0).bfloat16(), torch.full((3,), 257.0).bfloat16()]
    *_, new_mean, new_var = decompose(x, None, None, *stats, True, 0.1, 1e-5)
    assert new_mean.dtype == torch.float32
    # 0.9 * 255 = 229.5 is no bf16: rounding it first is what eager does not do
    expected = 0.1 * x.double().mean((0, 2)) + 0.9 * 255.0
    torch.testing.assert_close(new_mean.double(), expected, atol=1e-5, rtol=1e-6)
    assert new_var.dtype == torch.float32

"""Per-channel reductions over channels-last (NHWC) activations, as a CNN's batch norms
compute them in training with saved activations NHWC (``channels-last{saved-nhwc=true}``):
the statistics of the forward and the backward's ``sum(grad)`` and
``sum(grad * (x - mean))``, on NHWC inputs and on an NHWC gradient with an NCHW
activation. Such a reduction has few outputs (one per channel) over many elements, so
it runs split in two kernels; the numbers are eager's."""

from __future__ import annotations

import pytest
import torch
from triton_checks import check, kernel_kinds

N, C = 3, 24
"""Sizes that are not powers of 2."""


def nhwc(height: int, dtype: torch.dtype, channels: int = C) -> torch.Tensor:
    # Quartered: sums of up to 1728 products, added in another order than eager's, then
    # agree within float32's absolute tolerance (1e-5) even where a sum comes out small.
    x = (torch.randn(N, channels, height, height) / 4).to(dtype)
    return x.contiguous(memory_format=torch.channels_last)


def bn_backward_sums(
    grad: torch.Tensor, x: torch.Tensor, mean: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``sum(grad)``, ``grad * (x - mean)`` and its sum over every dim but the channels,
    computed on the NHWC views as ``channels-last`` rewrites a backward's pointwise ops."""
    grad_nhwc = grad.permute(0, 2, 3, 1)
    total = grad_nhwc.sum((0, 1, 2))  # first: the scheduler fuses the product after it
    centered = grad_nhwc * (x.permute(0, 2, 3, 1) - mean)
    return total, centered, centered.sum((0, 1, 2))


def bn_forward_stats(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    var, mean = torch.var_mean(x, (0, 2, 3), correction=0)
    return var, mean, x.sum((0, 2, 3))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("height", [7, 24])
def test_batch_norm_backward_sums_over_nhwc(dtype: torch.dtype, height: int) -> None:
    """``sum(grad)`` is fused with ``grad * (x - mean)``, which does not read it: that
    kernel ran unsplit, one program per block of channels over all N*H*W elements."""
    compiled = check(
        bn_backward_sums,
        nhwc(height, dtype),
        nhwc(height, dtype),
        torch.randn(C).to(dtype),
    )
    kinds = kernel_kinds(compiled)
    if height == 24:  # 1728 elements per channel: every reduction split
        assert "looped" not in kinds, kinds
        assert "persistent" in kinds, kinds
        assert kinds.count("split") == 2, kinds


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("height", [7, 24])
def test_sum_of_products_of_nhwc_and_nchw(dtype: torch.dtype, height: int) -> None:
    """An NHWC gradient times an NCHW activation: one load contiguous along the
    channels, the other along the pixels."""
    check(
        lambda g, x: ((g * x).sum((0, 2, 3)), g.sum((0, 2, 3))),
        nhwc(height, dtype),
        torch.randn(N, C, height, height).to(dtype),
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("height", [7, 24])
def test_batch_norm_forward_statistics_over_nhwc(dtype: torch.dtype, height: int) -> None:
    check(bn_forward_stats, nhwc(height, dtype))


def bn_backward_dot(
    grad: torch.Tensor, x: torch.Tensor, mean: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``sum(grad)`` and ``sum(grad * (x - mean))`` without the product as a result: the
    product is recomputed in the second sum, and both sums run in one kernel."""
    grad_nhwc = grad.permute(0, 2, 3, 1)
    return grad_nhwc.sum((0, 1, 2)), (grad_nhwc * (x.permute(0, 2, 3, 1) - mean)).sum((0, 1, 2))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_two_batch_norm_sums_in_one_kernel_split_together(dtype: torch.dtype) -> None:
    compiled = check(bn_backward_dot, nhwc(24, dtype), nhwc(24, dtype), torch.randn(C).to(dtype))
    kinds = kernel_kinds(compiled)
    assert kinds.count("split") == 1, kinds  # one first kernel, partials of both sums
    assert "looped" not in kinds, kinds


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("channels_last", [True, False])
def test_batch_norm_statistics_split_by_chan_s_formula(
    dtype: torch.dtype, channels_last: bool
) -> None:
    """The forward's ``welford`` statistics over many elements a channel (1728 NHWC, an
    outer reduction; 12288 NCHW, an inner one) split like sums: partial (mean, m2, count)
    triples, combined by Chan's formula in the second kernel.
    Unsplit, one program per block of channels read all N*H*W elements (42 ms a launch
    for ResNet-18's large batch norms on an H200). A mean far from zero checks that the
    combine takes deviations from the combined mean, not a sum of squares."""
    height = 24 if channels_last else 64
    x = (torch.randn(N, C, height, height) + 100).to(dtype)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    compiled = check(lambda x: torch.var_mean(x, (0, 2, 3), correction=0), x)
    kinds = kernel_kinds(compiled)
    assert kinds.count("split") == 1, kinds
    assert "looped" not in kinds, kinds

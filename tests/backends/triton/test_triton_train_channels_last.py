"""Saved activations in the layout kiln computes them in, on the Triton executor
(:mod:`kiln.frontends.saved_layout`): Inductor's layout optimization in training, where
cuDNN's convolution backward then runs channels-last too."""

from __future__ import annotations

from contextlib import AbstractContextManager

import pytest
import torch
from saved_layout_cases import (
    SAVED_NHWC,
    SmallCnn,
    is_channels_last,
    saved_batches,
    train_like_eager,
)
from triton_checks import DEVICE


def _no_tf32() -> AbstractContextManager[None]:
    """cuDNN's TF32 convolutions, NHWC here and NCHW in eager, would differ by ~1e-3."""
    cudnn = torch.backends.cudnn
    return cudnn.flags(
        enabled=cudnn.enabled,
        benchmark=cudnn.benchmark,
        deterministic=cudnn.deterministic,
        allow_tf32=False,
    )


def test_cnn_training_saves_activations_channels_last(monkeypatch: pytest.MonkeyPatch) -> None:
    """The forward returned every saved activation NCHW (a copy back from the NHWC
    buffers its convolutions compute) and the backward read them so; now they stay
    channels-last from the forward to the backward, with no copy (``saved-nhwc``, on by
    default on the GPU)."""
    torch.manual_seed(0)
    options = {
        "executor": "triton",
        "verbose": False,
        "cuda_graphs": False,
        "pipeline": SAVED_NHWC,
    }
    with _no_tf32():
        compiled, copies = train_like_eager(
            SmallCnn().to(DEVICE),
            lambda: torch.randn(2, 3, 8, 8, device=DEVICE),
            options,
            monkeypatch,
        )
    _, activations = saved_batches(compiled, 2)
    assert len(activations) >= 5  # 5 activations and the pool's indices
    assert all(is_channels_last(v) for v in activations), [v.stride() for v in activations]
    assert copies == []


class ShuffleBlock(torch.nn.Module):
    """ShuffleNet-v2's stride-1 block (torchvision's ``InvertedResidual``): one half of
    the channels through 1x1 / depthwise 3x3 / 1x1 convolutions with batch norms, the
    other passed through, concatenated, and the channels shuffled."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        half = channels // 2
        bn = torch.nn.BatchNorm2d
        self.branch = torch.nn.Sequential(
            torch.nn.Conv2d(half, half, 1, bias=False),
            bn(half),
            torch.nn.ReLU(),
            torch.nn.Conv2d(half, half, 3, padding=1, groups=half, bias=False),
            bn(half),
            torch.nn.Conv2d(half, half, 1, bias=False),
            bn(half),
            torch.nn.ReLU(),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        kept, branch = x.chunk(2, dim=1)
        out = torch.cat((kept, self.branch(branch)), dim=1)
        n, c, h, w = out.shape
        return out.view(n, 2, c // 2, h, w).transpose(1, 2).contiguous().view(n, c, h, w)


class ShuffleBlocks(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.blocks = torch.nn.Sequential(ShuffleBlock(8), ShuffleBlock(8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(self.stem(x)).mean((2, 3))


def test_saved_channel_slices_are_the_compact_copies_the_convolutions_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On the GPU the split along C stays NCHW, and ``gpu-copy-nchw-inputs`` (on by
    default) gives the branch's first convolution a compact channels-last copy of its
    half. The forward saved the half itself for the backward (a view of the shuffled
    tensor), so the backward's ``convolution_backward`` read it NCHW against NHWC
    gradients and ATen copied it each step; now the copy is what is saved: the backward
    gets every branch input channels-last, with the same gradients as eager."""
    import kiln.passes.channels_last as channels_last_pass

    monkeypatch.setattr(channels_last_pass, "_on_gpu", lambda module: True)
    torch.manual_seed(0)
    options = {"executor": "triton", "verbose": False, "cuda_graphs": False}
    with _no_tf32():
        compiled, _ = train_like_eager(
            ShuffleBlocks().to(DEVICE),
            lambda: torch.randn(2, 3, 6, 6, device=DEVICE),
            options,
            monkeypatch,
        )
    _, activations = saved_batches(compiled, 2)
    halves = [v for v in activations if v.shape[1] == 4]
    assert len(halves) >= 2  # each block's branch input (and what its convolutions saved)
    assert all(is_channels_last(v) for v in halves), [v.stride() for v in halves]

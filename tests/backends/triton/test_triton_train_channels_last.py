"""Saved activations in the layout kiln computes them in, on the Triton executor
(:mod:`kiln.frontends.saved_layout`): Inductor's layout optimization in training, where
cuDNN's convolution backward then runs channels-last too."""

from __future__ import annotations

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
    cudnn = torch.backends.cudnn
    # cuDNN's TF32 convolutions, NHWC here and NCHW in eager, would differ by ~1e-3.
    with cudnn.flags(
        enabled=cudnn.enabled,
        benchmark=cudnn.benchmark,
        deterministic=cudnn.deterministic,
        allow_tf32=False,
    ):
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

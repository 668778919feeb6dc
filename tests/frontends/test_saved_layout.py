"""Saved activations in the layout kiln computes them in, on the C++ executor
(:mod:`kiln.frontends.saved_layout`; the Triton executor's test is
tests/backends/triton/test_triton_train_channels_last.py)."""

from __future__ import annotations

import pytest
import torch
from saved_layout_cases import SmallCnn, is_channels_last, saved_batches, train_like_eager


def test_cnn_training_saves_activations_channels_last(monkeypatch: pytest.MonkeyPatch) -> None:
    """The forward returned every saved activation NCHW (a copy back from the NHWC
    buffers its convolutions and batch norms compute), and the backward read them so.
    Now the forward returns them channels-last, reports those strides, and AOTAutograd
    hands them to the backward as they are: no copy on either side."""
    torch.manual_seed(0)
    compiled, copies = train_like_eager(
        SmallCnn(), lambda: torch.randn(2, 3, 8, 8), {"executor": "cpp"}, monkeypatch
    )
    # The image (read by the first convolution's weight gradient) stays as it came.
    image, activations = saved_batches(compiled, 2)
    assert len(image) == 1 and image[0].is_contiguous()
    assert len(activations) >= 5 and all(is_channels_last(v) for v in activations), [
        v.stride() for v in activations
    ]
    assert copies == []

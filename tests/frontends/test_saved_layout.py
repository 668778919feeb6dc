"""Saved activations in the layout kiln computes them in, on the C++ executor
(:mod:`kiln.frontends.saved_layout`; the Triton executor's test is
tests/backends/triton/test_triton_train_channels_last.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from saved_layout_cases import (
    SAVED_NHWC,
    SmallCnn,
    is_channels_last,
    saved_batches,
    train_like_eager,
)

from kiln import graph_cache
from kiln.compiler import DEFAULT_PIPELINE, compile_history, reset_compile_history


def test_cnn_training_saves_activations_channels_last(monkeypatch: pytest.MonkeyPatch) -> None:
    """The forward returned every saved activation NCHW (a copy back from the NHWC
    buffers its convolutions and batch norms compute), and the backward read them so.
    Now the forward returns them channels-last, reports those strides, and AOTAutograd
    hands them to the backward as they are: no copy on either side. (On the CPU only
    with ``saved-nhwc-cpu``: see the next test.)"""
    torch.manual_seed(0)
    options = {"executor": "cpp", "pipeline": SAVED_NHWC}
    compiled, copies = train_like_eager(
        SmallCnn(), lambda: torch.randn(2, 3, 8, 8), options, monkeypatch
    )
    # The image (read by the first convolution's weight gradient) stays as it came.
    image, activations = saved_batches(compiled, 2)
    assert len(image) == 1
    assert image[0].is_contiguous()
    assert len(activations) >= 5  # 5 activations and the pool's indices
    assert all(is_channels_last(v) for v in activations), [v.stride() for v in activations]
    assert copies == []


def test_cpu_keeps_saved_activations_nchw_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """On the CPU the forward of a small network still returns its saved activations
    NCHW by default (oneDNN's training step ran slower channels-last at batch 2, 64x64:
    ``saved_nhwc_cpu_min_elements``), and reports those strides: the backward takes them
    as they come, with no copy."""
    torch.manual_seed(0)
    compiled, copies = train_like_eager(
        SmallCnn(), lambda: torch.randn(2, 3, 8, 8), {"executor": "cpp"}, monkeypatch
    )
    _, activations = saved_batches(compiled, 2)
    assert activations
    assert all(v.is_contiguous() for v in activations)
    assert copies == []


def test_cpu_saves_the_activations_of_large_convolutions_channels_last(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On the CPU a forward whose largest convolution output reaches
    ``saved-nhwc-cpu-min-elements`` (4M elements by default: batch 32 at 224x224 trained
    1.2-1.9x faster so; here lowered to this small network's 1024) saves its activations
    channels-last without ``saved-nhwc-cpu``, and its backward, which receives them so,
    computes on them NHWC: eager's losses and gradients, no copy on either side."""
    torch.manual_seed(0)
    pipeline = DEFAULT_PIPELINE.replace(
        "channels-last", "channels-last{saved-nhwc-cpu-min-elements=1024}"
    )
    options = {"executor": "cpp", "pipeline": pipeline}
    compiled, copies = train_like_eager(
        SmallCnn(), lambda: torch.randn(2, 3, 8, 8), options, monkeypatch
    )
    _, activations = saved_batches(compiled, 2)
    assert len(activations) >= 5
    assert all(is_channels_last(v) for v in activations), [v.stride() for v in activations]
    assert copies == []


def test_graph_cache_hit_reports_the_saved_layout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A forward from the graph cache returns its saved activations channels-last as
    the compile that stored it did: the strides it reports come with the entry."""
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv(graph_cache.ENV, "1")
    for attempt in range(2):
        torch.manual_seed(0)
        reset_compile_history()
        options = {"executor": "cpp", "pipeline": SAVED_NHWC}
        compiled, _ = train_like_eager(
            SmallCnn(), lambda: torch.randn(2, 3, 8, 8), options, monkeypatch
        )
        forward = next(s for s in compile_history() if s.name.startswith("forward"))
        assert forward.graph_cache == ("stored" if attempt == 0 else "hit")
        _, activations = saved_batches(compiled, 2)
        assert all(is_channels_last(v) for v in activations)

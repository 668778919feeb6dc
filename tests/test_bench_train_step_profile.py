"""benchmarks/train_step_profile.py: kiln variants with pass options (A/B of an option)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kiln.compile_options import DEFAULT_PIPELINE

_BENCHMARKS = str(Path(__file__).resolve().parents[1] / "benchmarks")


def test_pass_options_replace_their_pass_in_the_default_pipeline() -> None:
    if _BENCHMARKS not in sys.path:
        sys.path.insert(0, _BENCHMARKS)
    import train_step_profile  # pyright: ignore[reportMissingImports]

    spec = "channels-last{gpu-copy-nchw-inputs=true}+conv1x1-to-mm{nchw-max-weight=0}"
    pipeline: str = train_step_profile.with_pass_options(spec)  # pyright: ignore
    expected = DEFAULT_PIPELINE.replace(
        "channels-last,", "channels-last{gpu-copy-nchw-inputs=true},"
    ).replace("conv1x1-to-mm,", "conv1x1-to-mm{nchw-max-weight=0},")
    assert pipeline == expected
    with pytest.raises(SystemExit, match="not-a-pass"):
        train_step_profile.with_pass_options("not-a-pass{x=1}")  # pyright: ignore


def test_output_error_reads_how_far_the_compiled_output_is_from_eager() -> None:
    if _BENCHMARKS not in sys.path:
        sys.path.insert(0, _BENCHMARKS)
    import torch
    import train_step_profile  # pyright: ignore[reportMissingImports]

    model = torch.nn.Linear(8, 4)
    x = torch.randn(3, 8)
    with torch.no_grad():
        right = model(x)
    error = train_step_profile.output_error  # pyright: ignore
    assert error(right, model, (x,)) == 0.0
    assert error(right * 1.5, model, (x,)) > 0.3  # a wrong variant shows
    assert error(right[:2], model, (x,)) == float("inf")

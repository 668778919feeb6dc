"""The ``conv-epilogue`` pass: inference convolutions with their batch norm and
activation as one oneDNN call, through the whole CPU pipeline against eager (fresh
inputs, weights and statistics changed between calls); its IR in / IR out test is
tests/filecheck/aten/conv-epilogue.mlir."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from models import randomize_batch_norms
from torch import nn

from kiln.frontends.dynamo import kiln_backend
from kiln.passes.conv_epilogue import MIN_OUTPUT, available

pytestmark = pytest.mark.skipif(not available(), reason="needs oneDNN")

FUSED = "mkldnn::_convolution_pointwise"


def _blocks() -> nn.Module:
    """MobileNet-v2's and ResNet's patterns: conv-BN-ReLU6, depthwise conv-BN-ReLU6, a 1x1
    projection with a BN alone, a biased conv-BN-ReLU."""
    model = nn.Sequential(
        nn.Conv2d(8, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU6(),
        nn.Conv2d(16, 16, 3, padding=1, groups=16, bias=False), nn.BatchNorm2d(16), nn.ReLU6(),
        nn.Conv2d(16, 16, 1, bias=False), nn.BatchNorm2d(16),
        nn.Conv2d(16, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
    )  # fmt: skip
    randomize_batch_norms(model)
    return model.eval()


def _compile(model: nn.Module, tmp_path: Path) -> tuple[object, Path]:
    torch._dynamo.reset()  # pyright: ignore[reportPrivateImportUsage]
    options = {"verbose": False, "debug_dir": str(tmp_path), "graph_cache": False}
    return torch.compile(model, backend=kiln_backend, options=options), tmp_path


def _wrapper(debug: Path) -> str:
    return "\n".join(p.read_text() for p in debug.glob("*/wrapper.py"))


def test_convolutions_batch_norms_and_activations_fuse_and_keep_eager_numbers(
    tmp_path: Path,
) -> None:
    torch.manual_seed(0)
    model = _blocks()
    compiled, debug = _compile(model, tmp_path)
    with torch.no_grad():
        for _ in range(2):
            x = torch.randn(1, 8, 256, 256)  # 1M outputs a convolution: fused
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)  # pyright: ignore[reportCallIssue]
        wrapper = _wrapper(debug)
        assert wrapper.count(FUSED) == 4, wrapper
        assert "aten::convolution.default" not in wrapper
        # The fold runs at every call: weights and statistics changed in place are seen.
        model[1].running_var.mul_(3.0)
        model[4].weight.add_(0.5)
        model[8].bias.sub_(1.0)
        model[0].weight.mul_(-1.0)
        x = torch.randn(1, 8, 256, 256)
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)  # pyright: ignore[reportCallIssue]


def test_small_convolutions_stay_as_they_were(tmp_path: Path) -> None:
    """Below MIN_OUTPUT the fold's kernels and oneDNN's reorder of an unpacked weight
    cost more than the pass they save."""
    assert 2 * 16 * 32 * 32 < MIN_OUTPUT
    torch.manual_seed(0)
    model = _blocks()
    compiled, debug = _compile(model, tmp_path)
    with torch.no_grad():
        x = torch.randn(2, 8, 32, 32)
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)  # pyright: ignore[reportCallIssue]
    assert FUSED not in _wrapper(debug)


@pytest.mark.parametrize("activation", [nn.SiLU(), nn.Hardswish(), nn.GELU(), nn.GELU("tanh")])
def test_smooth_activations_run_as_post_ops_within_float32_rounding(
    activation: nn.Module, tmp_path: Path
) -> None:
    """EfficientNet's SiLU, MobileNet-v3's hardswish, GELU: oneDNN's post-ops, not ATen's
    kernels, so equal to eager within float32 rounding rather than bit for bit."""
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(8, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), activation
    )  # fmt: skip
    randomize_batch_norms(model)
    model.eval()
    compiled, debug = _compile(model, tmp_path)
    with torch.no_grad():
        x = torch.randn(1, 8, 256, 256)
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)  # pyright: ignore[reportCallIssue]
    assert _wrapper(debug).count(FUSED) == 1

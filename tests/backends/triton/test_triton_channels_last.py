"""Conv nets with the ``channels-last`` pass through the Triton backend, against eager:
NHWC activations between the convolutions, NHWC extern results, no extra kernels."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from models import randomize_batch_norms
from torch import nn
from triton_checks import PIPELINE, assert_close, capture, check, compile_capture

WITH_CHANNELS_LAST = (*PIPELINE[:4], "channels-last", *PIPELINE[4:])


class ConvNet(nn.Module):
    """Stem conv+BN+ReLU, max pool, a residual block, a strided grouped conv, a head."""

    def __init__(self, channels: int = 4) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, channels, 3, padding=1), nn.BatchNorm2d(channels), nn.ReLU()
        )
        self.pool = nn.MaxPool2d(2)
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.down = nn.Conv2d(channels, 2 * channels, 3, stride=2, padding=1, groups=2)
        self.head = nn.Linear(2 * channels, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.pool(self.stem(x))
        y = F.relu(y + self.bn1(self.conv1(y)))
        return self.head(torch.sigmoid(self.down(y)).mean(dim=(2, 3)))


def conv_net() -> ConvNet:
    torch.manual_seed(0)
    model = ConvNet()
    randomize_batch_norms(model)
    return model.eval()


def test_conv_net_matches_eager() -> None:
    model, x = conv_net(), torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        compiled = check(model, x, passes=WITH_CHANNELS_LAST)
    assert "channels_last" not in compiled.program.source  # the copy is a kernel
    fresh = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        (actual,) = compiled.run([*compiled.args[:-1], fresh.to(compiled.args[-1].device)])
        assert_close(actual, model(fresh.to(compiled.args[-1].device)).cpu())


def test_no_extra_kernels() -> None:
    model, x = conv_net(), torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        without = compile_capture(capture(model, x))
        with_pass = compile_capture(capture(model, x), WITH_CHANNELS_LAST)
    kernels = [
        sum(1 for op in c.module.ops if op.name == "triton.kernel") for c in (without, with_pass)
    ]
    # The image's copy to channels-last is the only added kernel.
    assert kernels[1] == kernels[0] + 1

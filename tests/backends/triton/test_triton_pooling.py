"""``max_pool2d_with_indices`` as Triton kernels (see tests/passes/test_lower_pooling.py):
values (and, off the GPU, indices) equal eager's, NCHW and channels-last, padding and
-inf windows. On a GPU a graph reading the indices keeps ATen's pool."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from triton_checks import DEVICE, check


def _image(channels_last: bool) -> torch.Tensor:
    x = torch.randn(2, 3, 9, 11)
    x[1, 2] = float("-inf")
    x[0, 1, 0, 0:4] = 5.0
    return x.to(memory_format=torch.channels_last) if channels_last else x


@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "nhwc"])
def test_max_pool_values_are_kernels(channels_last: bool) -> None:
    compiled = check(lambda x: F.max_pool2d(x, 3, 2, 1) * 2.0, _image(channels_last))
    assert "max_pool2d" not in compiled.program.source  # kernels, no ATen call


@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "nhwc"])
def test_max_pool_indices_match_eager(channels_last: bool) -> None:
    def pool(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return F.max_pool2d(x, 3, 2, 1, return_indices=True)

    if DEVICE.type != "cuda":
        check(pool, _image(channels_last))
        return
    # On the GPU through torch.compile, which records the program's device (kiln.device):
    # the indices stay ATen's there.
    from kiln.frontends.dynamo import kiln_backend

    x = _image(channels_last).to(DEVICE)
    torch._dynamo.reset()  # pyright: ignore[reportPrivateImportUsage]
    got = torch.compile(pool, backend=kiln_backend)(x)
    want = pool(x)
    torch.testing.assert_close(got[0], want[0])
    torch.testing.assert_close(got[1], want[1])

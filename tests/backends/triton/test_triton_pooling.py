"""``max_pool2d_with_indices`` as Triton kernels (see tests/passes/test_lower_pooling.py):
values and indices equal eager's, NCHW and channels-last, padding and -inf windows."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from triton_checks import check


@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "nhwc"])
def test_max_pool_values_and_indices(channels_last: bool) -> None:
    x = torch.randn(2, 3, 9, 11)
    x[1, 2] = float("-inf")
    x[0, 1, 0, 0:4] = 5.0
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
    compiled = check(lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True), x)
    assert "max_pool2d" not in compiled.program.source  # kernels, no ATen call

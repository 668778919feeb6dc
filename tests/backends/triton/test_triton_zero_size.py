"""Zero-size dims through the Triton backend (see tests/backends/cpp/test_cpp_zero_size.py)."""

from __future__ import annotations

import pytest
import torch
from triton_checks import DEVICE, check, randn

from kiln.compiler import CompileOptions, compile_graph
from kiln.frontends.capture import capture_make_fx


def test_eye_and_block_diag_with_empty_dims() -> None:
    check(lambda x: torch.eye(x.shape[0], device=x.device) + x.sum(), randn(0, 3))
    check(lambda a, b: torch.block_diag(a, b) * 2.0, randn(2, 0), randn(3, 2))


def test_max_over_an_empty_dim_raises() -> None:
    x = randn(0, 4).to(DEVICE)
    cap = capture_make_fx(lambda x: x.max(0).values, x)
    compiled = compile_graph(cap.gm, [x], CompileOptions(executor="triton", verbose=False))
    with pytest.raises(IndexError, match="non-zero size"):
        compiled(x)  # eager's error (a loop over nothing returned -inf)

"""Casts to bfloat16 and float16 through the Triton backend, bit for bit against eager.

PyTorch converts an integer or a float64 to bfloat16 or float16 through float32
(``c10::BFloat16`` and ``c10::Half`` are built from a float), on CPU and CUDA alike: two
roundings (the H200 run of session 11: int64 ``2**24 + 2**16 + 1`` is bfloat16 ``2**24``
on CUDA too). Triton's direct cast rounds once; on the H200 it folded kiln's two casts
(integer to float32 to bfloat16) into that one rounding, so kiln rounds the float32 to
bfloat16 in its bits; and Triton's CPU interpreter turned integers and float64 into
bfloat16's raw bits (``int64 9`` became ``8.3e-40``). Run with ``KILN_TRITON_DEVICE=cuda``
to check the GPU path.
"""

from __future__ import annotations

import pytest
import torch
from triton_checks import DEVICE, capture, compile_capture

# Values that round differently once and twice: 2**24 + 2**16 + 1 is 2**24 through
# float32 (a tie, then even) but 2**24 + 2**17 rounded once.
INTEGERS = [-9, -1, 0, 1, 7, 9, 127, 255, 257, 1000, 65535, 2**24 + 2**16 + 1, -(2**30) - 2**22 - 1]
# 1 + 2**-8 + 2**-30: bfloat16 1.0 through float32, 1.0078125 rounded once; the same
# for float16 with 2**-11.
FLOAT64 = [0.0, -2.5, 1 + 2**-8 + 2**-30, 1 + 2**-11 + 2**-40, 3e38, 7e4, 1e-40, 1e-6]
FLOAT64 += [float("nan"), float("inf")]


def _bits_equal(have: torch.Tensor, want: torch.Tensor) -> None:
    have, want = have.cpu(), want.cpu()
    assert have.dtype == want.dtype
    assert torch.equal(have.isnan(), want.isnan()), (have, want)
    same = have.view(torch.int16) == want.view(torch.int16)
    assert bool((same | want.isnan()).all()), (have, want)


@pytest.mark.parametrize(
    "dtype", [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool], ids=str
)
def test_an_integer_cast_to_bfloat16_rounds_as_eager(dtype: torch.dtype) -> None:
    values = torch.tensor(INTEGERS, dtype=torch.int64)
    if dtype == torch.bool:
        values = values.remainder(2)
    info = torch.iinfo(dtype) if dtype != torch.bool else None
    if info is not None:
        values = values[(values >= info.min) & (values <= info.max)]
    x = values.to(dtype).to(DEVICE)
    compiled = compile_capture(capture(lambda t: t.to(torch.bfloat16), x))
    (have,) = compiled.run()
    _bits_equal(have, x.to(torch.bfloat16))


@pytest.mark.parametrize("half", [torch.bfloat16, torch.float16], ids=str)
def test_a_float64_cast_to_a_half_type_rounds_as_eager(half: torch.dtype) -> None:
    x = torch.tensor(FLOAT64, dtype=torch.float64).to(DEVICE)
    compiled = compile_capture(capture(lambda t: (t * 1.0).to(half), x))
    (have,) = compiled.run()
    _bits_equal(have, (x * 1.0).to(half))

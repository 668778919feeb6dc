"""Float-to-integer casts of NaN, infinities and out-of-range values in C++.

C++ leaves them undefined, so g++ may assume they never happen: ``x - (double)(int)x``
of ``-inf`` folded to ``-inf - (-inf)`` (NaN) where eager computes
``-inf - INT32_MIN = -inf``. Kiln's C++ converts as x86's truncating instructions do,
which is what eager runs on x86 (for every pair below, its scalar and vectorized paths
agree): NaN and out-of-range values give ``INT64_MIN`` / ``INT32_MIN``, and int16, int8
and uint8 are the low bits of that int32 (float64 3e9 -> int16 0, 300.0 -> int8 44).
"""

from __future__ import annotations

import pytest
import torch

from kiln.compiler import CompileOptions, compile_graph
from kiln.frontends.capture import capture_make_fx

FLOATS = [torch.float64, torch.float32, torch.float16, torch.bfloat16]
INTS = [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool]
SPECIAL = [float("nan"), float("inf"), float("-inf"), 3e9, -3e9, 1e20, 2.0**63, -(2.0**63)]
ORDINARY = [300.0, -200.0, 7e4, -7e4, 2147483647.9, -2147483648.9, 0.5, -2.5]


def _casts(x: torch.Tensor) -> list[torch.Tensor]:
    out: list[torch.Tensor] = []
    for integer in INTS:
        cast = x.to(integer)
        out += [cast, x - cast.to(x.dtype)]  # the cast used inside the kernel too
    return out


@pytest.mark.parametrize("length", [0, 37], ids=["scalar", "vector"])
@pytest.mark.parametrize("floating", FLOATS, ids=str)
def test_a_cast_of_nan_inf_or_out_of_range_is_eager_value(
    floating: torch.dtype, length: int
) -> None:
    """To every integer dtype: 0-d inputs one value at a time, or a vector of them all."""
    values = torch.tensor(SPECIAL + ORDINARY, dtype=torch.float64).to(floating)
    if length == 0:
        inputs = [values[k].clone() for k in range(len(values))]
    else:
        inputs = [values.repeat(length)]
    options = CompileOptions(executor="cpp", verbose=False)
    compiled = compile_graph(capture_make_fx(_casts, inputs[0]).gm, [inputs[0]], options)
    for x in inputs:
        have, want = compiled(x), _casts(x)
        for h, w in zip(have, want, strict=True):
            assert h.dtype == w.dtype
            assert torch.equal(h.isnan(), w.isnan()), (x, h, w)
            assert torch.equal(h.nan_to_num(), w.nan_to_num()), (x, h, w)

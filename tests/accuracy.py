"""Judging a result by its accuracy against a float64 run, not by closeness to eager.

Where kiln rounds less often than eager (float32 kernels with other summation orders,
half precision computed in f32 and rounded once), kiln and eager can be further apart
than any fixed tolerance while kiln is the closer one to the exact result.
"""

from __future__ import annotations

from typing import Any

import torch


def assert_as_accurate_as_eager(
    actual: Any,
    expected: torch.Tensor,
    reference: torch.Tensor,
    *,
    relative: float,
    absolute: float = 0.0,
    min_scale: float = 0.0,
) -> None:
    """kiln's largest error against ``reference`` (a float64 run of the same graph) is at
    most twice eager's, plus ``relative`` times the largest |reference| (at least
    ``min_scale``) plus ``absolute``. Positions where kiln equals eager or the reference,
    or both are NaN, count as exact."""
    assert isinstance(actual, torch.Tensor)
    assert actual.shape == expected.shape
    assert actual.dtype == expected.dtype
    if reference.numel() == 0:
        return
    have, want, exact = actual.double(), expected.double(), reference.double()
    agree = (have.isnan() & want.isnan()) | (have == want) | (have == exact)
    kiln_error = torch.where(agree, 0.0, (have - exact).abs().nan_to_num(nan=torch.inf))
    eager_error = (want - exact).abs().nan_to_num(nan=torch.inf)
    scale = float(exact.abs().nan_to_num(nan=0.0, posinf=0.0).max())
    bound = 2 * float(eager_error.max()) + relative * max(scale, min_scale) + absolute
    worst = float(kiln_error.max())
    assert worst <= bound, (
        f"kiln's largest error {worst:.3g} against float64 exceeds {bound:.3g} (twice "
        f"eager's {float(eager_error.max()):.3g}, largest |value| {scale:.3g}); kiln "
        f"{actual}, eager {expected}, float64 {reference}"
    )

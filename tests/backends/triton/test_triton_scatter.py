"""Accumulating scatters in the Triton backend: ``tl.atomic_add`` after a zero-fill
kernel, many duplicate indices, against eager on fresh inputs (interpreter on CPU;
``KILN_TRITON_DEVICE=cuda`` on a GPU)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch
from triton_checks import DEVICE, assert_close, check


def _index_put(x: torch.Tensor, i: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return torch.index_put(x, (i,), v * 2, accumulate=True)


def _embedding_backward(g: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
    return torch.ops.aten.embedding_dense_backward(g, i, 20, 3, False)


CASES: dict[str, tuple[Callable[..., Any], Callable[[], Sequence[torch.Tensor]]]] = {
    "index_put_f32_negative": (
        _index_put,
        lambda: (torch.randn(7, 5), torch.randint(-7, 7, (40,)), torch.randn(40, 5)),
    ),
    "index_put_i32_broadcast": (
        lambda x, i, v: torch.index_put(x, (i,), v, accumulate=True),
        lambda: (
            torch.randint(-50, 50, (6, 3), dtype=torch.int32),
            torch.randint(0, 6, (4, 5)),
            torch.randint(-50, 50, (3,), dtype=torch.int32),
        ),
    ),
    "scatter_add": (
        lambda x, i, s: x.scatter_add(1, i, s),
        lambda: (torch.randn(3, 6), torch.randint(0, 6, (3, 10)), torch.randn(3, 10)),
    ),
    "embedding_backward": (
        _embedding_backward,
        lambda: (torch.randn(2, 16, 8), torch.randint(0, 20, (2, 16))),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_scatter(name: str) -> None:
    fn, make = CASES[name]
    compiled = check(fn, *make())
    assert "tl.atomic_add(" in compiled.program.source
    fresh = [t.to(DEVICE) for t in make()]
    (out,) = compiled.run(fresh)
    assert_close(out, fn(*[t.clone() for t in fresh]).cpu())

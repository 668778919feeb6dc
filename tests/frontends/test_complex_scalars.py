"""Programs with complex Python scalars compile and equal eager (they failed to import:
a Scalar argument could only be an integer or a float)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

CASES: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "real plus imaginary": lambda x, z: x + 1j,
    "real times complex": lambda x, z: x * (2 - 1j),
    "complex times imaginary": lambda x, z: z * 1j,
    "equal to a complex": lambda x, z: torch.eq(z, 1j),
    "where with a complex": lambda x, z: torch.where(x > 0, z, 1j),
    "full of a complex": lambda x, z: torch.full_like(z, 2 + 3j),
    "complex power": lambda x, z: z ** (1 + 1j),
    "sub with alpha": lambda x, z: torch.sub(x, 1j, alpha=2),
}


@pytest.mark.parametrize("name", list(CASES))
def test_complex_scalars_compile_to_eager_values(name: str) -> None:
    fn = CASES[name]
    x = torch.randn(6)
    z = torch.randn(6, dtype=torch.complex64)
    got = torch.compile(fn, backend="kiln", options={"verbose": False})(x, z)
    want = fn(x, z)
    assert got.dtype == want.dtype
    torch.testing.assert_close(got, want)


def test_polar_trains_with_eager_gradients() -> None:
    """``polar``'s backward multiplies by ``1j`` (``mul.Scalar``)."""
    magnitude = torch.rand(5, requires_grad=True)
    angle = torch.randn(5, requires_grad=True)

    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.view_as_real(torch.polar(a, b) * 2)

    grad = torch.randn(5, 2)
    compiled = torch.compile(fn, backend="kiln", options={"verbose": False})
    got = torch.autograd.grad(compiled(magnitude, angle), (magnitude, angle), grad)
    want = torch.autograd.grad(fn(magnitude, angle), (magnitude, angle), grad)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w)

"""Views of unsigned tensors, which no loop body computes: their copies are ATen's
``clone`` of the view in a ``loop.extern``. A flipped view (negative strides) is
``as_strided`` of the forward view, then ``flip`` (found by the program fuzzer, session
46: ``x.flip(0)`` of a ``uint8`` ``[2, 3]`` tensor returned its second row as zeros, the
C++ view reading before the storage; ATen's interpreter raised on the negative stride)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from cpp_checks import check

CASES: dict[str, tuple[Callable[..., Any], tuple[int, ...]]] = {
    "flip rows": (lambda x: x.flip(0), (2, 3)),
    "flip columns": (lambda x: x.flip(-1), (4, 5)),
    "flip both of a slice": (lambda x: x[1:, ::2].flip(0, 1), (5, 7)),
    "flip then add": (lambda x: x.flip(1) + 1, (3, 4)),
    "flip an empty dim": (lambda x: x.flip(0), (0, 3)),
}


def _uint8(shape: tuple[int, ...]) -> Callable[[], tuple[torch.Tensor]]:
    return lambda: (torch.randint(0, 256, shape, dtype=torch.uint8),)


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_flipped_unsigned_view_is_copied_as_eager(case: str) -> None:
    fn, shape = CASES[case]
    check(fn, _uint8(shape), runs=2)


@pytest.mark.parametrize("executor", ["cpp", "interpret"])
def test_a_flipped_unsigned_view_through_torch_compile(executor: str) -> None:
    """The user's path (Dynamo, the default pipeline), with the empty case the fuzzer
    found (``as_strided`` of an empty view at storage offset -1), compiled and through
    the reference interpreters."""
    for shape in [(2, 3), (0,), (1, 1, 1)]:
        torch._dynamo.reset()
        options = {"verbose": False, "executor": executor}
        compiled = torch.compile(lambda x: x.flip(0), backend="kiln", options=options)
        x = torch.randint(0, 256, shape, dtype=torch.uint8)
        torch.testing.assert_close(compiled(x), x.flip(0), rtol=0, atol=0)


def test_a_flipped_unsigned_view_of_symbolic_sizes() -> None:
    """Under ``dynamic=True`` the flipped strides are symbolic (``-s1``): told negative by
    their form, the others (products of sizes) non-negative."""
    torch._dynamo.reset()
    compiled = torch.compile(
        lambda x: x[:, 1:].flip(0) + 1, backend="kiln", dynamic=True, options={"verbose": False}
    )
    for shape in [(3, 4), (5, 7), (2, 9)]:
        x = torch.randint(0, 200, shape, dtype=torch.uint8)
        torch.testing.assert_close(compiled(x), x[:, 1:].flip(0) + 1, rtol=0, atol=0)

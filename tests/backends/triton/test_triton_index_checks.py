"""Indirect indices outside their dimension fail the launch (``tl.device_assert``), as
eager raises and Inductor asserts, instead of reading another row or arbitrary memory."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from triton_checks import DEVICE, Compiled, check


def _gather(x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
    return torch.gather(x, 1, i) * 2


def _embedding(w: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
    return F.embedding(i, w) + 1


def _cross_entropy(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(x, t)


def _run_and_wait(compiled: Compiled, args: list[object]) -> None:
    compiled.run(args)
    if DEVICE.type == "cuda":  # a device-side assert surfaces at the next sync
        torch.cuda.synchronize()


CASES = [
    (_gather, torch.randn(4, 6), torch.tensor([[0], [5], [1], [2]]), [[0], [6], [1], [2]]),
    (_gather, torch.randn(4, 6), torch.tensor([[0], [5], [1], [2]]), [[0], [-1], [1], [2]]),
    (_embedding, torch.randn(10, 8), torch.tensor([1, 9, 0]), [1, 10, 0]),
    (_cross_entropy, torch.randn(4, 5), torch.tensor([1, 4, 3, 0]), [1, 5, 4, 0]),
    (_cross_entropy, torch.randn(4, 5), torch.tensor([1, 4, 3, 0]), [1, -1, 4, 0]),
]


@pytest.mark.parametrize(
    ("fn", "x", "good", "bad"),
    CASES,
    ids=["gather-6", "gather-neg", "embedding-10", "cross_entropy-5", "cross_entropy-neg"],
)
def test_out_of_range_index_fails_the_launch(
    fn: object, x: torch.Tensor, good: torch.Tensor, bad: list[int]
) -> None:
    compiled = check(fn, x, good)  # pyright: ignore[reportArgumentType]
    assert "tl.device_assert(" in compiled.program.source
    args = list(compiled.args)
    args[1] = torch.tensor(bad, device=DEVICE)
    # IndexOutOfBounds in the interpreter; a device-side assert (RuntimeError) on a GPU.
    with pytest.raises(RuntimeError):
        _run_and_wait(compiled, args)


# Outputs that alias each other share storage through the Triton executor too (the
# structure that rebuilds them is the same for every executor; issue 20 item 3).


def test_aliasing_outputs_share_storage_with_triton() -> None:
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[2]))
    from test_output_aliasing import CASES, check_aliasing_like_eager

    for fn in CASES:
        torch._dynamo.reset()
        check_aliasing_like_eager(fn, "triton", DEVICE.type)

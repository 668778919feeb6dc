"""Peak memory of a training step under ``torch.compile(backend="kiln")``, against eager.

A step (forward, backward with a fixed output gradient, from no gradients) is measured
from the CPU allocator's records (:func:`step_peak_bytes`), as bytes beyond what was
allocated before it. Issue 16 measured kiln at about twice
eager's peak on the H200 (Inductor below eager); the causes were a contiguous copy of
every transposed weight the forward saved for the backward (AOTAutograd's default
partitioner saves ``t(weight)``; kiln computed it into a buffer of its own), the
backward copying its strided arguments all at once in its prologue, and no
recomputation of cheap forward ops in the backward (Inductor's min-cut partitioner).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from live_bytes import step_peak_bytes
from torch import nn

from kiln.frontends.dynamo import kiln_backend


class Block(nn.Module):
    """A pre-norm transformer MLP block: its weights are large next to the activations
    of a small batch, as in the dashboard's latency-bound training rows."""

    def __init__(self, dim: int = 128, hidden: int = 512) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(F.gelu(self.up(self.norm(x))))


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(Block(), Block())


def _step(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> Callable[[], None]:
    grad = torch.randn(x.shape, generator=torch.Generator().manual_seed(1))

    def step() -> None:
        fn(x).backward(grad)

    return step


def _peak_and_grads(options: dict[str, str] | None) -> tuple[int, list[torch.Tensor]]:
    """The step's peak bytes (the least over three steps, after a warm-up that compiles)
    and the gradients of its parameters; eager when ``options`` is None."""
    torch._dynamo.reset()
    model = _model()
    x = torch.randn(16, 128, generator=torch.Generator().manual_seed(2))
    fn = (
        model
        if options is None
        else torch.compile(model, backend=kiln_backend, options={"verbose": False, **options})  # pyright: ignore[reportArgumentType, reportCallIssue]
    )
    step = _step(fn, x)
    step()
    peaks = []
    for _ in range(3):
        # No gradients before the step: its peak is then its activations, gradients and
        # temporaries (with last step's gradients freed inside it, the new ones would
        # hide anything up to their size).
        model.zero_grad(set_to_none=True)
        peaks.append(step_peak_bytes(step))
    peak = min(peaks)
    grads = [p.grad.clone() for p in model.parameters() if p.grad is not None]
    return peak, grads


@pytest.fixture(scope="module")
def eager() -> tuple[int, list[torch.Tensor]]:
    return _peak_and_grads(None)


# kiln may not hold more than eager at the step's peak. At this size both peak at the
# end of the backward, where every gradient (1 MiB, the same in both) is live: kiln's
# fused kernels and min-cut's smaller saved set can only gain on the activations. Before
# the fixes kiln held 1.12x eager's peak (transposed weight copies); after, 1.00x. The
# 2% leaves room for small temporaries (a reduction's partials, extern workspaces).
BOUND = 1.02


@pytest.mark.parametrize("partitioner", ["min-cut", "default"])
def test_training_step_peak_is_not_above_eager(
    eager: tuple[int, list[torch.Tensor]], partitioner: str
) -> None:
    eager_peak, eager_grads = eager
    peak, grads = _peak_and_grads({"partitioner": partitioner})
    assert peak <= eager_peak * BOUND, (
        f"kiln ({partitioner}) step peak {peak} B, eager {eager_peak} B ({peak / eager_peak:.2f}x)"
    )
    assert len(grads) == len(eager_grads)
    for actual, expected in zip(grads, eager_grads, strict=True):
        torch.testing.assert_close(actual, expected, atol=1e-4, rtol=1e-4)

"""Training steps through ``torch.compile(backend="kiln")`` on the Triton executor: the
kernels a step launches (issue 16, session 12: ``benchmarks/train_kernels.py`` counts
them for the zoo) and eager's gradients."""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch
from triton_checks import DEVICE

from kiln.compiler import GraphStats, compile_history, reset_compile_history
from kiln.frontends.dynamo import kiln_backend


def _train_like_eager(
    model: torch.nn.Module, make_input: Callable[[], torch.Tensor], steps: int = 2
) -> list[GraphStats]:
    """``steps`` training steps of ``model`` compiled by kiln (Triton) against a copy run
    eagerly: the same outputs and gradients; the statistics of the graphs compiled."""
    reference = copy.deepcopy(model)
    reset_compile_history()
    compiled = torch.compile(
        model, backend=kiln_backend, options={"executor": "triton", "verbose": False}
    )
    for _ in range(steps):
        x = make_input()
        outputs = []
        for m, f in ((model, compiled), (reference, reference)):
            m.zero_grad()
            y = f(x)
            y.square().mean().backward()
            outputs.append(y)
        torch.testing.assert_close(outputs[0], outputs[1], rtol=1e-4, atol=1e-5)
        for p, q in zip(model.parameters(), reference.parameters(), strict=True):
            assert p.grad is not None
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5)
    return compile_history()


class _Attention(torch.nn.Module):
    """BERT's self-attention: separate q/k/v projections, each viewed as heads and
    transposed (the views the forward saves for SDPA's backward)."""

    def __init__(self, width: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.out = (torch.nn.Linear(width, width) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape

        def split(y: torch.Tensor) -> torch.Tensor:
            return y.view(b, t, self.heads, c // self.heads).transpose(1, 2)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        return self.out(y.transpose(1, 2).reshape(b, t, c))


def test_saved_transposed_projections_are_views_not_copies() -> None:
    """The forward returned each saved ``q``/``k``/``v`` (a transposed view of a linear
    layer's output) as a copy: a kernel each. They are now views of the matmul results.
    Two launches are left: attention's output and log-sum-exp, which ATen returns
    transposed, are copied into buffers (and those permuted again for the backward)."""
    torch.manual_seed(0)
    model = _Attention().to(DEVICE)
    stats = _train_like_eager(model, lambda: torch.randn(1, 8, 32, device=DEVICE))
    forward = next(s for s in stats if s.name.startswith("forward"))
    assert forward.launches == 2, forward.summary()

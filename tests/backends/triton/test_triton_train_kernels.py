"""Training steps through ``torch.compile(backend="kiln")`` on the Triton executor: the
kernels a step launches (issue 16, session 12: ``benchmarks/train_kernels.py`` counts
them for the zoo) and eager's gradients."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
import torch
from saved_layout_cases import counting_copies
from triton_checks import DEVICE

from kiln.compiler import GraphStats, compile_history, reset_compile_history
from kiln.frontends.dynamo import kiln_backend


def _train_like_eager(
    model: torch.nn.Module,
    make_input: Callable[[], torch.Tensor],
    monkeypatch: pytest.MonkeyPatch,
    steps: int = 2,
) -> tuple[list[GraphStats], list[str]]:
    """``steps`` training steps of ``model`` compiled by kiln (Triton) against a copy run
    eagerly: the same outputs and gradients. Returns the statistics of the graphs
    compiled and the copies (:func:`_counting_copies`) of the last compiled step."""
    reference = copy.deepcopy(model)
    torch._dynamo.reset()  # compile again (a model of a class compiled before too)
    reset_compile_history()
    # Without CUDA graphs (on by default on CUDA): a recording's static input copies are
    # the runner's (tests/backends/triton/test_cuda_graph_runner.py), not the program's.
    options = {"executor": "triton", "verbose": False, "cuda_graphs": False}
    compiled = torch.compile(model, backend=kiln_backend, options=options)
    copies: list[str] = []
    for step in range(steps):
        x = make_input()
        model.zero_grad()
        if step == steps - 1:
            with counting_copies(monkeypatch) as copies:
                y = compiled(x)
                y.square().mean().backward()
        else:
            y = compiled(x)
            y.square().mean().backward()
        reference.zero_grad()
        want = reference(x)
        want.square().mean().backward()
        torch.testing.assert_close(y, want, rtol=1e-4, atol=1e-5)
        for p, q in zip(model.parameters(), reference.parameters(), strict=True):
            assert p.grad is not None
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5)
    return compile_history(), copies


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


def test_saved_transposed_projections_are_views_not_copies(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The forward returned each saved ``q``/``k``/``v`` (a transposed view of a linear
    layer's output) as a copy: a kernel each; they are now views of the matmul results
    (``output-layout``). It also copied attention's output and log-sum-exp, which ATen
    lays out transposed, back into that layout (2 kernels; see the next test)."""
    torch.manual_seed(0)
    model = _Attention().to(DEVICE)
    stats, _ = _train_like_eager(model, lambda: torch.randn(1, 8, 32, device=DEVICE), monkeypatch)
    forward = next(s for s in stats if s.name.startswith("forward"))
    # Its projections and attention are ATen calls: nothing left to launch.
    assert forward.launches == 0, forward.summary()


def test_attention_results_are_read_in_the_layout_aten_writes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Attention returns its output, log-sum-exp and (backward) gradients transposed in
    memory. The wrapper copied each into a contiguous buffer (an ATen copy kernel on the
    GPU: 5 per layer and step) and the forward copied the saved output and log-sum-exp
    back (2 kernels). The externs now yield them permuted as ATen laid them out
    (``kiln.result_orders``): no copy in the whole step."""
    torch.manual_seed(0)
    model = _Attention().to(DEVICE)
    stats, copies = _train_like_eager(
        model, lambda: torch.randn(1, 8, 32, device=DEVICE), monkeypatch
    )
    assert copies == []
    backward = next(s for s in stats if s.name.startswith("backward"))
    assert backward.launches == 4, backward.summary()  # the four bias gradients (sums)


class _Embedding(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embedding = torch.nn.Embedding(64, 16)
        self.out = torch.nn.Linear(16, 8)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.out(self.embedding(ids))


def test_embedding_backward_computes_its_masks_in_the_scatter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The embedding's backward masks the ids (in range, not padding) before the
    scatter-add of the gradient: the masks had a kernel of their own (``inline-producers``
    weighed bytes only). Now: the output bias gradient, the zero fill and the scatter."""
    torch.manual_seed(0)
    model = _Embedding().to(DEVICE)
    stats, _ = _train_like_eager(
        model, lambda: torch.randint(0, 64, (2, 12), device=DEVICE), monkeypatch
    )
    backward = next(s for s in stats if s.name.startswith("backward"))
    assert backward.launches == 3, backward.summary()

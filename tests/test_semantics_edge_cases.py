"""Semantics under ``kiln.compile`` that eager users rely on (issue 20), each against
eager: module buffers mutated in training (BatchNorm's running statistics),
``inference_mode`` and ``no_grad``, recompiles on new shapes and dtypes, and random ops
(shapes and plausible distributions). Outputs that alias inputs or each other:
tests/test_output_aliasing.py and tests/test_program_fuzz.py."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import kiln
from kiln.compiler import compile_history, reset_compile_history


@pytest.fixture(autouse=True)
def _fresh() -> None:
    torch._dynamo.reset()
    reset_compile_history()


def _kiln_compiled(count: int) -> None:
    """``count`` graphs went through kiln (not an eager fallback after a graph break)."""
    assert len(compile_history()) == count, [s.name for s in compile_history()]


def test_batch_norm_training_updates_the_running_statistics() -> None:
    torch.manual_seed(0)
    eager = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU()).train()
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU()).train()
    model.load_state_dict(eager.state_dict())
    compiled = kiln.compile(model, fullgraph=True, verbose=False, executor="cpp")
    for _ in range(2):
        x = torch.randn(2, 3, 6, 6)
        torch.testing.assert_close(compiled(x), eager(x), rtol=1e-4, atol=1e-5)
    for name, buffer in eager.named_buffers():
        torch.testing.assert_close(dict(model.named_buffers())[name], buffer, rtol=1e-4, atol=1e-6)
    assert int(model[1].num_batches_tracked) == 2  # pyright: ignore[reportArgumentType]


def test_inference_mode_and_no_grad() -> None:
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
    compiled = kiln.compile(model, verbose=False, executor="cpp")
    x = torch.randn(5, 8)
    with torch.inference_mode():
        want = model(x)
        have = compiled(x)
    torch.testing.assert_close(have, want, rtol=1e-4, atol=1e-5)
    assert have.is_inference() == want.is_inference()
    with torch.no_grad():
        have = compiled(x)
    torch.testing.assert_close(have, want, rtol=1e-4, atol=1e-5)
    assert not have.requires_grad
    have = compiled(x)  # grad mode again: the graph is differentiable
    assert have.requires_grad
    have.sum().backward()
    assert all(p.grad is not None for p in model.parameters())


def test_recompiles_on_new_shapes_and_dtypes() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return (x * 2).softmax(-1) + x.sum(0)

    compiled = kiln.compile(fn, dynamic=False, fullgraph=True, verbose=False, executor="cpp")
    cases = [((4, 8), torch.float32), ((6, 8), torch.float32), ((4, 8), torch.float64)]
    for shape, dtype in cases:
        x = torch.randn(shape, dtype=dtype)
        have = compiled(x)
        assert have.dtype == dtype
        torch.testing.assert_close(have, fn(x))
    _kiln_compiled(len(cases))


def test_dropout_in_training_keeps_the_shape_and_the_distribution() -> None:
    p = 0.3

    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.dropout(x, p, training=True)

    compiled = kiln.compile(fn, fullgraph=True, verbose=False, executor="cpp")
    x = torch.rand(100, 200) + 1  # no zeros of its own
    y = compiled(x)
    assert y.shape == x.shape
    assert y.dtype == x.dtype
    dropped = (y == 0).float().mean().item()
    assert abs(dropped - p) < 0.02, dropped  # 20000 draws: 5 standard deviations
    kept = y != 0
    torch.testing.assert_close(y[kept], x[kept] / (1 - p))
    assert not torch.equal(compiled(x), y)  # a new mask every call


def test_random_factories_have_plausible_distributions() -> None:
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.rand_like(x), torch.randn(x.shape[0], 500) + x.sum() * 0

    compiled = kiln.compile(fn, fullgraph=True, verbose=False, executor="cpp")
    uniform, normal = compiled(torch.ones(40, 50))
    assert uniform.shape == (40, 50)
    assert normal.shape == (40, 500)
    assert float(uniform.min()) >= 0
    assert float(uniform.max()) < 1
    assert abs(uniform.mean().item() - 0.5) < 0.03
    assert abs(normal.mean().item()) < 0.03
    assert abs(normal.std().item() - 1) < 0.03

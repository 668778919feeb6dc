"""Mixed-precision normalizations (bfloat16 activations, float32 parameters: autocast's
mix) keep their saved statistics in float32 between forward and backward, as eager does.

Before, kiln took torch's meta at its word (statistics in bfloat16) and rounded them
between the graphs: ``BatchNorm1d``'s weight gradient was twice as far from the float64
result as eager's, ``LayerNorm``'s input gradient 2.6 times (found by the ModuleInfo
sweep, session 46).
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
import torch
from torch import nn
from torch.fx.experimental.proxy_tensor import make_fx

from kiln.frontends.eager_statistics import declare_eager_statistics

MODULES: dict[str, tuple[Callable[[], nn.Module], tuple[int, ...]]] = {
    "BatchNorm1d": (lambda: nn.BatchNorm1d(10), (4, 10)),
    "BatchNorm2d": (lambda: nn.BatchNorm2d(6), (3, 6, 5, 4)),
    "GroupNorm": (lambda: nn.GroupNorm(3, 12), (4, 12, 5)),
    "LayerNorm": (lambda: nn.LayerNorm(10), (4, 7, 10)),
    "InstanceNorm2d": (lambda: nn.InstanceNorm2d(4, affine=True), (3, 4, 6, 5)),
}


def _step(
    module: nn.Module, x: torch.Tensor, grad: torch.Tensor, backend: str | None
) -> list[torch.Tensor]:
    """Outputs, input and parameter gradients, as float64, of one training step."""
    x = x.clone().requires_grad_()
    run = module if backend is None else torch.compile(module, backend=backend)
    out = run(x)
    out.backward(grad.to(out.dtype))
    grads = [p.grad for p in module.parameters()]
    assert x.grad is not None
    assert all(g is not None for g in grads)
    return [t.double() for t in (out, x.grad, *grads)]  # pyright: ignore[reportOptionalMemberAccess]


@pytest.mark.parametrize("name", sorted(MODULES))
def test_a_bfloat16_training_step_is_as_accurate_as_eager(name: str) -> None:
    torch.manual_seed(0)
    make, shape = MODULES[name]
    module = make()
    x = torch.randn(shape).bfloat16()
    grad = torch.randn(shape)
    exact = _step(copy.deepcopy(module).double(), x.double(), grad.double(), None)
    eager = _step(copy.deepcopy(module), x, grad, None)
    kiln = _step(copy.deepcopy(module), x, grad, "kiln")
    for what, e, k, ref in zip(
        ["output", "input grad", "weight grad", "bias grad"], eager, kiln, exact, strict=True
    ):
        eager_error = (e - ref).abs().max().item()
        kiln_error = (k - ref).abs().max().item()
        # Eager's own bfloat16 error, with room for another summation order; rounding
        # the statistics to bfloat16 was 1.9-2.6 times it.
        assert kiln_error <= 1.5 * eager_error + 1e-3, (what, kiln_error, eager_error)


def _layer_norm_statistics(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
    out, mean, rstd = torch.ops.aten.native_layer_norm(x, [5], w, w, 1e-5)
    return out, mean, rstd


def test_statistics_returned_by_the_program_have_eager_dtype() -> None:
    x, w = torch.randn(3, 5).bfloat16(), torch.randn(5)
    eager = _layer_norm_statistics(x, w)
    assert [t.dtype for t in eager] == [torch.bfloat16, torch.float32, torch.float32]
    compiled = torch.compile(_layer_norm_statistics, backend="kiln")(x, w)
    for got, want in zip(compiled, eager, strict=True):
        assert got.dtype == want.dtype
        torch.testing.assert_close(got, want)


def test_statistics_computed_on_keep_the_traced_dtype() -> None:
    """A value computed from the statistics was traced with meta's dtype; its op is left
    as traced rather than given operands of another type than its result's."""

    def program(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out, mean, _ = torch.ops.aten.native_layer_norm(x, [5], w, w, 1e-5)
        return out, mean + 1

    traced = make_fx(program, tracing_mode="fake")(torch.randn(3, 5).bfloat16(), torch.randn(5))
    assert declare_eager_statistics(traced.graph) == 0
    returned = make_fx(_layer_norm_statistics, tracing_mode="fake")(
        torch.randn(3, 5).bfloat16(), torch.randn(5)
    )
    assert declare_eager_statistics(returned.graph) == 1
    (norm,) = [n for n in returned.graph.nodes if "native_layer_norm" in str(n.target)]
    assert [v.dtype for v in norm.meta["val"]] == [torch.bfloat16, torch.float32, torch.float32]

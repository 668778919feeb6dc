"""Activations rewritten before AOTAutograd traces them (``frontends/activation_rewrites.py``):
in-place calls on dead intermediates made out of place, ``hardtanh`` as ``clamp`` without
autograd; the values, and the gradients at the bounds, are eager's."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from kiln.frontends.activation_rewrites import rewrite_activations
from kiln.frontends.dynamo import kiln_backend


def _captured(
    fn: Callable[..., Any], *args: torch.Tensor, needs_autograd: bool
) -> tuple[Counter[str], list[Any], Any]:
    """What ``rewrite_activations`` did to Dynamo's graph of ``fn``, the graph's call
    targets after it, and the rewritten graph's result on ``args``."""
    seen: dict[str, Any] = {}

    def backend(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        seen["done"] = rewrite_activations(gm, needs_autograd)
        seen["targets"] = [n.target for n in gm.graph.nodes if n.op == "call_function"]
        return gm.forward

    torch._dynamo.reset()  # pyright: ignore[reportPrivateImportUsage]
    out = torch.compile(fn, backend=backend)(*args)
    return seen["done"], seen["targets"], out


class Block(torch.nn.Module):
    def __init__(self, act: torch.nn.Module) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.act = act

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.bn(self.conv(x))).mean((2, 3))


def test_an_inference_relu6_in_place_is_an_out_of_place_clamp() -> None:
    block = Block(torch.nn.ReLU6(inplace=True)).eval()
    x = torch.randn(2, 3, 8, 8) * 4
    with torch.no_grad():
        done, targets, out = _captured(block, x, needs_autograd=False)
        expected = block(x)
    assert done == Counter({"out of place": 1, "hardtanh as clamp": 1})
    assert torch.clamp in targets
    assert F.hardtanh not in targets
    torch.testing.assert_close(out, expected)


def test_a_training_hardtanh_stays_hardtanh_out_of_place() -> None:
    """``clamp``'s gradient at the bounds is 1, ``hardtanh``'s 0: with autograd the
    activation is only made out of place."""
    done, targets, _ = _captured(
        lambda x: F.hardtanh(x * 2, 0.0, 6.0, True), torch.randn(8), needs_autograd=True
    )
    assert done == Counter({"out of place": 1})
    assert F.hardtanh in targets
    assert torch.clamp not in targets


def test_in_place_calls_seen_elsewhere_stay_in_place() -> None:
    x = torch.randn(4, 6)

    def read_after(x: torch.Tensor) -> torch.Tensor:
        y = x * 2
        z = F.relu(y, inplace=True)
        return z + y  # reads the written y

    def of_a_view(x: torch.Tensor) -> torch.Tensor:
        y = x * 2
        v = y.view(6, 4)
        F.silu(v, inplace=True)  # writes y through its view
        return y

    def of_an_input(x: torch.Tensor) -> torch.Tensor:
        return F.relu(x, inplace=True)

    for fn in (read_after, of_a_view, of_an_input):
        done, _, out = _captured(fn, x.clone(), needs_autograd=False)
        assert not done, fn.__name__
        torch.testing.assert_close(out, fn(x.clone()), msg=fn.__name__)


@pytest.mark.parametrize("dynamic", [False, True])
def test_compiled_in_place_activations_match_eager_with_gradients_at_the_bounds(
    dynamic: bool,
) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 32),
        torch.nn.ReLU6(inplace=True),
        torch.nn.Linear(32, 32),
        torch.nn.Hardswish(inplace=True),
        torch.nn.Linear(32, 8),
        torch.nn.SiLU(inplace=True),
    )
    x = torch.randn(4, 16) * 3
    torch._dynamo.reset()  # pyright: ignore[reportPrivateImportUsage]
    compiled = torch.compile(model, backend=kiln_backend, dynamic=dynamic)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x))
    # Training, with the first activation's input exactly at its bounds in places.
    with torch.no_grad():
        model[0].bias[:4] = 0.0
        model[0].weight[:4] = 0.0
        model[0].bias[4:8] = 6.0
        model[0].weight[4:8] = 0.0
    grads = []
    for fn in (compiled, model):
        model.zero_grad()
        fn(x).sum().backward()
        grads.append([p.grad.clone() for p in model.parameters() if p.grad is not None])
    for got, expected in zip(*grads, strict=True):
        torch.testing.assert_close(got, expected)
    torch._dynamo.reset()  # pyright: ignore[reportPrivateImportUsage]

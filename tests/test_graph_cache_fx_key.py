"""The graph cache's key on the FX graph itself (:mod:`kiln.fx_key`, issue 19 warm start):
a hit imports no IR module, and every input the importer reads changes the key, so a
graph is never served another graph's program."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from kiln import graph_cache
from kiln.compiler import CompileOptions, compile_graph
from kiln.frontends.capture import capture_make_fx
from kiln.fx_key import describe_graph


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv(graph_cache.ENV, "1")
    return tmp_path / "cache"


def first(out: Any) -> torch.Tensor:
    return out[0] if isinstance(out, tuple | list) else out


def described(fn: Callable[..., Any], *inputs: Any) -> str:
    text = describe_graph(capture_make_fx(fn, *inputs).gm)
    assert text is not None
    return text


def scale(x: torch.Tensor, c: float) -> torch.Tensor:
    return (x * c).sum(0)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (0.0, -0.0),  # float bits
        (1, 1.0),  # int or float: another overload's scalar
        (0.5, 0.25),
    ],
)
def test_scalar_arguments_change_the_description(a: float, b: float) -> None:
    x = torch.randn(4, 5)
    assert described(lambda t: scale(t, a), x) != described(lambda t: scale(t, b), x)


def test_strides_and_aliasing_change_the_description() -> None:
    x = torch.randn(6, 4)
    contiguous = described(lambda t: t.exp(), x)
    assert contiguous != described(lambda t: t.exp(), x.t().contiguous().t())  # strides
    # A result viewing its input's storage, or a copy of it: storage-dependent ops
    # (as_strided) are imported differently.
    view = described(lambda t: t.view(24).as_strided((3,), (2,)) + 1, x)
    copy = described(lambda t: t.clone().view(24).as_strided((3,), (2,)) + 1, x)
    assert "s0]" in view
    assert view != copy


def test_traced_constants_are_keyed_by_their_data() -> None:
    """A constant made while tracing (``_tensor_constant0``) is embedded in the program."""
    x = torch.randn(3)
    one = described(lambda t: t + torch.tensor([1.0, 2.0, 3.0]), x)
    other = described(lambda t: t + torch.tensor([1.0, 2.0, 4.0]), x)
    assert "sha256" in one
    assert one != other


def test_symbolic_shapes_fall_back_to_the_ir_key() -> None:
    capture = capture_make_fx(lambda t: t.exp() + 1, torch.randn(4, 5), dynamic=True)
    assert describe_graph(capture.gm) is None
    options = CompileOptions(verbose=False)
    cold = compile_graph(capture.gm, capture.example_inputs, options)
    warm = compile_graph(capture.gm, capture.example_inputs, options)
    assert (cold.stats.graph_cache, warm.stats.graph_cache) == ("stored", "hit")
    x = torch.randn(7, 5)
    torch.testing.assert_close(first(warm(x)), x.exp() + 1)


def test_driver_context_is_in_the_key() -> None:
    """What the driver adds to the imported module (device, inference graph) keys too."""
    options = CompileOptions(verbose=False)
    keys = {
        graph_cache.graph_key("graph", options, "cpp", (f"device {d}", f"inference prepack {p}"))
        for d in ("None", "cuda:0")
        for p in (False, True)
    }
    assert len(keys) == 4


def test_inference_graphs_have_entries_of_their_own() -> None:
    """An inference graph (``prepack-weights`` may keep its weights prepacked) never
    finds a training graph's entry; its hit rebuilds the module it was compiled to."""
    x, w = torch.randn(4, 8), torch.randn(8, 8)
    capture = capture_make_fx(lambda a, b: torch.relu(a @ b) + 1, x, w)
    options = CompileOptions(verbose=False)
    trained = compile_graph(capture.gm, capture.example_inputs, options)
    cold = compile_graph(capture.gm, capture.example_inputs, options, inference=True)
    warm = compile_graph(capture.gm, capture.example_inputs, options, inference=True)
    statuses = (trained.stats.graph_cache, cold.stats.graph_cache, warm.stats.graph_cache)
    assert statuses == ("stored", "stored", "hit")
    assert str(warm.module) == str(cold.module)
    torch.testing.assert_close(first(warm(x, w)), torch.relu(x @ w) + 1)

"""Issue 20 item 13: a ``cat`` of hundreds of inputs compiled for minutes.

Two causes, each bounded here: inlining n pointwise producers into one consumer walked
the consumer's whole (growing) body for every producer, quadratic work; and a pointwise
cat selects among all its inputs at every element, a body g++ took minutes over, so
past :data:`MAX_POINTWISE_CAT_INPUTS` inputs the cat runs as the ATen call.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
from lower_aten_checks import assert_same, capture_and_lower, function, interpret, loop_ops
from xdsl.ir import Operation

from kiln.compiler import CompileOptions, compile_graph
from kiln.dialects.loop import ExternOp, PointwiseOp
from kiln.frontends.capture import capture_make_fx
from kiln.passes.aten_to_loop.indexing import MAX_POINTWISE_CAT_INPUTS
from kiln.passes.scheduling.inline import inline_cheap_producers


def _cat(*xs: torch.Tensor) -> torch.Tensor:
    return torch.cat(xs, 1)


def _stack(*xs: torch.Tensor) -> torch.Tensor:
    return torch.stack(xs, 0)


@pytest.mark.parametrize("fn", [_cat, _stack])
@pytest.mark.parametrize("count", [MAX_POINTWISE_CAT_INPUTS, MAX_POINTWISE_CAT_INPUTS + 1])
def test_many_input_cat_runs_as_the_aten_call(fn: object, count: int) -> None:
    assert callable(fn)
    xs = [torch.randn(2, 3) for _ in range(count)]
    module, capture, stats = capture_and_lower(fn, *xs)
    ops = loop_ops(module)
    assert len(ops) == 1
    if count > MAX_POINTWISE_CAT_INPUTS:
        assert isinstance(ops[0], ExternOp), stats
    else:
        assert isinstance(ops[0], PointwiseOp)
    assert_same(interpret(module, capture.example_inputs), fn(*xs))


def test_many_input_cat_through_the_cpp_backend() -> None:
    xs = [torch.randn(3, 2) for _ in range(MAX_POINTWISE_CAT_INPUTS + 1)]

    def f(*xs: torch.Tensor) -> torch.Tensor:
        return torch.cat(xs).relu()

    capture = capture_make_fx(f, *xs)
    compiled = compile_graph(
        capture.gm, capture.example_inputs, CompileOptions(executor="cpp", verbose=False)
    )
    fresh = [torch.randn(3, 2) for _ in xs]
    torch.testing.assert_close(compiled(*fresh), f(*fresh))


def _counting_walks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the ops every ``Operation.walk`` visits."""
    visited = [0]
    walk = Operation.walk

    def counted(self: Operation, *args: object, **kwargs: object) -> Iterator[Operation]:
        for op in walk(self, *args, **kwargs):  # pyright: ignore[reportArgumentType]
            visited[0] += 1
            yield op

    monkeypatch.setattr(Operation, "walk", counted)
    return visited


def test_inlining_many_producers_into_one_consumer_is_linear(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """60 producers ``x * 2 + 1`` into one cat: the walks visit a number of ops linear in
    the producers (before: every producer walked the consumer's body three times, about
    50k ops here)."""
    count = 60
    xs = [torch.randn(2, 3) for _ in range(count)]

    def f(*xs: torch.Tensor) -> torch.Tensor:
        return torch.cat([x * 2 + 1 for x in xs])

    module, capture, _ = capture_and_lower(f, *xs)
    visited = _counting_walks(monkeypatch)
    assert inline_cheap_producers(function(module)) == 2 * count
    monkeypatch.undo()
    assert visited[0] < 100 * count, visited[0]
    (only,) = loop_ops(module)
    assert isinstance(only, PointwiseOp)
    assert_same(interpret(module, capture.example_inputs), f(*xs))

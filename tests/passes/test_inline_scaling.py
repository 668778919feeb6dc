"""``inline-producers``' per-layer cost (issue 19) without changing what it inlines.

A producer refused once is not weighed again while neither it nor any of its consumers
changed, and inlining rewrites the consumer in place (new operand lists, no new op): the
same numbers before and after (loop interpreter), every op still verifies, and no
unchanged (producer, consumers) pair is weighed twice.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from fuse_checks import assert_results_close, random_inputs, schedule
from torch import nn
from xdsl.dialects.builtin import ModuleOp, UnknownLoc
from xdsl.dialects.func import FuncOp

import kiln.passes.scheduling.inline as inline
from kiln.dialects.loop.interpreter import run_function
from kiln.dialects.loop.ops import LoopNestOp, PointwiseOp
from kiln.examples import GPTBlock
from kiln.frontends.capture import capture_make_fx
from kiln.frontends.fx import import_graph


def _loop_module(layers: int) -> ModuleOp:
    model = nn.Sequential(*[GPTBlock(dim=16, heads=2, seed=k) for k in range(layers)]).eval()
    module: ModuleOp = import_graph(capture_make_fx(model, torch.randn(1, 4, 16)).gm)
    return schedule(module, "decompose,lower-aten")


def _func(module: ModuleOp) -> FuncOp:
    return next(op for op in module.ops if isinstance(op, FuncOp))


def test_refused_producers_are_not_weighed_again(monkeypatch: pytest.MonkeyPatch) -> None:
    module = _loop_module(3)
    # Each op with its text at the time: the same op unchanged weighs the same.
    weighed: list[tuple[tuple[object, str], ...]] = []
    original = inline.worth_inlining

    def recording(
        producer: PointwiseOp, consumers: list[LoopNestOp], cpu: bool = False, **kwargs: Any
    ) -> bool:
        weighed.append(tuple((op, str(op)) for op in (producer, *consumers)))
        return original(producer, consumers, cpu, **kwargs)

    monkeypatch.setattr(inline, "worth_inlining", recording)
    before = module.clone()
    assert inline.inline_cheap_producers(_func(module)) > 10
    module.verify()
    assert len(weighed) == len(set(weighed))
    name = _func(before).sym_name.data
    args = random_inputs(_func(before).function_type.inputs.data)
    expected = run_function(before, [a.clone() for a in args], name)
    assert_results_close(run_function(module, [a.clone() for a in args], name), expected)


def test_inlining_rewrites_the_consumer_in_place() -> None:
    module = _loop_module(1)
    block = _func(module).body.block
    producer, consumer = next(
        (op, use.operation)
        for op in block.ops
        if isinstance(op, PointwiseOp)
        for use in op.result.uses
        if isinstance(use.operation, LoopNestOp)
    )
    assert isinstance(consumer, LoopNestOp)
    before = len(block.ops)
    location = consumer.location  # the FX node and source line, printed in kernels.cpp
    assert not isinstance(location, UnknownLoc)
    inline.inline_into(producer, consumer)
    assert consumer.parent_block() is block
    assert len(block.ops) == before
    assert producer.result not in consumer.inputs
    consumer.verify()
    assert consumer.location == location  # a rebuilt consumer lost it

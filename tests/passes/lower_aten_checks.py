"""Shared helpers for the lower-aten tests: capture, lower, interpret, compare."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.testing import assert_close
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp
from xdsl.parser import Parser

from kiln.dialects.loop import ExternOp, LoopNestOp, PointwiseOp
from kiln.dialects.loop.interpreter import run_function
from kiln.frontends.capture import Capture, capture_make_fx
from kiln.frontends.fx import import_graph, rebuild_outputs
from kiln.passes.aten_to_loop import lowering_table
from kiln.passes.lower_aten import LoweringStats, lower_function
from kiln.registry import make_context


def function(module: ModuleOp) -> FuncOp:
    func = module.body.block.first_op
    assert isinstance(func, FuncOp)
    return func


def lower_module(module: ModuleOp, stats: LoweringStats | None = None) -> ModuleOp:
    """Lower in place, verify, and check the text round-trips."""
    lower_function(function(module), lowering_table(), stats)
    module.verify()
    text = str(module)
    reparsed = Parser(make_context(), text).parse_module()
    assert str(reparsed) == text
    return module


def capture_and_lower(
    fn: Callable[..., Any], *inputs: Any, dynamic: bool = False
) -> tuple[ModuleOp, Capture, LoweringStats]:
    capture = capture_make_fx(fn, *inputs, dynamic=dynamic)
    module = import_graph(capture.gm)
    stats = LoweringStats({}, {})
    return lower_module(module, stats), capture, stats


def interpret(module: ModuleOp, inputs: Sequence[Any]) -> Any:
    fresh = [v.clone() if isinstance(v, torch.Tensor) else v for v in inputs]
    return rebuild_outputs(function(module), run_function(module, fresh))


def assert_same(got: Any, expected: Any) -> None:
    got_leaves = [v for v in pytree.tree_leaves(got) if isinstance(v, torch.Tensor)]
    want_leaves = [v for v in pytree.tree_leaves(expected) if isinstance(v, torch.Tensor)]
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves, strict=True):
        assert_close(g, w, equal_nan=True, check_stride=False)


def check(fn: Callable[..., Any], *inputs: Any, dynamic: bool = False) -> ModuleOp:
    """Lower ``fn``'s graph and compare the interpreted result with eager."""
    module, capture, _ = capture_and_lower(fn, *inputs, dynamic=dynamic)
    assert_same(interpret(module, capture.example_inputs), fn(*inputs))
    return module


def loop_ops(module: ModuleOp) -> list[LoopNestOp | ExternOp]:
    return [op for op in function(module).body.block.ops if isinstance(op, LoopNestOp | ExternOp)]


def pointwise_ops(module: ModuleOp) -> list[PointwiseOp]:
    return [op for op in loop_ops(module) if isinstance(op, PointwiseOp)]

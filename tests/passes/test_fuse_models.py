"""The model zoo through the whole scheduling pipeline, equal to eager.

Each model's make_fx graph runs through ``decompose, lower-aten, fuse, tile,
buffer-reuse``; the kernel interpreter (poisoning freed and fresh memory) must give
eager's numbers, every kernel must be runnable point by point (as a backend runs it),
fusion must leave no more kernels than there were loop nodes, and
buffer-reuse must not raise the peak. Dynamic-shape captures and AOTAutograd training
graphs (forward and backward) of a few models run too.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest
import torch
import torch.utils._pytree as pytree
from fuse_checks import (
    assert_runnable_point_by_point,
    capture_args,
    kernels,
    program,
    schedule,
)
from models import ALL_MODELS
from torch.testing import assert_close
from xdsl.dialects.builtin import ModuleOp

from kiln.dialects.kernel.interpreter import run_program
from kiln.dialects.kernel.liveness import memory_timeline
from kiln.dialects.loop import LoopNestOp
from kiln.frontends.capture import Capture, capture_aot_training, capture_make_fx
from kiln.frontends.fx import import_graph, rebuild_outputs

PIPELINE = "decompose,lower-aten,fuse,tile,buffer-reuse"


def flat(value: Any) -> list[torch.Tensor]:
    return [v for v in pytree.tree_leaves(value) if isinstance(v, torch.Tensor)]


def compile_and_run(capture: Capture, inputs: list[Any] | None = None) -> tuple[ModuleOp, Any, Any]:
    """The scheduled module, its results rebuilt like the graph's, and the graph's."""
    module = import_graph(capture.gm)
    args = capture_args(module, capture)
    if inputs is not None:
        args[len(args) - len(inputs) :] = inputs
    expected = capture.gm(
        *[
            a.clone() if isinstance(a, torch.Tensor) else a
            for a in args[: len(capture.example_inputs)]
        ]
    )
    func = next(op for op in module.ops)
    lowered = schedule(module.clone(), "decompose,lower-aten")
    loop_nodes = sum(1 for op in lowered.walk() if isinstance(op, LoopNestOp))
    schedule(module, PIPELINE)
    assert_runnable_point_by_point(module)
    results, _ = run_program(module, args)
    got = rebuild_outputs(func, results)  # pyright: ignore[reportArgumentType]
    assert len(kernels(module)) <= loop_nodes
    return module, got, expected


@pytest.mark.parametrize("model_name", sorted(ALL_MODELS))
def test_model(model_name: str) -> None:
    model, inputs = ALL_MODELS[model_name]()
    capture = capture_make_fx(model, *inputs)
    module, got, expected = compile_and_run(capture)
    assert_close(flat(got), flat(expected))
    with torch.no_grad():
        model, inputs = ALL_MODELS[model_name]()
        assert_close(flat(got), flat(model(*inputs)))
    profile = memory_timeline(program(module))
    assert profile.allocations > 0 or not kernels(module)


@pytest.mark.parametrize("model_name", ["embedding_indexing", "gpt_block"])
def test_dynamic_model(model_name: str) -> None:
    model, inputs = ALL_MODELS[model_name]()
    capture = capture_make_fx(model, *inputs, dynamic=True)
    _, got, expected = compile_and_run(capture)
    assert_close(flat(got), flat(expected))


@cache
def training(model_name: str) -> Any:
    model, inputs = ALL_MODELS[model_name]()
    return capture_aot_training(model, *inputs)


@pytest.mark.parametrize("model_name", ["gpt_block", "losses"])
@pytest.mark.parametrize("part", ["forward", "backward"])
def test_training_graphs(model_name: str, part: str) -> None:
    capture = getattr(training(model_name), part)
    _, got, expected = compile_and_run(capture)
    assert_close(flat(got), flat(expected))

"""The model zoo (tests/models.py) lowered to loop IR and interpreted equal to eager.

Every model's make_fx graph, with and without ``decompose`` first; AOTAutograd
training graphs (forward and backward) for a few. The GPT block after ``decompose``
is the milestone graph: no view became a copy (a copy exists only where an extern
needs a strided input that no strided view can express, as eager's own clone does).
"""

from __future__ import annotations

import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import torch
from lower_aten_checks import assert_same, function, interpret, lower_module
from xdsl.dialects.builtin import DictionaryAttr, ModuleOp, StringAttr

from kiln.dialects.loop import ExternOp, LoadOp, PointwiseOp, YieldOp
from kiln.frontends.capture import (
    AotTrainingCapture,
    Capture,
    capture_aot_training,
    capture_make_fx,
)
from kiln.frontends.fx import GET_ATTR_ATTR, import_graph
from kiln.passes.decompose import DecomposePass
from kiln.passes.lower_aten import LoweringStats
from kiln.registry import make_context

sys.path.insert(0, str(Path(__file__).parents[1]))
from models import ALL_MODELS

MODELS = sorted(ALL_MODELS)
TRAINING = ["conv_bn_relu_train", "embedding_indexing", "gpt_block", "losses"]
MATMULS = {"aten::mm.default", "aten::bmm.default", "aten::addmm.default"}


def arguments(module: ModuleOp, capture: Capture) -> list[Any]:
    """The capture's inputs, then the ``get_attr`` tensors the importer made arguments."""
    args = [v.clone() if isinstance(v, torch.Tensor) else v for v in capture.example_inputs]
    attrs = function(module).arg_attrs
    for attr in attrs.data[len(args) :] if attrs is not None else ():
        assert isinstance(attr, DictionaryAttr)
        target = attr.data[GET_ATTR_ATTR]
        assert isinstance(target, StringAttr)
        value: Any = capture.gm
        for part in target.data.split("."):
            value = getattr(value, part)
        args.append(value.detach().clone())
    return args


def lower_and_compare(capture: Capture, decompose: bool = False) -> tuple[ModuleOp, LoweringStats]:
    module = import_graph(capture.gm)
    args = arguments(module, capture)
    expected = capture.gm(*[v.clone() if isinstance(v, torch.Tensor) else v for v in args])
    if decompose:
        DecomposePass().apply(make_context(), module)
    stats = LoweringStats({}, {})
    lower_module(module, stats)
    assert_same(interpret(module, args), expected)
    return module, stats


@pytest.mark.parametrize("decompose", [False, True], ids=["plain", "decomposed"])
@pytest.mark.parametrize("model_name", MODELS)
def test_make_fx_graphs(model_name: str, decompose: bool) -> None:
    model, inputs = ALL_MODELS[model_name]()
    lower_and_compare(capture_make_fx(model, *inputs), decompose)


@cache
def training(model_name: str) -> AotTrainingCapture:
    model, inputs = ALL_MODELS[model_name]()
    return capture_aot_training(model, *inputs)


@pytest.mark.parametrize("model_name", TRAINING)
def test_training_graphs(model_name: str) -> None:
    graphs = training(model_name)
    lower_and_compare(graphs.forward)
    lower_and_compare(graphs.backward)


DYNAMIC = ["embedding_indexing", "gpt_block", "layer_norm", "mlp", "rmsnorm_rotary"]


@pytest.mark.parametrize("model_name", DYNAMIC)
def test_dynamic_shapes(model_name: str) -> None:
    """Symbolic sizes: one lowered module runs inputs of two batch sizes."""
    model, inputs = ALL_MODELS[model_name]()
    capture = capture_make_fx(model, *inputs, dynamic=True)
    module, _ = lower_and_compare(capture)
    state = capture.example_inputs[: len(capture.example_inputs) - len(inputs)]
    # Grow the batch dim only: make_fx's duck sizing gives equal sizes one symbol (the
    # 3 positions and gather_index's last dim), which kiln relies on as dynamo's guards do.
    bigger = [torch.cat([x, x.flip(0)]) if x.dim() > 1 else x for x in inputs]
    with torch.no_grad():
        expected = model(*bigger)
    assert_same(interpret(module, [*state, *bigger]), expected)


def _is_copy(op: PointwiseOp) -> bool:
    body = list(op.body.block.ops)
    return len(body) == 2 and isinstance(body[0], LoadOp) and isinstance(body[1], YieldOp)


def test_gpt_block_after_decompose_has_no_view_copies() -> None:
    model, inputs = ALL_MODELS["gpt_block"]()
    module, stats = lower_and_compare(capture_make_fx(model, *inputs), decompose=True)
    assert set(stats.extern) <= MATMULS, stats.extern
    for op in function(module).body.block.ops:
        if isinstance(op, PointwiseOp) and _is_copy(op):
            users = {use.operation for use in op.result.uses}
            assert users, f"an unused copy: {op}"
            assert all(isinstance(u, ExternOp) for u in users), f"a view was copied: {op}"

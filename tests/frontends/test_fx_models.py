"""Each test model captured with make_fx, AOTAutograd (inference, and forward + backward
of a training step) and torch.export, imported, checked for structure and round trip."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from fx_checks import assert_faithful, dynamic_dims, the_function
from fx_model_cases import MODEL_CASES, GPTBlock, ModelCase
from xdsl.dialects.builtin import IndexType, TensorType

from kiln.dialects.aten import AtenOp
from kiln.frontends.capture import (
    Capture,
    capture_aot,
    capture_aot_training,
    capture_export,
    capture_make_fx,
)
from kiln.frontends.fx import import_graph

# torch.export deep-copies pytree specs, which warns inside torch itself.
pytestmark = pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning")


def test_make_fx(model_case: ModelCase) -> None:
    model = model_case.make()
    inputs = model_case.inputs()
    gm, example = capture_make_fx(model, *inputs)
    # Parameters and buffers first, named after them, then the user's inputs.
    state = [*dict(model.named_parameters()), *dict(model.named_buffers())]
    placeholders = gm.graph.find_nodes(op="placeholder")
    assert [p.name for p in placeholders[: len(state)]] == [s.replace(".", "_") for s in state]
    assert len(example) == len(placeholders)
    assert_faithful(gm, import_graph(gm))


def test_aot_inference(model_case: ModelCase) -> None:
    gm, example = capture_aot(model_case.make(), *model_case.inputs())
    assert len(example) == len(gm.graph.find_nodes(op="placeholder"))
    assert_faithful(gm, import_graph(gm))


def test_aot_training(model_case: ModelCase) -> None:
    graphs = capture_aot_training(model_case.make(), *model_case.inputs())
    for gm, example in (graphs.forward, graphs.backward):
        assert len(example) == len(gm.graph.find_nodes(op="placeholder"))
        assert_faithful(gm, import_graph(gm))


def test_export(model_case: ModelCase) -> None:
    gm, example = capture_export(model_case.make(), *model_case.inputs())
    assert len(example) == len(gm.graph.find_nodes(op="placeholder"))
    assert_faithful(gm, import_graph(gm))


DYNAMIC_CASES = [c for c in MODEL_CASES if c.name in ("mlp", "gpt_block")]


@pytest.mark.parametrize("case", DYNAMIC_CASES, ids=[c.name for c in DYNAMIC_CASES])
@pytest.mark.parametrize("capture", [capture_make_fx, capture_aot, capture_export])
def test_dynamic_shapes(case: ModelCase, capture: Callable[..., Capture]) -> None:
    model = case.make()
    gm, _ = capture(model, *case.inputs(), dynamic=True)
    module = import_graph(gm)
    assert_faithful(gm, module)
    function = the_function(module)
    # The user input's dims are symbolic; parameters keep static shapes.
    assert dynamic_dims(module) >= 1
    params = function.function_type.inputs.data[: len(list(model.parameters()))]
    assert all(isinstance(ty, TensorType) and ty.has_static_shape() for ty in params)
    if case.name == "gpt_block":
        # view/reshape sizes come from the input, as index values.
        sizes = [op for op in function.body.walk() if op.name == "aten.sym_size.int"]
        assert sizes
        assert all(isinstance(op.results[0].type, IndexType) for op in sizes)
        views = [op for op in function.body.walk() if op.name == "aten.view.default"]
        assert any(isinstance(op, AtenOp) and op.sym_operands() for op in views)


def test_dynamic_training_backward_takes_symbolic_sizes() -> None:
    graphs = capture_aot_training(GPTBlock(), torch.randn(2, 6, 16), dynamic=True)
    module = import_graph(graphs.backward.gm)
    assert_faithful(graphs.backward.gm, module)
    arg_types = the_function(module).function_type.inputs.data
    assert any(isinstance(ty, IndexType) for ty in arg_types)
    ints = [v for v in graphs.backward.example_inputs if isinstance(v, int)]
    assert ints, "the real inputs of SymInt placeholders are ints"
    for op in the_function(module).body.walk():
        assert isinstance(op, AtenOp) or op.name.startswith(("arith.", "func."))

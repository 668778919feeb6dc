"""Every zoo model, captured four ways, imported to aten IR and interpreted.

For each (model, capture) the imported module is verified, printed, parsed back (the
text must be identical), run with the aten interpreter on the capture's real inputs,
and compared with the captured GraphModule run eagerly on the same inputs; make_fx
graphs are also compared with the original ``nn.Module``. Dynamic-shape captures are
run on a second, differently shaped input as well.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

import pytest
import torch
import torch.utils._pytree as pytree
from models import ALL_MODELS, Inputs
from torch import nn
from torch.testing import assert_close
from xdsl.dialects.builtin import DictionaryAttr, ModuleOp, StringAttr, TensorType
from xdsl.dialects.func import FuncOp
from xdsl.parser import Parser

from kiln.dialects.aten.interpreter import run_function
from kiln.frontends.capture import (
    AotTrainingCapture,
    Capture,
    capture_aot,
    capture_aot_training,
    capture_export,
    capture_make_fx,
)
from kiln.frontends.fx import GET_ATTR_ATTR, import_graph, rebuild_outputs
from kiln.registry import make_context

# --- helpers -----------------------------------------------------------------------------


def fresh(values: Sequence[Any]) -> list[Any]:
    """Copies, so that a graph that mutates its inputs (train-mode BatchNorm) cannot
    change what the next run sees."""
    return [v.detach().clone() if isinstance(v, torch.Tensor) else v for v in values]


def import_and_round_trip(gm: torch.fx.GraphModule) -> ModuleOp:
    module = import_graph(gm)
    module.verify()
    text = str(module)
    reparsed = Parser(make_context(), text).parse_module()
    reparsed.verify()
    assert str(reparsed) == text
    assert reparsed.is_structurally_equivalent(module)
    return reparsed


def forward_function(module: ModuleOp) -> FuncOp:
    function = module.body.block.first_op
    assert isinstance(function, FuncOp)
    return function


def function_args(module: ModuleOp, gm: torch.fx.GraphModule, inputs: Sequence[Any]) -> list[Any]:
    """The capture's inputs, then the ``get_attr`` tensors the importer made arguments."""
    args = fresh(inputs)
    attrs = forward_function(module).arg_attrs
    extra = attrs.data[len(args) :] if attrs is not None else ()
    for attr in extra:
        assert isinstance(attr, DictionaryAttr)
        target = attr.data[GET_ATTR_ATTR]
        assert isinstance(target, StringAttr)
        value: Any = gm
        for part in target.data.split("."):
            value = getattr(value, part)
        args.append(value.detach().clone())
    return args


def interpret(module: ModuleOp, gm: torch.fx.GraphModule, inputs: Sequence[Any]) -> Any:
    """Run the imported function and rebuild the GraphModule's output structure."""
    results = run_function(module, function_args(module, gm, inputs))
    return rebuild_outputs(forward_function(module), results)


def check_capture(capture: Capture) -> ModuleOp:
    module = import_and_round_trip(capture.gm)
    expected = capture.gm(*fresh(capture.example_inputs))
    assert_close(interpret(module, capture.gm, capture.example_inputs), expected)
    return module


def eager(model_name: str, inputs: Inputs | None = None) -> Any:
    """The original module's output, from a freshly built model (train-mode models
    update their buffers when run)."""
    model, example = ALL_MODELS[model_name]()
    return model(*(example if inputs is None else inputs))


def flat_tensors(value: Any) -> list[torch.Tensor]:
    return [v for v in pytree.tree_leaves(value) if isinstance(v, torch.Tensor)]


@cache
def training_capture(model_name: str) -> AotTrainingCapture:
    model, inputs = ALL_MODELS[model_name]()
    return capture_aot_training(model, *inputs)


MODELS = sorted(ALL_MODELS)

# --- static shapes -----------------------------------------------------------------------


@pytest.mark.parametrize("model_name", MODELS)
def test_make_fx(model_name: str) -> None:
    model, inputs = ALL_MODELS[model_name]()
    capture = capture_make_fx(model, *inputs)
    module = check_capture(capture)
    interpreted = interpret(module, capture.gm, capture.example_inputs)
    with torch.no_grad():
        assert_close(flat_tensors(interpreted), flat_tensors(eager(model_name)))


@pytest.mark.parametrize("model_name", MODELS)
def test_aot_inference(model_name: str) -> None:
    model, inputs = ALL_MODELS[model_name]()
    check_capture(capture_aot(model, *inputs))


@pytest.mark.parametrize("model_name", MODELS)
def test_aot_training_forward(model_name: str) -> None:
    check_capture(training_capture(model_name).forward)


@pytest.mark.parametrize("model_name", MODELS)
def test_aot_training_backward(model_name: str) -> None:
    check_capture(training_capture(model_name).backward)


@pytest.mark.parametrize("model_name", MODELS)
def test_export(model_name: str) -> None:
    model, inputs = ALL_MODELS[model_name]()
    check_capture(capture_export(model, *inputs))


# --- dynamic shapes ------------------------------------------------------------------------

Capturer = Callable[..., Capture]

DYNAMIC_CAPTURES: dict[str, Capturer] = {
    "make_fx": capture_make_fx,
    "aot": capture_aot,
    "export": capture_export,
}


def _other_shape_inputs(model_name: str) -> Inputs:
    """Inputs with different (non-0/1) sizes for every dynamic dim."""
    generator = torch.Generator().manual_seed(11)
    if model_name == "gpt_block":
        return (torch.randn(3, 7, 16, generator=generator),)
    if model_name == "embedding_indexing":
        return (
            torch.randint(0, 20, (4, 6), generator=generator),
            torch.randint(0, 6, (5,), generator=generator),
            torch.randint(0, 8, (4, 6, 2), generator=generator),
        )
    raise KeyError(model_name)


@pytest.mark.parametrize("how", sorted(DYNAMIC_CAPTURES))
@pytest.mark.parametrize("model_name", ["embedding_indexing", "gpt_block"])
def test_dynamic_shapes(model_name: str, how: str) -> None:
    model, inputs = ALL_MODELS[model_name]()
    capture = DYNAMIC_CAPTURES[how](model, *inputs, dynamic=True)
    module = check_capture(capture)
    input_types = forward_function(module).function_type.inputs.data
    dynamic_dims = [d for ty in input_types if isinstance(ty, TensorType) for d in ty.get_shape()]
    assert any(d < 0 for d in dynamic_dims), "the dynamic capture has only static shapes"

    # The same IR on differently shaped user inputs (they are the last placeholders).
    other = _other_shape_inputs(model_name)
    state = list(capture.example_inputs[: len(capture.example_inputs) - len(other)])
    new_inputs = [*state, *other]
    interpreted = interpret(module, capture.gm, new_inputs)
    assert_close(interpreted, capture.gm(*fresh(new_inputs)))
    with torch.no_grad():
        assert_close(flat_tensors(interpreted), flat_tensors(eager(model_name, other)))


def test_zoo_is_deterministic_and_random() -> None:
    for name, factory in ALL_MODELS.items():
        model_a, inputs_a = factory()
        model_b, inputs_b = factory()
        assert_close(inputs_a, inputs_b)
        for (pname, a), b in zip(
            model_a.state_dict().items(), model_b.state_dict().values(), strict=True
        ):
            assert_close(a, b)
            if a.is_floating_point() and a.numel() > 1:
                assert a.std() > 0, f"{name}.{pname} is constant"
        for x in inputs_a:
            assert x.numel() > 1
            assert x.float().std() > 0, f"{name} has a constant input"
        assert isinstance(model_a, nn.Module)

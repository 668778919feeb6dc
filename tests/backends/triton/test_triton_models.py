"""The model zoo (tests/models.py) through the default pipeline and the Triton backend,
compared with eager: inference graphs, a training step's backward graph, dynamic shapes."""

from __future__ import annotations

import pytest
import torch
from models import ALL_MODELS
from triton_checks import DEVICE, assert_close, capture, compile_capture, to_device

from kiln.frontends.capture import capture_aot_training


@pytest.mark.parametrize("model_name", sorted(ALL_MODELS))
def test_model(model_name: str) -> None:
    model, inputs = ALL_MODELS[model_name]()
    compiled = compile_capture(capture(model, *inputs))
    outputs = compiled.run()
    assert len(outputs) == len(compiled.expected)
    for actual, expected in zip(outputs, compiled.expected, strict=True):
        assert_close(actual, expected)


def test_gpt_block_training_backward() -> None:
    model, inputs = ALL_MODELS["gpt_block"]()
    graphs = capture_aot_training(to_device(model), *(to_device(x) for x in inputs))
    for graph in (graphs.forward, graphs.backward):
        compiled = compile_capture(graph)
        outputs = compiled.run()
        assert len(outputs) == len(compiled.expected)
        for actual, expected in zip(outputs, compiled.expected, strict=True):
            assert_close(actual, expected)


def test_dynamic_shapes() -> None:
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.softmax(x * 2, -1), (x + 1).sum(-1)

    x = torch.randn(6, 50)
    compiled = compile_capture(capture(fn, x, dynamic=True))
    assert "ks0" in compiled.program.source
    for shape in ((3, 50), (7, 19), (1, 1030)):
        other = torch.randn(*shape)
        outputs = compiled.run([other.to(DEVICE)])
        for actual, expected in zip(outputs, fn(other), strict=True):
            assert_close(actual, expected)


def test_torch_compile_backend_runs_triton() -> None:
    import kiln

    model, inputs = ALL_MODELS["gpt_block"]()
    model = model.to(DEVICE)
    inputs = tuple(t.to(DEVICE) for t in inputs)
    compiled = kiln.compile(model, executor="triton", verbose=False)
    with torch.no_grad():
        for _ in range(2):
            assert_close(compiled(*inputs), model(*inputs))

"""The model zoo through the whole CPU pipeline and the C++ backend, against eager.

Each model is captured with ``make_fx`` (parameters lifted to inputs), imported, run
through ``decompose`` ... ``buffer-reuse``, compiled to C++ and run on fresh random
inputs of the capture's shapes (integer inputs keep the capture's values: they are
indices); the outputs must equal the captured graph run eagerly on the same inputs.

Float32 outputs are judged against a float64 run of the same graph: kiln must be about as
accurate as eager (random weights give activations in the hundreds, and a rotary
``x * cos - y * sin`` cancels them, so an element-wise 1e-4 against eager's own rounding
failed about once in forty draws while both were ~1e-3 from the float64 result).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from accuracy import assert_as_accurate_as_eager
from cpp_checks import MODEL_TOLERANCE, PIPELINE, assert_matches, flat_outputs, lower_graph
from models import ALL_MODELS

from kiln.frontends.capture import capture_make_fx
from kiln.targets import build_cpp_program


def fresh_like(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.dtype.is_floating_point:
        return torch.randn_like(value)
    if isinstance(value, torch.Tensor):
        return value.clone()
    return value


@pytest.mark.parametrize("name", list(ALL_MODELS))
def test_model(name: str) -> None:
    model, inputs = ALL_MODELS[name]()
    captured = capture_make_fx(model, *inputs)
    program = build_cpp_program(lower_graph(captured.gm, PIPELINE))
    graph64 = copy.deepcopy(captured.gm).double()
    for _ in range(2):
        args = [fresh_like(v) for v in captured.example_inputs]
        expected = flat_outputs(
            captured.gm(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
        )
        reference = flat_outputs(graph64(*[_double(a) for a in args]))
        actual = program(args)
        assert len(actual) == len(expected)
        for a, e, r in zip(actual, expected, reference, strict=True):
            if (
                isinstance(e, torch.Tensor)
                and e.dtype == torch.float32
                and bool(r.isfinite().all())
            ):
                assert_as_accurate_as_eager(
                    a, e, r.double(), relative=MODEL_TOLERANCE[0] * 0.1, min_scale=1.0
                )
            else:
                assert_matches(a, e, MODEL_TOLERANCE)


def _double(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.dtype == torch.float32:
        return value.double()
    return value.clone() if isinstance(value, torch.Tensor) else value

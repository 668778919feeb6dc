"""The C++ wrapper holds exactly the memory ``buffer-reuse`` planned.

The program's live bytes are sampled before every wrapper line (:mod:`live_bytes`); their
peak must equal the planned peak (``memory_timeline``): a Python name that outlives the
buffer's ``kernel.free`` (an extern's temporary, the old name of a reused buffer, a
copy) would show up as extra bytes. Called with a list it owns (AOTAutograd's boxed
convention), the wrapper also drops each argument after its last use.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from cpp_checks import MODEL_TOLERANCE, PIPELINE, assert_matches, flat_outputs, lower_graph
from live_bytes import planned_peak, run_counting_live_bytes
from models import ALL_MODELS
from xdsl.dialects.builtin import StringAttr

from kiln.dialects.aten.fx.outputs import OUTPUTS_ATTR, rebuild_structure
from kiln.dialects.kernel.program_ops import find_program
from kiln.frontends.capture import Capture, capture_aot_training, capture_make_fx
from kiln.targets import build_cpp_program


def fresh(value: Any, random: bool) -> Any:
    """A new contiguous argument like ``value`` (random if floating point and ``random``)."""
    if isinstance(value, torch.Tensor) and value.dtype.is_floating_point and random:
        return torch.randn(value.shape, dtype=value.dtype)
    if isinstance(value, torch.Tensor):
        return value.clone(memory_format=torch.contiguous_format)
    return value


def check_peak(captured: Capture, random: bool = True) -> None:
    module = lower_graph(captured.gm, PIPELINE)
    program_op = find_program(module)
    program = build_cpp_program(module)
    args = [fresh(v, random) for v in captured.example_inputs]
    expected = flat_outputs(
        captured.gm(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
    )
    run = run_counting_live_bytes(program.run, list(args))
    assert run.peak == planned_peak(program_op) > 0, program.python_source
    structure = program_op.attributes.get(OUTPUTS_ATTR)
    assert isinstance(structure, StringAttr)
    outputs = flat_outputs(rebuild_structure(structure.data, run.outputs))
    for actual, want in zip(outputs, expected, strict=True):
        assert_matches(actual, want, MODEL_TOLERANCE)
    # Handed over, the arguments die at their last use: the peak counting them is the
    # plan's with each argument held only that long.
    boxed = [fresh(v, random) for v in captured.example_inputs]
    run = run_counting_live_bytes(
        program.boxed_call, boxed, code=program.run.__code__, count_arguments=True
    )
    assert boxed == []
    assert run.peak == planned_peak(program_op, arguments=True)


@pytest.mark.parametrize("name", ["gpt_block", "conv_bn_relu_eval"])
def test_inference_peak_is_the_planned_peak(name: str) -> None:
    model, inputs = ALL_MODELS[name]()
    check_peak(capture_make_fx(model, *inputs))


def test_backward_peak_is_the_planned_peak() -> None:
    model, inputs = ALL_MODELS["gpt_block"]()
    # The saved activations as the forward computed them: random ones would not be
    # consistent with each other (a saved mean and its rstd).
    check_peak(capture_aot_training(model, *inputs).backward, random=False)

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


def _reduce_then_scale(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    # b is first read by the second kernel, after a's last use.
    return (b * a.sin().mean()).cos()


def test_strided_arguments_are_copied_at_their_first_use() -> None:
    # A backward graph receives saved activations that may be strided views (a saved
    # transposed weight): each is copied contiguous right before the op that first reads
    # it, so a's copy is gone when b's is made. Copied in the prologue, both copies lived
    # together from the start of the call.
    a_base, b_base = torch.randn(96, 64), torch.randn(80, 48)
    examples = (a_base.t().contiguous(), b_base.t().contiguous())
    module = lower_graph(capture_make_fx(_reduce_then_scale, *examples).gm)
    program = build_cpp_program(module)
    copies = (a_base.numel() + b_base.numel()) * 4
    args = [a_base.t(), b_base.t()]  # views: not contiguous
    run = run_counting_live_bytes(program.boxed_call, args, code=program.run.__code__)
    assert args == []
    assert run.peak < copies, program.python_source
    (actual,) = run.outputs
    torch.testing.assert_close(
        actual, _reduce_then_scale(a_base.t(), b_base.t()), atol=1e-5, rtol=1e-4
    )


def _scatter_max(x: torch.Tensor, index: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    return (x * 2).scatter_reduce(0, index, src, reduce="amax")


def test_extern_update_of_a_dying_buffer_runs_in_place() -> None:
    # The functional scatter copies its whole input first; the program's own ``x * 2``
    # dies there, so the extern updates it in place: one buffer, not two, at the peak
    # (as the embedding gradient, ``index_put(zeros, ..., accumulate=True)``, at the end
    # of a language model's backward).
    x, src = torch.randn(512, 64), torch.randn(256, 64)
    index = torch.randint(0, 512, (256, 64))
    module = lower_graph(capture_make_fx(_scatter_max, x, index, src).gm)
    program = build_cpp_program(module)
    assert "scatter_reduce_" in program.python_source, program.python_source
    run = run_counting_live_bytes(program.run, [x, index, src])
    assert run.peak == x.numel() * 4, program.python_source
    torch.testing.assert_close(run.outputs[0], _scatter_max(x, index, src))

"""The Triton wrapper holds exactly the memory ``buffer-reuse`` planned.

As for the C++ wrapper (``tests/backends/cpp/test_cpp_memory.py``): live bytes sampled
before every line of the generated ``call`` must peak at the planned peak. An extern's
``tmpN`` names once kept every extern result alive to the end of the call (on the H200:
resnet 1909 MB against Inductor's 341 MB). Handed its argument list (AOTAutograd's boxed
convention), the wrapper also drops each argument after its last use.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.utils._pytree as pytree
from live_bytes import planned_peak, run_counting_live_bytes
from models import ALL_MODELS
from triton_checks import assert_close, capture, compile_capture, to_device
from xdsl.dialects.builtin import StringAttr

from kiln.backends.triton.runtime import TritonProgram, interpreting
from kiln.dialects.aten.fx.outputs import OUTPUTS_ATTR, rebuild_structure
from kiln.dialects.kernel.program_ops import find_program
from kiln.frontends.capture import Capture, capture_aot_training


def fresh(value: Any, random: bool) -> Any:
    """A new contiguous argument like ``value`` (random if floating point and ``random``)."""
    if isinstance(value, torch.Tensor) and value.dtype.is_floating_point and random:
        return torch.randn(value.shape, dtype=value.dtype).to(value.device)
    if isinstance(value, torch.Tensor):
        return value.clone(memory_format=torch.contiguous_format)
    return value


def check_peak(captured: Capture, random: bool = True) -> None:
    compiled = compile_capture(captured)
    program = compiled.program
    assert isinstance(program, TritonProgram)
    program_op = find_program(compiled.module)
    # Triton's interpreter leaves each launch's arguments in reference cycles until the
    # next collection; compiled launches hold nothing.
    cycles = interpreting()
    args = [fresh(v, random) for v in compiled.args]
    expected = compiled.run([a.clone() if isinstance(a, torch.Tensor) else a for a in args])
    run = run_counting_live_bytes(
        program.boxed_call, list(args), code=program.call.__code__, collect_cycles=cycles
    )
    assert run.peak == planned_peak(program_op) > 0, program.source
    structure = program_op.attributes.get(OUTPUTS_ATTR)
    outputs = (
        rebuild_structure(structure.data, run.outputs)
        if isinstance(structure, StringAttr)
        else run.outputs
    )
    outputs = pytree.tree_leaves(outputs, is_leaf=lambda v: v is None)
    assert len(outputs) == len(expected)
    for actual, want in zip(outputs, expected, strict=True):
        assert_close(actual, want)
    boxed = [fresh(v, random) for v in compiled.args]
    run = run_counting_live_bytes(
        program.boxed_call,
        boxed,
        code=program.call.__code__,
        collect_cycles=cycles,
        count_arguments=True,
    )
    assert boxed == []
    assert run.peak == planned_peak(program_op, arguments=True)


@pytest.mark.parametrize("name", ["gpt_block", "conv_bn_relu_eval"])
def test_inference_peak_is_the_planned_peak(name: str) -> None:
    model, inputs = ALL_MODELS[name]()
    check_peak(capture(model, *inputs))


def test_backward_peak_is_the_planned_peak() -> None:
    model, inputs = ALL_MODELS["gpt_block"]()
    graphs = capture_aot_training(to_device(model), *(to_device(x) for x in inputs))
    # The saved activations as the forward computed them (random ones would not be
    # consistent with each other).
    check_peak(graphs.backward, random=False)


def _reduce_then_scale(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    # b is first read by the second kernel, after a's last use.
    return (b * a.sin().mean()).cos()


def test_strided_arguments_are_copied_at_their_first_use() -> None:
    # As in the C++ wrapper: ``as_buffer`` copies a strided argument right before the op
    # that first reads it, so a's copy is gone when b's is made (in the prologue, both
    # copies lived together from the start of the call).
    a_base, b_base = to_device(torch.randn(96, 64)), to_device(torch.randn(80, 48))
    examples = (a_base.t().contiguous(), b_base.t().contiguous())
    compiled = compile_capture(capture(_reduce_then_scale, *examples))
    program = compiled.program
    assert isinstance(program, TritonProgram)
    copies = (a_base.numel() + b_base.numel()) * 4
    args = [a_base.t(), b_base.t()]  # views: not contiguous
    run = run_counting_live_bytes(
        program.boxed_call, args, code=program.call.__code__, collect_cycles=interpreting()
    )
    assert args == []
    assert run.peak < copies, program.source
    (actual,) = run.outputs
    assert_close(actual, _reduce_then_scale(a_base.t(), b_base.t()))


def _scatter_max(x: torch.Tensor, index: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    return (x * 2).scatter_reduce(0, index, src, reduce="amax")


def test_extern_update_of_a_dying_buffer_runs_in_place() -> None:
    # As in the C++ wrapper: the extern updates the program's own dying ``x * 2`` in
    # place instead of a whole copy of it.
    x, src = to_device(torch.randn(512, 64)), to_device(torch.randn(256, 64))
    index = to_device(torch.randint(0, 512, (256, 64)))
    compiled = compile_capture(capture(_scatter_max, x, index, src))
    program = compiled.program
    assert isinstance(program, TritonProgram)
    assert "scatter_reduce_" in program.source, program.source
    run = run_counting_live_bytes(
        program.boxed_call,
        [x, index, src],
        code=program.call.__code__,
        collect_cycles=interpreting(),
    )
    assert run.peak == x.numel() * 4, program.source
    assert_close(run.outputs[0], _scatter_max(x, index, src))

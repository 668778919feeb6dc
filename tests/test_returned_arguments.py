"""A graph that returns one of its arguments unchanged returns that tensor itself.

OpInfo's gradient samples found it (``cat`` of one channels-last tensor, ``x.float(
memory_format=torch.channels_last)``): the backward returns its channels-last gradient
input as the input's gradient, and the compiled graph returned a row-major copy of it, with
strides other than the graph's contract (the FakeTensor's, eager's). Under
``torch.compile`` AOTAutograd takes such an output from the inputs, so only a direct
``compile_graph`` caller saw it; eager returns the argument itself, as kiln now does.
"""

from __future__ import annotations

import pytest
import torch

from kiln.compile_options import Executor
from kiln.compiler import CompileOptions, compile_graph
from kiln.frontends.capture import capture_aot


def _doubles_and_passes(x: torch.Tensor, g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x * 2, g


@pytest.mark.parametrize("executor", ["cpp", "triton"])
def test_a_strided_argument_returned_unchanged_is_the_argument_itself(executor: Executor) -> None:
    x = torch.randn(2, 3, 4, 4).to(memory_format=torch.channels_last)
    g = torch.randn(2, 3, 4, 4).to(memory_format=torch.channels_last)
    captured = capture_aot(_doubles_and_passes, x, g)
    compiled = compile_graph(captured.gm, [x, g], CompileOptions(verbose=False, executor=executor))
    doubled, passed = compiled(x, g)
    assert passed is g
    torch.testing.assert_close(doubled, x * 2)
    assert doubled.stride() == x.stride()
    # A transposed argument too, next to a contiguous one
    t, c = torch.randn(5, 3).t(), torch.randn(3, 5)
    captured = capture_aot(_doubles_and_passes, c, t)
    compiled = compile_graph(captured.gm, [c, t], CompileOptions(verbose=False, executor=executor))
    doubled, passed = compiled(c, t)
    assert passed is t
    torch.testing.assert_close(doubled, c * 2)

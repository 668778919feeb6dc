"""The ``output-layout`` pass: IR in/IR out, stride orders, and the same numbers."""

from __future__ import annotations

import torch
from pass_checks import assert_pass_output, run_pass

from kiln.dialects.aten.interpreter import run_function
from kiln.frontends.fx.outputs import rebuild_structure
from kiln.passes.output_layout import OutputLayoutPass, stride_order
from kiln.registry import default_registry

TRANSPOSED = """
func.func @f(%x: tensor<4x8xf32>) -> (tensor<8x4xf32>, tensor<4x8xf32>) attributes {kiln.outputs = "(0, 1)", kiln.output_strides = [[1, 8], [8, 1]]} {
  %t = aten.t.default(%x) : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %y = aten.mul.Scalar(%t, other = 2) : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %z = aten.neg.default(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %y, %z : tensor<8x4xf32>, tensor<4x8xf32>
}
"""

PERMUTED = """
func.func @f(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) attributes {kiln.outputs = "(permute(0, (1, 0)), 1)"} {
  %t = aten.t.default(%x) : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %y = aten.mul.Scalar(%t, other = 2) : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %z = aten.neg.default(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %0 = aten.permute.default(%y, dims = [1, 0]) : (tensor<8x4xf32>) -> tensor<4x8xf32>
  func.return %0, %z : tensor<4x8xf32>, tensor<4x8xf32>
}
"""


def test_registered_under_kiln() -> None:
    assert default_registry().get_pass("output-layout") is OutputLayoutPass


def test_permuted_output_is_returned_through_a_view() -> None:
    assert_pass_output(OutputLayoutPass(), TRANSPOSED, PERMUTED)
    before, after = run_pass(OutputLayoutPass(), TRANSPOSED)
    x = torch.randn(4, 8)
    want = run_function(before, [x], "f")
    structure = after.ops.first.attributes["kiln.outputs"].data  # pyright: ignore
    got = rebuild_structure(structure, run_function(after, [x], "f"))
    for w, g in zip(want, got, strict=True):
        torch.testing.assert_close(g, w)
    assert got[0].stride() == (1, 8)
    assert got[1].stride() == (8, 1)


def test_stride_orders() -> None:
    assert stride_order([4, 8], [8, 1]) == [0, 1]
    assert stride_order([8, 4], [1, 8]) == [1, 0]
    assert stride_order([2, 5, 6, 3], [90, 6, 1, 30]) == [0, 3, 1, 2]
    assert stride_order([1, 4, 8], [32, 1, 4]) == [0, 2, 1]  # a unit dim stays in place
    assert stride_order([4, 8], [16, 2]) is None  # not dense
    assert stride_order([4, 8], [1, 1]) is None  # overlapping

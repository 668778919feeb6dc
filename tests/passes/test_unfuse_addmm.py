"""The ``unfuse-addmm`` pass: IR in/IR out, where it applies, and the same numbers."""

from __future__ import annotations

from pass_checks import assert_pass_output, assert_same_semantics, printed, run_pass

from kiln.passes.unfuse_addmm import UnfuseAddmmPass
from kiln.registry import default_registry

POINTWISE_USE = """
func.func @f(%b: tensor<8xf32>, %x: tensor<4x16xf32>, %w: tensor<16x8xf32>) -> tensor<2x2x8xf32> {
  %0 = aten.addmm.default(%b, %x, %w) : (tensor<8xf32>, tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %1 = aten.view.default(%0, size = [2, 2, 8]) : (tensor<4x8xf32>) -> tensor<2x2x8xf32>
  %2 = aten.relu.default(%1) : (tensor<2x2x8xf32>) -> tensor<2x2x8xf32>
  func.return %2 : tensor<2x2x8xf32>
}
"""

UNFUSED = """
func.func @f(%b: tensor<8xf32>, %x: tensor<4x16xf32>, %w: tensor<16x8xf32>) -> tensor<2x2x8xf32> {
  %mm = aten.mm.default(%x, %w) : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %0 = aten.add.Tensor(%mm, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %1 = aten.view.default(%0, size = [2, 2, 8]) : (tensor<4x8xf32>) -> tensor<2x2x8xf32>
  %2 = aten.relu.default(%1) : (tensor<2x2x8xf32>) -> tensor<2x2x8xf32>
  func.return %2 : tensor<2x2x8xf32>
}
"""


def test_registered_under_kiln() -> None:
    assert default_registry().get_pass("unfuse-addmm") is UnfuseAddmmPass


def test_addmm_feeding_pointwise_ops_is_split() -> None:
    assert_pass_output(UnfuseAddmmPass(), POINTWISE_USE, UNFUSED)
    before, after = run_pass(UnfuseAddmmPass(), POINTWISE_USE)
    assert_same_semantics(before, after)


def test_kept_where_the_add_would_not_fuse() -> None:
    returned = """
    func.func @f(%b: tensor<8xf32>, %x: tensor<4x16xf32>, %w: tensor<16x8xf32>) -> tensor<4x8xf32> {
      %0 = aten.addmm.default(%b, %x, %w) : (tensor<8xf32>, tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
      func.return %0 : tensor<4x8xf32>
    }
    """
    assert_pass_output(UnfuseAddmmPass(), returned, returned)
    into_mm = """
    func.func @f(%b: tensor<8xf32>, %x: tensor<4x16xf32>, %w: tensor<16x8xf32>, %v: tensor<8x3xf32>) -> tensor<4x3xf32> {
      %0 = aten.addmm.default(%b, %x, %w) : (tensor<8xf32>, tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
      %1 = aten.mm.default(%0, %v) : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
      func.return %1 : tensor<4x3xf32>
    }
    """
    assert_pass_output(UnfuseAddmmPass(), into_mm, into_mm)
    scaled = POINTWISE_USE.replace("(%b, %x, %w)", "(%b, %x, %w, beta = 2)")
    assert_pass_output(UnfuseAddmmPass(), scaled, scaled)


def test_split_through_a_functional_view() -> None:
    """``permute_copy`` (an ``aten.generic``, torch's ``view_copy`` tag) is view-like: the
    add still fuses into the pointwise op after it, with the same numbers."""
    text = """
    func.func @f(%b: tensor<8xf32>, %x: tensor<4x16xf32>, %w: tensor<16x8xf32>) -> tensor<8x4xf32> {
      %0 = aten.addmm.default(%b, %x, %w) : (tensor<8xf32>, tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
      %1 = aten.generic "aten::permute_copy.default"(%0, dims = [1, 0]) : (tensor<4x8xf32>) -> tensor<8x4xf32>
      %2 = aten.neg.default(%1) : (tensor<8x4xf32>) -> tensor<8x4xf32>
      func.return %2 : tensor<8x4xf32>
    }
    """
    before, after = run_pass(UnfuseAddmmPass(), text)
    assert "aten.mm.default" in printed(after)
    assert "aten.addmm" not in printed(after)
    assert_same_semantics(before, after)

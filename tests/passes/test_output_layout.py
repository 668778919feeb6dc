"""The ``output-layout`` pass: IR in/IR out, stride orders, and the same numbers."""

from __future__ import annotations

from typing import Any

import torch
from pass_checks import assert_pass_output, run_pass

from kiln.dialects.aten.fx.outputs import rebuild_structure
from kiln.dialects.aten.interpreter import run_function
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


# --- outputs that are views of other outputs share their storage -------------------------

ALIASED = """
func.func @f(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<6xf32>, tensor<3x2xf32>) attributes {kiln.outputs = "(0, 1, 2)"} {
  %y = aten.add.Scalar(%x, other = 1) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %v = aten.view.default(%y, size = [-1]) : (tensor<2x3xf32>) -> tensor<6xf32>
  %t = aten.t.default(%y) : (tensor<2x3xf32>) -> tensor<3x2xf32>
  func.return %y, %v, %t : tensor<2x3xf32>, tensor<6xf32>, tensor<3x2xf32>
}
"""

ALIASED_AFTER = """
func.func @f(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) attributes {kiln.outputs = "(0, alias('aten::view.default', 0, \\"{'size': [-1]}\\"), alias('aten::t.default', 0, '{}'))"} {
  %y = aten.add.Scalar(%x, other = 1) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %v = aten.view.default(%y, size = [-1]) : (tensor<2x3xf32>) -> tensor<6xf32>
  %t = aten.t.default(%y) : (tensor<2x3xf32>) -> tensor<3x2xf32>
  func.return %y, %y, %y : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>
}
"""

# Two views of an intermediate no output returns: it is returned too, unseen.
SHARED_BASE = """
func.func @f(%x: tensor<2x3xf32>) -> (tensor<3x2xf32>, tensor<2xf32>) attributes {kiln.outputs = "[0, 1]"} {
  %y = aten.add.Scalar(%x, other = 1) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %t = aten.t.default(%y) : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %s = aten.select.int(%y, dim = 1, index = 2) : (tensor<2x3xf32>) -> tensor<2xf32>
  func.return %t, %s : tensor<3x2xf32>, tensor<2xf32>
}
"""


def _run(text: str, x: torch.Tensor) -> tuple[list[Any], list[Any]]:
    before, after = run_pass(OutputLayoutPass(), text)
    want = list(run_function(before, [x], "f"))
    structure = after.ops.first.attributes["kiln.outputs"].data  # pyright: ignore
    return want, list(rebuild_structure(structure, run_function(after, [x], "f")))


def test_view_of_an_output_is_returned_as_a_view() -> None:
    assert_pass_output(OutputLayoutPass(), ALIASED, ALIASED_AFTER)
    want, got = _run(ALIASED, torch.randn(2, 3))
    for w, g in zip(want, got, strict=True):
        torch.testing.assert_close(g, w)
        assert g.stride() == w.stride()
    got[0].add_(10)  # eager: every view sees it
    torch.testing.assert_close(got[1], got[0].view(-1))
    torch.testing.assert_close(got[2], got[0].t())


def test_views_of_an_unreturned_intermediate_share_it() -> None:
    want, got = _run(SHARED_BASE, torch.randn(2, 3))
    assert isinstance(got, list)
    assert len(got) == 2
    for w, g in zip(want, got, strict=True):
        torch.testing.assert_close(g, w)
    assert got[0].untyped_storage().data_ptr() == got[1].untyped_storage().data_ptr()
    got[0].mul_(0)
    assert not got[1].any()


# One view returned twice (eager's ``v.contiguous(memory_format=torch.channels_last)``
# is ``v`` itself when ``v`` already is channels-last contiguous, size-1 dims included).
VIEW_RETURNED_TWICE = """
func.func @f(%x: tensor<2x3xf32>) -> (tensor<2x1x3xf32>, tensor<2x1x3xf32>) attributes {kiln.outputs = "(0, 1)"} {
  %y = aten.add.Scalar(%x, other = 1) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %u = aten.unsqueeze.default(%y, dim = 1) : (tensor<2x3xf32>) -> tensor<2x1x3xf32>
  func.return %u, %u : tensor<2x1x3xf32>, tensor<2x1x3xf32>
}
"""


def test_a_view_returned_twice_is_one_storage() -> None:
    """Found by the program fuzzer: each place got its own copy of the view (lowering
    materialises a returned view; eager: one tensor, so an in-place update through one
    output shows through the other). Both places are now the view replayed on its base."""
    _, after = run_pass(OutputLayoutPass(), VIEW_RETURNED_TWICE)
    structure = after.ops.first.attributes["kiln.outputs"].data  # pyright: ignore
    unsqueeze = "alias('aten::unsqueeze.default', 2, \"{'dim': 1}\")"
    assert structure == f"({unsqueeze}, {unsqueeze})"
    want, got = _run(VIEW_RETURNED_TWICE, torch.randn(2, 3))
    assert len(got) == 2
    for w, g in zip(want, got, strict=True):
        torch.testing.assert_close(g, w)
    assert got[0].untyped_storage().data_ptr() == got[1].untyped_storage().data_ptr()
    got[0].mul_(0)
    assert not got[1].any()


# A stepped slice of a transposed intermediate: the only output, with eager's strides
# (1, 8) neither contiguous nor dense; its base is no output.
STEPPED_SLICE = """
func.func @f(%x: tensor<6x4xf32>) -> tensor<4x3xf32> attributes {kiln.outputs = "0", kiln.output_strides = [[1, 8]]} {
  %t = aten.t.default(%x) : (tensor<6x4xf32>) -> tensor<4x6xf32>
  %y = aten.mul.Scalar(%t, other = 2) : (tensor<4x6xf32>) -> tensor<4x6xf32>
  %s = aten.slice.Tensor(%y, dim = 1, start = 0, end = 6, step = 2) : (tensor<4x6xf32>) -> tensor<4x3xf32>
  func.return %s : tensor<4x3xf32>
}
"""


def test_the_unreturned_base_of_a_stepped_slice_takes_the_slices_layout() -> None:
    """The program fuzzer's ``x.contiguous(memory_format=channels_last)[..., ::2]``
    (session 10): the base was returned contiguous, so the slice replayed on it had
    strides (3, 1)... not eager's. The base now takes the dim order of the slice's
    recorded strides: returned permuted, seen through the inverse permutation."""
    _, after = run_pass(OutputLayoutPass(), STEPPED_SLICE)
    structure = after.ops.first.attributes["kiln.outputs"].data  # pyright: ignore
    assert (
        structure
        == "alias('aten::slice.Tensor', permute(1, (1, 0)), \"{'dim': 1, 'start': 0, 'end': 6, 'step': 2}\")"
    )
    x = torch.randn(6, 4)
    (got,) = [rebuild_structure(structure, run_function(after, [x], "f"))]
    want = (x.t() * 2)[:, ::2]
    torch.testing.assert_close(got, want)
    assert got.stride() == want.stride() == (1, 8)


# A forward graph saving attention's transposed query for the backward:
# ``mm(x, w).view(1, 4, 2, 3).transpose(1, 2)``, eager's strides (24, 3, 6, 1).
TRANSPOSED_MATMUL_VIEW = """
func.func @f(%x: tensor<4x5xf32>, %w: tensor<5x6xf32>) -> tensor<1x2x4x3xf32> attributes {kiln.outputs = "0", kiln.output_strides = [[24, 3, 6, 1]]} {
  %mm = aten.mm.default(%x, %w) : (tensor<4x5xf32>, tensor<5x6xf32>) -> tensor<4x6xf32>
  %v = aten.view.default(%mm, size = [1, 4, 2, 3]) : (tensor<4x6xf32>) -> tensor<1x4x2x3xf32>
  %t = aten.transpose.int(%v, dim0 = 1, dim1 = 2) : (tensor<1x4x2x3xf32>) -> tensor<1x2x4x3xf32>
  func.return %t : tensor<1x2x4x3xf32>
}
"""


def test_the_only_view_of_a_matmul_is_returned_as_a_view_not_a_copy() -> None:
    """Session 12 (issue 16): a training forward copied every saved transposed q/k/v
    (a kernel each: 6 of BERT's 18 forward launches) into a buffer laid out as the
    matmul's own result. When the view replayed on its (contiguous) base has eager's
    strides over the whole base, the base is returned and the output is the view."""
    _, after = run_pass(OutputLayoutPass(), TRANSPOSED_MATMUL_VIEW)
    structure = after.ops.first.attributes["kiln.outputs"].data  # pyright: ignore
    view = "alias('aten::view.default', 1, \"{'size': [1, 4, 2, 3]}\")"
    assert structure == f"alias('aten::transpose.int', {view}, \"{{'dim0': 1, 'dim1': 2}}\")"
    x, w = torch.randn(4, 5), torch.randn(5, 6)
    got = rebuild_structure(structure, run_function(after, [x, w], "f"))
    want = (x @ w).view(1, 4, 2, 3).transpose(1, 2)
    torch.testing.assert_close(got, want)
    assert got.stride() == want.stride() == (24, 3, 6, 1)


def test_a_view_that_replays_to_other_strides_stays_a_permuted_copy() -> None:
    """Eager's strides (24, 1, 6, 2) are not what the transpose of the contiguous base
    gives: the output is computed into its own buffer as before."""
    text = TRANSPOSED_MATMUL_VIEW.replace("[[24, 3, 6, 1]]", "[[24, 1, 6, 2]]")
    _, after = run_pass(OutputLayoutPass(), text)
    structure = after.ops.first.attributes["kiln.outputs"].data  # pyright: ignore
    assert "alias" not in structure


# ``torch.chunk(t, 3, 1)[0]`` of a size-1 dim under ``dynamic=True``: a ``split`` of one
# piece, which ATen returns as a list of one view (found by the dynamic fuzzer).
ONE_PIECE_SPLIT = """
func.func @f(%x: tensor<2x1x3xf32>) -> tensor<3x1x2xf32> attributes {kiln.outputs = "(0,)", kiln.output_strides = [[1, 3, 3]]} {
  %y = aten.add.Scalar(%x, other = 1) : (tensor<2x1x3xf32>) -> tensor<2x1x3xf32>
  %s = aten.split_with_sizes.default(%y, split_sizes = [1], dim = 1) : (tensor<2x1x3xf32>) -> tensor<2x1x3xf32>
  %t = aten.permute.default(%s, dims = [2, 1, 0]) : (tensor<2x1x3xf32>) -> tensor<3x1x2xf32>
  func.return %t : tensor<3x1x2xf32>
}
"""


def test_a_view_of_a_one_piece_split_is_replayed_on_the_piece() -> None:
    """The returned view's chain names the split's piece (``[0]``), as for several pieces:
    replayed without it, ``permute`` was applied to ATen's list of one tensor and every
    call raised."""
    before, after = run_pass(OutputLayoutPass(), ONE_PIECE_SPLIT)
    structure = after.ops.first.attributes["kiln.outputs"].data  # pyright: ignore
    assert "'aten::split_with_sizes.default'" in structure
    x = torch.randn(2, 1, 3)
    (want,) = run_function(before, [x], "f")
    (got,) = rebuild_structure(structure, run_function(after, [x], "f"))
    torch.testing.assert_close(got, want)
    assert got.stride() == (1, 3, 3)  # eager's: the view itself, not a copy

"""The ``pad-mm`` pass: IR in/IR out, where it applies, and the same numbers."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from pass_checks import (
    ArgsFactory,
    assert_pass_output,
    assert_same_semantics,
    parse,
    printed,
    run_pass,
    structured_outputs,
)
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.dialects.func import FuncOp

import kiln
from kiln.compiler import DEFAULT_PIPELINE
from kiln.dialects.aten.padded_products import PaddingProblem
from kiln.passes.pad_mm import PadMmPass
from kiln.registry import default_registry

N_MISALIGNED = """
func.func @f(%x: tensor<64x32xf32>, %w: tensor<32x1001xf32>) -> tensor<64x1001xf32> {
  %0 = aten.mm.default(%x, %w) : (tensor<64x32xf32>, tensor<32x1001xf32>) -> tensor<64x1001xf32>
  func.return %0 : tensor<64x1001xf32>
}
"""

N_PADDED = """
func.func @f(%x: tensor<64x32xf32>, %w: tensor<32x1001xf32>) -> tensor<64x1001xf32> {
  %padded = aten.constant_pad_nd.default(%w, pad = [0, 3]) : (tensor<32x1001xf32>) -> tensor<32x1004xf32>
  %mm_padded = aten.mm.default(%x, %padded) : (tensor<64x32xf32>, tensor<32x1004xf32>) -> tensor<64x1004xf32>
  %0 = aten.slice.Tensor(%mm_padded, dim = 1, start = 0, end = 1001) : (tensor<64x1004xf32>) -> tensor<64x1001xf32>
  %1 = aten.clone.default(%0) : (tensor<64x1001xf32>) -> tensor<64x1001xf32>
  func.return %1 : tensor<64x1001xf32>
}
"""


ADDMM_MISALIGNED = """
func.func @f(%b: tensor<1001xf32>, %x: tensor<64x32xf32>, %w: tensor<32x1001xf32>) -> tensor<64x1001xf32> {
  %0 = aten.addmm.default(%b, %x, %w) : (tensor<1001xf32>, tensor<64x32xf32>, tensor<32x1001xf32>) -> tensor<64x1001xf32>
  func.return %0 : tensor<64x1001xf32>
}
"""

ADDMM_PADDED = """
func.func @f(%b: tensor<1001xf32>, %x: tensor<64x32xf32>, %w: tensor<32x1001xf32>) -> tensor<64x1001xf32> {
  %padded = aten.constant_pad_nd.default(%w, pad = [0, 3]) : (tensor<32x1001xf32>) -> tensor<32x1004xf32>
  %bias_padded = aten.constant_pad_nd.default(%b, pad = [0, 3]) : (tensor<1001xf32>) -> tensor<1004xf32>
  %mm_padded = aten.addmm.default(%bias_padded, %x, %padded) : (tensor<1004xf32>, tensor<64x32xf32>, tensor<32x1004xf32>) -> tensor<64x1004xf32>
  %0 = aten.slice.Tensor(%mm_padded, dim = 1, start = 0, end = 1001) : (tensor<64x1004xf32>) -> tensor<64x1001xf32>
  %1 = aten.clone.default(%0) : (tensor<64x1001xf32>) -> tensor<64x1001xf32>
  func.return %1 : tensor<64x1001xf32>
}
"""
"""A returned product with a bias vector: the bias is padded too and stays in the
``addmm`` (cuBLAS's epilogue); returned itself, the slice is copied out to eager's strides,
returned as a view (BERT's LM head), it is not (``test_a_returned_view_of_a_padded_addmm``)."""

ADDMM_ROW_BIAS = """
func.func @f(%b: tensor<64x1001xf32>, %x: tensor<64x32xf32>, %w: tensor<32x1001xf32>) -> tensor<64x1001xf32> {
  %0 = aten.addmm.default(%b, %x, %w) : (tensor<64x1001xf32>, tensor<64x32xf32>, tensor<32x1001xf32>) -> tensor<64x1001xf32>
  func.return %0 : tensor<64x1001xf32>
}
"""

ADDMM_ROW_BIAS_PADDED = """
func.func @f(%b: tensor<64x1001xf32>, %x: tensor<64x32xf32>, %w: tensor<32x1001xf32>) -> tensor<64x1001xf32> {
  %padded = aten.constant_pad_nd.default(%w, pad = [0, 3]) : (tensor<32x1001xf32>) -> tensor<32x1004xf32>
  %mm_padded = aten.mm.default(%x, %padded) : (tensor<64x32xf32>, tensor<32x1004xf32>) -> tensor<64x1004xf32>
  %sliced = aten.slice.Tensor(%mm_padded, dim = 1, start = 0, end = 1001) : (tensor<64x1004xf32>) -> tensor<64x1001xf32>
  %0 = aten.add.Tensor(%sliced, %b) : (tensor<64x1001xf32>, tensor<64x1001xf32>) -> tensor<64x1001xf32>
  func.return %0 : tensor<64x1001xf32>
}
"""
"""A bias that is no vector: added to the slice, which writes the contiguous result."""


def test_registered_and_in_the_default_pipeline() -> None:
    assert default_registry().get_pass("pad-mm") is PadMmPass
    assert "pad-mm" in DEFAULT_PIPELINE.split(",")


def test_misaligned_n_is_padded_and_sliced() -> None:
    assert_pass_output(PadMmPass(force=True), N_MISALIGNED, N_PADDED)
    before, after = run_pass(PadMmPass(force=True), N_MISALIGNED)
    assert_same_semantics(before, after)


def test_misaligned_k_pads_both_operands() -> None:
    text = """
    func.func @f(%x: tensor<64x30xf32>, %w: tensor<30x1000xf32>) -> tensor<64x1000xf32> {
      %0 = aten.mm.default(%x, %w) : (tensor<64x30xf32>, tensor<30x1000xf32>) -> tensor<64x1000xf32>
      func.return %0 : tensor<64x1000xf32>
    }
    """
    before, after = run_pass(PadMmPass(force=True), text)
    out = printed(after)
    assert out.count("aten.constant_pad_nd.default") == 2
    assert "pad = [0, 2]" in out  # x: two zero columns
    assert "pad = [0, 0, 0, 2]" in out  # w: two zero rows
    assert "aten.slice" not in out  # N is aligned
    assert_same_semantics(before, after)


def test_bfloat16_needs_a_larger_product() -> None:
    """16-bit products reach the tensor cores' balance (100 FLOP/byte) only when large."""
    small = N_MISALIGNED.replace("f32", "bf16")
    assert_pass_output(PadMmPass(force=True), small, small)
    large = small.replace("64x", "4096x").replace("x32x", "x768x").replace("<32x", "<768x")
    assert "aten.constant_pad_nd" in printed(run_pass(PadMmPass(force=True), large)[1])


def test_bmm_is_padded() -> None:
    text = """
    func.func @f(%x: tensor<4x64x33xf32>, %w: tensor<4x33x257xf32>) -> tensor<4x64x257xf32> {
      %0 = aten.bmm.default(%x, %w) : (tensor<4x64x33xf32>, tensor<4x33x257xf32>) -> tensor<4x64x257xf32>
      func.return %0 : tensor<4x64x257xf32>
    }
    """
    before, after = run_pass(PadMmPass(force=True), text)
    out = printed(after)
    assert "tensor<4x64x260xf32>" in out
    assert "tensor<4x36x260xf32>" in out
    assert "aten.slice.Tensor" in out
    assert_same_semantics(before, after)


def test_misaligned_m_of_a_transposed_operand_is_padded() -> None:
    """A weight gradient ``g.t() @ h`` (GPT-2's LM head: ``M = 50257``) reads ``a`` with
    ``M`` as its leading dimension: ``a`` gets zero rows, the result is sliced back.
    Left alone, cuBLAS ran it in an ``align1`` kernel (2.2 ms of a 6.4 ms step)."""
    text = """
    func.func @f(%g: tensor<64x1001xf32>, %h: tensor<64x32xf32>) -> tensor<1001x32xf32> {
      %t = aten.permute.default(%g, dims = [1, 0]) : (tensor<64x1001xf32>) -> tensor<1001x64xf32>
      %0 = aten.mm.default(%t, %h) : (tensor<1001x64xf32>, tensor<64x32xf32>) -> tensor<1001x32xf32>
      func.return %0 : tensor<1001x32xf32>
    }
    """
    before, after = run_pass(PadMmPass(force=True), text)
    out = printed(after)
    # three zero rows of the transposed operand: three zero columns of its source, then
    # the transpose again (a contiguous copy, not a transposing one)
    assert "aten.constant_pad_nd.default(%g, pad = [0, 3])" in out
    assert "(tensor<64x1004xf32>) -> tensor<1004x64xf32>" in out
    assert "tensor<1004x32xf32>" in out
    assert "aten.slice.Tensor(%mm_padded, start = 0, end = 1001)" in out  # dim 0
    assert "aten.clone" not in out  # the first rows of a row-major result: contiguous
    assert_same_semantics(before, after)
    # The same product with a row-major ``a`` (leading dimension K = 64): not padded.
    row_major = """
    func.func @f(%a: tensor<1001x64xf32>, %h: tensor<64x32xf32>) -> tensor<1001x32xf32> {
      %0 = aten.mm.default(%a, %h) : (tensor<1001x64xf32>, tensor<64x32xf32>) -> tensor<1001x32xf32>
      func.return %0 : tensor<1001x32xf32>
    }
    """
    assert_pass_output(PadMmPass(force=True), row_major, row_major)


def test_a_transposed_weight_is_padded_in_its_own_layout() -> None:
    """A linear layer's ``x @ w.t()`` with ``N`` misaligned (GPT-2's LM head): the weight
    ``[N, K]`` gets zero rows and is transposed again, so the product reads it as a
    transpose (``TN``), as Inductor pads it, instead of a transposed contiguous copy."""
    text = """
    func.func @f(%x: tensor<64x32xf32>, %w: tensor<1001x32xf32>) -> tensor<64x1001xf32> {
      %t = aten.t.default(%w) : (tensor<1001x32xf32>) -> tensor<32x1001xf32>
      %0 = aten.mm.default(%x, %t) : (tensor<64x32xf32>, tensor<32x1001xf32>) -> tensor<64x1001xf32>
      func.return %0 : tensor<64x1001xf32>
    }
    """
    before, after = run_pass(PadMmPass(force=True), text)
    out = printed(after)
    assert "aten.constant_pad_nd.default(%w, pad = [0, 0, 0, 3])" in out
    assert "(tensor<1004x32xf32>) -> tensor<32x1004xf32>" in out
    assert_same_semantics(before, after)


def test_bmm_with_a_transposed_operand_pads_m_and_n() -> None:
    text = """
    func.func @f(%g: tensor<4x33x65xf32>, %w: tensor<4x33x257xf32>) -> tensor<4x65x257xf32> {
      %t = aten.transpose.int(%g, dim0 = -1, dim1 = -2) : (tensor<4x33x65xf32>) -> tensor<4x65x33xf32>
      %0 = aten.bmm.default(%t, %w) : (tensor<4x65x33xf32>, tensor<4x33x257xf32>) -> tensor<4x65x257xf32>
      func.return %0 : tensor<4x65x257xf32>
    }
    """
    before, after = run_pass(PadMmPass(force=True), text)
    out = printed(after)
    assert "tensor<4x68x260xf32>" in out
    assert out.count("aten.slice.Tensor") == 2
    assert_same_semantics(before, after)


@pytest.mark.parametrize(
    ("text", "expected"),
    [(ADDMM_MISALIGNED, ADDMM_PADDED), (ADDMM_ROW_BIAS, ADDMM_ROW_BIAS_PADDED)],
    ids=["bias_vector", "bias_matrix"],
)
def test_addmm_is_padded_with_its_bias(text: str, expected: str) -> None:
    assert_pass_output(PadMmPass(force=True), text, expected)
    before, after = run_pass(PadMmPass(force=True), text)
    assert_same_semantics(before, after)


def test_a_returned_view_of_a_padded_addmm_is_not_copied() -> None:
    """BERT's LM head: ``addmm(b, x, w.t()).view(8, 512, 30522)`` returned. The bias goes
    into the padded ``addmm`` and the view of its slice is returned (no pass of its own
    over the logits: 167 us of a 2.2 ms bfloat16 call on an H100 before)."""
    text = """
    func.func @f(%b: tensor<1001xf32>, %x: tensor<64x32xf32>, %w: tensor<32x1001xf32>) -> tensor<2x32x1001xf32>
        attributes {kiln.outputs = "(0,)"} {
      %0 = aten.addmm.default(%b, %x, %w) : (tensor<1001xf32>, tensor<64x32xf32>, tensor<32x1001xf32>) -> tensor<64x1001xf32>
      %1 = aten.view.default(%0, size = [2, 32, 1001]) : (tensor<64x1001xf32>) -> tensor<2x32x1001xf32>
      func.return %1 : tensor<2x32x1001xf32>
    }
    """
    before, after = run_pass(PadMmPass(force=True), text)
    out = printed(after)
    assert "aten.clone" not in out
    assert "aten.add.Tensor" not in out
    assert "func.return %mm_padded" in out
    b, x, w = torch.randn(1001), torch.randn(64, 32), torch.randn(32, 1001)
    (want,), (have,) = structured_outputs(before, [b, x, w]), structured_outputs(after, [b, x, w])
    assert isinstance(want, torch.Tensor)
    assert isinstance(have, torch.Tensor)
    torch.testing.assert_close(have, want)
    assert have.stride() == (32 * 1004, 1004, 1)


def test_addmm_with_a_row_bias_and_a_misaligned_k() -> None:
    text = """
    func.func @f(%b: tensor<64x1001xf32>, %x: tensor<64x30xf32>, %w: tensor<30x1001xf32>) -> tensor<64x1001xf32> {
      %0 = aten.addmm.default(%b, %x, %w) : (tensor<64x1001xf32>, tensor<64x30xf32>, tensor<30x1001xf32>) -> tensor<64x1001xf32>
      func.return %0 : tensor<64x1001xf32>
    }
    """
    before, after = run_pass(PadMmPass(force=True), text)
    out = printed(after)
    assert "aten.addmm" not in out
    assert "tensor<64x32xf32>" in out
    assert "tensor<32x1004xf32>" in out
    assert_same_semantics(before, after)


@pytest.mark.parametrize(
    "text",
    [
        # addmm scaling its bias or product: left to ATen
        ADDMM_MISALIGNED.replace("(%b, %x, %w)", "(%b, %x, %w, beta = 2)"),
        ADDMM_MISALIGNED.replace("(%b, %x, %w)", "(%b, %x, %w, alpha = 0.5)"),
        # aligned already
        N_MISALIGNED.replace("1001", "1004"),
        # memory bound: a skinny product pays more for the copy than it gains
        N_MISALIGNED.replace("64x", "1x"),
        # an integer product: cuBLAS has no tensor-core path to gain
        N_MISALIGNED.replace("f32", "i64"),
    ],
    ids=["addmm_beta", "addmm_alpha", "aligned", "memory_bound", "integer"],
)
def test_left_alone(text: str) -> None:
    assert_pass_output(PadMmPass(force=True), text, text)


def test_only_on_cuda_unless_forced() -> None:
    assert_pass_output(PadMmPass(), N_MISALIGNED, N_MISALIGNED)
    on_gpu = (
        'builtin.module attributes {"kiln.device" = "cuda:0", "kiln.tf32_matmul"} {'
        + N_MISALIGNED
        + "}"
    )
    assert "aten.constant_pad_nd" in printed(run_pass(PadMmPass(), on_gpu)[1])


def test_float32_is_padded_only_in_tf32() -> None:
    """Without TF32, cuBLAS runs float32 products in FFMA kernels, aligned or not: padding
    would only add copies (ViT-small's training step on the H200). 16-bit products are
    padded either way."""
    full_fp32 = 'builtin.module attributes {"kiln.device" = "cuda:0"} {' + N_MISALIGNED + "}"
    never = PadMmPass(measure="never")  # the rules alone, on a machine with a GPU too
    assert "aten.constant_pad_nd" not in printed(run_pass(never, full_fp32)[1])
    large_bf16 = (
        N_MISALIGNED.replace("f32", "bf16")
        .replace("64x", "4096x")
        .replace("x32x", "x768x")
        .replace("<32x", "<768x")
    )
    on_gpu = 'builtin.module attributes {"kiln.device" = "cuda:0"} {' + large_bf16 + "}"
    assert "aten.constant_pad_nd" in printed(run_pass(PadMmPass(), on_gpu)[1])


def test_the_driver_marks_tf32_programs_for_the_gpu_only() -> None:
    from kiln.compiler import _DriverMarks  # pyright: ignore[reportPrivateUsage]
    from kiln.dialects.aten.function_attrs import tf32_matmul

    for marks, expected in (
        (_DriverMarks(torch.device("cuda:0"), None, tf32_matmul=True), True),
        (_DriverMarks(torch.device("cuda:0"), None), False),
    ):
        module = ModuleOp([])
        marks.apply(module)
        assert tf32_matmul(module) is expected
        assert f"tf32 matmul {expected}" in marks.key_context()


def test_tf32_follows_torchs_float32_matmul_precision() -> None:
    from kiln.compiler import runs_tf32_matmul

    saved = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("high")
        assert runs_tf32_matmul(torch.device("cuda:0"))
        assert not runs_tf32_matmul(None)  # the CPU: no tensor cores to align for
        torch.set_float32_matmul_precision("highest")
        assert not runs_tf32_matmul(torch.device("cuda:0"))
    finally:
        torch.set_float32_matmul_precision(saved)


def test_end_to_end_numbers_and_output_strides() -> None:
    """Compiled with the pass forced on the CPU: eager's values and eager's (contiguous)
    output strides, although the product was computed into a padded buffer."""
    pipeline = DEFAULT_PIPELINE.replace("pad-mm", "pad-mm{force=true}")

    def f(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = x @ w.t()  # the LM-head shape: N odd, the weight transposed
        grad_w = y.t() @ x  # its weight gradient's shape: M odd, ``a`` transposed
        logits = torch.nn.functional.linear(x, w, b)  # a returned addmm (BERT's LM head)
        return y, torch.relu(y) * 2, grad_w, logits

    x, w, b = torch.randn(64, 32), torch.randn(1001, 32), torch.randn(1001)
    compiled = kiln.compile(f, pipeline=pipeline)
    got, expected = compiled(x, w, b), f(x, w, b)
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e)
        assert g.stride() == e.stride()


VIEW_RETURNED = """
func.func @f(%x: tensor<64x32xf32>, %w: tensor<32x1001xf32>) -> (tensor<2x32x1001xf32>, tensor<4x16x1001xf32>)
    attributes {kiln.outputs = "(0, alias('aten::view.default', 2, \\"{'size': [4, 16, 1001]}\\"), 1)"} {
  %0 = aten.mm.default(%x, %w) : (tensor<64x32xf32>, tensor<32x1001xf32>) -> tensor<64x1001xf32>
  %1 = aten.view.default(%0, size = [2, 32, 1001]) : (tensor<64x1001xf32>) -> tensor<2x32x1001xf32>
  %2 = aten.mul.Scalar(%0, other = 2) : (tensor<64x1001xf32>) -> tensor<64x1001xf32>
  func.return %1, %2, %0 : tensor<2x32x1001xf32>, tensor<64x1001xf32>, tensor<64x1001xf32>
}
"""
"""GPT-2's logits (``mm(...).view(8, 512, 50257)``, returned as a view: result 0) and
a product the caller sees only through a view (``output-layout``'s alias base: result 2)."""


def test_a_returned_view_of_a_padded_product_is_not_copied() -> None:
    """Eager returns a view of the product: kiln returns the padded product, the slice and
    view replayed on it by ``kiln.outputs`` (Inductor's rule: a view output keeps eager's
    stride order, not its exact strides), not a copy of the whole product out of the
    padded buffer (217 us of GPT-2 large's 1.37 ms bfloat16 call on the H200). Eager's
    values; rows of the padded length."""
    before, after = run_pass(PadMmPass(force=True), VIEW_RETURNED)
    out = printed(after)
    assert "aten.clone" not in out
    assert "func.return %mm_padded, %1, %mm_padded" in out
    (func,) = [op for op in after.ops if isinstance(op, FuncOp)]
    assert func.attributes["kiln.outputs"] == StringAttr(
        "(alias('aten::view.default', alias('aten::slice.Tensor', 0, "
        "\"{'dim': 1, 'start': 0, 'end': 1001}\"), \"{'size': [2, 32, 1001]}\"), "
        "alias('aten::view.default', alias('aten::slice.Tensor', 2, "
        "\"{'dim': 1, 'start': 0, 'end': 1001}\"), \"{'size': [4, 16, 1001]}\"), 1)"
    )
    x, w = torch.randn(64, 32), torch.randn(32, 1001)
    expected, got = structured_outputs(before, [x, w]), structured_outputs(after, [x, w])
    for want, have in zip(expected, got, strict=True):
        assert isinstance(want, torch.Tensor)
        assert isinstance(have, torch.Tensor)
        torch.testing.assert_close(have, want)
    assert got[0].stride() == (32 * 1004, 1004, 1)  # pyright: ignore[reportAttributeAccessIssue]
    assert got[2].stride() == (1001, 1)  # the product itself keeps eager's strides  # pyright: ignore[reportAttributeAccessIssue]


def test_a_view_that_cannot_see_the_padded_rows_is_copied() -> None:
    """``mm(...).view(-1)`` cannot be a view of the padded product's slice (its rows are
    not adjacent): it stays a copy with eager's strides."""
    text = """
    func.func @f(%x: tensor<64x32xf32>, %w: tensor<32x1001xf32>) -> tensor<64064xf32>
        attributes {kiln.outputs = "(0,)"} {
      %0 = aten.mm.default(%x, %w) : (tensor<64x32xf32>, tensor<32x1001xf32>) -> tensor<64x1001xf32>
      %1 = aten.view.default(%0, size = [-1]) : (tensor<64x1001xf32>) -> tensor<64064xf32>
      func.return %1 : tensor<64064xf32>
    }
    """
    before, after = run_pass(PadMmPass(force=True), text)
    assert 'attributes {kiln.outputs = "(0,)"}' in printed(after)
    assert_same_semantics(before, after)


def test_end_to_end_a_returned_view_of_a_padded_product() -> None:
    """Compiled with the pass forced on the CPU: the view of the product comes back in
    the padded buffer, with eager's values and stride order; where another returned view
    cannot see the padded rows (``view(-1)``), the product is copied out and every view
    has eager's strides."""
    pipeline = DEFAULT_PIPELINE.replace("pad-mm", "pad-mm{force=true}")

    def logits(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = x @ w.t()
        return y.view(2, 32, 1001), (y * 2).view(4, 16, 1001)

    def flattened(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = x @ w.t()
        return y.view(2, 32, 1001), y.view(-1)

    x, w = torch.randn(64, 32), torch.randn(1001, 32)
    for f, padded in ((logits, True), (flattened, False)):
        compiled = kiln.compile(f, pipeline=pipeline)
        got, expected = compiled(x, w), f(x, w)
        for g, e in zip(got, expected, strict=True):
            torch.testing.assert_close(g, e)
        strides = [g.stride() for g in got]
        assert strides[0] == ((32 * 1004, 1004, 1) if padded else (32 * 1001, 1001, 1))
        assert strides[1:] == [e.stride() for e in expected[1:]]


CLASSIFIER_GRADIENT = """
builtin.module attributes {"kiln.device" = "cuda:0"} {
  func.func @f(%g: tensor<2x1000xf32>, %w: tensor<1000x1024xf32>) -> tensor<2x1024xf32> {
    %0 = aten.mm.default(%g, %w) : (tensor<2x1000xf32>, tensor<1000x1024xf32>) -> tensor<2x1024xf32>
    func.return %0 : tensor<2x1024xf32>
  }
}
"""
"""MobileNet-v3's classifier input gradient at batch 2 (float32, no TF32): no rule pads
it (memory bound, row-major ``a``), cuBLAS ran it in ``gemmSN_NN`` (16-21 us on an H100)
and with ``M = 4`` in a split-K kernel (5 us)."""


MNV3_PROBLEM = PaddingProblem(
    "float32", 0, 2, 1000, 1024, False, False, False, m_pad=2, k_pad=0, n_pad=0
)


def _listing(text: str, *keys: str) -> str:
    listed = ", ".join(f'"{k}"' for k in keys)
    return text.replace(
        '"kiln.device" = "cuda:0"', f'"kiln.device" = "cuda:0", "kiln.padded_products" = [{listed}]'
    )


def test_the_products_the_rules_leave_are_measured_and_padded_where_listed() -> None:
    module = parse(CLASSIFIER_GRADIENT)
    assert PadMmPass().to_measure(module) == [MNV3_PROBLEM]
    assert MNV3_PROBLEM.key() == "float32 2x1000x1024 NN pad m+2 k+0 n+0"
    # measured, not faster padded (not listed): left
    assert_pass_output(PadMmPass(), _listing(CLASSIFIER_GRADIENT), _listing(CLASSIFIER_GRADIENT))
    listed = _listing(CLASSIFIER_GRADIENT, MNV3_PROBLEM.key())
    before, after = run_pass(PadMmPass(), listed)
    out = printed(after)
    # M of a row-major ``a`` too (cuBLAS picks its kernel by M): two zero rows, sliced back
    assert "aten.constant_pad_nd.default(%g, pad = [0, 0, 0, 2])" in out
    assert "aten.mm.default(%padded, %w) : (tensor<4x1000xf32>, tensor<1000x1024xf32>)" in out
    assert "aten.slice.Tensor(%mm_padded, start = 0, end = 2)" in out
    assert "aten.clone" not in out
    # integers: exact sums in any order (the padded product's blocking differs)
    integers: dict[str, ArgsFactory] = {
        "f": lambda: [
            torch.randint(-3, 4, (2, 1000)).float(),
            torch.randint(-3, 4, (1000, 1024)).float(),
        ]
    }
    assert_same_semantics(before, after, integers)
    # listed, but the option says never: left
    assert_pass_output(PadMmPass(measure="never"), listed, listed)


def test_nothing_is_measured_where_the_rules_decide_or_off_cuda_or_under_never() -> None:
    on_gpu_tf32 = (
        'builtin.module attributes {"kiln.device" = "cuda:0", "kiln.tf32_matmul"} {'
        + N_MISALIGNED
        + "}"
    )
    assert PadMmPass().to_measure(parse(on_gpu_tf32)) == []  # the rules pad it
    assert PadMmPass(measure="never").to_measure(parse(CLASSIFIER_GRADIENT)) == []
    assert PadMmPass(force=True).to_measure(parse(CLASSIFIER_GRADIENT)) == []
    off_gpu = CLASSIFIER_GRADIENT.replace('"kiln.device" = "cuda:0"', '"kiln.device" = "cpu"')
    assert PadMmPass().to_measure(parse(off_gpu)) == []
    aligned = CLASSIFIER_GRADIENT.replace("2x", "4x")
    assert PadMmPass().to_measure(parse(aligned)) == []
    with pytest.raises(ValueError, match="measure='sometimes'"):
        PadMmPass(measure="sometimes").to_measure(parse(CLASSIFIER_GRADIENT))


def test_a_measured_addmm_and_bmm_describe_their_bias_layout_and_batch() -> None:
    text = """
    builtin.module attributes {"kiln.device" = "cuda:0"} {
      func.func @f(%b: tensor<1000xf32>, %x: tensor<2x1024xf32>, %w: tensor<1000x1024xf32>,
                   %p: tensor<3x5x7xf32>, %q: tensor<3x7x9xf32>) -> (tensor<2x1000xf32>, tensor<3x5x9xf32>) {
        %t = aten.t.default(%w) : (tensor<1000x1024xf32>) -> tensor<1024x1000xf32>
        %0 = aten.addmm.default(%b, %x, %t) : (tensor<1000xf32>, tensor<2x1024xf32>, tensor<1024x1000xf32>) -> tensor<2x1000xf32>
        %1 = aten.bmm.default(%p, %q) : (tensor<3x5x7xf32>, tensor<3x7x9xf32>) -> tensor<3x5x9xf32>
        %2 = aten.bmm.default(%p, %q) : (tensor<3x5x7xf32>, tensor<3x7x9xf32>) -> tensor<3x5x9xf32>
        func.return %0, %1 : tensor<2x1000xf32>, tensor<3x5x9xf32>
      }
    }
    """
    addmm = PaddingProblem("float32", 0, 2, 1024, 1000, False, True, True, 2, 0, 0)
    bmm = PaddingProblem("float32", 3, 5, 7, 9, False, False, False, 3, 1, 3)
    assert PadMmPass().to_measure(parse(text)) == [addmm, bmm]  # each once
    assert addmm.key() == "float32 2x1024x1000 NT bias pad m+2 k+0 n+0"
    assert bmm.key() == "float32 3x5x7x9 NN pad m+3 k+1 n+3"


def test_the_driver_measures_before_pad_mm_and_lists_what_pays(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kiln.backends.triton import matmul_padding
    from kiln.compiler import _measure_padding  # pyright: ignore[reportPrivateUsage]
    from kiln.dialects.aten.padded_products import padded_products

    asked: list[tuple[PaddingProblem, str]] = []

    def pays(problem: PaddingProblem, device: str) -> bool:
        asked.append((problem, device))
        return True

    module = parse(CLASSIFIER_GRADIENT)
    monkeypatch.setattr(matmul_padding, "can_measure", lambda: False)
    _measure_padding(PadMmPass(), module)  # no GPU here: nothing listed
    assert padded_products(module) == frozenset()
    monkeypatch.setattr(matmul_padding, "can_measure", lambda: True)
    monkeypatch.setattr(matmul_padding, "padding_pays", pays)
    _measure_padding(PadMmPass(), module)
    assert asked == [(MNV3_PROBLEM, "cuda:0")]
    assert padded_products(module) == {MNV3_PROBLEM.key()}
    assert "aten.constant_pad_nd" in printed(run_pass(PadMmPass(), str(module))[1])

    def fails(problem: PaddingProblem, device: str) -> bool:
        raise RuntimeError("CUDA error: out of memory")

    fresh = parse(CLASSIFIER_GRADIENT)
    monkeypatch.setattr(matmul_padding, "padding_pays", fails)
    with pytest.warns(RuntimeWarning, match="could not time 1 matrix products on cuda:0"):
        _measure_padding(PadMmPass(), fresh)  # the program still compiles, unpadded
    assert padded_products(fresh) == frozenset()


@pytest.mark.parametrize(
    "problem",
    [
        PaddingProblem("float64", 0, 2, 1000, 1024, False, False, False, 2, 0, 0),
        PaddingProblem("float64", 0, 6, 30, 1001, True, True, True, 2, 2, 3),
        PaddingProblem("float64", 0, 2, 1024, 1001, False, True, True, 0, 0, 3),
        PaddingProblem("float64", 0, 5, 30, 1001, False, False, True, 3, 2, 3),
        PaddingProblem("float64", 3, 5, 7, 9, True, False, False, 3, 1, 3),
    ],
    ids=lambda p: p.key(),
)
def test_the_timed_padded_form_computes_the_product(problem: PaddingProblem) -> None:
    """What the GPU times as the padded form is the same product as the original (in
    float64 here: the padded product sums in another order)."""
    from kiln.backends.triton.matmul_padding import _programs  # pyright: ignore[reportPrivateUsage]

    torch.manual_seed(0)
    original, padded = _programs(problem, "cpu")
    want, have = original(), padded()
    assert have.shape == want.shape
    torch.testing.assert_close(have, want)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="times cuBLAS on a GPU")
def test_a_verdict_is_measured_once_and_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kiln.backends.triton import matmul_padding

    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    problem = PaddingProblem("float32", 0, 2, 1000, 1024, False, False, False, 2, 0, 0)
    timing = matmul_padding.padding_timing(problem)
    assert timing.original_ms > 0
    assert timing.padded_ms > 0
    (stored,) = (tmp_path / "matmul-padding").glob("*.json")
    matmul_padding._measured.cache_clear()  # pyright: ignore[reportPrivateUsage]
    monkeypatch.setattr(matmul_padding, "_measured", lambda *_: pytest.fail("measured again"))
    assert matmul_padding.padding_timing(problem) == timing
    assert stored.exists()

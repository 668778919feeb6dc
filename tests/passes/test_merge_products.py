"""``merge-products``: IR in / IR out, the same numbers before and after (aten
interpreter), the products it must leave alone, and a training step through
``torch.compile`` against eager."""

from __future__ import annotations

import pytest
import torch
from pass_checks import (
    assert_pass_output,
    assert_same_semantics,
    printed,
    run_pass,
    structured_outputs,
)
from product_groups import Attention, count_merges
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.dialects.func import FuncOp

from kiln.compiler import DEFAULT_PIPELINE
from kiln.frontends.dynamo import kiln_backend
from kiln.passes.merge_products import MergeProductsPass
from kiln.passes.pad_mm import PadMmPass
from kiln.registry import make_context

GPU = MergeProductsPass(gpu=True)


def _module(body: str, device: str = "cuda:0") -> str:
    return f'builtin.module attributes {{"kiln.device" = "{device}"}} {{{body}}}'


# Query, key and value projections of one input (a linear layer's weight transposed by
# permute or t), the query read by a relu before the value's product.
PROJECTIONS = """
func.func @qkv(%x: tensor<8x16xf32>, %wq: tensor<16x16xf32>, %wk: tensor<4x16xf32>, %wv: tensor<4x16xf32>) -> (tensor<8x16xf32>, tensor<8x4xf32>) {
  %tq = aten.permute.default(%wq, dims = [1, 0]) : (tensor<16x16xf32>) -> tensor<16x16xf32>
  %q = aten.mm.default(%x, %tq) : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %rq = aten.relu.default(%q) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %tk = aten.permute.default(%wk, dims = [1, 0]) : (tensor<4x16xf32>) -> tensor<16x4xf32>
  %k = aten.mm.default(%x, %tk) : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %tv = aten.t.default(%wv) : (tensor<4x16xf32>) -> tensor<16x4xf32>
  %v = aten.mm.default(%x, %tv) : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %kv = aten.add.Tensor(%k, %v) : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  %sq = aten.mul.Tensor(%rq, %rq) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  func.return %sq, %kv : tensor<8x16xf32>, tensor<8x4xf32>
}
"""


def test_projections_of_one_input_become_one_product() -> None:
    # The relu of the query's slice moves after the merged product (it stood between).
    assert_pass_output(
        GPU,
        _module(PROJECTIONS),
        _module("""
func.func @qkv(%x: tensor<8x16xf32>, %wq: tensor<16x16xf32>, %wk: tensor<4x16xf32>, %wv: tensor<4x16xf32>) -> (tensor<8x16xf32>, tensor<8x4xf32>) {
  %merged_source = aten.cat.default(tensors = [%wq, %wk, %wv]) : (tensor<16x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<24x16xf32>
  %merged_operand = aten.permute.default(%merged_source, dims = [1, 0]) : (tensor<24x16xf32>) -> tensor<16x24xf32>
  %merged = aten.mm.default(%x, %merged_operand) : (tensor<8x16xf32>, tensor<16x24xf32>) -> tensor<8x24xf32>
  %q = aten.slice.Tensor(%merged, dim = 1, start = 0, end = 16) : (tensor<8x24xf32>) -> tensor<8x16xf32>
  %k = aten.slice.Tensor(%merged, dim = 1, start = 16, end = 20) : (tensor<8x24xf32>) -> tensor<8x4xf32>
  %v = aten.slice.Tensor(%merged, dim = 1, start = 20, end = 24) : (tensor<8x24xf32>) -> tensor<8x4xf32>
  %rq = aten.relu.default(%q) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %kv = aten.add.Tensor(%k, %v) : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  %sq = aten.mul.Tensor(%rq, %rq) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  func.return %sq, %kv : tensor<8x16xf32>, tensor<8x4xf32>
}
"""),
    )
    assert_same_semantics(*run_pass(GPU, _module(PROJECTIONS)))


# Weight gradients of two projections of one input (shared right operand), from
# gradients given untransposed and transposed, and a product of untransposed operands.
GRADIENTS = """
func.func @grads(%x: tensor<8x16xf32>, %ga: tensor<8x6xf32>, %gb: tensor<8x10xf32>, %c: tensor<3x8xf32>) -> (tensor<6x16xf32>, tensor<3x16xf32>) {
  %ta = aten.permute.default(%ga, dims = [1, 0]) : (tensor<8x6xf32>) -> tensor<6x8xf32>
  %da = aten.mm.default(%ta, %x) : (tensor<6x8xf32>, tensor<8x16xf32>) -> tensor<6x16xf32>
  %tb = aten.permute.default(%gb, dims = [1, 0]) : (tensor<8x10xf32>) -> tensor<10x8xf32>
  %db = aten.mm.default(%tb, %x) : (tensor<10x8xf32>, tensor<8x16xf32>) -> tensor<10x16xf32>
  %dc = aten.mm.default(%c, %x) : (tensor<3x8xf32>, tensor<8x16xf32>) -> tensor<3x16xf32>
  %s = aten.sum.dim_IntList(%db, dim = [0], keepdim = true) : (tensor<10x16xf32>) -> tensor<1x16xf32>
  %a2 = aten.mul.Tensor(%da, %s) : (tensor<6x16xf32>, tensor<1x16xf32>) -> tensor<6x16xf32>
  %c2 = aten.add.Tensor(%dc, %s) : (tensor<3x16xf32>, tensor<1x16xf32>) -> tensor<3x16xf32>
  func.return %a2, %c2 : tensor<6x16xf32>, tensor<3x16xf32>
}
"""


def test_products_sharing_their_right_operand_merge_rows() -> None:
    before, after = run_pass(GPU, _module(GRADIENTS))
    text = printed(after)
    assert text.count("aten.mm.default") == 1
    # Mixed transposed and plain left operands: their rows concatenated as they are.
    assert "aten.cat.default(tensors = [%ta, %tb, %c])" in text
    assert "-> tensor<19x16xf32>" in text
    assert_same_semantics(before, after)


def test_transposed_left_operands_concatenate_untransposed() -> None:
    body = GRADIENTS.replace("%dc = aten.mm.default(%c, %x)", "%dc = aten.mm.default(%c, %ga2)")
    body = body.replace("%c: tensor<3x8xf32>)", "%c: tensor<3x8xf32>, %ga2: tensor<8x16xf32>)")
    before, after = run_pass(GPU, _module(body))
    text = printed(after)
    # The two gradients side by side ([8, 16] row-major), the product reads it transposed.
    assert "aten.cat.default(tensors = [%ga, %gb], dim = 1)" in text
    assert text.count("aten.mm.default") == 2
    assert_same_semantics(before, after)


def test_dependent_products_are_left_alone() -> None:
    # The second product's right operand is computed from the first product's result.
    body = """
func.func @chain(%x: tensor<8x8xf32>, %w: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %a = aten.mm.default(%x, %w) : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %r = aten.relu.default(%a) : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %b = aten.mm.default(%x, %r) : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %s = aten.add.Tensor(%a, %b) : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  func.return %s : tensor<8x8xf32>
}
"""
    _, after = run_pass(GPU, _module(body))
    assert printed(after).count("aten.mm.default") == 2
    assert "aten.cat" not in printed(after)


def test_returned_products_sharing_their_left_operand_are_left_alone() -> None:
    # A returned column slice would be copied into a buffer of its own (eager's
    # strides): no gain.
    body = """
func.func @out(%x: tensor<8x16xf32>, %a: tensor<16x4xf32>, %b: tensor<16x4xf32>) -> (tensor<8x4xf32>, tensor<2x4x4xf32>) {
  %p = aten.mm.default(%x, %a) : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %q = aten.mm.default(%x, %b) : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %v = aten.view.default(%q, size = [2, 4, 4]) : (tensor<8x4xf32>) -> tensor<2x4x4xf32>
  func.return %p, %v : tensor<8x4xf32>, tensor<2x4x4xf32>
}
"""
    _, after = run_pass(GPU, _module(body))
    assert printed(after).count("aten.mm.default") == 2


# A backward's weight gradients: products of one input with two output gradients,
# returned (a row slice of the merged product has eager's strides: returned as the
# merged product seen through the slice, no copy).
WEIGHT_GRADIENTS = """
func.func @f(%x: tensor<8x16xf32>, %ga: tensor<8x6xf32>, %gb: tensor<8x10xf32>) -> (tensor<6x16xf32>, tensor<10x16xf32>)
    attributes {kiln.outputs = "(0, 1)"} {
  %ta = aten.t.default(%ga) : (tensor<8x6xf32>) -> tensor<6x8xf32>
  %da = aten.mm.default(%ta, %x) : (tensor<6x8xf32>, tensor<8x16xf32>) -> tensor<6x16xf32>
  %tb = aten.t.default(%gb) : (tensor<8x10xf32>) -> tensor<10x8xf32>
  %db = aten.mm.default(%tb, %x) : (tensor<10x8xf32>, tensor<8x16xf32>) -> tensor<10x16xf32>
  func.return %da, %db : tensor<6x16xf32>, tensor<10x16xf32>
}
"""


def _assert_returned_as_before(
    before: ModuleOp, after: ModuleOp, inputs: list[object], **tolerance: float
) -> None:
    """What the caller sees (values and strides) is what it saw before the pass."""
    expected, got = structured_outputs(before, inputs), structured_outputs(after, inputs)
    for want, have in zip(expected, got, strict=True):
        assert isinstance(want, torch.Tensor)
        assert isinstance(have, torch.Tensor)
        torch.testing.assert_close(have.float(), want.float(), **tolerance)
        assert have.stride() == want.stride()


def test_returned_weight_gradients_are_slices_of_one_product() -> None:
    before, after = run_pass(GPU, _module(WEIGHT_GRADIENTS))
    text = printed(after)
    assert text.count("aten.mm.default") == 1
    assert "func.return %merged, %merged" in text
    (func,) = [op for op in after.ops if isinstance(op, FuncOp)]
    assert func.attributes["kiln.outputs"] == StringAttr(
        "(alias('aten::slice.Tensor', 0, \"{'start': 0, 'end': 6}\"), "
        "alias('aten::slice.Tensor', 1, \"{'start': 6, 'end': 16}\"))"
    )
    inputs: list[object] = [torch.randn(8, 16), torch.randn(8, 6), torch.randn(8, 10)]
    _assert_returned_as_before(before, after, inputs)


def test_returned_weight_gradients_with_columns_pad_mm_pads_stay_apart() -> None:
    # pad-mm would pad the merged product's 1001 columns to 1008 (bfloat16): each
    # returned slice would have rows of 1008, not eager's 1001.
    text = (
        WEIGHT_GRADIENTS.replace("8x16xf32", "512x1001xbf16")
        .replace("8x6xf32", "512x600xbf16")
        .replace("8x10xf32", "512x1100xbf16")
        .replace("6x8xf32", "600x512xbf16")
        .replace("10x8xf32", "1100x512xbf16")
        .replace("6x16xf32", "600x1001xbf16")
        .replace("10x16xf32", "1100x1001xbf16")
    )
    half = MergeProductsPass(half=True)
    _, after = run_pass(half, _module(text))
    assert printed(after).count("aten.mm.default") == 2
    # With 1008 columns: merged, and pad-mm pads only the merged product's rows.
    aligned = text.replace("x1001xbf16", "x1008xbf16")
    before, after = run_pass(half, _module(aligned))
    assert printed(after).count("aten.mm.default") == 1
    PadMmPass(force=True).apply(make_context(), after)
    inputs: list[object] = [torch.randn(512, 1008), torch.randn(512, 600), torch.randn(512, 1100)]
    inputs = [t.bfloat16() for t in inputs]  # pyright: ignore[reportAttributeAccessIssue]
    _assert_returned_as_before(before, after, inputs, rtol=2e-2, atol=0.5)


# A backward's input gradient: the sum of the output gradients' products with their
# weights (viewed 3-D), plus a residual term.
INPUT_GRADIENT = """
func.func @dx(%ga: tensor<8x6xf32>, %gb: tensor<8x10xf32>, %wa: tensor<6x16xf32>, %wb: tensor<10x16xf32>, %r: tensor<1x8x16xf32>) -> tensor<1x8x16xf32> {
  %pa = aten.mm.default(%ga, %wa) : (tensor<8x6xf32>, tensor<6x16xf32>) -> tensor<8x16xf32>
  %va = aten.view.default(%pa, size = [1, 8, 16]) : (tensor<8x16xf32>) -> tensor<1x8x16xf32>
  %pb = aten.mm.default(%gb, %wb) : (tensor<8x10xf32>, tensor<10x16xf32>) -> tensor<8x16xf32>
  %vb = aten.view.default(%pb, size = [1, 8, 16]) : (tensor<8x16xf32>) -> tensor<1x8x16xf32>
  %s = aten.add.Tensor(%va, %r) : (tensor<1x8x16xf32>, tensor<1x8x16xf32>) -> tensor<1x8x16xf32>
  %t = aten.add.Tensor(%s, %vb) : (tensor<1x8x16xf32>, tensor<1x8x16xf32>) -> tensor<1x8x16xf32>
  %u = aten.relu.default(%t) : (tensor<1x8x16xf32>) -> tensor<1x8x16xf32>
  func.return %u : tensor<1x8x16xf32>
}
"""


def test_a_sum_of_products_is_one_product_of_the_concatenations() -> None:
    before, after = run_pass(GPU, _module(INPUT_GRADIENT))
    text = printed(after)
    assert text.count("aten.mm.default") == 1
    assert "aten.cat.default(tensors = [%ga, %gb], dim = 1)" in text
    assert "aten.cat.default(tensors = [%wa, %wb])" in text
    assert text.count("aten.add.Tensor") == 1  # the residual
    assert_same_semantics(before, after)


def test_mixed_dtypes_are_left_alone() -> None:
    body = PROJECTIONS.replace("%wk: tensor<4x16xf32>", "%wk: tensor<4x16xbf16>")
    body = body.replace("(tensor<4x16xf32>) -> tensor<16x4xf32>\n  %k", "(tensor<4x16xbf16>) -> tensor<16x4xbf16>\n  %k", 1)  # fmt: skip
    body = body.replace(
        "%k = aten.mm.default(%x, %tk) : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>",
        "%xb = aten._to_copy.default(%x, dtype = bf16) : (tensor<8x16xf32>) -> tensor<8x16xbf16>\n"
        "  %kb = aten.mm.default(%xb, %tk) : (tensor<8x16xbf16>, tensor<16x4xbf16>) -> tensor<8x4xbf16>\n"
        "  %k = aten._to_copy.default(%kb, dtype = f32) : (tensor<8x4xbf16>) -> tensor<8x4xf32>",
    )
    before, after = run_pass(GPU, _module(body))
    text = printed(after)
    assert text.count("aten.mm.default") == 2  # q and v merged; k's product is bf16
    assert_same_semantics(before, after)


# BERT's projections: addmm with a bias vector each (unfuse-addmm leaves them: their
# results feed views, not pointwise ops).
BIASED_PROJECTIONS = """
func.func @qkv(%x: tensor<8x16xf32>, %wq: tensor<16x16xf32>, %bq: tensor<16xf32>, %wk: tensor<4x16xf32>, %bk: tensor<4xf32>) -> (tensor<8x16xf32>, tensor<2x4x4xf32>) {
  %tq = aten.t.default(%wq) : (tensor<16x16xf32>) -> tensor<16x16xf32>
  %q = aten.addmm.default(%bq, %x, %tq) : (tensor<16xf32>, tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %tk = aten.t.default(%wk) : (tensor<4x16xf32>) -> tensor<16x4xf32>
  %k = aten.addmm.default(%bk, %x, %tk) : (tensor<4xf32>, tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %vq = aten.mul.Tensor(%q, %q) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %vk = aten.view.default(%k, size = [2, 4, 4]) : (tensor<8x4xf32>) -> tensor<2x4x4xf32>
  %rk = aten.relu.default(%vk) : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  func.return %vq, %rk : tensor<8x16xf32>, tensor<2x4x4xf32>
}
"""


def test_biased_projections_of_one_input_become_one_addmm() -> None:
    before, after = run_pass(GPU, _module(BIASED_PROJECTIONS))
    text = printed(after)
    assert "aten.cat.default(tensors = [%bq, %bk])" in text
    assert "aten.cat.default(tensors = [%wq, %wk])" in text
    assert text.count("aten.addmm.default") == 1
    assert "aten.mm.default" not in text
    assert_same_semantics(before, after)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # a product without a bias: an mm and an addmm do not merge
        (
            "%k = aten.addmm.default(%bk, %x, %tk) : (tensor<4xf32>, tensor<8x16xf32>, tensor<16x4xf32>)",
            "%k = aten.mm.default(%x, %tk) : (tensor<8x16xf32>, tensor<16x4xf32>)",
        ),
        # a bias of the product's shape, not a vector
        (
            "%bk: tensor<4xf32>) ->",
            "%bk: tensor<8x4xf32>) ->",
        ),
        # beta = 2
        (
            "%k = aten.addmm.default(%bk, %x, %tk) : (tensor<4xf32>,",
            "%k = aten.addmm.default(%bk, %x, %tk, beta = 2) : (tensor<4xf32>,",
        ),
    ],
)
def test_addmm_merges_only_with_addmm_of_a_bias_vector(old: str, new: str) -> None:
    body = BIASED_PROJECTIONS.replace(old, new)
    if "8x4xf32>) ->" in new:
        body = body.replace("aten.addmm.default(%bk, %x, %tk) : (tensor<4xf32>,", "aten.addmm.default(%bk, %x, %tk) : (tensor<8x4xf32>,")  # fmt: skip
    assert body != BIASED_PROJECTIONS
    before, after = run_pass(GPU, _module(body))
    text = printed(after)
    assert "aten.cat" not in text
    assert_same_semantics(before, after)


def test_on_by_default_on_a_gpu_only() -> None:
    _, merged = run_pass(MergeProductsPass(), _module(PROJECTIONS))
    assert printed(merged).count("aten.mm.default") == 1
    _, off = run_pass(MergeProductsPass(gpu=False), _module(PROJECTIONS))
    assert printed(off).count("aten.mm.default") == 3
    # Half-precision products merge by default too (measured: less kernel time in bfloat16
    # training and inference); half=false keeps them apart.
    bf16 = PROJECTIONS.replace("f32>", "bf16>")
    _, merged = run_pass(MergeProductsPass(), _module(bf16))
    assert printed(merged).count("aten.mm.default") == 1
    _, untouched = run_pass(MergeProductsPass(half=False), _module(bf16))
    assert printed(untouched).count("aten.mm.default") == 3
    sums = INPUT_GRADIENT.replace("f32>", "bf16>")
    _, merged = run_pass(MergeProductsPass(), _module(sums))
    assert printed(merged).count("aten.mm.default") == 1
    _, untouched = run_pass(MergeProductsPass(half=False), _module(sums))
    assert printed(untouched).count("aten.mm.default") == 2
    _, cpu = run_pass(GPU, _module(PROJECTIONS, device="cpu"))
    assert printed(cpu).count("aten.mm.default") == 3
    _, merged = run_pass(MergeProductsPass(cpu=True), _module(PROJECTIONS, device="cpu"))
    assert printed(merged).count("aten.mm.default") == 1


@pytest.mark.parametrize("bias", [False, True])
def test_training_step_matches_eager(monkeypatch: pytest.MonkeyPatch, bias: bool) -> None:
    # The forward's three projections merge (addmm with biases: BERT's), and the
    # backward's three weight gradients (returned: row slices of one product, seen
    # through views); losses and gradients are eager's.
    merged = count_merges(monkeypatch)
    torch.manual_seed(0)
    model = Attention(bias)
    reference = Attention(bias)
    reference.load_state_dict(model.state_dict())
    pipeline = DEFAULT_PIPELINE.replace("merge-products", "merge-products{cpu=true}")
    compiled = torch.compile(
        model,
        backend=kiln_backend,
        options={"executor": "cpp", "pipeline": pipeline, "graph_cache": False},
    )
    for _ in range(2):
        x = torch.randn(2, 6, 32)
        got, want = compiled(x), reference(x)
        torch.testing.assert_close(got, want)
        grad = torch.randn_like(want)
        got.backward(grad)
        want.backward(grad)
        for (name, p), r in zip(model.named_parameters(), reference.parameters(), strict=True):
            assert p.grad is not None
            torch.testing.assert_close(p.grad, r.grad, msg=name)
        model.zero_grad()
        reference.zero_grad()
    assert merged == [3, 3]

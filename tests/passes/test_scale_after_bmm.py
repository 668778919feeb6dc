"""The ``scale-after-bmm`` pass: IR in/IR out, where it applies, the same numbers, and
attention on short CPU sequences without the two copy kernels it removes."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from pass_checks import assert_pass_output, assert_same_semantics, printed, run_pass

import kiln
from kiln.compiler import DEFAULT_PIPELINE, CompiledGraph
from kiln.passes.scale_after_bmm import ScaleAfterBmmPass
from kiln.registry import default_registry

SCALED = """
func.func @f(%q: tensor<1x4x8x16xf32>, %k: tensor<1x4x16x8xf32>) -> tensor<1x4x8x8xf32> {
  %0 = aten.mul.Scalar(%q, other = 0.5) : (tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  %1 = aten.mul.Scalar(%k, other = 0.25) : (tensor<1x4x16x8xf32>) -> tensor<1x4x16x8xf32>
  %2 = aten.expand.default(%0, size = [1, 4, 8, 16]) : (tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  %3 = aten.view.default(%2, size = [4, 8, 16]) : (tensor<1x4x8x16xf32>) -> tensor<4x8x16xf32>
  %4 = aten.view.default(%1, size = [4, 16, 8]) : (tensor<1x4x16x8xf32>) -> tensor<4x16x8xf32>
  %5 = aten.bmm.default(%3, %4) : (tensor<4x8x16xf32>, tensor<4x16x8xf32>) -> tensor<4x8x8xf32>
  %6 = aten.view.default(%5, size = [1, 4, 8, 8]) : (tensor<4x8x8xf32>) -> tensor<1x4x8x8xf32>
  func.return %6 : tensor<1x4x8x8xf32>
}
"""

PRODUCT_SCALED = """
func.func @f(%q: tensor<1x4x8x16xf32>, %k: tensor<1x4x16x8xf32>) -> tensor<1x4x8x8xf32> {
  %0 = aten.expand.default(%q, size = [1, 4, 8, 16]) : (tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  %1 = aten.view.default(%0, size = [4, 8, 16]) : (tensor<1x4x8x16xf32>) -> tensor<4x8x16xf32>
  %2 = aten.view.default(%k, size = [4, 16, 8]) : (tensor<1x4x16x8xf32>) -> tensor<4x16x8xf32>
  %3 = aten.bmm.default(%1, %2) : (tensor<4x8x16xf32>, tensor<4x16x8xf32>) -> tensor<4x8x8xf32>
  %4 = aten.mul.Scalar(%3, other = 0.125) : (tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %5 = aten.view.default(%4, size = [1, 4, 8, 8]) : (tensor<4x8x8xf32>) -> tensor<1x4x8x8xf32>
  func.return %5 : tensor<1x4x8x8xf32>
}
"""


SYMBOLIC = """
func.func @f(%q: tensor<1x4x?x16xf32>, %k: tensor<1x4x16x?xf32>, %s: index) -> tensor<1x4x?x?xf32> {
  %0 = aten.mul.Scalar(%q, other = 0.5) : (tensor<1x4x?x16xf32>) -> tensor<1x4x?x16xf32>
  %1 = aten.mul.Scalar(%k, other = 0.25) : (tensor<1x4x16x?xf32>) -> tensor<1x4x16x?xf32>
  %2 = aten.expand.default(%0, size = [1, 4, %s, 16]) : (tensor<1x4x?x16xf32>, index) -> tensor<1x4x?x16xf32>
  %3 = aten.view.default(%2, size = [4, %s, 16]) : (tensor<1x4x?x16xf32>, index) -> tensor<4x?x16xf32>
  %4 = aten.view.default(%1, size = [4, 16, %s]) : (tensor<1x4x16x?xf32>, index) -> tensor<4x16x?xf32>
  %5 = aten.bmm.default(%3, %4) : (tensor<4x?x16xf32>, tensor<4x16x?xf32>) -> tensor<4x?x?xf32>
  %6 = aten.view.default(%5, size = [1, 4, %s, %s]) : (tensor<4x?x?xf32>, index, index) -> tensor<1x4x?x?xf32>
  func.return %6 : tensor<1x4x?x?xf32>
}
"""

PRODUCT_SCALED_SYMBOLIC = """
func.func @f(%q: tensor<1x4x?x16xf32>, %k: tensor<1x4x16x?xf32>, %s: index) -> tensor<1x4x?x?xf32> {
  %0 = aten.expand.default(%q, size = [1, 4, %s, 16]) : (tensor<1x4x?x16xf32>, index) -> tensor<1x4x?x16xf32>
  %1 = aten.view.default(%0, size = [4, %s, 16]) : (tensor<1x4x?x16xf32>, index) -> tensor<4x?x16xf32>
  %2 = aten.view.default(%k, size = [4, 16, %s]) : (tensor<1x4x16x?xf32>, index) -> tensor<4x16x?xf32>
  %3 = aten.bmm.default(%1, %2) : (tensor<4x?x16xf32>, tensor<4x16x?xf32>) -> tensor<4x?x?xf32>
  %4 = aten.mul.Scalar(%3, other = 0.125) : (tensor<4x?x?xf32>) -> tensor<4x?x?xf32>
  %5 = aten.view.default(%4, size = [1, 4, %s, %s]) : (tensor<4x?x?xf32>, index, index) -> tensor<1x4x?x?xf32>
  func.return %5 : tensor<1x4x?x?xf32>
}
"""


def test_registered_under_kiln() -> None:
    assert default_registry().get_pass("scale-after-bmm") is ScaleAfterBmmPass


def test_the_product_of_scaled_operands_is_scaled_once() -> None:
    assert_pass_output(ScaleAfterBmmPass(), SCALED, PRODUCT_SCALED)
    before, after = run_pass(ScaleAfterBmmPass(), SCALED)
    assert_same_semantics(before, after)


def test_views_with_symbolic_sizes_are_passed_through() -> None:
    """dynamic=True: the views' sizes are symbolic operands; the rewrite is the same (it
    was skipped, and T5 small compiled dynamic kept both scaling copies per attention)."""
    assert_pass_output(ScaleAfterBmmPass(), SYMBOLIC, PRODUCT_SCALED_SYMBOLIC)


def test_bfloat16_is_rewritten_with_the_same_numbers() -> None:
    text = SCALED.replace("xf32>", "xbf16>")
    before, after = run_pass(ScaleAfterBmmPass(), text)
    assert printed(after).count("aten.mul.Scalar") == 1
    assert_same_semantics(before, after)


@pytest.mark.parametrize(
    "change",
    [
        # float16: the unscaled product could overflow where the scaled one does not.
        lambda t: t.replace("xf32>", "xf16>"),
        # The scaled queries are read by something else too: their tensor stays.
        lambda t: t.replace(
            "func.return %6 : tensor<1x4x8x8xf32>",
            "func.return %6, %0 : tensor<1x4x8x8xf32>, tensor<1x4x8x16xf32>",
        ).replace("-> tensor<1x4x8x8xf32> {", "-> (tensor<1x4x8x8xf32>, tensor<1x4x8x16xf32>) {"),
        # Only one operand scaled (not the attention pattern): kept.
        lambda t: t.replace("%4 = aten.view.default(%1,", "%4 = aten.view.default(%k,"),
    ],
    ids=["float16", "scaled-operand-used-twice", "one-operand-scaled"],
)
def test_kept(change: object) -> None:
    assert callable(change)
    text = change(SCALED)
    before, after = run_pass(ScaleAfterBmmPass(), text)
    assert printed(after) == printed(before)


@pytest.mark.parametrize(
    ("biased", "dynamic"),
    [(False, None), (True, None), (True, True)],
    ids=["causal", "biased", "biased-dynamic"],
)
def test_short_cpu_attention_runs_without_the_scaling_copies(
    monkeypatch: pytest.MonkeyPatch, biased: bool, dynamic: bool | None
) -> None:
    """Scaled dot-product attention on a short sequence at batch 1 (decomposed on the
    CPU): eager's numbers, and two launches fewer than with the pass left out (the scaled
    queries' and keys' copies; at batch > 1 merging batch and heads needs the copies
    anyway, unscaled). Biased: an additive mask and scale 1 (T5's attention), also with
    ``dynamic=True`` (symbolic sequence length; the views between the scaling and the
    product took symbolic sizes, and the pass skipped them)."""
    import kiln.frontends.dynamo as dynamo

    def attention(
        q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor
    ) -> torch.Tensor:
        # [batch, seq, heads, dim] projections, as transformers lay them out.
        batch, seq = q.shape[:2]  # symbolic under dynamic=True
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        if biased:
            out = torch.nn.functional.scaled_dot_product_attention(
                q, k, v, attn_mask=bias, scale=1.0
            )
        else:
            out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return out.transpose(1, 2).reshape(batch, seq, 64)

    graphs: list[CompiledGraph] = []
    original = dynamo.compile_graph

    def recording(*args: Any, **kwargs: Any) -> CompiledGraph:
        graphs.append(original(*args, **kwargs))
        return graphs[-1]

    monkeypatch.setattr(dynamo, "compile_graph", recording)
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 16, 4, 16, generator=generator) for _ in range(3))
    bias = torch.randn(1, 4, 16, 16, generator=generator)
    expected = attention(q, k, v, bias)
    launches: dict[str, int] = {}
    for name, pipeline in (
        ("with", DEFAULT_PIPELINE),
        ("without", DEFAULT_PIPELINE.replace("scale-after-bmm,", "")),
    ):
        torch._dynamo.reset()  # pyright: ignore[reportPrivateImportUsage]
        compiled = kiln.compile(attention, graph_cache=False, pipeline=pipeline, dynamic=dynamic)
        torch.testing.assert_close(compiled(q, k, v, bias), expected)
        launches[name] = graphs[-1].stats.launches
    assert launches["with"] <= launches["without"] - 2, launches

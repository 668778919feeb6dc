"""The ``unfuse-addmm`` pass: IR in/IR out, where it applies, and the same numbers."""

from __future__ import annotations

from collections import Counter

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


def test_a_size_read_under_dynamic_shapes_does_not_keep_addmm() -> None:
    """``torch.compile(dynamic=True)`` of an attention projection: the traced graph reads
    the sequence length of the projection's view with ``sym_size.int``, which kept the
    ``addmm`` (DistilBERT's queries and keys; 0.02 ms of a 0.75 ms call). Now ``mm`` + a
    fused bias add, the numbers eager's at two sequence lengths."""
    import torch

    from kiln.compiler import compile_history, reset_compile_history

    class Attention(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.q = torch.nn.Linear(32, 32)
            self.k = torch.nn.Linear(32, 32)
            self.v = torch.nn.Linear(32, 32)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, t, _ = x.shape
            q, k, v = (p(x).view(b, t, 4, 8).transpose(1, 2) for p in (self.q, self.k, self.v))
            return torch.nn.functional.scaled_dot_product_attention(q, k, v)

    from kiln.compiler import DEFAULT_PIPELINE

    torch.manual_seed(0)
    model = Attention().eval()

    def externs_of(pipeline: str) -> Counter[str]:
        torch._dynamo.reset()
        reset_compile_history()
        options = {"verbose": False, "pipeline": pipeline}
        compiled = torch.compile(model, backend="kiln", dynamic=True, options=options)
        with torch.no_grad():
            for t in (5, 9):
                x = torch.randn(1, t, 32)
                torch.testing.assert_close(compiled(x), model(x))
        externs: Counter[str] = Counter()
        for stats in compile_history():
            externs.update(stats.externs)
        return externs

    # Without scale-after-bmm, the queries and keys are scaled (pointwise) before their
    # product: mm + a fused add. The values feed the second product directly: addmm
    # (before: all three).
    externs = externs_of(DEFAULT_PIPELINE.replace("scale-after-bmm,", ""))
    assert externs["aten::addmm.default"] == 1, externs
    assert externs["aten::mm.default"] == 2, externs
    # With it (the default), the scaling follows the product: every projection feeds a
    # product directly and keeps its bias in addmm, as in the static compile.
    externs = externs_of(DEFAULT_PIPELINE)
    assert externs["aten::addmm.default"] == 3, externs
    assert externs["aten::mm.default"] == 0, externs

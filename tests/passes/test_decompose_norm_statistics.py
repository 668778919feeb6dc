"""decompose: mixed-precision normalizations keep the float32 statistics the IR declares
(eager's dtype; PyTorch's CPU decompositions round them to the input's), so the op is
decomposed instead of left to ATen, with eager's numbers."""

from __future__ import annotations

import pytest
import torch
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser

from kiln.dialects.aten import AtenOp
from kiln.dialects.aten.interpreter import run_function
from kiln.passes.decompose import DecomposePass
from kiln.registry import make_context

LAYER_NORM = """
func.func @forward(%x: tensor<4x7x10xbf16>, %w: tensor<10xf32>, %b: tensor<10xf32>) -> (tensor<4x7x10xbf16>, tensor<4x7x1xf32>, tensor<4x7x1xf32>) {
  %out, %mean, %rstd = aten.native_layer_norm.default(%x, normalized_shape = [10], weight = %w, bias = %b, eps = 1.0e-05) : (tensor<4x7x10xbf16>, tensor<10xf32>, tensor<10xf32>) -> (tensor<4x7x10xbf16>, tensor<4x7x1xf32>, tensor<4x7x1xf32>)
  func.return %out, %mean, %rstd : tensor<4x7x10xbf16>, tensor<4x7x1xf32>, tensor<4x7x1xf32>
}
"""

GROUP_NORM = """
func.func @forward(%x: tensor<4x12x5xbf16>, %w: tensor<12xf32>, %b: tensor<12xf32>) -> (tensor<4x12x5xbf16>, tensor<4x3xf32>, tensor<4x3xf32>) {
  %out, %mean, %rstd = aten.native_group_norm.default(%x, weight = %w, bias = %b, N = 4, C = 12, HxW = 5, group = 3, eps = 1.0e-05) : (tensor<4x12x5xbf16>, tensor<12xf32>, tensor<12xf32>) -> (tensor<4x12x5xbf16>, tensor<4x3xf32>, tensor<4x3xf32>)
  func.return %out, %mean, %rstd : tensor<4x12x5xbf16>, tensor<4x3xf32>, tensor<4x3xf32>
}
"""

BATCH_NORM = """
func.func @forward(%x: tensor<6x10xbf16>, %w: tensor<10xf32>, %m: tensor<10xf32>, %v: tensor<10xf32>) -> (tensor<6x10xbf16>, tensor<10xf32>, tensor<10xf32>, tensor<10xf32>, tensor<10xf32>) {
  %out, %mean, %rstd, %m2, %v2 = aten._native_batch_norm_legit_functional.default(%x, %m, %v, weight = %w, bias = %w, training = true, momentum = 0.1, eps = 1.0e-05) : (tensor<6x10xbf16>, tensor<10xf32>, tensor<10xf32>, tensor<10xf32>, tensor<10xf32>) -> (tensor<6x10xbf16>, tensor<10xf32>, tensor<10xf32>, tensor<10xf32>, tensor<10xf32>)
  func.return %out, %mean, %rstd, %m2, %v2 : tensor<6x10xbf16>, tensor<10xf32>, tensor<10xf32>, tensor<10xf32>, tensor<10xf32>
}
"""


def _parse(text: str) -> ModuleOp:
    module = Parser(make_context(), text).parse_module()
    module.verify()
    return module


@pytest.mark.parametrize(
    ("text", "shapes"),
    [
        (LAYER_NORM, [(4, 7, 10), (10,), (10,)]),
        (GROUP_NORM, [(4, 12, 5), (12,), (12,)]),
        (BATCH_NORM, [(6, 10), (10,), (10,), (10,)]),
    ],
    ids=["layer_norm", "group_norm", "batch_norm"],
)
def test_float32_statistics_are_decomposed_with_eager_numbers(
    text: str, shapes: list[tuple[int, ...]]
) -> None:
    torch.manual_seed(0)
    inputs = [torch.randn(shapes[0]).bfloat16(), *(torch.rand(s) + 0.5 for s in shapes[1:])]
    module = _parse(text)
    before = run_function(module, inputs)
    DecomposePass().apply(make_context(), module)
    module.verify()
    normalizations = [
        op.overload_name
        for op in module.walk()
        if isinstance(op, AtenOp) and "norm" in op.overload_name
    ]
    assert normalizations == []
    after = run_function(module, inputs)
    for got, want in zip(after, before, strict=True):
        assert isinstance(got, torch.Tensor)
        assert isinstance(want, torch.Tensor)
        assert got.dtype == want.dtype
        # The same float32 arithmetic; the bfloat16 output is rounded once either way.
        torch.testing.assert_close(
            got, want, atol=1e-2 if got.dtype == torch.bfloat16 else 1e-5, rtol=1e-5
        )

"""``unfuse-conv-bias``: IR in / IR out, the same numbers before and after (aten
interpreter), CUDA modules only, and a whole conv net on the Triton executor."""

from __future__ import annotations

import torch
from pass_checks import assert_pass_output, parse, run_pass
from xdsl.dialects.func import FuncOp

from kiln.compiler import DEFAULT_PIPELINE
from kiln.dialects.aten.interpreter import run_function
from kiln.passes.unfuse_conv_bias import UnfuseConvBiasPass
from kiln.registry import default_registry

CONV = "stride = [1, 1], padding = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1"

BIASED = f"""
func.func @forward(%x: tensor<2x3x6x6xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4xf32>) -> tensor<2x4x6x6xf32> {{
  %0 = aten.convolution.default(%x, %w, bias = %b, {CONV}) : (tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<2x4x6x6xf32>
  %1 = aten.relu.default(%0) : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  func.return %1 : tensor<2x4x6x6xf32>
}}
"""


def _on(device: str, text: str) -> str:
    return f'builtin.module attributes {{"kiln.device" = "{device}"}} {{{text}}}'


def test_registered_and_before_channels_last() -> None:
    assert default_registry().get_pass("unfuse-conv-bias") is UnfuseConvBiasPass
    passes = DEFAULT_PIPELINE.split(",")
    assert passes.index("unfuse-conv-bias") < passes.index("channels-last")


def test_bias_becomes_a_pointwise_add_on_cuda() -> None:
    assert_pass_output(
        UnfuseConvBiasPass(force=True),
        BIASED,
        f"""
        func.func @forward(%x: tensor<2x3x6x6xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4xf32>) -> tensor<2x4x6x6xf32> {{
          %conv = aten.convolution.default(%x, %w, {CONV}) : (tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32>
          %bias = aten.view.default(%b, size = [4, 1, 1]) : (tensor<4xf32>) -> tensor<4x1x1xf32>
          %0 = aten.add.Tensor(%conv, %bias) : (tensor<2x4x6x6xf32>, tensor<4x1x1xf32>) -> tensor<2x4x6x6xf32>
          %1 = aten.relu.default(%0) : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
          func.return %1 : tensor<2x4x6x6xf32>
        }}
        """,
    )


def test_only_on_cuda_and_same_numbers() -> None:
    _, on_cpu = run_pass(UnfuseConvBiasPass(), _on("cpu", BIASED))
    assert "bias = %b" in str(on_cpu)
    before, after = run_pass(UnfuseConvBiasPass(), _on("cuda:0", BIASED))
    assert "bias = %b" not in str(after)
    generator = torch.Generator().manual_seed(0)
    args = [
        torch.randn(2, 3, 6, 6, generator=generator),
        torch.randn(4, 3, 3, 3, generator=generator),
        torch.randn(4, generator=generator),
    ]
    func = next(op for op in parse(_on("cuda:0", BIASED)).walk() if isinstance(op, FuncOp))
    assert func is not None
    (expected,) = run_function(before, args)
    (actual,) = run_function(after, args)
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(
        actual, torch.relu(torch.nn.functional.conv2d(args[0], args[1], args[2], padding=1))
    )


BACKWARD = f"""
func.func @backward(%g: tensor<2x4x6x6xf32>, %x: tensor<2x3x6x6xf32>, %w: tensor<4x3x3x3xf32>) -> (tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) {{
  %gi, %gw, %gb = aten.convolution_backward.default(%g, %x, %w, bias_sizes = [4], {CONV}, output_mask = [true, true, true]) : (tensor<2x4x6x6xf32>, tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>) -> (tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>)
  func.return %gi, %gw, %gb : tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>
}}
"""


def test_bias_gradient_becomes_a_sum_on_cuda() -> None:
    assert_pass_output(
        UnfuseConvBiasPass(force=True),
        BACKWARD,
        f"""
        func.func @backward(%g: tensor<2x4x6x6xf32>, %x: tensor<2x3x6x6xf32>, %w: tensor<4x3x3x3xf32>) -> (tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) {{
          %gi, %gw, %0 = aten.convolution_backward.default(%g, %x, %w, bias_sizes = [4], {CONV}, output_mask = [true, true, false]) : (tensor<2x4x6x6xf32>, tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>) -> (tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>, none)
          %gb = aten.sum.dim_IntList(%g, dim = [0, 2, 3]) : (tensor<2x4x6x6xf32>) -> tensor<4xf32>
          func.return %gi, %gw, %gb : tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>
        }}
        """,
    )


def test_bias_gradient_same_numbers_and_only_on_cuda() -> None:
    _, on_cpu = run_pass(UnfuseConvBiasPass(), _on("cpu", BACKWARD))
    assert "aten.sum" not in str(on_cpu)
    before, after = run_pass(UnfuseConvBiasPass(), _on("cuda:0", BACKWARD))
    assert "output_mask = [true, true, false]" in str(after)
    generator = torch.Generator().manual_seed(1)
    g, x, w = (
        torch.randn(2, 4, 6, 6, generator=generator),
        torch.randn(2, 3, 6, 6, generator=generator),
        torch.randn(4, 3, 3, 3, generator=generator),
    )
    expected = run_function(before, [g, x, w], "backward")
    actual = run_function(after, [g, x, w], "backward")
    for a, e in zip(actual, expected, strict=True):
        torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(actual[2], g.sum((0, 2, 3)), rtol=1e-5, atol=1e-5)


def test_bias_gradient_left_when_not_asked_for() -> None:
    text = f"""
    func.func @backward(%g: tensor<2x4x6x6xf32>, %x: tensor<2x3x6x6xf32>, %w: tensor<4x3x3x3xf32>) -> (tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>) {{
      %gi, %gw, %gb = aten.convolution_backward.default(%g, %x, %w, bias_sizes = [4], {CONV}, output_mask = [true, true, false]) : (tensor<2x4x6x6xf32>, tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>) -> (tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>, none)
      func.return %gi, %gw : tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>
    }}
    """
    _, after = run_pass(UnfuseConvBiasPass(force=True), text)
    assert "aten.sum" not in str(after)


def test_bias_gradient_keeps_what_the_importer_recorded() -> None:
    """``kiln.result_orders`` says ATen returns the input gradient channels-last; the
    rewritten op must keep it (without it, each gradient was copied to NCHW: ConvNeXt's
    step ran 52 more copy kernels on the H200)."""
    orders = "{kiln.result_orders = [[0 : i64, 2 : i64, 3 : i64, 1 : i64], [0 : i64, 2 : i64, 3 : i64, 1 : i64], []]}"
    text = BACKWARD.replace(
        "output_mask = [true, true, true]) :", f"output_mask = [true, true, true]) {orders} :"
    )
    assert orders in text
    _, after = run_pass(UnfuseConvBiasPass(force=True), text)
    (backward,) = [op for op in after.walk() if op.name == "aten.convolution_backward.default"]
    assert "kiln.result_orders" in backward.attributes
    assert "output_mask = [true, true, false]) {kiln.result_orders" in str(after)

"""``patch-conv-to-mm``: IR in / IR out, the same numbers before and after (aten
interpreter), CUDA modules only, and the convolutions it must leave alone."""

from __future__ import annotations

from pass_checks import assert_pass_output, assert_same_semantics, run_pass

from kiln.compiler import DEFAULT_PIPELINE
from kiln.passes.patch_conv_to_mm import PatchConvToMmPass
from kiln.registry import default_registry


def _conv(
    kernel: list[int], padding: list[int] | None = None, stride: list[int] | None = None
) -> str:
    return (
        f"stride = {stride or kernel}, padding = {padding or [0, 0]}, dilation = [1, 1], "
        "transposed = false, output_padding = [0, 0], groups = 1"
    )


def _module(body: str, device: str = "cuda:0") -> str:
    return f'builtin.module attributes {{"kiln.device" = "{device}"}} {{{body}}}'


# A ViT-style patch embedding (4x2 patches of a 3-channel 8x6 image), then the tokens
# (copied contiguous: the token view's strides follow the product's NHWC rows, and the
# driver's output-layout, run before, fixes what the function returns).
PATCHES = f"""
func.func @embed(%x: tensor<2x3x8x6xf32>, %w: tensor<5x3x4x2xf32>) -> tensor<2x6x5xf32> {{
  %0 = aten.convolution.default(%x, %w, {_conv([4, 2])}) : (tensor<2x3x8x6xf32>, tensor<5x3x4x2xf32>) -> tensor<2x5x2x3xf32>
  %1 = aten.view.default(%0, size = [2, 5, 6]) : (tensor<2x5x2x3xf32>) -> tensor<2x5x6xf32>
  %2 = aten.permute.default(%1, dims = [0, 2, 1]) : (tensor<2x5x6xf32>) -> tensor<2x6x5xf32>
  %3 = aten.clone.default(%2, memory_format = "contiguous_format") : (tensor<2x6x5xf32>) -> tensor<2x6x5xf32>
  func.return %3 : tensor<2x6x5xf32>
}}
"""

BIASED = f"""
func.func @biased(%x: tensor<1x2x4x4xf32>, %w: tensor<3x2x2x2xf32>, %b: tensor<3xf32>) -> tensor<1x3x2x2xf32> {{
  %0 = aten.convolution.default(%x, %w, bias = %b, {_conv([2, 2])}) : (tensor<1x2x4x4xf32>, tensor<3x2x2x2xf32>, tensor<3xf32>) -> tensor<1x3x2x2xf32>
  %1 = aten.relu.default(%0) : (tensor<1x3x2x2xf32>) -> tensor<1x3x2x2xf32>
  %2 = aten.clone.default(%1, memory_format = "contiguous_format") : (tensor<1x3x2x2xf32>) -> tensor<1x3x2x2xf32>
  func.return %2 : tensor<1x3x2x2xf32>
}}
"""


def test_registered_between_unfuse_conv_bias_and_channels_last() -> None:
    assert default_registry().get_pass("patch-conv-to-mm") is PatchConvToMmPass
    passes = DEFAULT_PIPELINE.split(",")
    assert passes.index("unfuse-conv-bias") < passes.index("patch-conv-to-mm")
    assert passes.index("patch-conv-to-mm") < passes.index("pad-mm")
    assert passes.index("patch-conv-to-mm") < passes.index("channels-last")


def test_patch_embedding_becomes_one_mm() -> None:
    assert_pass_output(
        PatchConvToMmPass(),
        _module(PATCHES),
        _module("""
        func.func @embed(%x: tensor<2x3x8x6xf32>, %w: tensor<5x3x4x2xf32>) -> tensor<2x6x5xf32> {
          %x_6d = aten.reshape.default(%x, shape = [2, 3, 2, 4, 3, 2]) : (tensor<2x3x8x6xf32>) -> tensor<2x3x2x4x3x2xf32>
          %patches = aten.permute.default(%x_6d, dims = [0, 2, 4, 1, 3, 5]) : (tensor<2x3x2x4x3x2xf32>) -> tensor<2x2x3x3x4x2xf32>
          %x_rows = aten.reshape.default(%patches, shape = [12, 24]) : (tensor<2x2x3x3x4x2xf32>) -> tensor<12x24xf32>
          %w_2d = aten.reshape.default(%w, shape = [5, 24]) : (tensor<5x3x4x2xf32>) -> tensor<5x24xf32>
          %w_t = aten.permute.default(%w_2d, dims = [1, 0]) : (tensor<5x24xf32>) -> tensor<24x5xf32>
          %mm = aten.mm.default(%x_rows, %w_t) : (tensor<12x24xf32>, tensor<24x5xf32>) -> tensor<12x5xf32>
          %y_nhwc = aten.reshape.default(%mm, shape = [2, 2, 3, 5]) : (tensor<12x5xf32>) -> tensor<2x2x3x5xf32>
          %conv = aten.permute.default(%y_nhwc, dims = [0, 3, 1, 2]) : (tensor<2x2x3x5xf32>) -> tensor<2x5x2x3xf32>
          %0 = aten.view.default(%conv, size = [2, 5, 6]) : (tensor<2x5x2x3xf32>) -> tensor<2x5x6xf32>
          %1 = aten.permute.default(%0, dims = [0, 2, 1]) : (tensor<2x5x6xf32>) -> tensor<2x6x5xf32>
          %2 = aten.clone.default(%1, memory_format = "contiguous_format") : (tensor<2x6x5xf32>) -> tensor<2x6x5xf32>
          func.return %2 : tensor<2x6x5xf32>
        }
        """),
    )


def test_same_numbers_with_and_without_bias() -> None:
    for body in (PATCHES, BIASED):
        before, after = run_pass(PatchConvToMmPass(), _module(body))
        assert "aten.convolution" not in str(after)
        assert_same_semantics(before, after)


def _wide(element: str = "f32") -> str:
    """PATCHES with 8 input channels (a ConvNeXt downsampling layer's shape of problem)."""
    return (
        PATCHES.replace("2x3x8x6xf32", "2x8x8x6xf32")
        .replace("5x3x4x2xf32", "5x8x4x2xf32")
        .replace("xf32>", f"x{element}>")
    )


def _rewritten(body: str, module_attrs: str = "", **options: int) -> bool:
    module = _module(body).replace(
        '"kiln.device" = "cuda:0"', f'"kiln.device" = "cuda:0"{module_attrs}'
    )
    before, after = run_pass(PatchConvToMmPass(**options), module)
    assert_same_semantics(before, after)
    return "aten.convolution" not in str(after)


def test_float32_with_many_channels_stays_cudnns() -> None:
    # cuDNN runs a float32 convolution in TF32, cuBLAS the float32 product in full
    # precision on FFMA units: on an H100 ConvNeXt-atto's 2x2 downsampling convolutions
    # cost 55 us more a training step as products. An RGB stem is still rewritten.
    assert not _rewritten(_wide())
    assert _rewritten(PATCHES)
    assert not _rewritten(PATCHES, float32_max_channels=0)
    assert _rewritten(_wide(), float32_max_channels=-1)
    assert _rewritten(_wide(), float32_max_channels=8)


def test_float32_with_many_channels_rewritten_under_tf32() -> None:
    # Products in TF32 (torch.set_float32_matmul_precision("high")) run on tensor cores
    # as cuDNN's convolution does: the product is the faster form again.
    assert _rewritten(_wide(), ', "kiln.tf32_matmul"')


def test_half_precision_rewritten_whatever_its_channels() -> None:
    assert _rewritten(_wide("bf16"))
    assert _rewritten(_wide("f16"))


def test_left_alone() -> None:
    def conv_func(x: str, w: str, y: str, attrs: str, returned: bool = False) -> str:
        tail = "%0" if returned else "%1"
        return f"""
        func.func @f(%x: tensor<{x}xf32>, %w: tensor<{w}xf32>) -> tensor<{y}xf32> {{
          %0 = aten.convolution.default(%x, %w, {attrs}) : (tensor<{x}xf32>, tensor<{w}xf32>) -> tensor<{y}xf32>
          %1 = aten.relu.default(%0) : (tensor<{y}xf32>) -> tensor<{y}xf32>
          func.return {tail} : tensor<{y}xf32>
        }}
        """

    cases = {
        "on the CPU": _module(conv_func("1x2x4x4", "3x2x2x2", "1x3x2x2", _conv([2, 2])), "cpu"),
        "returned": _module(conv_func("1x2x4x4", "3x2x2x2", "1x3x2x2", _conv([2, 2]), True)),
        "a remainder": _module(conv_func("1x2x5x4", "3x2x2x2", "1x3x2x2", _conv([2, 2]))),
        "1x1": _module(conv_func("1x2x4x4", "3x2x1x1", "1x3x4x4", _conv([1, 1]))),
        "padded": _module(conv_func("1x2x4x4", "3x2x2x2", "1x3x3x3", _conv([2, 2], [1, 1]))),
        "overlapping": _module(
            conv_func("1x2x4x4", "3x2x2x2", "1x3x3x3", _conv([2, 2], stride=[1, 1]))
        ),
    }
    for case, text in cases.items():
        _, after = run_pass(PatchConvToMmPass(), text)
        assert "aten.convolution" in str(after), case

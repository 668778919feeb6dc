"""Depthwise convolutions as Triton kernels on GPU programs (passes/aten_to_loop/convolution.py):
values equal eager's in bfloat16 and float16, NCHW and channels-last, with stride,
padding, dilation, rectangular windows, a channel multiplier and a bias; the batch norm
and activation after one fuse into its kernel; no ATen convolution is left. float32 and
CPU programs (no ``kiln.device``) keep ATen's convolution."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from triton_checks import (
    DEVICE,
    PIPELINE,
    Compiled,
    assert_close,
    capture,
    program_arguments,
    run_pipeline,
)
from xdsl.dialects.builtin import StringAttr

from kiln.compile_options import DEFAULT_PIPELINE
from kiln.dialects.aten.function_attrs import DEVICE_ATTR
from kiln.dialects.aten.fx import import_graph
from kiln.targets import build_triton_program

CASES: list[dict[str, Any]] = [
    {"kernel": (3, 3), "stride": 1, "padding": 1},
    {"kernel": (5, 5), "stride": 2, "padding": 2},
    {"kernel": (3, 3), "stride": 1, "padding": 2, "dilation": 2},
    {"kernel": (7, 7), "stride": 1, "padding": 3},
    {"kernel": (1, 3), "stride": (2, 1), "padding": (0, 1)},
    {"kernel": (3, 3), "stride": 2, "padding": 0, "multiplier": 2, "bias": True},
]


def _gpu_program(fn: Any, *inputs: torch.Tensor, passes: Sequence[str] = PIPELINE) -> Compiled:
    """``fn`` through the Triton pipeline as a GPU program (``kiln.device``), run in
    Triton's interpreter off the GPU."""
    graph = capture(fn, *inputs)
    module = import_graph(graph.gm)
    module.attributes[DEVICE_ATTR] = StringAttr("cuda:0")
    run_pipeline(module, passes)
    args = program_arguments(module, graph)
    expected = graph.gm(*[a.clone() for a in args])
    expected = tuple(
        v.detach().cpu() for v in (expected if isinstance(expected, tuple) else (expected,))
    )
    return Compiled(build_triton_program(module), module, args, expected)


def _check(fn: Any, *inputs: torch.Tensor, passes: Sequence[str] = PIPELINE) -> Compiled:
    compiled = _gpu_program(fn, *inputs, passes=passes)
    for actual, expected in zip(compiled.run(), compiled.expected, strict=True):
        assert_close(actual, expected)
    return compiled


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "nhwc"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_depthwise_convolution_is_a_kernel(
    case: int, channels_last: bool, dtype: torch.dtype
) -> None:
    spec = CASES[case]
    channels = 4
    out_channels = channels * spec.get("multiplier", 1)
    x = torch.randn(2, channels, 9, 11).to(dtype)
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
    weight = torch.randn(out_channels, 1, *spec["kernel"]).to(dtype)
    bias = torch.randn(out_channels).to(dtype) if spec.get("bias") else None

    def conv(x: torch.Tensor, weight: torch.Tensor, *bias: torch.Tensor) -> torch.Tensor:
        return F.conv2d(
            x,
            weight,
            bias[0] if bias else None,
            spec["stride"],
            spec["padding"],
            spec.get("dilation", 1),
            groups=channels,
        )

    compiled = _check(conv, x, weight, *([bias] if bias is not None else []))
    assert "aten::convolution" not in compiled.program.source  # a kernel, no ATen call


def test_batch_norm_and_activation_fuse_into_the_convolution() -> None:
    block = torch.nn.Sequential(
        torch.nn.Conv2d(8, 8, 3, 1, 1, groups=8, bias=False),
        torch.nn.BatchNorm2d(8),
        torch.nn.ReLU6(),
    ).eval()
    for p in block.parameters():
        torch.nn.init.normal_(p)
    block[1].running_mean.normal_()
    block[1].running_var.uniform_(0.5, 2.0)
    block = block.to(DEVICE, torch.bfloat16)
    x = torch.randn(2, 8, 10, 10).to(torch.bfloat16).to(memory_format=torch.channels_last)
    with torch.no_grad():
        compiled = _check(block, x)
    assert "aten::convolution" not in compiled.program.source
    assert compiled.program.source.count("kiln_poi_") <= 2  # the kernel (+ an input copy)


def _conv(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return F.conv2d(x, weight, padding=1, groups=4)


def test_float32_keeps_cudnn() -> None:
    compiled = _check(_conv, torch.randn(1, 4, 6, 6), torch.randn(4, 1, 3, 3))
    assert "aten::convolution" in compiled.program.source


def test_cpu_programs_keep_aten_convolution() -> None:
    from triton_checks import check

    if DEVICE.type == "cuda":
        pytest.skip("the program's device is the GPU here")
    x, weight = torch.randn(1, 4, 6, 6).bfloat16(), torch.randn(4, 1, 3, 3).bfloat16()
    compiled = check(_conv, x, weight)
    assert "aten::convolution" in compiled.program.source


@pytest.mark.parametrize(
    ("window", "stride", "channels"), [(3, 1, 32), (3, 2, 48), (5, 1, 24), (7, 2, 40)]
)
def test_nhwc_kernels_tile_pixels_by_channels(window: int, stride: int, channels: int) -> None:
    """MobileNet's inverted residual (1x1 convolution, depthwise convolution, each with
    batch norm and ReLU6), whose depthwise kernel runs over NHWC positions and reads the
    weight per channel (``taps*c + tap``): a 2-D tile of pixels x channels (the weight one
    channel vector a block, the window's bounds divided out of the pixel index only), not a
    1-D block gathering the weight per element and dividing the flat position for every
    tap's bounds (MobileNet-v2 large on the H200: 28.7 us for a 14x14x384 convolution of
    batch 32, twice cuDNN's); eager's numbers."""
    block = torch.nn.Sequential(
        torch.nn.Conv2d(8, channels, 1, bias=False),
        torch.nn.BatchNorm2d(channels),
        torch.nn.ReLU6(),
        torch.nn.Conv2d(channels, channels, window, stride, window // 2, groups=channels),
        torch.nn.BatchNorm2d(channels),
        torch.nn.ReLU6(),
    ).eval()
    for p in block.parameters():
        torch.nn.init.normal_(p)
    for norm in (block[1], block[4]):
        norm.running_var.uniform_(0.5, 2.0)
    block = block.to(DEVICE, torch.bfloat16)
    x = torch.randn(2, 8, 11, 9).to(torch.bfloat16).to(memory_format=torch.channels_last)
    with torch.no_grad():
        compiled = _check(block, x, passes=DEFAULT_PIPELINE.split(","))
    source = compiled.program.source
    (conv_kernel,) = [  # the depthwise convolution's (the 1x1 one stays cuDNN's)
        part
        for part in source.split("@triton.jit")
        if re.search(r"def kiln_poi_fused\w*_conv", part)
    ]
    assert "YBLOCK: tl.constexpr" in conv_kernel
    assert f"{window * window} * xindex" in conv_kernel  # the weight: a channel vector

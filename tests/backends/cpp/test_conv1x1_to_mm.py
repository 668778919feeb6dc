"""1x1 convolutions of channels-last activations as matrix products (issue 15, pass
``conv1x1-to-mm``), through the C++ backend against eager on fresh random inputs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from models import randomize_batch_norms
from torch import nn

import kiln
from kiln.compiler import compile_history, reset_compile_history
from kiln.passes import prepack_weights as prepack_weights_pass


class _InvertedResidual(nn.Module):
    """MobileNet-v2's block: 3x3 stem, 1x1 expansion, depthwise 3x3, 1x1 projection
    (with a bias here, to take the addmm path), residual add, batch norms between."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn0 = nn.BatchNorm2d(8)
        self.expand = nn.Conv2d(8, 24, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(24)
        self.depthwise = nn.Conv2d(24, 24, 3, padding=1, groups=24, bias=False)
        self.bn2 = nn.BatchNorm2d(24)
        self.project = nn.Conv2d(24, 8, 1)
        self.strided = nn.Conv2d(8, 4, 1, stride=2)
        randomize_batch_norms(self)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = F.relu6(self.bn0(self.stem(x)))
        h = F.relu6(self.bn1(self.expand(y)))
        h = F.relu6(self.bn2(self.depthwise(h)))
        y = self.project(h) + y
        return y.mean((2, 3)), self.strided(y).sigmoid()


def _compile(model: Callable[..., Any], **options: Any) -> Callable[..., Any]:
    torch._dynamo.reset()
    reset_compile_history()
    return kiln.compile(model, verbose=False, **options)


def _check_inverted_residual(
    compiled: Callable[..., Any], model: nn.Module, shapes: Sequence[tuple[int, ...]]
) -> None:
    """Values and strides equal eager's at each input shape, from one compile in which
    expand became an mm and project an addmm (the stem, the depthwise and the strided 1x1
    stay convolutions)."""
    with torch.no_grad():
        for shape in shapes:
            x = torch.randn(*shape)
            got, want = compiled(x), model(x)
            for g, w in zip(got, want, strict=True):
                torch.testing.assert_close(g, w, atol=1e-4, rtol=1e-4)
                assert g.stride() == w.stride()
    (stats,) = compile_history()
    assert stats.externs["aten::mm.default"] == 1
    assert stats.externs["aten::addmm.default"] == 1
    assert stats.externs["aten::convolution.default"] == 3


def test_pointwise_convolutions_run_as_mm() -> None:
    model = _InvertedResidual().eval()
    _check_inverted_residual(_compile(model), model, [(2, 3, 7, 9)] * 2)


def test_bfloat16_pointwise_convolutions_run_as_mm() -> None:
    """bfloat16 too: the products and their views keep the convolution's element type (a
    float32 view of a bfloat16 buffer read garbage: 3.3 off where values are 0.34)."""
    model = _InvertedResidual().to(torch.bfloat16).eval()
    compiled = _compile(model)
    with torch.no_grad():
        for _ in range(2):
            x = torch.randn(2, 3, 7, 9, dtype=torch.bfloat16)
            got, want = compiled(x), model(x)
            for g, w in zip(got, want, strict=True):
                assert g.dtype == torch.bfloat16
                torch.testing.assert_close(g, w, atol=2e-2, rtol=2e-2)
                assert g.stride() == w.stride()
    if not prepack_weights_pass._cpu_packs_bfloat16():  # pyright: ignore[reportPrivateUsage]
        return  # ATen's unpacked bfloat16 convolutions: their inputs are not stored NHWC
    (stats,) = compile_history()
    assert stats.externs["aten::mm.default"] == 1
    assert stats.externs["aten::addmm.default"] == 1


def test_float16_pointwise_convolutions_stay_convolutions() -> None:
    model = _InvertedResidual().to(torch.float16).eval()
    compiled = _compile(model)
    with torch.no_grad():
        x = torch.randn(2, 3, 7, 9, dtype=torch.float16)
        for g, w in zip(compiled(x), model(x), strict=True):
            torch.testing.assert_close(g, w, atol=2e-2, rtol=2e-2)
    (stats,) = compile_history()
    assert "aten::mm.default" not in stats.externs


def test_pointwise_convolutions_of_many_rows_stay_convolutions() -> None:
    """Above ``MAX_ROWS`` rows (``N*H*W``) oneDNN's convolution beats the matrix product
    (ResNet-50 at batch 32): the 1x1 convolutions stay convolutions, values unchanged."""
    model = _InvertedResidual().eval()
    compiled = _compile(model)
    with torch.no_grad():
        x = torch.randn(2, 3, 48, 48)  # 4,608 rows
        got, want = compiled(x), model(x)
        for g, w in zip(got, want, strict=True):
            torch.testing.assert_close(g, w, atol=1e-4, rtol=1e-4)
            assert g.stride() == w.stride()
    (stats,) = compile_history()
    assert "aten::mm.default" not in stats.externs
    assert stats.externs["aten::convolution.default"] == 5


def test_batch_one_runs_channels_last_with_mm() -> None:
    """At batch 1, ATen runs these 1x1 convolutions on a channels-last input in its
    reference kernel (``Slow2d``), which made ``channels-last`` keep the whole function
    NCHW; run as matrix products they no longer do."""
    stem = nn.Conv2d(3, 16, 3, padding=1)
    expand = nn.Conv2d(16, 64, 1, bias=False)
    depthwise = nn.Conv2d(64, 64, 3, padding=1, groups=64)
    project = nn.Conv2d(64, 16, 1)

    def f(x: torch.Tensor) -> torch.Tensor:
        y = F.relu6(stem(x))
        h = F.relu6(depthwise(F.relu6(expand(y))))
        return (project(h) + y).mean((2, 3))

    compiled = _compile(f)
    with torch.no_grad():
        for _ in range(2):
            x = torch.randn(1, 3, 8, 8)
            torch.testing.assert_close(compiled(x), f(x), atol=1e-4, rtol=1e-4)
    (stats,) = compile_history()
    assert stats.externs["aten::mm.default"] == 1
    assert stats.externs["aten::addmm.default"] == 1


def test_returned_pointwise_convolution_keeps_eager_layout() -> None:
    """The 1x1 convolution's result is returned: channels-last keeps it NCHW, so it stays
    a convolution; the one before it (read by a returned pointwise op) becomes an mm."""
    conv1 = nn.Conv2d(4, 6, 3, padding=1)
    conv2 = nn.Conv2d(6, 6, 1, bias=False)
    conv3 = nn.Conv2d(6, 5, 1, bias=False)

    def f(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = torch.tanh(conv1(x))
        g = conv2(h)
        return g * 2, conv3(torch.relu(g))

    compiled = _compile(f)
    with torch.no_grad():
        x = torch.randn(1, 4, 5, 5)
        got, want = compiled(x), f(x)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, atol=1e-4, rtol=1e-4)
        assert g.stride() == w.stride()


def test_pointwise_convolutions_of_symbolic_sizes_run_as_mm(tmp_path: Path) -> None:
    """Under ``dynamic=True`` (symbolic batch and image sizes) the 1x1 convolutions are
    matrix products too, over ``n*h*w`` rows of the NHWC buffers: ATen's oneDNN
    convolution reordered their weights at every call (MobileNet-v2 dynamic ran 2.6-3.3x
    its static compile). One compile serves every size, each equal to eager.

    The batch norms after the convolutions and products write over the extern's result,
    as in the static program (the products' reshaped to NHWC inside the extern): the
    dynamic one allocated a buffer for each (MobileNet-v2 at batch 2, 1.10x static by
    thread time). Only the input's NHWC copy and the two outputs are allocated."""
    model = _InvertedResidual().eval()
    torch._dynamo.reset()
    reset_compile_history()
    options = {"verbose": False, "debug_dir": str(tmp_path)}
    compiled = torch.compile(model, backend="kiln", dynamic=True, options=options)
    _check_inverted_residual(compiled, model, [(2, 3, 7, 9), (3, 3, 6, 11), (5, 3, 8, 8)])
    (wrapper,) = tmp_path.glob("*/wrapper.py")
    source = wrapper.read_text()
    assert source.count("= _empty_strided(") == 3, source
    assert "mm = _reshape(" in source
    assert "addmm = _reshape(" in source


class _ShuffleUnit(nn.Module):
    """ShuffleNet-v2's unit (torchvision's ``InvertedResidual``): stride 2 runs both
    branches on the whole input, stride 1 splits the channels; then concatenate and
    shuffle the channels."""

    def __init__(self, inp: int, out: int, stride: int) -> None:
        super().__init__()
        self.stride = stride
        half = out // 2
        if stride > 1:
            self.branch1 = nn.Sequential(
                nn.Conv2d(inp, inp, 3, stride, 1, groups=inp, bias=False),
                nn.BatchNorm2d(inp),
                nn.Conv2d(inp, half, 1, bias=False),
                nn.BatchNorm2d(half),
                nn.ReLU(),
            )
        width = inp if stride > 1 else half
        self.branch2 = nn.Sequential(
            nn.Conv2d(width, half, 1, bias=False),
            nn.BatchNorm2d(half),
            nn.ReLU(),
            nn.Conv2d(half, half, 3, stride, 1, groups=half, bias=False),
            nn.BatchNorm2d(half),
            nn.Conv2d(half, half, 1, bias=False),
            nn.BatchNorm2d(half),
            nn.ReLU(),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.stride == 1:
            x1, x2 = x.chunk(2, dim=1)
            y = torch.cat((x1, self.branch2(x2)), dim=1)
        else:
            y = torch.cat((self.branch1(x), self.branch2(x)), dim=1)
        n, c, h, w = y.shape
        y = y.view(n, 2, c // 2, h, w).transpose(1, 2).contiguous()
        return y.view(n, c, h, w)


def _shufflenet() -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, 2, 1, bias=False),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        _ShuffleUnit(8, 16, 2),
        _ShuffleUnit(16, 16, 1),
        _ShuffleUnit(16, 16, 1),
        _ShuffleUnit(16, 32, 2),
        _ShuffleUnit(32, 32, 1),
        nn.Conv2d(32, 24, 1, bias=False),
        nn.ReLU(),
    )
    randomize_batch_norms(model)
    return model.eval()


def test_shufflenet_units_run_every_pointwise_convolution_as_mm(tmp_path: Path) -> None:
    """Every 1x1 convolution after a channel shuffle is a matrix product, the one on a
    channel slice included (strided rows of the NHWC buffer): before, the layout stopped
    at the first ``cat`` and they ran as NCHW oneDNN convolutions (ShuffleNet-v2 0.75x
    Inductor). The shuffle is materialized NHWC once, so no extern input is copied
    (a strided depthwise convolution got an NCHW copy of the shuffle, and each slice's
    matrix product a copy of its rows). Values equal eager's on fresh inputs."""
    model = _shufflenet()

    def f(x: torch.Tensor) -> torch.Tensor:
        return model(x).mean((2, 3))

    compiled = _compile(f, debug_dir=str(tmp_path))
    with torch.no_grad():
        for _ in range(2):
            x = torch.randn(2, 3, 32, 32)
            torch.testing.assert_close(compiled(x), f(x), atol=1e-4, rtol=1e-4)
    (stats,) = compile_history()
    # the stem and the 7 depthwise convolutions; 13 pointwise ones as mm
    assert stats.externs["aten::convolution.default"] == 8
    assert stats.externs["aten::mm.default"] == 13
    (wrapper,) = tmp_path.glob("*/wrapper.py")
    assert "_contiguous = " not in wrapper.read_text()  # no copy of an extern input


def test_shufflenet_units_of_symbolic_sizes_run_as_the_static_ones() -> None:
    """Under ``dynamic=True`` (symbolic batch and image sizes) the channel shuffle stays
    NHWC too (its sizes compare as the tracer's expressions), so every 1x1 convolution
    after it is a matrix product, as in the static program: before, each shuffle went
    back to NCHW and ShuffleNet-v2's dynamic program ran 53 oneDNN convolutions and 3
    ``mm`` (7.9 ms a call against 3.1 ms static). Values equal eager's at two sizes."""
    model = _shufflenet()

    def f(x: torch.Tensor) -> torch.Tensor:
        return model(x).mean((2, 3))

    torch._dynamo.reset()
    reset_compile_history()
    compiled = torch.compile(f, backend="kiln", dynamic=True, options={"verbose": False})
    with torch.no_grad():
        for shape in [(2, 3, 32, 32), (3, 3, 24, 24)]:
            x = torch.randn(*shape)
            torch.testing.assert_close(compiled(x), f(x), atol=1e-4, rtol=1e-4)
    (stats,) = compile_history()
    assert stats.externs["aten::convolution.default"] == 8
    assert stats.externs["aten::mm.default"] == 13


class _ConvMlpBlock(nn.Module):
    """timm's ConvNeXt block with ``conv_mlp`` (ConvNeXt-atto): depthwise 7x7,
    LayerNorm2d (``permute``, ``layer_norm``, ``permute`` back), 1x1 conv, GELU, 1x1 conv,
    layer scale, residual."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.dw = nn.Conv2d(c, c, 7, padding=3, groups=c)
        self.norm = nn.LayerNorm(c)
        self.fc1 = nn.Conv2d(c, 4 * c, 1)
        self.fc2 = nn.Conv2d(4 * c, c, 1)
        self.gamma = nn.Parameter(torch.randn(c))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.norm(self.dw(x).permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        y = self.fc2(F.gelu(self.fc1(y)))
        return x + y.mul(self.gamma.reshape(1, -1, 1, 1))


def test_convnext_conv_mlp_blocks_run_both_pointwise_convolutions_as_addmm() -> None:
    """The LayerNorm2d's ``permute(0, 3, 1, 2)`` of a contiguous NHWC tensor counts as
    channels-last on the CPU too, so the GELU between the two 1x1 convolutions computes
    NHWC and both run as ``addmm`` on the NHWC buffers. Before, only the first did; the
    second ran as an NCHW oneDNN convolution (ConvNeXt-atto 0.95x Inductor)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 16, 4, 4), _ConvMlpBlock(16), _ConvMlpBlock(16)).eval()

    def f(x: torch.Tensor) -> torch.Tensor:
        return model(x).mean((2, 3))

    compiled = _compile(f)
    with torch.no_grad():
        for _ in range(2):
            x = torch.randn(2, 3, 32, 32)
            torch.testing.assert_close(compiled(x), f(x), atol=1e-4, rtol=1e-4)
    (stats,) = compile_history()
    assert stats.externs["aten::convolution.default"] == 3  # the stem and the depthwise
    assert stats.externs["aten::addmm.default"] == 4


class _SqueezeExcite(nn.Module):
    """MobileNet-v3's inverted residual with squeeze-and-excitation: the two 1x1
    convolutions act on the pooled ``[N, C, 1, 1]`` map."""

    def __init__(self, c: int, hidden: int, squeezed: int) -> None:
        super().__init__()
        self.expand = nn.Conv2d(c, hidden, 1, bias=False)
        self.depthwise = nn.Conv2d(hidden, hidden, 3, padding=1, groups=hidden, bias=False)
        self.fc1 = nn.Conv2d(hidden, squeezed, 1)
        self.fc2 = nn.Conv2d(squeezed, hidden, 1)
        self.project = nn.Conv2d(hidden, c, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.hardswish(self.depthwise(F.hardswish(self.expand(x))))
        scale = F.hardsigmoid(self.fc2(F.relu(self.fc1(F.adaptive_avg_pool2d(h, 1)))))
        return x + self.project(h * scale)


def test_squeeze_excitation_convolutions_on_a_1x1_map_run_as_addmm() -> None:
    """A 1x1 map's NCHW buffer is its NHWC one, so squeeze-and-excitation's two 1x1
    convolutions run as ``addmm`` (80-105 us each in oneDNN, 9-28 us as addmm):
    MobileNet-v3-small 5.8 -> 4.8 ms, EfficientNet-B0 12.9 -> 8.8 ms."""
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, 2, 1), _SqueezeExcite(8, 32, 8), _SqueezeExcite(8, 24, 8)
    ).eval()

    def f(x: torch.Tensor) -> torch.Tensor:
        return model(x).mean((2, 3))

    compiled = _compile(f)
    with torch.no_grad():
        for _ in range(2):
            x = torch.randn(2, 3, 16, 16)
            torch.testing.assert_close(compiled(x), f(x), atol=1e-4, rtol=1e-4)
    (stats,) = compile_history()
    assert stats.externs["aten::convolution.default"] == 3  # the stem and the depthwise
    assert stats.externs["aten::addmm.default"] == 4
    assert stats.externs["aten::mm.default"] == 4


def test_channel_slices_feeding_wider_convolutions_match_eager() -> None:
    """A channel slice of an NHWC buffer is a strided view, not a channels-last buffer:
    a 3x3 convolution (``split`` with ``split_size``), a strided 1x1 one and a pointwise
    op reading slices, and a ``cat`` of an NCHW value, all match eager."""
    torch.manual_seed(0)
    stem = nn.Conv2d(3, 12, 3, padding=1)
    wide = nn.Conv2d(4, 4, 3, padding=1)
    strided = nn.Conv2d(4, 6, 1, stride=2)

    def f(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a, b, c = torch.relu(stem(x)).split(4, dim=1)
        merged = torch.cat((wide(a), torch.sigmoid(b), y), dim=1)
        return merged.mean((2, 3)), strided(c).sum((2, 3))

    compiled = _compile(f)
    with torch.no_grad():
        for _ in range(2):
            x, y = torch.randn(2, 3, 9, 9), torch.randn(2, 5, 9, 9)
            for got, want in zip(compiled(x, y), f(x, y), strict=True):
                torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


def test_channel_split_of_symbolic_sizes_is_left_as_it_is() -> None:
    """A ``split`` whose sizes are symbolic (``dynamic=True``) stays an NCHW split (its
    sizes are SSA values, not properties: reading them as properties raised)."""
    torch.manual_seed(0)
    conv = nn.Conv2d(3, 8, 3, padding=1)

    def f(x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(conv(x))
        n = x.shape[2] // 4
        a, b = y.split([n, 8 - n], dim=1)
        return torch.cat((b, a), 1).mean((2, 3))

    torch._dynamo.reset()
    compiled = torch.compile(f, backend="kiln", dynamic=True, options={"verbose": False})
    with torch.no_grad():
        for side in (8, 12, 16):
            x = torch.randn(2, 3, side, side)
            torch.testing.assert_close(compiled(x), f(x), atol=1e-4, rtol=1e-4)


class _NchwBlock(nn.Module):
    """A training block whose activations stay NCHW (small: no channels-last): 1x1
    convolutions with and without a bias around a depthwise 3x3, batch norms between,
    and a channel split whose halves feed a 1x1 (a strided NCHW input)."""

    def __init__(self) -> None:
        super().__init__()
        self.expand = nn.Conv2d(6, 16, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.depthwise = nn.Conv2d(16, 16, 3, padding=1, groups=16, bias=False)
        self.bn2 = nn.BatchNorm2d(16)
        self.project = nn.Conv2d(16, 6, 1)
        self.split_conv = nn.Conv2d(3, 5, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.bn1(self.expand(x)))
        h = F.relu(self.bn2(self.depthwise(h)))
        y = self.project(h) + x
        left, right = y.chunk(2, dim=1)
        return torch.cat([self.split_conv(left), right], dim=1)


def test_training_pointwise_convolutions_of_nchw_activations_run_as_bmm() -> None:
    """A small CPU training step keeps its activations NCHW; its 1x1 convolutions and
    their backwards ran as oneDNN convolutions (62-69 us forward, 144-161 us backward at
    ShuffleNet-v2's small sizes, against 9-17 and 28-41 us as products). Now batched
    products: outputs, every gradient and the running statistics as eager's, against
    float64 with eager's own error as the floor."""
    torch.manual_seed(0)
    model = _NchwBlock()
    eager = _NchwBlock()
    eager.load_state_dict(model.state_dict())
    exact = _NchwBlock().double()
    exact.load_state_dict(model.state_dict())
    compiled = _compile(model)
    for step in range(2):
        x = torch.randn(2, 6, 9, 7) * (step + 1)
        grad = torch.randn(2, 8, 9, 7)
        results = []
        for m, fn, dtype in (
            (model, compiled, torch.float32),
            (eager, eager, torch.float32),
            (exact, exact, torch.float64),
        ):
            m.zero_grad(set_to_none=True)
            y = fn(x.to(dtype))
            y.backward(grad.to(dtype))
            results.append([y.detach(), *(p.grad for p in m.parameters())])
        for got, want, ref in zip(*results, strict=True):
            floor = (want.double() - ref).abs().max().item()
            torch.testing.assert_close(got.double(), ref, rtol=1e-4, atol=max(1e-5, 4 * floor))
    for (name, got), (_, want) in zip(model.named_buffers(), eager.named_buffers(), strict=True):
        torch.testing.assert_close(got, want, msg=name)
    forward, backward = compile_history()
    for stats in (forward, backward):
        assert stats.externs["aten::bmm.default"] >= 3, stats.externs
    assert forward.externs["aten::convolution.default"] == 1  # the depthwise 3x3 alone
    assert backward.externs["aten::convolution_backward.default"] == 1

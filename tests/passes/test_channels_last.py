"""The ``channels-last`` pass: IR in/IR out, the same numbers before and after (aten
interpreter), and whole conv nets through the C++ backend against eager, with no extra
kernels."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from models import randomize_batch_norms
from pass_checks import assert_pass_output, parse, printed, random_args, run_pass
from torch import nn
from xdsl.dialects.builtin import DYNAMIC_INDEX, ModuleOp, StringAttr
from xdsl.dialects.func import FuncOp
from xdsl.passes import PassPipeline

from kiln.compiler import DEFAULT_PIPELINE
from kiln.dialects.aten.interpreter import run_function
from kiln.dialects.aten.ops import AtenOp
from kiln.frontends.capture import capture_aot, capture_aot_training, capture_make_fx
from kiln.frontends.fx import OUTPUTS_ATTR, import_graph, rebuild_structure
from kiln.passes.channels_last import ChannelsLastPass
from kiln.registry import default_registry
from kiln.targets import build_cpp_program

WITHOUT = DEFAULT_PIPELINE.replace("channels-last,", "")
NO_INPUT_COPY = DEFAULT_PIPELINE.replace("channels-last", "channels-last{convert-inputs=false}")
WEIGHT_COPIES = DEFAULT_PIPELINE.replace("channels-last", "channels-last{convert-weights=true}")
TOLERANCE = 1e-4
"""rtol and atol, float32 whole models: convolution algorithms differ by layout (rounding
only)."""


def assert_close(actual: Any, expected: Any) -> None:
    torch.testing.assert_close(actual, expected, rtol=TOLERANCE, atol=TOLERANCE)


CONV = "stride = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1"

CONV_RELU_CONV = f"""
func.func @forward(%x: tensor<2x3x6x6xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4x1x1xf32>, %w2: tensor<4x4x1x1xf32>) -> tensor<2x4xf32> {{
  %0 = aten.convolution.default(%x, %w, padding = [1, 1], {CONV}) : (tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32>
  %1 = aten.add.Tensor(%0, %b) : (tensor<2x4x6x6xf32>, tensor<4x1x1xf32>) -> tensor<2x4x6x6xf32>
  %2 = aten.relu.default(%1) : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %3 = aten.convolution.default(%2, %w2, padding = [0, 0], {CONV}) : (tensor<2x4x6x6xf32>, tensor<4x4x1x1xf32>) -> tensor<2x4x6x6xf32>
  %4 = aten.add.Tensor(%3, %2) : (tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %5 = aten.mean.dim(%4, dim = [2, 3]) : (tensor<2x4x6x6xf32>) -> tensor<2x4xf32>
  func.return %5 : tensor<2x4xf32>
}}
"""


def test_registered_and_in_the_default_pipeline() -> None:
    assert default_registry().get_pass("channels-last") is ChannelsLastPass
    passes = DEFAULT_PIPELINE.split(",")
    assert passes.index("channels-last") < passes.index("lower-aten")


def test_activations_between_convolutions_become_nhwc() -> None:
    # The image is copied to channels-last once; the bias add, relu and residual add
    # compute NHWC tensors; convolutions and the mean read the NCHW permutes of them.
    assert_pass_output(
        ChannelsLastPass(),
        CONV_RELU_CONV,
        f"""
        func.func @forward(%x: tensor<2x3x6x6xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4x1x1xf32>, %w2: tensor<4x4x1x1xf32>) -> tensor<2x4xf32> {{
          %x_nhwc = aten.clone.default(%x, memory_format = "channels_last") : (tensor<2x3x6x6xf32>) -> tensor<2x3x6x6xf32>
          %0 = aten.convolution.default(%x_nhwc, %w, padding = [1, 1], {CONV}) : (tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32>
          %1 = aten.permute.default(%0, dims = [0, 2, 3, 1]) : (tensor<2x4x6x6xf32>) -> tensor<2x6x6x4xf32>
          %2 = aten.unsqueeze.default(%b, dim = 0) : (tensor<4x1x1xf32>) -> tensor<1x4x1x1xf32>
          %3 = aten.permute.default(%2, dims = [0, 2, 3, 1]) : (tensor<1x4x1x1xf32>) -> tensor<1x1x1x4xf32>
          %4 = aten.add.Tensor(%1, %3) : (tensor<2x6x6x4xf32>, tensor<1x1x1x4xf32>) -> tensor<2x6x6x4xf32>
          %5 = aten.relu.default(%4) : (tensor<2x6x6x4xf32>) -> tensor<2x6x6x4xf32>
          %6 = aten.permute.default(%5, dims = [0, 3, 1, 2]) : (tensor<2x6x6x4xf32>) -> tensor<2x4x6x6xf32>
          %7 = aten.convolution.default(%6, %w2, padding = [0, 0], {CONV}) : (tensor<2x4x6x6xf32>, tensor<4x4x1x1xf32>) -> tensor<2x4x6x6xf32>
          %8 = aten.permute.default(%7, dims = [0, 2, 3, 1]) : (tensor<2x4x6x6xf32>) -> tensor<2x6x6x4xf32>
          %9 = aten.add.Tensor(%8, %5) : (tensor<2x6x6x4xf32>, tensor<2x6x6x4xf32>) -> tensor<2x6x6x4xf32>
          %10 = aten.permute.default(%9, dims = [0, 3, 1, 2]) : (tensor<2x6x6x4xf32>) -> tensor<2x4x6x6xf32>
          %11 = aten.mean.dim(%10, dim = [2, 3]) : (tensor<2x4x6x6xf32>) -> tensor<2x4xf32>
          func.return %11 : tensor<2x4xf32>
        }}
        """,
    )


def test_returned_activations_stay_nchw() -> None:
    # Results are NCHW buffers: the returned relu (and the convolution it is computed
    # from) keep their layout; only the image copy is skipped with convert-inputs=false.
    text = f"""
    func.func @forward(%x: tensor<2x3x6x6xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32> {{
      %0 = aten.convolution.default(%x, %w, padding = [1, 1], {CONV}) : (tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32>
      %1 = aten.relu.default(%0) : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
      func.return %1 : tensor<2x4x6x6xf32>
    }}
    """
    before, after = run_pass(ChannelsLastPass(), text)
    names = [op.name for op in after.walk() if isinstance(op, AtenOp)]
    assert "aten.permute.default" not in names
    assert_same_numbers(before, after)
    before, after = run_pass(ChannelsLastPass(convert_inputs=False), CONV_RELU_CONV)
    assert "aten.clone.default" not in [op.name for op in after.walk()]
    assert_same_numbers(before, after)


def test_a_contiguous_clone_does_not_keep_what_it_copies_nchw() -> None:
    # ShuffleNet's branches concatenated, then copied contiguous (its channel shuffle)
    # and returned (a training forward's saved activation): the returned clone is NCHW
    # whatever its input's layout, so the cat writes NHWC (it stayed NCHW, and with it
    # every block after it).
    text = f"""
    func.func @forward(%x: tensor<2x16x8x8xf32>, %w: tensor<16x16x3x3xf32>) -> tensor<2x32x8x8xf32> {{
      %0 = aten.convolution.default(%x, %w, padding = [1, 1], {CONV}) : (tensor<2x16x8x8xf32>, tensor<16x16x3x3xf32>) -> tensor<2x16x8x8xf32>
      %1 = aten.relu.default(%0) : (tensor<2x16x8x8xf32>) -> tensor<2x16x8x8xf32>
      %2 = aten.sigmoid.default(%0) : (tensor<2x16x8x8xf32>) -> tensor<2x16x8x8xf32>
      %3 = aten.cat.default(tensors = [%1, %2], dim = 1) : (tensor<2x16x8x8xf32>, tensor<2x16x8x8xf32>) -> tensor<2x32x8x8xf32>
      %4 = aten.clone.default(%3, memory_format = "contiguous_format") : (tensor<2x32x8x8xf32>) -> tensor<2x32x8x8xf32>
      func.return %4 : tensor<2x32x8x8xf32>
    }}
    """
    before, after = run_pass(ChannelsLastPass(), text)
    (cat,) = [op for op in after.walk() if isinstance(op, AtenOp) and op.name == "aten.cat.default"]
    assert "dim = 3" in printed(cat)
    assert_same_numbers(before, after)
    # A clone keeping its input's layout still keeps a returned value's producers NCHW.
    preserving = text.replace(
        'memory_format = "contiguous_format"', 'memory_format = "preserve_format"'
    )
    _, after = run_pass(ChannelsLastPass(), preserving)
    (cat,) = [op for op in after.walk() if isinstance(op, AtenOp) and op.name == "aten.cat.default"]
    assert "dim = 1" in printed(cat)


def test_leaves_graphs_without_2d_convolutions_alone() -> None:
    text = """
    func.func @forward(%x: tensor<2x3x6x6xf32>, %y: tensor<3x1x1xf32>) -> tensor<2x3x6x6xf32> {
      %0 = aten.add.Tensor(%x, %y) : (tensor<2x3x6x6xf32>, tensor<3x1x1xf32>) -> tensor<2x3x6x6xf32>
      func.return %0 : tensor<2x3x6x6xf32>
    }
    """
    assert_pass_output(ChannelsLastPass(), text, text)


def assert_same_numbers(before: ModuleOp, after: ModuleOp, seed: int = 0) -> None:
    """The functions compute the same values on random inputs (strides are not compared:
    layouts are what the pass changes)."""
    generator = torch.Generator().manual_seed(seed)
    for func in before.ops:
        if isinstance(func, FuncOp):
            inputs = random_args(func, generator)
            expected = run_function(before, inputs, func.sym_name.data)
            actual = run_function(after, inputs, func.sym_name.data)
            assert len(actual) == len(expected)
            for got, want in zip(actual, expected, strict=True):
                assert_close(got, want)


@pytest.mark.parametrize("seed", [0, 1])
def test_same_numbers_through_the_aten_interpreter(seed: int) -> None:
    before, after = run_pass(ChannelsLastPass(), CONV_RELU_CONV)
    assert_same_numbers(before, after, seed)


# --- whole models: C++ backend against eager on fresh inputs ---------------------------


class Block(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(x + self.bn2(self.conv2(y)))


class SmallResNet(nn.Module):
    """Stem conv+BN+ReLU, max pool, two residual blocks, a strided conv, global mean."""

    def __init__(self, channels: int = 8) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, channels, 3, padding=1), nn.BatchNorm2d(channels), nn.ReLU()
        )
        self.pool = nn.MaxPool2d(2)
        self.blocks = nn.Sequential(Block(channels), Block(channels))
        self.down = nn.Conv2d(channels, 2 * channels, 3, stride=2, padding=1, groups=2)
        self.head = nn.Linear(2 * channels, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.down(self.blocks(self.pool(self.stem(x))))
        return self.head(torch.sigmoid(y).mean(dim=(2, 3)))


def small_resnet() -> SmallResNet:
    torch.manual_seed(0)
    model = SmallResNet()
    randomize_batch_norms(model)
    return model.eval()


def lowered(gm: torch.fx.GraphModule, pipeline: str) -> ModuleOp:
    module = import_graph(gm)
    registry = default_registry()
    PassPipeline.parse_spec(registry.passes, pipeline).apply(registry.make_context(), module)
    module.verify()
    return module


def kernel_count(module: ModuleOp) -> int:
    """Kernel launches: identical kernels (the weight copies) share one ``kernel.kernel``
    after ``dedup-kernels``, each copy is still a launch."""
    return sum(1 for op in module.walk() if op.name == "kernel.launch")


def run_with(
    module: ModuleOp, params: Sequence[torch.Tensor], inputs: Sequence[torch.Tensor]
) -> list[Any]:
    """The program's results, rebuilt as the FX graph returns them (flat, Nones dropped)."""
    outputs = build_cpp_program(module)([*params, *inputs])
    values = list(outputs) if isinstance(outputs, list | tuple) else [outputs]
    structure = next(
        (op.attributes[OUTPUTS_ATTR] for op in module.ops if OUTPUTS_ATTR in op.attributes), None
    )
    if isinstance(structure, StringAttr):
        values = _flat(rebuild_structure(structure.data, values))
    return [v for v in values if v is not None]


def test_resnet_inference_matches_eager_on_fresh_inputs() -> None:
    model = small_resnet()
    capture = capture_aot(model, torch.randn(2, 3, 16, 16))
    params = capture.example_inputs[:-1]
    module = lowered(capture.gm, DEFAULT_PIPELINE)
    for _ in range(2):
        x = torch.randn(2, 3, 16, 16)
        with torch.no_grad():
            expected = model(x)
        (actual,) = run_with(module, params, [x])
        assert_close(actual, expected)


def _extern_overloads(module: ModuleOp) -> list[list[str]]:
    return [
        [inner.overload_name for inner in op.walk() if isinstance(inner, AtenOp)]
        for op in module.walk()
        if op.name == "kernel.extern"
    ]


def test_no_copy_kernels_and_nhwc_extern_results() -> None:
    model = small_resnet()
    capture = capture_aot(model, torch.randn(2, 3, 16, 16))
    without = lowered(capture.gm, WITHOUT)
    with_pass = lowered(capture.gm, DEFAULT_PIPELINE)
    no_input_copy = lowered(capture.gm, NO_INPUT_COPY)
    # Layout changes add no kernel; the image's copy to channels-last is the one extra.
    assert kernel_count(no_input_copy) == kernel_count(without)
    assert kernel_count(with_pass) == kernel_count(without) + 1
    # Every convolution returns an NHWC buffer straight from ATen (the max pool is a
    # kernel, writing NHWC too: it reads a channels-last input).
    bodies = [b for b in _extern_overloads(with_pass) if "aten::addmm.default" not in b]
    assert len(bodies) == 6
    for body in bodies:
        assert body[0] == "aten::as_strided.default"
        assert body[-1] == "aten::permute.default"


def test_batch_norm_left_to_aten_keeps_channels_last() -> None:
    # Without decompose, batch norm runs as an ATen extern: it takes its input's layout
    # like the convolutions do, so the relu after it still computes NHWC.
    model = small_resnet()
    capture = capture_aot(model, torch.randn(2, 3, 16, 16))
    params = capture.example_inputs[:-1]
    pipeline = "canonicalize,cse,dce,channels-last,lower-aten,fuse,tile,buffer-reuse"
    module = lowered(capture.gm, pipeline)
    bodies = _extern_overloads(module)
    norms = [b for b in bodies if "aten::_native_batch_norm_legit_no_training.default" in b]
    assert len(norms) == 5
    assert all(b[-1] == "aten::permute.default" for b in norms)
    without = lowered(capture.gm, pipeline.replace("channels-last,", ""))
    assert kernel_count(module) == kernel_count(without) + 1
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        expected = model(x)
    (actual,) = run_with(module, params, [x])
    assert_close(actual, expected)


@pytest.mark.parametrize(
    "pipeline", [NO_INPUT_COPY, WEIGHT_COPIES], ids=["no-input-copy", "weights"]
)
def test_copy_options_are_exact(pipeline: str) -> None:
    model = small_resnet()
    capture = capture_aot(model, torch.randn(2, 3, 16, 16))
    params = capture.example_inputs[:-1]
    module = lowered(capture.gm, pipeline)
    if pipeline == WEIGHT_COPIES:  # one copy per convolution weight, and the image's
        without = lowered(capture.gm, WITHOUT)
        assert kernel_count(module) == kernel_count(without) + 7
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        expected = model(x)
    (actual,) = run_with(module, params, [x])
    assert_close(actual, expected)


def test_returned_feature_maps_and_dynamic_shapes() -> None:
    # A feature map returned alongside the logits stays NCHW; symbolic sizes work.
    def fn(
        x: torch.Tensor, w: torch.Tensor, w2: torch.Tensor, b: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        y = F.relu(F.conv2d(x, w, padding=1) + b)
        z = F.conv2d(y, w2, padding=1)
        return z, torch.tanh(z + y).sum(dim=(2, 3))

    w, w2, b = torch.randn(4, 3, 3, 3), torch.randn(4, 4, 3, 3), torch.randn(4, 1, 1)
    # Distinct sizes at trace time: make_fx duck-sizes equal dims into one symbol.
    capture = capture_make_fx(fn, torch.randn(2, 3, 6, 8), w, w2, b, dynamic=True)
    module = lowered(capture.gm, DEFAULT_PIPELINE)
    program = build_cpp_program(module)
    for shape in ((2, 3, 6, 8), (3, 3, 5, 7)):
        x = torch.randn(*shape)
        actual = program([x, w, w2, b])
        for got, want in zip(actual, fn(x, w, w2, b), strict=True):
            assert_close(got, want)


@pytest.mark.parametrize(
    ("image", "channels"),
    [((1, 1, 5, 5), 3), ((3, 2, 4, 4), 1), ((2, 3, 3, 3), 5)],
    ids=["one-channel-image", "one-channel-maps", "1x1-maps"],
)
def test_degenerate_shapes(image: tuple[int, ...], channels: int) -> None:
    # One channel or 1x1 maps make NCHW and NHWC strides coincide: ATen may then return
    # either layout, and the results must be right whichever it picks.
    def fn(x: torch.Tensor, w: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
        y = torch.relu(F.conv2d(x, w, stride=2))
        return F.conv2d(y * 2, w2).sum(dim=(2, 3))

    w = (
        torch.randn(channels, image[1], 3, 3)
        if image[2] > 3
        else torch.randn(channels, image[1], 2, 2)
    )
    w2 = torch.randn(channels, channels, 1, 1)
    capture = capture_make_fx(fn, torch.randn(*image), w, w2)
    program = build_cpp_program(lowered(capture.gm, DEFAULT_PIPELINE))
    x = torch.randn(*image)
    (actual,) = program([x, w, w2])
    assert_close(actual, fn(x, w, w2))


def test_training_step_gradients_match_eager() -> None:
    # Forward graphs of a training step return the activations (kept NCHW); backward
    # graphs have no convolution op. Both must stay right.
    model = SmallResNet().train()
    x = torch.randn(2, 3, 16, 16)
    graphs = capture_aot_training(model, x)
    for graph in (graphs.forward, graphs.backward):
        module = lowered(graph.gm, DEFAULT_PIPELINE)
        reference = lowered(graph.gm, WITHOUT)
        args = [a.clone() if isinstance(a, torch.Tensor) else a for a in graph.example_inputs]
        actual = run_with(module, [], args)
        args = [a.clone() if isinstance(a, torch.Tensor) else a for a in graph.example_inputs]
        expected = run_with(reference, [], args)
        eager = [v for v in _flat(graph.gm(*graph.example_inputs)) if v is not None]
        assert len(actual) == len(eager)
        for got, ref, want in zip(actual, expected, eager, strict=True):
            assert_close(got, want)
            assert_close(got, ref)


def _flat(value: Any) -> list[Any]:
    if isinstance(value, list | tuple):
        return [v for item in value for v in _flat(item)]
    return [value]


def test_semantics_of_a_captured_resnet_through_the_interpreter() -> None:
    model = small_resnet()
    capture = capture_aot(model, torch.randn(2, 3, 16, 16))
    before = lowered(capture.gm, "decompose,canonicalize,cse,dce")
    after = before.clone()
    ChannelsLastPass().apply(default_registry().make_context(), after)
    after.verify()
    assert any(op.name == "aten.permute.default" for op in after.walk())
    params = capture.example_inputs[:-1]
    x = torch.randn(2, 3, 16, 16)
    (expected,) = run_function(before, [*params, x])
    (actual,) = run_function(after, [*params, x])
    assert_close(actual, expected)
    with torch.no_grad():
        assert_close(actual, model(x))


def test_printed_ir_parses_back() -> None:
    _, after = run_pass(ChannelsLastPass(), CONV_RELU_CONV)
    text = printed(after)
    assert printed(parse(text)) == text


SMALL_BATCH_ONE = f"""
func.func @forward(%x: tensor<1x64x8x8xf32>, %w: tensor<64x64x3x3xf32>) -> tensor<1x64xf32> {{
  %0 = aten.convolution.default(%x, %w, padding = [1, 1], {CONV}) : (tensor<1x64x8x8xf32>, tensor<64x64x3x3xf32>) -> tensor<1x64x8x8xf32>
  %1 = aten.relu.default(%0) : (tensor<1x64x8x8xf32>) -> tensor<1x64x8x8xf32>
  %2 = aten.mean.dim(%1, dim = [2, 3]) : (tensor<1x64x8x8xf32>) -> tensor<1x64xf32>
  func.return %2 : tensor<1x64xf32>
}}
"""


def test_cpu_convolutions_aten_runs_with_its_reference_kernel_stay_nchw() -> None:
    """A small batch-1 convolution runs in ATen's ``Slow2d`` kernel, which on a
    channels-last input copies the NCHW weight channels-last on every call (ResNet-18 at
    64x64: 31 ms against 16 ms NCHW): on the CPU such a function stays NCHW; on a GPU
    (cuDNN) it still becomes NHWC."""
    from kiln.passes.channels_last_parts.cpu_heuristics import cpu_convolution_backend

    module = parse(SMALL_BATCH_ONE)
    conv = next(op for op in module.walk() if isinstance(op, AtenOp))
    assert cpu_convolution_backend(conv) == "Slow2d"
    assert_pass_output(ChannelsLastPass(), SMALL_BATCH_ONE, SMALL_BATCH_ONE)
    on_gpu = 'builtin.module attributes {"kiln.device" = "cuda:0"} {' + SMALL_BATCH_ONE + "}"
    assert "aten.permute" in printed(run_pass(ChannelsLastPass(), on_gpu)[1])
    # Where ATen picks oneDNN (it depends on the batch and the thread count), the CPU
    # converts too.
    batch_two = next(op for op in parse(CONV_RELU_CONV).walk() if isinstance(op, AtenOp))
    converted = "aten.permute" in printed(run_pass(ChannelsLastPass(), CONV_RELU_CONV)[1])
    assert converted == (cpu_convolution_backend(batch_two) != "Slow2d")


# ConvNeXt: a depthwise convolution, LayerNorm over channels on the NHWC permute, then
# ``permute(0, 3, 1, 2)`` back and a residual add feeding the next convolution.
NHWC_BLOCK = """
func.func @forward(%x: tensor<2x4x6x6xf32>, %w: tensor<4x1x3x3xf32>, %w2: tensor<4x1x3x3xf32>) -> tensor<2x4xf32> {
  %0 = aten.convolution.default(%x, %w, padding = [1, 1], stride = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 4) : (tensor<2x4x6x6xf32>, tensor<4x1x3x3xf32>) -> tensor<2x4x6x6xf32>
  %1 = aten.permute.default(%0, dims = [0, 2, 3, 1]) : (tensor<2x4x6x6xf32>) -> tensor<2x6x6x4xf32>
  %2 = aten._softmax.default(%1, dim = 3, half_to_float = false) : (tensor<2x6x6x4xf32>) -> tensor<2x6x6x4xf32>
  %3 = aten.permute.default(%2, dims = [0, 3, 1, 2]) : (tensor<2x6x6x4xf32>) -> tensor<2x4x6x6xf32>
  %4 = aten.add.Tensor(%3, %0) : (tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %5 = aten.convolution.default(%4, %w2, padding = [1, 1], stride = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 4) : (tensor<2x4x6x6xf32>, tensor<4x1x3x3xf32>) -> tensor<2x4x6x6xf32>
  %6 = aten.mean.dim(%5, dim = [2, 3]) : (tensor<2x4x6x6xf32>) -> tensor<2x4xf32>
  func.return %6 : tensor<2x4xf32>
}
"""


def test_nchw_permute_of_a_contiguous_nhwc_tensor_stays_channels_last() -> None:
    # %3 is ``permute(0, 3, 1, 2)`` of the softmax's contiguous NHWC result: stored
    # channels-last, so the residual add computes NHWC and the second (depthwise)
    # convolution reads it without a copy. Before, the add wrote NCHW and the
    # convolution ran on NCHW: on the H200 ATen's slow NCHW depthwise kernel and
    # layout copies around every ConvNeXt block.
    on_gpu = 'builtin.module attributes {"kiln.device" = "cuda:0"} {' + NHWC_BLOCK + "}"
    _, after = run_pass(ChannelsLastPass(), on_gpu)
    convs = [op for op in after.walk() if isinstance(op, AtenOp) and "convolution" in op.name]
    second_input = convs[1].operands[0].owner
    assert isinstance(second_input, AtenOp)
    assert second_input.overload_name == "aten::permute.default"
    add = second_input.operands[0].owner
    assert isinstance(add, AtenOp)
    assert add.overload_name == "aten::add.Tensor"
    assert add.results[0].type.get_shape() == (2, 6, 6, 4)  # pyright: ignore[reportAttributeAccessIssue]
    # the add reads the softmax result itself, not a transposed view of it
    owners = [v.owner for v in add.operands]
    assert any(isinstance(o, AtenOp) and "_softmax" in o.overload_name for o in owners)
    before = parse(on_gpu)
    func = next(op for op in before.walk() if isinstance(op, FuncOp))
    args = random_args(func, torch.Generator().manual_seed(0))
    (expected,) = run_function(before, args)
    (actual,) = run_function(after, args)
    assert_close(actual, expected)


def test_convnext_style_blocks_match_eager_with_nhwc_between_convolutions() -> None:
    class Block(nn.Module):
        def __init__(self, c: int) -> None:
            super().__init__()
            self.dw = nn.Conv2d(c, c, 7, padding=3, groups=c)
            self.norm = nn.LayerNorm(c)
            self.fc1 = nn.Linear(c, 4 * c)
            self.fc2 = nn.Linear(4 * c, c)
            self.gamma = nn.Parameter(torch.randn(c))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.norm(self.dw(x).permute(0, 2, 3, 1))
            y = self.fc2(F.gelu(self.fc1(y))).permute(0, 3, 1, 2)
            return x + y.mul(self.gamma.reshape(1, -1, 1, 1))

    model = nn.Sequential(nn.Conv2d(3, 16, 4, 4), Block(16), Block(16)).eval()
    capture = capture_aot(model, torch.randn(2, 3, 32, 32))
    module = lowered(capture.gm, DEFAULT_PIPELINE)
    # Both depthwise convolutions read an NHWC buffer through a permute (no copy kernel
    # makes their input).
    convs = [body for body in _extern_overloads(module) if "aten::convolution.default" in body]
    assert len(convs) == 3
    params = capture.example_inputs[:-1]
    for _ in range(2):
        x = torch.randn(2, 3, 32, 32)
        with torch.no_grad():
            expected = model(x)
        (actual,) = run_with(module, params, [x])
        assert_close(actual, expected)


# ShuffleNet-v2's unit: split the channels, a 1x1 convolution on one half, concatenate,
# shuffle the channels (view, transpose, contiguous, view).
CHANNEL_SHUFFLE = f"""
func.func @forward(%x: tensor<2x3x6x6xf32>, %w: tensor<8x3x3x3xf32>, %w1: tensor<4x4x1x1xf32>) -> tensor<2x8xf32> {{
  %0 = aten.convolution.default(%x, %w, padding = [1, 1], {CONV}) : (tensor<2x3x6x6xf32>, tensor<8x3x3x3xf32>) -> tensor<2x8x6x6xf32>
  %1 = aten.relu.default(%0) : (tensor<2x8x6x6xf32>) -> tensor<2x8x6x6xf32>
  %a, %b = aten.split_with_sizes.default(%1, split_sizes = [4, 4], dim = 1) : (tensor<2x8x6x6xf32>) -> (tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>)
  %2 = aten.convolution.default(%b, %w1, padding = [0, 0], {CONV}) : (tensor<2x4x6x6xf32>, tensor<4x4x1x1xf32>) -> tensor<2x4x6x6xf32>
  %3 = aten.relu.default(%2) : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %4 = aten.cat.default(tensors = [%a, %3], dim = 1) : (tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>) -> tensor<2x8x6x6xf32>
  %5 = aten.view.default(%4, size = [2, 2, 4, 6, 6]) : (tensor<2x8x6x6xf32>) -> tensor<2x2x4x6x6xf32>
  %6 = aten.permute.default(%5, dims = [0, 2, 1, 3, 4]) : (tensor<2x2x4x6x6xf32>) -> tensor<2x4x2x6x6xf32>
  %7 = aten.clone.default(%6, memory_format = "contiguous_format") : (tensor<2x4x2x6x6xf32>) -> tensor<2x4x2x6x6xf32>
  %8 = aten.view.default(%7, size = [2, 8, 6, 6]) : (tensor<2x4x2x6x6xf32>) -> tensor<2x8x6x6xf32>
  %9 = aten.mean.dim(%8, dim = [2, 3]) : (tensor<2x8x6x6xf32>) -> tensor<2x8xf32>
  func.return %9 : tensor<2x8xf32>
}}
"""


def _aten_ops(module: ModuleOp, overload: str) -> list[AtenOp]:
    return [op for op in module.walk() if isinstance(op, AtenOp) and op.overload_name == overload]


def _shape(value: Any) -> tuple[int, ...]:
    return tuple(value.type.get_shape())


def test_split_cat_and_channel_shuffle_stay_channels_last() -> None:
    # Before, the layout stopped at the cat: the shuffle, the split and the next blocks'
    # 1x1 convolutions ran NCHW (ATen's oneDNN convolution, 2-5x slower than the matrix
    # product conv1x1-to-mm makes of an NHWC one: ShuffleNet-v2 0.75x Inductor).
    before, after = run_pass(ChannelsLastPass(), CHANNEL_SHUFFLE)
    (split,) = _aten_ops(after, "aten::split_with_sizes.default")
    assert _shape(split.operands[0]) == (2, 6, 6, 8)
    (cat,) = _aten_ops(after, "aten::cat.default")
    assert _shape(cat.results[0]) == (2, 6, 6, 8)
    views = [_shape(op.results[0]) for op in _aten_ops(after, "aten::view.default")]
    assert views == [(2, 6, 6, 2, 4), (2, 6, 6, 8)]
    (clone,) = [
        op for op in _aten_ops(after, "aten::clone.default") if _shape(op.results[0])[-1] == 2
    ]
    assert _shape(clone.results[0]) == (2, 6, 6, 4, 2)
    # the shuffled tensor is materialized NHWC once (a channels_last clone: a copy in
    # lower-aten), which the mean reads
    (mean,) = _aten_ops(after, "aten::mean.dim")
    stored = mean.operands[0].owner
    assert isinstance(stored, AtenOp)
    assert stored.overload_name == "aten::clone.default"
    assert stored.arg_attr("memory_format") == StringAttr("channels_last")
    # the 1x1 convolution reads the NCHW view of an NHWC channel slice: conv1x1-to-mm's
    # input, as strided rows
    pointwise = _aten_ops(after, "aten::convolution.default")[1]
    source = pointwise.operands[0].owner
    assert isinstance(source, AtenOp)
    assert source.overload_name == "aten::permute.default"
    assert source.operands[0].owner is split
    assert_same_numbers(before, after)
    assert_same_numbers(before, after, seed=1)


def test_channel_shuffle_pointwise_convolutions_become_mm() -> None:
    before = parse(CHANNEL_SHUFFLE)
    after = parse(CHANNEL_SHUFFLE)
    registry = default_registry()
    PassPipeline.parse_spec(registry.passes, "channels-last,conv1x1-to-mm").apply(
        registry.make_context(), after
    )
    assert len(_aten_ops(after, "aten::convolution.default")) == 1
    assert len(_aten_ops(after, "aten::mm.default")) == 1
    assert_same_numbers(before, after)


# The same unit under dynamo's dynamic=True: symbolic batch and image sizes, which the
# importer records as the tracer's expressions (kiln.traced_sizes); the shuffle's views
# take them as index values.
ANY = DYNAMIC_INDEX


def _symbolic_shuffle(view_batch: str = "s0") -> str:
    return f"""
func.func @forward(%n: index {{kiln.size_symbol = "s0"}}, %h: index {{kiln.size_symbol = "s1"}}, %x: tensor<?x3x?x?xf32> {{kiln.size_symbols = ["s0", "", "s1", "s1"]}}, %w: tensor<8x3x3x3xf32>) -> tensor<?x8xf32> {{
  %0 = aten.convolution.default(%x, %w, padding = [1, 1], {CONV}) {{kiln.traced_sizes = [["s0", "", "s1", "s1"]]}} : (tensor<?x3x?x?xf32>, tensor<8x3x3x3xf32>) -> tensor<?x8x?x?xf32>
  %1 = aten.relu.default(%0) : (tensor<?x8x?x?xf32>) -> tensor<?x8x?x?xf32>
  %5 = aten.view.default(%1, size = [%n, 2, 4, %h, %h]) {{kiln.traced_sizes = [["{view_batch}", "", "", "s1", "s1"]]}} : (tensor<?x8x?x?xf32>, index, index, index) -> tensor<?x2x4x?x?xf32>
  %6 = aten.permute.default(%5, dims = [0, 2, 1, 3, 4]) : (tensor<?x2x4x?x?xf32>) -> tensor<?x4x2x?x?xf32>
  %7 = aten.clone.default(%6, memory_format = "contiguous_format") {{kiln.traced_sizes = [["{view_batch}", "", "", "s1", "s1"]]}} : (tensor<?x4x2x?x?xf32>) -> tensor<?x4x2x?x?xf32>
  %8 = aten.view.default(%7, size = [%n, 8, %h, %h]) {{kiln.traced_sizes = [["{view_batch}", "", "s1", "s1"]]}} : (tensor<?x4x2x?x?xf32>, index, index, index) -> tensor<?x8x?x?xf32>
  %9 = aten.mean.dim(%8, dim = [2, 3]) : (tensor<?x8x?x?xf32>) -> tensor<?x8xf32>
  func.return %9 : tensor<?x8xf32>
}}
"""


def test_channel_shuffle_of_symbolic_sizes_stays_channels_last() -> None:
    # Before, a symbolic shape stopped the shuffle: it read the NCHW view of the NHWC
    # tensor, copied it NCHW, and every 1x1 convolution after it ran as an NCHW oneDNN
    # convolution (ShuffleNet-v2 under dynamic=True: 53 convolutions and 3 mm, 7.9 ms a
    # call against 3.1 ms static).
    _, after = run_pass(ChannelsLastPass(), _symbolic_shuffle())
    views = [_shape(op.results[0]) for op in _aten_ops(after, "aten::view.default")]
    assert views == [(ANY, ANY, ANY, 2, 4), (ANY, ANY, ANY, 8)]
    (clone,) = [
        op for op in _aten_ops(after, "aten::clone.default") if _shape(op.results[0])[-1] == 2
    ]
    assert _shape(clone.results[0]) == (ANY, ANY, ANY, 4, 2)
    assert str(clone.attributes["kiln.traced_sizes"]) == '[["s0", "s1", "s1", "", ""]]'
    (mean,) = _aten_ops(after, "aten::mean.dim")
    stored = mean.operands[0].owner
    assert isinstance(stored, AtenOp)
    assert stored.arg_attr("memory_format") == StringAttr("channels_last")


def test_channel_shuffle_of_other_symbolic_sizes_is_left_alone() -> None:
    # The shuffle's batch is not the tracer's batch of its input: its views are not a
    # per-position channel permutation of the input, so they stay as they are.
    _, after = run_pass(ChannelsLastPass(), _symbolic_shuffle(view_batch="2*s0"))
    views = [_shape(op.results[0]) for op in _aten_ops(after, "aten::view.default")]
    assert views == [(ANY, 2, 4, ANY, ANY), (ANY, 8, ANY, ANY)]


def test_returned_shuffle_keeps_nchw() -> None:
    # The shuffled tensor is returned: it (a view of the contiguous copy) stays NCHW. The
    # cat before that copy is free: the copy is NCHW whatever the cat's layout.
    text = CHANNEL_SHUFFLE.replace("-> tensor<2x8xf32> {", "-> tensor<2x8x6x6xf32> {").replace(
        "func.return %9 : tensor<2x8xf32>", "func.return %8 : tensor<2x8x6x6xf32>"
    )
    before, after = run_pass(ChannelsLastPass(), text)
    (cat,) = _aten_ops(after, "aten::cat.default")
    assert _shape(cat.results[0]) == (2, 6, 6, 8)
    assert [_shape(op.results[0]) for op in _aten_ops(after, "aten::view.default")] == [
        (2, 2, 4, 6, 6),
        (2, 8, 6, 6),
    ]
    assert_same_numbers(before, after)


def test_a_channel_slice_a_convolution_reads_is_copied_compact() -> None:
    """A 1x1 convolution too large for ``conv1x1-to-mm`` (more rows than its MAX_ROWS)
    on an NHWC channel slice: ATen got the strided slice, returned NCHW, and the branch
    ran NCHW up to the concatenation, which read it transposed (ShuffleNet-v2 at batch
    32 on the CPU: 0.56x Inductor). Now the slice is copied into a compact NHWC buffer
    and the convolution and its consumers stay channels-last."""
    # batch 128: 4608 rows
    text = re.sub(r"tensor<2x", "tensor<128x", CHANNEL_SHUFFLE).replace(
        "size = [2, ", "size = [128, "
    )
    before, after = run_pass(ChannelsLastPass(), text)
    pointwise = _aten_ops(after, "aten::convolution.default")[1]
    compact = pointwise.operands[0].owner
    assert isinstance(compact, AtenOp)
    assert compact.overload_name == "aten::clone.default"
    assert compact.arg_attr("memory_format") == StringAttr("channels_last")
    # the ReLU after it runs on its NHWC form
    (relu,) = [
        op
        for op in _aten_ops(after, "aten::relu.default")
        if _shape(op.results[0]) == (128, 6, 6, 4)
    ]
    assert relu is not None
    assert_same_numbers(before, after)


def _on_gpu(text: str) -> str:
    return 'builtin.module attributes {"kiln.device" = "cuda:0"} {' + text + "}"


def test_gpu_channel_plumbing_option_keeps_the_shuffle_nhwc() -> None:
    # On the GPU the cat, split and shuffle stay NCHW by default (ShuffleNet-v2 small
    # training on an H100 was no faster with them NHWC: session 42, train-kernels.md);
    # ``gpu-channel-plumbing`` rewrites them as on the CPU, computing the same numbers.
    before, default = run_pass(ChannelsLastPass(), _on_gpu(CHANNEL_SHUFFLE))
    (cat,) = _aten_ops(default, "aten::cat.default")
    assert _shape(cat.results[0]) == (2, 8, 6, 6)
    _, after = run_pass(ChannelsLastPass(gpu_channel_plumbing=True), _on_gpu(CHANNEL_SHUFFLE))
    (cat,) = _aten_ops(after, "aten::cat.default")
    assert _shape(cat.results[0]) == (2, 6, 6, 8)
    (split,) = _aten_ops(after, "aten::split_with_sizes.default")
    assert _shape(split.operands[0]) == (2, 6, 6, 8)
    assert_same_numbers(before, after)


def test_gpu_copy_nchw_inputs_option_copies_a_convolution_input_channels_last() -> None:
    # The 1x1 convolution reads a channel slice of a tensor kept NCHW (the split is not
    # rewritten on the GPU): without ``gpu-copy-nchw-inputs`` (on by default) it runs
    # NCHW (and so does its branch, with ATen's NCHW depthwise kernels in ShuffleNet);
    # with it, it reads a channels-last copy of the slice.
    before, default = run_pass(
        ChannelsLastPass(gpu_copy_nchw_inputs=False), _on_gpu(CHANNEL_SHUFFLE)
    )
    pointwise = _aten_ops(default, "aten::convolution.default")[1]
    assert isinstance(pointwise.operands[0].owner, AtenOp)
    assert pointwise.operands[0].owner.overload_name == "aten::split_with_sizes.default"
    _, after = run_pass(ChannelsLastPass(), _on_gpu(CHANNEL_SHUFFLE))
    pointwise = _aten_ops(after, "aten::convolution.default")[1]
    copy = pointwise.operands[0].owner
    assert isinstance(copy, AtenOp)
    assert copy.overload_name == "aten::clone.default"
    assert copy.arg_attr("memory_format") == StringAttr("channels_last")
    assert_same_numbers(before, after)
    # On the CPU the option does nothing.
    _, cpu = run_pass(ChannelsLastPass(), CHANNEL_SHUFFLE)
    _, cpu_default = run_pass(ChannelsLastPass(gpu_copy_nchw_inputs=False), CHANNEL_SHUFFLE)
    assert printed(cpu) == printed(cpu_default)


SQUEEZE_EXCITE = f"""
func.func @forward(%x: tensor<2x3x6x6xf32>, %w: tensor<8x3x3x3xf32>, %w1: tensor<4x8x1x1xf32>, %w2: tensor<8x4x1x1xf32>) -> tensor<2x8xf32> {{
  %0 = aten.convolution.default(%x, %w, padding = [1, 1], {CONV}) : (tensor<2x3x6x6xf32>, tensor<8x3x3x3xf32>) -> tensor<2x8x6x6xf32>
  %1 = aten.relu.default(%0) : (tensor<2x8x6x6xf32>) -> tensor<2x8x6x6xf32>
  %2 = aten.mean.dim(%1, dim = [2, 3], keepdim = true) : (tensor<2x8x6x6xf32>) -> tensor<2x8x1x1xf32>
  %3 = aten.convolution.default(%2, %w1, padding = [0, 0], {CONV}) : (tensor<2x8x1x1xf32>, tensor<4x8x1x1xf32>) -> tensor<2x4x1x1xf32>
  %4 = aten.relu.default(%3) : (tensor<2x4x1x1xf32>) -> tensor<2x4x1x1xf32>
  %5 = aten.convolution.default(%4, %w2, padding = [0, 0], {CONV}) : (tensor<2x4x1x1xf32>, tensor<8x4x1x1xf32>) -> tensor<2x8x1x1xf32>
  %6 = aten.sigmoid.default(%5) : (tensor<2x8x1x1xf32>) -> tensor<2x8x1x1xf32>
  %7 = aten.mul.Tensor(%1, %6) : (tensor<2x8x6x6xf32>, tensor<2x8x1x1xf32>) -> tensor<2x8x6x6xf32>
  %8 = aten.mean.dim(%7, dim = [2, 3]) : (tensor<2x8x6x6xf32>) -> tensor<2x8xf32>
  func.return %8 : tensor<2x8xf32>
}}
"""


def test_gpu_copy_nchw_inputs_leaves_single_pixel_inputs_alone() -> None:
    # A squeeze-excite block's pooled [N, C, 1, 1] is NHWC and NCHW at once: a copy would
    # change only its strides, for a kernel launch (nine in MobileNet-v3's forward).
    before, after = run_pass(ChannelsLastPass(), _on_gpu(SQUEEZE_EXCITE))
    (image_copy,) = _aten_ops(after, "aten::clone.default")
    image = image_copy.parent_block()
    assert image is not None
    assert image_copy.operands[0] == image.args[0]
    assert_same_numbers(before, after)

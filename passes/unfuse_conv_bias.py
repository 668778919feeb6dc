"""``unfuse-conv-bias``: on a GPU, a convolution's bias becomes a pointwise ``add``.

ATen's cuDNN convolutions take no bias: ``aten.convolution`` runs the convolution, then
adds the bias in a kernel of its own (an ``add_`` broadcast over the output; on a
channels-last output ATen's slow strided elementwise kernel). Split out, the add is a
pointwise op that fuses into the kernel reading the convolution anyway (a LayerNorm, a
GELU, a residual add), as Inductor's convolution lowering does on GPUs. ConvNeXt-atto
bf16 on the H200 ran 44 such kernels, a quarter of its kernel time::

    %0 = aten.convolution.default(%x, %w, bias = %b, stride = [1, 1], ...) : (...) -> tensor<2x8x6x6xf32>

becomes::

    %conv = aten.convolution.default(%x, %w, stride = [1, 1], ...) : (...) -> tensor<2x8x6x6xf32>
    %bias = aten.view.default(%b, size = [8, 1, 1]) : (tensor<8xf32>) -> tensor<8x1x1xf32>
    %0 = aten.add.Tensor(%conv, %bias) : (tensor<2x8x6x6xf32>, tensor<8x1x1xf32>) -> tensor<2x8x6x6xf32>

The numbers are eager's: ATen rounds the convolution to its dtype and then adds the
bias, as the add here does.

The backward's bias gradient likewise: ``convolution_backward`` with ``output_mask[2]``
set sums the output gradient over every dimension but the channels in an ATen reduction
kernel of its own (ConvNeXt-atto's training step on the H200: 39 of them, 0.88 ms of
its 11.1, the whole gap to Inductor). As a ``sum`` it fuses into the kernel that computes
that gradient, as Inductor's ``convolution_backward`` lowering does::

    %gi, %gw, %gb = aten.convolution_backward.default(%g, %x, %w, ..., output_mask = [true, true, true]) : (...) -> (tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>)

becomes::

    %gi, %gw, %0 = aten.convolution_backward.default(%g, %x, %w, ..., output_mask = [true, true, false]) : (...) -> (tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>, none)
    %gb = aten.sum.dim_IntList(%g, dim = [0, 2, 3]) : (tensor<2x4x6x6xf32>) -> tensor<4xf32>

(ATen's own bias gradient is that sum, accumulated in float32 for 16-bit dtypes as
kiln's reductions are.) Only on CUDA (``kiln.device``): oneDNN on the CPU applies the
bias inside the convolution, and sums its gradient, for free. Convolutions with
symbolic sizes are left alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, NoneType, TensorType
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from kiln.dialects.aten import AtenOp
from kiln.dialects.aten.dialect import op_class
from kiln.dialects.aten.function_attrs import module_device

CONVOLUTION = "aten::convolution.default"
CONVOLUTION_BACKWARD = "aten::convolution_backward.default"


def _on_cuda(module: ModuleOp) -> bool:
    return module_device(module).startswith("cuda")


def _static(ty: Any) -> bool:
    return isinstance(ty, TensorType) and all(d >= 0 for d in ty.get_shape())  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]


def _arguments(op: AtenOp, tensors: dict[str, Any]) -> dict[str, Any]:
    """``tensors`` and every non-tensor argument ``op`` was given, as ``from_args`` takes
    them (to rebuild ``op`` with some of them changed)."""
    args = dict(tensors)
    for spec in op.op_schema().arguments:
        if not spec.kind.is_tensor and op.arg_attr(spec.name) is not None:
            args[spec.name] = op.static_arg(spec.name)
    return args


class UnfuseConvBias(RewritePattern):
    """``convolution(x, w, b)`` -> ``add(convolution(x, w), view(b, [C, 1, ...]))``."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: AtenOp, rewriter: PatternRewriter) -> None:
        if op.overload_name != CONVOLUTION or op.sym_operands() or len(op.results) != 1:
            return
        tensors = op.tensor_operands()
        bias = (tensors.get("bias") or [None])[0]
        result = op.results[0]
        if bias is None or not _static(result.type) or not _static(bias.type):
            return
        result_type = result.type
        bias_type = bias.type
        assert isinstance(result_type, TensorType)
        assert isinstance(bias_type, TensorType)
        shape: tuple[int, ...] = result_type.get_shape()  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        if len(shape) < 3 or bias_type.get_shape() != (shape[1],):  # pyright: ignore[reportUnknownMemberType]
            return
        args = _arguments(op, {"input": tensors["input"][0], "weight": tensors["weight"][0]})
        conv_class, view_class, add_class = (
            op_class("convolution.default"),
            op_class("view.default"),
            op_class("add.Tensor"),
        )
        assert conv_class is not None
        assert view_class is not None
        assert add_class is not None
        conv = conv_class.from_args(args, [result_type])
        view_shape = [shape[1], *([1] * (len(shape) - 2))]
        view = view_class.from_args(
            {"self": bias, "size": view_shape},
            [TensorType(bias_type.element_type, view_shape)],  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
        )
        add = add_class.from_args(
            {"self": conv.results[0], "other": view.results[0]}, [result_type]
        )
        for new in (conv, view, add):
            new.location = op.location
        conv.results[0].name_hint = "conv"
        view.results[0].name_hint = "bias"
        name = result.name_hint
        rewriter.replace(op, [conv, view, add])
        add.results[0].name_hint = name


class UnfuseConvBiasGradient(RewritePattern):
    """``convolution_backward(..., output_mask = [a, b, true])`` ->
    ``convolution_backward(..., output_mask = [a, b, false])`` and ``sum(g, [0, 2, ...])``."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: AtenOp, rewriter: PatternRewriter) -> None:
        if op.overload_name != CONVOLUTION_BACKWARD or op.sym_operands() or len(op.results) != 3:
            return
        mask = list(op.static_arg("output_mask"))
        grad_bias = op.results[2]
        grad_output = op.tensor_operands()["grad_output"][0]
        if len(mask) != 3 or not mask[2] or not isinstance(grad_bias.type, TensorType):
            return
        if not all(_static(r.type) for r in op.results if not isinstance(r.type, NoneType)):
            return
        if grad_output is None or not _static(grad_output.type):
            return
        grad_type = grad_output.type
        assert isinstance(grad_type, TensorType)
        rank = len(grad_type.get_shape())  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
        if rank < 3 or grad_bias.type.get_shape() != (grad_type.get_shape()[1],):  # pyright: ignore[reportUnknownMemberType]
            return
        args = _arguments(
            op, {name: tensors[0] for name, tensors in op.tensor_operands().items() if tensors}
        )
        args["output_mask"] = [mask[0], mask[1], False]
        backward_class, sum_class = (
            op_class("convolution_backward.default"),
            op_class("sum.dim_IntList"),
        )
        assert backward_class is not None
        assert sum_class is not None
        backward = backward_class.from_args(
            args, [op.results[0].type, op.results[1].type, NoneType()]
        )
        # What the importer recorded about the results (``kiln.result_orders``: cuDNN's
        # channels-last input gradient); without it each became an NCHW copy.
        backward.attributes.update(op.attributes)
        total = sum_class.from_args(
            {"self": grad_output, "dim": [0, *range(2, rank)]}, [grad_bias.type]
        )
        for new in (backward, total):
            new.location = op.location
        names = [r.name_hint for r in op.results]
        rewriter.replace(op, [backward, total], [*backward.results[:2], total.results[0]])
        for result, name in zip((*backward.results[:2], total.results[0]), names, strict=True):
            result.name_hint = name


@dataclass(frozen=True)
class UnfuseConvBiasPass(ModulePass):
    """On CUDA, add convolution biases in pointwise ops (see the module docstring)."""

    name: ClassVar[str] = "unfuse-conv-bias"  # pyright: ignore[reportIncompatibleVariableOverride]

    force: bool = False
    """Rewrite whatever the device (tests; the CPU gains nothing)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if not (self.force or _on_cuda(op)):
            return
        PatternRewriteWalker(
            GreedyRewritePatternApplier([UnfuseConvBias(), UnfuseConvBiasGradient()]),
            apply_recursively=False,
        ).rewrite_module(op)


__all__ = ["UnfuseConvBias", "UnfuseConvBiasGradient", "UnfuseConvBiasPass"]

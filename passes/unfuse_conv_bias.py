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
bias, as the add here does. Only on CUDA (``kiln.device``): oneDNN on the CPU applies the
bias inside the convolution for free. Convolutions with symbolic sizes are left alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from kiln.dialects.aten import AtenOp
from kiln.dialects.aten.dialect import op_class
from kiln.dialects.aten.encoding import decode_value
from kiln.dialects.aten.function_attrs import module_device

CONVOLUTION = "aten::convolution.default"


def _on_cuda(module: ModuleOp) -> bool:
    return module_device(module).startswith("cuda")


def _static(ty: Any) -> bool:
    return isinstance(ty, TensorType) and all(d >= 0 for d in ty.get_shape())  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]


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
        args: dict[str, Any] = {"input": tensors["input"][0], "weight": tensors["weight"][0]}
        for spec in op.op_schema().arguments:
            if spec.name in ("input", "weight", "bias"):
                continue
            attr = op.arg_attr(spec.name)
            if attr is not None:
                args[spec.name] = decode_value(spec, attr, ())
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


@dataclass(frozen=True)
class UnfuseConvBiasPass(ModulePass):
    """On CUDA, add convolution biases in pointwise ops (see the module docstring)."""

    name: ClassVar[str] = "unfuse-conv-bias"  # pyright: ignore[reportIncompatibleVariableOverride]

    force: bool = False
    """Rewrite whatever the device (tests; the CPU gains nothing)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if not (self.force or _on_cuda(op)):
            return
        PatternRewriteWalker(UnfuseConvBias(), apply_recursively=False).rewrite_module(op)


__all__ = ["UnfuseConvBias", "UnfuseConvBiasPass"]

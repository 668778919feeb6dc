"""``patch-conv-to-mm``: a convolution whose kernel tiles the image (a ViT's patch embedding) as one matrix product (GPU).

A 2-D convolution with kernel == stride, no padding, dilation 1 and one group reads
every input pixel exactly once: its patches are a permutation of the input, and the
convolution is the product of the ``[N*Hp*Wp, C*kh*kw]`` patch rows with the
``[O, C*kh*kw]`` weight transposed, whose rows are the NHWC result. cuDNN ran ViT-tiny's
16x16/16 patch embedding (3 channels, bfloat16, batch 2) in 97 us on the H200 given the
NHWC input ``channels-last`` made, and 45 us given Inductor's NCHW one; as a copy of the
patches (a kiln kernel) and one cuBLAS product it is a few microseconds::

    %y = aten.convolution.default(%x, %w, stride = [16, 16], padding = [0, 0], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1) : (tensor<2x3x224x224xbf16>, tensor<192x3x16x16xbf16>) -> tensor<2x192x14x14xbf16>

becomes::

    %x_6d = aten.reshape.default(%x, shape = [2, 3, 14, 16, 14, 16]) : (...) -> tensor<2x3x14x16x14x16xbf16>
    %patches = aten.permute.default(%x_6d, dims = [0, 2, 4, 1, 3, 5]) : (...) -> tensor<2x14x14x3x16x16xbf16>
    %x_rows = aten.reshape.default(%patches, shape = [392, 768]) : (...) -> tensor<392x768xbf16>
    %w_2d = aten.reshape.default(%w, shape = [192, 768]) : (...) -> tensor<192x768xbf16>
    %w_t = aten.permute.default(%w_2d, dims = [1, 0]) : (...) -> tensor<768x192xbf16>
    %mm = aten.mm.default(%x_rows, %w_t) : (...) -> tensor<392x192xbf16>
    %y_nhwc = aten.reshape.default(%mm, shape = [2, 14, 14, 192]) : (...) -> tensor<2x14x14x192xbf16>
    %y = aten.permute.default(%y_nhwc, dims = [0, 3, 1, 2]) : (...) -> tensor<2x192x14x14xbf16>

(with a bias, ``addmm``; ``unfuse-conv-bias`` has usually made it an add already). The
consumers of a patch embedding flatten and transpose it to tokens, which is then a view
of the product's rows. It runs before ``channels-last`` (nothing is left for it to
convert) and before ``pad-mm`` (which pads the product if it needs it).

Only on CUDA (``kiln.device``), with static sizes, image sizes that the kernel divides
(no row or column the convolution would drop) and a kernel of more than one pixel (1x1
convolutions are ``conv1x1-to-mm``'s on the CPU and cuDNN's on the GPU); a convolution
whose result the function returns is left alone (its layout is the function's output
layout). A float32 convolution with more than ``float32-max-channels`` (4) input
channels is left to cuDNN unless float32 products run in TF32: cuDNN runs it in TF32
tensor-core kernels, cuBLAS the product in full float32 on FFMA units, slower (see the
option). The numbers change only by rounding (cuBLAS's summation order instead of
cuDNN's; for a float32 stem, full float32 products where eager's cuDNN rounds the
operands to TF32).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import Float32Type, ModuleOp, TensorType
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from kiln.dialects.aten.dialect import op_class
from kiln.dialects.aten.function_attrs import runs_on_cpu, tf32_matmul
from kiln.dialects.aten.memory_format import NCHW
from kiln.dialects.aten.ops import AtenOp
from kiln.dialects.aten.shapes import static_shape

CONVOLUTION = "aten::convolution.default"


def is_patch_convolution(op: AtenOp) -> bool:
    """A static 2-D convolution whose kernel tiles its input exactly: kernel == stride
    (more than one pixel), no padding, dilation 1, one group, not transposed."""
    if op.overload_name != CONVOLUTION or len(op.results) != 1 or op.sym_operands():
        return False
    tensors = op.tensor_operands()
    x = static_shape(tensors["input"][0], 4)
    w = static_shape(tensors["weight"][0], 4)
    y = static_shape(op.results[0], 4)
    bias = tensors["bias"][0] if tensors.get("bias") else None
    if x is None or w is None or y is None:
        return False
    if bias is not None and static_shape(bias, 1) != (w[0],):
        return False
    kernel = list(w[2:])
    return (
        op.static_arg("transposed") is False
        and op.static_arg("groups") == 1
        and list(op.static_arg("stride")) == kernel
        and all(p == 0 for p in op.static_arg("padding"))
        and all(d == 1 for d in op.static_arg("dilation"))
        and kernel[0] * kernel[1] > 1
        and w[1] == x[1]
        and x[2] % kernel[0] == 0
        and x[3] % kernel[1] == 0
        and y == (x[0], w[0], x[2] // kernel[0], x[3] // kernel[1])
    )


def _is_float32(value: SSAValue) -> bool:
    ty = value.type
    return isinstance(ty, TensorType) and isinstance(ty.element_type, Float32Type)


def _returned(value: SSAValue) -> bool:
    return any(isinstance(use.operation, ReturnOp) for use in value.uses)


def _rewrite(op: AtenOp) -> SSAValue:
    """``op`` as a patch copy and one product; returns the NCHW view replacing its result."""
    tensors = op.tensor_operands()
    x, weight = tensors["input"][0], tensors["weight"][0]
    assert x is not None
    assert weight is not None
    bias = tensors["bias"][0] if tensors.get("bias") else None
    ty = x.type
    assert isinstance(ty, TensorType)
    element: Attribute = ty.element_type  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    x_shape, w_shape = static_shape(x, 4), static_shape(weight, 4)
    assert x_shape is not None
    assert w_shape is not None
    n, c, h, w = x_shape
    out, _, kh, kw = w_shape
    hp, wp = h // kh, w // kw
    rows, depth = n * hp * wp, c * kh * kw
    point = InsertPoint.before(op)

    def build(overload: str, args: dict[str, Any], shape: list[int], name: str) -> SSAValue:
        cls = op_class(overload)
        assert cls is not None
        new: Operation = cls.from_args(args, [TensorType(element, shape)])
        new.location = op.location  # pyright: ignore[reportAttributeAccessIssue]
        Rewriter.insert_op(new, point)
        new.results[0].name_hint = name
        return new.results[0]

    x6 = build("reshape.default", {"self": x, "shape": [n, c, hp, kh, wp, kw]}, [n, c, hp, kh, wp, kw], "x_6d")  # fmt: skip
    patches = build("permute.default", {"self": x6, "dims": [0, 2, 4, 1, 3, 5]}, [n, hp, wp, c, kh, kw], "patches")  # fmt: skip
    x_rows = build("reshape.default", {"self": patches, "shape": [rows, depth]}, [rows, depth], "x_rows")  # fmt: skip
    w2 = build("reshape.default", {"self": weight, "shape": [out, depth]}, [out, depth], "w_2d")
    wt = build("permute.default", {"self": w2, "dims": [1, 0]}, [depth, out], "w_t")
    if bias is None:
        product = build("mm.default", {"self": x_rows, "mat2": wt}, [rows, out], "mm")
    else:
        product = build(
            "addmm.default", {"self": bias, "mat1": x_rows, "mat2": wt}, [rows, out], "addmm"
        )
    y_nhwc = build("reshape.default", {"self": product, "shape": [n, hp, wp, out]}, [n, hp, wp, out], "y_nhwc")  # fmt: skip
    name = op.results[0].name_hint or "conv"
    return build("permute.default", {"self": y_nhwc, "dims": list(NCHW)}, [n, out, hp, wp], name)


@dataclass(frozen=True)
class PatchConvToMmPass(ModulePass):
    """Patch-embedding convolutions as matrix products (see the module docstring)."""

    name: ClassVar[str] = "patch-conv-to-mm"  # pyright: ignore[reportIncompatibleVariableOverride]

    float32_max_channels: int = 4
    """A float32 convolution is rewritten only with at most this many input channels (an
    RGB image's stem), unless float32 products run in TF32 (``kiln.tf32_matmul``). cuDNN
    runs float32 convolutions in TF32 by default (``torch.backends.cudnn.allow_tf32``)
    where cuBLAS runs the product in full float32 on FFMA units: on an H100, ConvNeXt-atto's
    2x2 downsampling convolutions (40 to 160 channels) as products took its training step
    from 0.823 to 0.884 ms of kernels, while ViT's 3-channel 16x16 patch embedding, cuDNN's
    slow case, is 3 % of the step faster as one (docs/benchmarks/train-kernels.md,
    "Session 53"); ``-1``: all."""

    def _rewrites(self, conv: AtenOp, tf32: bool) -> bool:
        """Whether ``conv``'s product runs at least as fast as cuDNN runs it (see
        :attr:`float32_max_channels`)."""
        if tf32 or self.float32_max_channels < 0 or not _is_float32(conv.results[0]):
            return True
        x = static_shape(conv.tensor_operands()["input"][0], 4)
        return x is not None and x[1] <= self.float32_max_channels

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if runs_on_cpu(op):
            return
        tf32 = tf32_matmul(op)
        for func in [f for f in op.walk() if isinstance(f, FuncOp)]:
            if not func.body.blocks:
                continue
            for inner in list(func.body.block.ops):
                if (
                    isinstance(inner, AtenOp)
                    and is_patch_convolution(inner)
                    and not _returned(inner.results[0])
                    and self._rewrites(inner, tf32)
                ):
                    replacement = _rewrite(inner)
                    inner.results[0].replace_all_uses_with(replacement)
                    Rewriter.erase_op(inner)


__all__ = ["PatchConvToMmPass", "is_patch_convolution"]

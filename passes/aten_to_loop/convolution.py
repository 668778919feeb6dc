"""Depthwise convolutions in half and bfloat16 as pointwise kernels over the output, on GPUs.

A 2-D convolution with one input channel per group (``groups == C_in``, weight
``[C_out, 1, kh, kw]``: MobileNet, EfficientNet, ShuffleNet, ConvNeXt) computes each
output element as the sum over its window of input times weight. Lowered here, that sum
is unrolled (at most :data:`MAX_WINDOW` taps), each tap a masked load (a position in the
padding reads 0), accumulated in float32 for half and bfloat16 as cuDNN does; as a
pointwise kernel it fuses with the batch norm and activation after it. Why: on the
H200, cuDNN's bfloat16 NHWC depthwise engine runs each such convolution as 50 to 200
launches (3457 a call of a small EfficientNet-B0: 14 ms, against 0.5 ms in float32), for
kiln and Inductor alike; lowered, the whole call takes 0.43 ms. A channels-last input gets a channels-last result, as
ATen returns it.

float32 stays cuDNN's: its float32 depthwise kernel is fast (about 4 us a convolution
of a small ConvNeXt), and lowered, the convolution fused into the LayerNorm after it as
that reduction's prologue took 15 us a launch (ConvNeXt-atto 395 us a call against 300).
On the CPU oneDNN's depthwise kernels stay (prepacked weights, fused post-ops). Transposed
convolutions, larger windows, integer inputs and symbolic output sizes stay ATen calls.
"""

from __future__ import annotations

from collections.abc import Sequence

import sympy
from xdsl.ir import SSAValue

from kiln.dialects.loop.expr import floordiv
from kiln.passes.aten_to_loop.body import BodyBuilder
from kiln.passes.aten_to_loop.context import Lowered, Lowering, LoweringContext, OpArgs
from kiln.passes.aten_to_loop.indexing import range_mask
from kiln.passes.aten_to_loop.pooling import image_output, pair
from kiln.passes.aten_to_loop.tensors import ZERO, TensorRef, expr
from kiln.passes.aten_to_loop.types import NoLowering, compute_type, is_low_precision

Expr = sympy.Expr
MAX_WINDOW = 49
"""Windows up to 7x7 (ConvNeXt's) unroll into one kernel; larger ones stay ATen."""


def _static(size: Expr) -> int:
    value = sympy.sympify(size)
    if not value.is_Integer:
        raise NoLowering("symbolic channel count or kernel size")
    return int(value)


def is_depthwise(x: TensorRef, weight: TensorRef, groups: object) -> bool:
    """Whether a convolution of ``x`` by ``weight`` in ``groups`` groups reads one input
    channel per group (each output channel one input channel's window)."""
    if x.rank != 4 or weight.rank != 4 or not isinstance(groups, int) or groups < 2:
        return False
    in_channels = sympy.sympify(x.sizes[1])
    return sympy.sympify(weight.sizes[1]) == 1 and in_channels == groups


def _depthwise_convolution(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    if ctx.device.startswith("cpu"):
        raise NoLowering("on the CPU oneDNN runs depthwise convolutions")
    x, weight, bias = args.tensor("input"), args.tensor("weight"), args.opt_tensor("bias")
    if args.value("transposed"):
        raise NoLowering("transposed convolution")
    if not is_low_precision(x.dtype):
        raise NoLowering("cuDNN's float32 depthwise kernels are fast")
    if not is_depthwise(x, weight, args.value("groups")):
        raise NoLowering("not a 2-D depthwise convolution")
    kh, kw = _static(weight.sizes[2]), _static(weight.sizes[3])
    if kh * kw > MAX_WINDOW:
        raise NoLowering("convolution window too large to unroll")
    (sh, sw), (ph, pw), (dh, dw) = (
        pair(args.value("stride")),
        pair(args.value("padding")),
        pair(args.value("dilation")),
    )
    shape = args.result_type(0).get_shape()
    if any(d < 0 for d in shape):
        raise NoLowering("symbolic convolution output")
    multiplier = _static(weight.sizes[0]) // _static(x.sizes[1])
    height, width = x.sizes[2], x.sizes[3]
    acc = compute_type(args.result_dtype(0))

    def element(bb: BodyBuilder, lead: Sequence[Expr], oh: Expr, ow: Expr) -> SSAValue:
        n, c = lead
        source = c if multiplier == 1 else floordiv(c, multiplier)
        rows = [oh * sh - ph + i * dh for i in range(kh)]
        columns = [ow * sw - pw + j * dw for j in range(kw)]
        row_masks = [range_mask(bb, ih, ZERO, height) for ih in rows]
        column_masks = [range_mask(bb, iw, ZERO, width) for iw in columns]
        total: SSAValue | None = None
        for i, (ih, row_mask) in enumerate(zip(rows, row_masks, strict=True)):
            for j, (iw, column_mask) in enumerate(zip(columns, column_masks, strict=True)):
                masks = [m for m in (row_mask, column_mask) if m is not None]
                if not masks:
                    tap = bb.load(x, [n, source, ih, iw])
                else:
                    mask = masks[0] if len(masks) == 1 else bb.and_(*masks)
                    tap = bb.load(x, [n, source, ih, iw], mask, 0.0)
                w = bb.load(weight, [c, ZERO, expr(i), expr(j)])
                product = bb.mul(bb.cast(tap, acc), bb.cast(w, acc))
                total = product if total is None else bb.add_(total, product)
        assert total is not None
        if bias is not None:
            total = bb.add_(total, bb.cast(bb.load(bias, [c]), acc))
        return total

    sizes = [expr(d) for d in shape]
    return [image_output(ctx, x, sizes, args.result_dtype(0), element)]


LOWERINGS: dict[str, Lowering] = {
    "convolution": _depthwise_convolution,
}

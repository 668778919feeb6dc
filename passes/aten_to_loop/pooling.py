"""Pooling: ``max_pool2d_with_indices`` as pointwise kernels over the output.

Each output element is the maximum over its window, read with masked loads (a position
in the padding is never a candidate: its load is masked and filled with ``-inf``), the
index the position ``ih * W + iw`` of the element ATen picks: scanning the window row by
row, the first valid position, then any strictly greater value or any NaN (so a NaN
wins and the last NaN's index is kept), as ATen's CPU kernels and its CUDA NCHW kernel
do. Its CUDA channels-last kernel starts from index 0 instead, so a window of ``-inf``
only gets index 0 there; which kernel eager runs depends on a layout kiln does not
track, so on a GPU the op is lowered only when nothing reads the indices (inference). Values and
indices are two kernels reading the same window; in inference graphs nothing reads the
indices and ``fuse`` drops their kernel. A channels-last input gets channels-last
results (NHWC buffers seen as NCHW), as ATen returns them.

Large windows (more than :data:`MAX_WINDOW` elements), integer inputs and symbolic
output sizes under ``ceil_mode`` stay ATen calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sympy
from xdsl.dialects.builtin import i64
from xdsl.ir import SSAValue

from kiln.dialects.aten.memory_format import NCHW, NHWC
from kiln.dialects.loop.expr import floordiv
from kiln.passes.aten_to_loop.body import BodyBuilder
from kiln.passes.aten_to_loop.context import Lowered, Lowering, LoweringContext, OpArgs
from kiln.passes.aten_to_loop.indexing import range_mask
from kiln.passes.aten_to_loop.tensors import ZERO, TensorRef, expr
from kiln.passes.aten_to_loop.types import NoLowering, is_float

Expr = sympy.Expr
MAX_WINDOW = 49
"""Windows up to 7x7 unroll into one kernel; larger ones stay ATen."""


def pair(value: Any, default: Sequence[int] | None = None) -> tuple[int, int]:
    if isinstance(value, int):
        value = [value]
    values = list(value) if value is not None else []
    if not values:
        if default is None:
            raise NoLowering("missing pooling argument")
        values = list(default)
    if len(values) == 1:
        values = values * 2
    if len(values) != 2 or not all(isinstance(v, int) for v in values):
        raise NoLowering("pooling arguments are not two integers")
    return int(values[0]), int(values[1])


class _Window:
    """Where the window of output element ``(oh, ow)`` reads."""

    def __init__(self, x: TensorRef, args: OpArgs) -> None:
        self.x = x
        self.kernel = pair(args.value("kernel_size"))
        self.stride = pair(args.value("stride"), self.kernel)
        self.padding = pair(args.value("padding"), (0, 0))
        self.dilation = pair(args.value("dilation"), (1, 1))
        self.height, self.width = x.sizes[-2], x.sizes[-1]

    def positions(self, oh: Expr, ow: Expr) -> list[tuple[Expr, Expr]]:
        (kh, kw), (sh, sw), (ph, pw), (dh, dw) = (
            self.kernel,
            self.stride,
            self.padding,
            self.dilation,
        )
        return [
            (oh * sh - ph + i * dh, ow * sw - pw + j * dw) for i in range(kh) for j in range(kw)
        ]

    def load(
        self, bb: BodyBuilder, lead: Sequence[Expr], ih: Expr, iw: Expr
    ) -> tuple[SSAValue, SSAValue | None]:
        """The element at ``(ih, iw)`` (``-inf`` outside the input) and its validity
        mask (None when it is always inside)."""
        mask: SSAValue | None = None
        for position, size in ((ih, self.height), (iw, self.width)):
            check = range_mask(bb, position, ZERO, size)
            if check is not None:
                mask = check if mask is None else bb.and_(mask, check)
        src = [*lead, ih, iw]
        if mask is None:
            return bb.load(self.x, src), None
        return bb.load(self.x, src, mask, float("-inf")), mask


def image_output(
    ctx: LoweringContext,
    x: TensorRef,
    sizes: Sequence[Expr],
    dtype: Any,
    element: Any,
) -> TensorRef:
    """A pointwise kernel computing ``element(bb, lead, oh, ow)`` per output element,
    NHWC-stored when ``x`` is channels-last."""
    if x.rank == 4 and x.is_channels_last():

        def body_nhwc(bb: BodyBuilder, idx: Sequence[Expr]) -> SSAValue:
            n, oh, ow, c = idx
            return element(bb, [n, c], oh, ow)

        return ctx.pointwise([sizes[d] for d in NHWC], dtype, body_nhwc).permute(NCHW)

    def body(bb: BodyBuilder, idx: Sequence[Expr]) -> SSAValue:
        return element(bb, list(idx[:-2]), idx[-2], idx[-1])

    return ctx.pointwise(sizes, dtype, body)


def _output_sizes(window: _Window, args: OpArgs) -> list[Expr]:
    """The result's sizes: the type's, or with symbolic input sizes ATen's formula
    ``(size + 2*padding - dilation*(kernel - 1) - 1) // stride + 1`` (``ceil_mode`` also
    drops a last window that starts in the padding: such outputs stay ATen calls)."""
    shape = args.result_type(0).get_shape()
    if all(d >= 0 for d in shape):
        return [expr(d) for d in shape]
    if args.value("ceil_mode"):
        raise NoLowering("symbolic pooling output with ceil_mode")
    spatial = [
        floordiv(size + 2 * pad - dil * (k - 1) - 1, stride) + 1
        for size, k, stride, pad, dil in zip(
            (window.height, window.width),
            window.kernel,
            window.stride,
            window.padding,
            window.dilation,
            strict=True,
        )
    ]
    return args.result_sizes(0, [*window.x.sizes[:-2], *spatial])


def _max_pool2d_with_indices(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    x = args.tensor("self")
    if x.rank not in (3, 4) or not is_float(x.dtype):
        raise NoLowering("max pooling of a non-float or non-image tensor")
    if not ctx.device.startswith("cpu") and args.op.results[1].uses:
        raise NoLowering("indices on a GPU: ATen's NCHW and NHWC kernels disagree on them")
    window = _Window(x, args)
    if window.kernel[0] * window.kernel[1] > MAX_WINDOW:
        raise NoLowering("pooling window too large to unroll")
    sizes = _output_sizes(window, args)

    def values(bb: BodyBuilder, lead: Sequence[Expr], oh: Expr, ow: Expr) -> SSAValue:
        best: SSAValue | None = None
        for ih, iw in window.positions(oh, ow):
            v, _ = window.load(bb, lead, ih, iw)
            best = v if best is None else bb.maximum(best, v)  # NaN-propagating
        assert best is not None
        return best

    def indices(bb: BodyBuilder, lead: Sequence[Expr], oh: Expr, ow: Expr) -> SSAValue:
        best: SSAValue | None = None
        index: SSAValue | None = None
        unset = bb.const(-1, i64)
        for ih, iw in window.positions(oh, ow):
            v, valid = window.load(bb, lead, ih, iw)
            position = bb.index_as(ih * window.width + iw, i64)
            if best is None or index is None:
                best = v
                index = position if valid is None else bb.select(valid, position, unset)
                continue
            better = bb.or_(bb.cmp("gt", v, best), bb.isnan(v))
            if valid is not None:
                better = bb.and_(valid, bb.or_(better, bb.cmp("eq", index, unset)))
            best = bb.select(better, v, best)
            index = bb.select(better, position, index)
        assert index is not None
        return index

    return [
        image_output(ctx, x, sizes, args.result_dtype(0), values),
        image_output(ctx, x, sizes, args.result_dtype(1), indices),
    ]


LOWERINGS: dict[str, Lowering] = {
    "max_pool2d_with_indices": _max_pool2d_with_indices,
}

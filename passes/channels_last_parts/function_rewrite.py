"""``channels-last``'s rewrite of one function body: the walk over its ops that dispatches
to the pattern families, and the pointwise ops rewritten to compute NHWC tensors."""

from __future__ import annotations

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from kiln.dialects.aten.dialect import op_class
from kiln.dialects.aten.memory_format import NCHW, NHWC
from kiln.dialects.aten.ops import AtenOp
from kiln.dialects.aten.size_symbols import TRACED_SIZES_ATTR
from kiln.dialects.aten.traits import FollowsChannelsLast, has_aten_trait
from kiln.passes.channels_last_parts.aten_helpers import (
    RESHAPES,
    has_layout_args,
    is_2d_convolution,
    is_elementwise,
    permuted_type,
    tensor_rank,
    tensor_shape,
)
from kiln.passes.channels_last_parts.channel_plumbing import CAT, CHANNEL_SPLITS, ChannelPlumbing
from kiln.passes.channels_last_parts.convolution_layout import ConvolutionLayout
from kiln.passes.channels_last_parts.saved_nhwc import SavedNhwc


class FunctionRewrite(ConvolutionLayout, ChannelPlumbing, SavedNhwc):
    """The rewrite of one function body (see :mod:`kiln.passes.channels_last`)."""

    # -- building ---------------------------------------------------------------------

    def _unsqueeze_front(self, value: SSAValue, point: InsertPoint) -> SSAValue:
        unsqueeze = op_class("unsqueeze.default")
        assert unsqueeze is not None
        ty = value.type
        assert isinstance(ty, TensorType)
        shape: tuple[int, ...] = ty.get_shape()  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        result_type = TensorType(ty.element_type, [1, *shape])  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
        return self._insert(unsqueeze.from_args({"self": value, "dim": 0}, [result_type]), point)

    def _broadcast_nhwc(self, value: SSAValue, user: Operation) -> SSAValue:
        """An operand of a rewritten pointwise op, broadcast to 4-D and permuted to NHWC
        (views only)."""
        if value in self.channels_last:
            return self.nhwc_of(value)
        rank = tensor_rank(value)
        assert rank is not None
        if rank == 0:
            return value
        for _ in range(4 - rank):
            value = self._unsqueeze_front(value, InsertPoint.before(user))
        return self._permute(value, NHWC, InsertPoint.before(user))

    # -- rewriting --------------------------------------------------------------------

    def run(self) -> bool:
        changed = False
        for op in list(self.block.ops):
            if not isinstance(op, AtenOp) or op.parent is None:  # None: erased (a shuffle)
                continue
            if is_2d_convolution(op):
                changed |= self._convolution(op)
            elif has_aten_trait(op, FollowsChannelsLast):
                self._follow_input(op)
            elif self.channel_plumbing and op.overload_name == CAT:
                changed |= self._cat(op)
            elif self.channel_plumbing and op.overload_name in CHANNEL_SPLITS:
                changed |= self._channel_split(op)
            elif (
                self.channel_plumbing and op.overload_name in RESHAPES and self._channel_shuffle(op)
            ):
                changed = True
            elif self._is_nchw_view_of_nhwc(op):
                # ``permute(y, [0, 3, 1, 2])`` of a contiguous NHWC tensor (ConvNeXt's
                # ``x.permute(0, 3, 1, 2)`` after its LayerNorm and MLP) is an NCHW tensor
                # stored channels-last: what reads it may stay NHWC, and a convolution
                # reading it gets it without a copy (cuDNN's NHWC depthwise kernel on the
                # GPU rather than ATen's NCHW one). On the CPU it was GPU only while the
                # 1x1 convolutions after it ran in oneDNN (ConvNeXt-atto 15 % slower);
                # with conv1x1-to-mm they become matrix products on the NHWC buffers
                # (ConvNeXt-atto 7.6 -> 5.7 ms, Inductor 7.4 ms: docs/benchmarks/cpu-profile.md).
                (result,) = op.results
                self.channels_last.add(result)
                self.nhwc[result] = op.operands[0]
            elif self._is_convertible_pointwise(op):
                self._pointwise(op)
                changed = True
            elif self.recorded_nhwc:
                self._recorded_nhwc(op)
        changed |= self._return_free_nhwc()
        changed |= self._return_compact_copies()
        self._erase_unused()
        return changed

    def _is_convertible_pointwise(self, op: AtenOp) -> bool:
        if not op.results or not is_elementwise(op) or has_layout_args(op):
            return False
        shapes = {tensor_shape(r) for r in op.results}
        if len(shapes) != 1:
            return False
        (shape,) = shapes
        if shape is None or len(shape) != 4 or any(r in self.keep_nchw for r in op.results):
            return False
        ranks = [tensor_rank(v) for v in op.operands]
        if any(r is not None and r > 4 for r in ranks):
            return False
        return any(v in self.channels_last and tensor_shape(v) == shape for v in op.operands)

    def _pointwise(self, op: AtenOp) -> None:
        operands: list[SSAValue] = []
        mapped: dict[SSAValue, SSAValue] = {}
        for value in op.operands:
            if tensor_rank(value) is None:
                operands.append(value)
                continue
            if value not in mapped:
                mapped[value] = self._broadcast_nhwc(value, op)
            operands.append(mapped[value])
        new = type(op).create(
            operands=operands,
            result_types=[permuted_type(r.type, NHWC) for r in op.results],
            properties=dict(op.properties),
            # Not the tracer's sizes: they are NCHW's, the result here is NHWC.
            attributes={k: v for k, v in op.attributes.items() if k != TRACED_SIZES_ATTR},
        )
        new.location = op.location
        Rewriter.insert_op(new, InsertPoint.before(op))
        for old, result in zip(op.results, new.results, strict=True):
            result.name_hint = old.name_hint
            nchw = self._permute(result, NCHW, InsertPoint.before(op))
            sizes = self.sizes(old)
            if sizes is not None:
                self.traced[nchw] = sizes
            if old.name_hint:
                nchw.name_hint = f"{old.name_hint}_nchw"
            old.replace_all_uses_with(nchw)
            self.channels_last.add(nchw)
            self.nhwc[nchw] = result
        Rewriter.erase_op(op)

    def _erase_unused(self) -> None:
        for op in reversed(self.created):
            if op.parent is not None and all(not r.uses for r in op.results):
                Rewriter.erase_op(op)

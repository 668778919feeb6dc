"""``channels-last``'s convolution layout decisions: which convolutions read (and return)
channels-last, the input clones that feed them, the ops that follow their input's layout,
and NCHW permutes of contiguous NHWC tensors."""

from __future__ import annotations

from xdsl.ir import BlockArgument, SSAValue
from xdsl.rewriter import InsertPoint

from kiln.dialects.aten.encoding import decode_value
from kiln.dialects.aten.memory_format import NCHW
from kiln.dialects.aten.ops import AtenOp
from kiln.dialects.aten.traits import FollowsChannelsLast, ViewLike, has_aten_trait
from kiln.passes.channels_last_parts.aten_helpers import (
    PERMUTE,
    RESHAPES,
    tensor_rank,
    tensor_shape,
)
from kiln.passes.channels_last_parts.rewrite_state import RewriteState
from kiln.passes.conv1x1_to_mm import is_pointwise_convolution


def _first_tensor(op: AtenOp) -> SSAValue | None:
    for values in op.tensor_operands().values():
        return values[0] if values else None
    return None


def _single_pixel_or_channel(value: SSAValue) -> bool:
    """Whether ``value``'s NCHW buffer is an NHWC one too (H * W == 1: a squeeze-excite
    block's pooled ``[N, C, 1, 1]``; or C == 1): a copy would change its strides only,
    for a kernel launch (MobileNet-v3 and EfficientNet-b0 on an H100, session 42: nine and
    sixteen such copies, their training steps 3 % and 2 % slower)."""
    shape = tensor_shape(value)
    if shape is None or len(shape) != 4:
        return False
    return (shape[2] == 1 and shape[3] == 1) or shape[1] == 1


class ConvolutionLayout(RewriteState):
    """Convolutions, their input clones, and the ops that follow their input's layout."""

    def _convolution(self, op: AtenOp) -> bool:
        (result,) = op.results
        if result in self.keep_nchw:
            return False
        x = op.operands[0]
        if x in self.channel_slices and not self._reads_slices_as_rows(op):
            # ATen would get a strided view that is no channels-last buffer and return
            # an NCHW result, and the block's branch would run NCHW up to the shuffle,
            # which then read it transposed (ShuffleNet-v2 at batch 32: its shuffle
            # kernels took a third of kiln's kernel time). One compact NHWC copy of the
            # slice instead keeps the branch channels-last.
            x = op.operands[0] = self._compact_slice(x, op)
        if x not in self.channels_last:
            if self.convert_inputs and isinstance(x, BlockArgument):
                op.operands[0] = self._input_clone(x)
            elif (
                self.copy_nchw_inputs
                and not isinstance(x, BlockArgument)
                and not _single_pixel_or_channel(x)
            ):
                op.operands[0] = self._compact_slice(x, op)
            else:
                return False
        weight = op.operands[1]
        if self.convert_weights and isinstance(weight, BlockArgument):
            op.operands[1] = self._input_clone(weight)
        self.channels_last.add(result)
        return True

    def _reads_slices_as_rows(self, op: AtenOp) -> bool:
        """Whether ``conv1x1-to-mm`` will run ``op`` as a matrix product on the rows of
        its input's NHWC buffer (a channel slice's rows are strided: no copy)."""
        return not self.on_gpu and self.pointwise_as_mm and is_pointwise_convolution(op)

    def _compact_slice(self, x: SSAValue, op: AtenOp) -> SSAValue:
        """``clone(x, memory_format = "channels_last")`` of a channel slice, right before
        the first convolution reading it (``lower-aten`` copies it into an NHWC buffer);
        ``compact_copies`` keeps it for the others and for ``_return_compact_copies``."""
        found = self.compact_copies.get(x)
        if found is None:
            found = self._channels_last_clone(x, InsertPoint.before(op), "_compact")
            self.channels_last.add(found)
            self.compact_copies[x] = found
        return found

    def _input_clone(self, x: SSAValue) -> SSAValue:
        """``clone(x, memory_format = "channels_last")`` once per function argument."""
        found = self.input_clones.get(x)
        if found is None:
            found = self._channels_last_clone(x, InsertPoint.at_start(self.block), "_nhwc")
            self.input_clones[x] = found
            self.channels_last.add(found)
        return found

    def _is_nchw_view_of_nhwc(self, op: AtenOp) -> bool:
        if op.overload_name != PERMUTE or len(op.results) != 1 or tensor_rank(op.results[0]) != 4:
            return False
        spec = next(a for a in op.op_schema().arguments if a.name == "dims")
        if list(decode_value(spec, op.arg_attr("dims"), ())) != list(NCHW):
            return False
        return op.results[0] not in self.keep_nchw and self._stored_contiguous(op.operands[0])

    def _stored_contiguous(self, value: SSAValue) -> bool:
        """Whether ``lower-aten`` stores ``value`` as a contiguous buffer of its own shape:
        a function argument (the wrappers make them contiguous), a value a non-view op
        computes (a kernel's or an extern's result; not one this pass keeps NHWC), or a
        reshaping view of such a value."""
        if value in self.channels_last:
            return False
        owner = value.owner
        while isinstance(owner, AtenOp) and owner.overload_name in RESHAPES:
            value = owner.operands[0]
            if value in self.channels_last:
                return False
            owner = value.owner
        if isinstance(value, BlockArgument):
            return True
        return isinstance(owner, AtenOp) and not (
            has_aten_trait(owner, ViewLike) or has_aten_trait(owner, FollowsChannelsLast)
        )

    def _follow_input(self, op: AtenOp) -> None:
        first = _first_tensor(op)
        if first is None or first not in self.channels_last:
            return
        for result in op.results:
            if tensor_rank(result) == 4:
                self.channels_last.add(result)

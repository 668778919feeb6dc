"""The state of ``channels-last``'s rewrite of one function body: which values are stored
channels-last, their NHWC forms, the values kept NCHW, and the builders (permutes, traced
sizes) that the pattern families share."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.func import ReturnOp
from xdsl.ir import Block, Operation, OpResult, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from kiln.dialects.aten.dialect import op_class
from kiln.dialects.aten.memory_format import NHWC
from kiln.dialects.aten.ops import AtenOp
from kiln.dialects.aten.size_symbols import traced_size_texts
from kiln.passes.channels_last_parts.aten_helpers import (
    follows_input_layout,
    is_elementwise,
    permuted_type,
    tensor_rank,
    tensor_shape,
)


def _traced_sizes(value: SSAValue, shape: Sequence[int]) -> tuple[int | str, ...] | None:
    """``shape`` with each symbolic dim the expression the importer recorded for it
    (``kiln.traced_sizes`` on ``value``'s op), or None where it recorded none."""
    if not isinstance(value, OpResult):
        return None
    texts = traced_size_texts(value.op, value.index)
    if texts is None or len(texts) != len(shape):
        return None
    sizes: list[int | str] = []
    for dim, text in zip(shape, texts, strict=True):
        if dim >= 0:
            sizes.append(dim)
        elif text is not None:
            sizes.append(text)
        else:
            return None
    return tuple(sizes)


class RewriteState:
    """The state of the rewrite of one function body, and the builders its pattern
    families share; ``function_rewrite.FunctionRewrite`` puts the families together."""

    def __init__(
        self,
        block: Block,
        convert_inputs: bool,
        convert_weights: bool,
        on_gpu: bool = False,
        pointwise_as_mm: bool = True,
        free_outputs: frozenset[int] = frozenset(),
        channels_last_args: Sequence[SSAValue] = (),
        recorded_nhwc: bool = False,
        channel_plumbing: bool = True,
        copy_nchw_inputs: bool = False,
    ) -> None:
        self.block = block
        self.free_outputs = free_outputs
        """Indices of returned values whose layout is free (``kiln.free_layout_outputs``)."""
        self.returned_nhwc: list[int] = []
        """Indices of returned values now returned as their NHWC tensor."""
        self.recorded_nhwc = recorded_nhwc
        """Whether results the importer records as laid out NHWC count as channels-last."""
        self.on_gpu = on_gpu
        """Whether permutes of NHWC tensors count as channels-last (see ``run``)."""
        self.channel_plumbing = channel_plumbing
        """Whether ``cat`` / ``split`` along C and channel shuffles keep the layout."""
        self.copy_nchw_inputs = copy_nchw_inputs
        """Whether a convolution reading an NCHW intermediate reads a channels-last copy."""
        self.pointwise_as_mm = pointwise_as_mm
        """Whether ``conv1x1-to-mm`` follows (CPU): it reads a channel slice of an NHWC
        buffer as strided rows, with no copy (see ``_convolution``)."""
        self.convert_inputs = convert_inputs
        self.convert_weights = convert_weights
        self.created: list[Operation] = []
        self.channels_last: set[SSAValue] = set(channels_last_args)
        """NCHW values that ``lower-aten`` will store as NHWC buffers."""
        self.nhwc: dict[SSAValue, SSAValue] = {}
        """A channels-last NCHW value -> the same tensor as a logical NHWC value."""
        self.input_clones: dict[SSAValue, SSAValue] = {}
        self.compact_copies: dict[SSAValue, SSAValue] = {}
        """A value a convolution reads through a compact channels-last copy -> the copy."""
        self.channel_slices: set[SSAValue] = set()
        """Values of ``channels_last`` that are channel slices of an NHWC buffer (a
        ``split`` along C): NHWC views, but not dense buffers of their own."""
        self.traced: dict[SSAValue, tuple[int | str, ...]] = {}
        """Sizes (:meth:`sizes`) of the NCHW values this pass made in place of the
        importer's (``_store_nhwc``), which carry no ``kiln.traced_sizes`` of their own."""
        self.keep_nchw = self._values_kept_nchw()

    # -- analysis ---------------------------------------------------------------------

    def _values_kept_nchw(self) -> set[SSAValue]:
        """Returned 4-D tensors, and what their layout follows from (pools,
        convolutions and views take their input's layout)."""
        terminator = self.block.last_op
        keep: set[SSAValue] = set()
        if isinstance(terminator, ReturnOp):
            keep = {
                v
                for k, v in enumerate(terminator.operands)
                if tensor_rank(v) is not None and k not in self.free_outputs
            }
        for op in reversed(list(self.block.ops)):
            if not isinstance(op, AtenOp) or not any(r in keep for r in op.results):
                continue
            if follows_input_layout(op):
                keep.update(v for v in op.operands if tensor_rank(v) is not None)
        return keep

    # -- building ---------------------------------------------------------------------

    def sizes(self, value: SSAValue) -> tuple[int | str, ...] | None:
        """``value``'s sizes: static dims as ints, symbolic ones as the tracer's
        expressions (``kiln.traced_sizes``, ``"s77"``), so that two symbolic sizes
        compare equal only when the tracer gave them the same expression; None when a
        symbolic size has no such record. An elementwise result has the sizes of an
        operand of its own shape (the importer records none for it; dynamo specialises
        sizes 0 and 1, so a symbolic dim never broadcasts)."""
        shape = tensor_shape(value)
        if shape is None:
            return None
        if all(d >= 0 for d in shape):
            return shape
        chain: list[SSAValue] = []
        found: tuple[int | str, ...] | None = None
        while found is None:
            found = self.traced.get(value)
            if found is not None:
                break
            owner = value.owner
            if isinstance(owner, AtenOp) and is_elementwise(owner):
                same = [v for v in owner.operands if tensor_shape(v) == shape]
                if not same:
                    return None
                chain.append(value)
                value = same[0]
                continue
            found = _traced_sizes(value, shape)
            if found is None:
                return None
        for v in chain:
            self.traced[v] = found
        return found

    def _insert(self, op: Operation, point: InsertPoint) -> SSAValue:
        Rewriter.insert_op(op, point)
        self.created.append(op)
        return op.results[0]

    def _channels_last_clone(self, x: SSAValue, point: InsertPoint, suffix: str) -> SSAValue:
        """``clone(x, memory_format = "channels_last")`` at ``point`` (``lower-aten``
        copies it into an NHWC buffer), named after ``x`` with ``suffix``."""
        clone = op_class("clone.default")
        assert clone is not None
        copy = clone.from_args({"self": x, "memory_format": "channels_last"}, [x.type])
        found = self._insert(copy, point)
        if x.name_hint:
            found.name_hint = f"{x.name_hint}{suffix}"
        return found

    def _after_definition(self, value: SSAValue) -> InsertPoint:
        owner = value.owner
        if isinstance(owner, Operation):
            return InsertPoint.after(owner)
        return InsertPoint.at_start(self.block)

    def _permute(self, value: SSAValue, dims: Sequence[int], point: InsertPoint) -> SSAValue:
        permute = op_class("permute.default")
        assert permute is not None
        op = permute.from_args(
            {"self": value, "dims": list(dims)}, [permuted_type(value.type, dims)]
        )
        return self._insert(op, point)

    def nhwc_of(self, value: SSAValue) -> SSAValue:
        """``value`` (NCHW, stored channels-last) as a logical NHWC tensor."""
        found = self.nhwc.get(value)
        if found is None:
            found = self._permute(value, NHWC, self._after_definition(value))
            if value.name_hint:
                found.name_hint = f"{value.name_hint}_nhwc"
            self.nhwc[value] = found
        return found

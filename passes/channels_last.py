"""``channels-last``: 2-D convolutions on channels-last (NHWC) activations.

oneDNN (CPU) and cuDNN (GPU, tensor cores above all) run convolutions faster on
channels-last tensors, and Inductor converts convolution inputs to channels-last and keeps
the activations between convolutions that way (its layout optimization). This pass does
the same at the aten level, without changing a single number: only where values are
stored changes, never what is computed.

Layouts at the aten level. Tensors have value semantics here, and ``lower-aten`` turns
views (``permute``, ``unsqueeze``) into index maps over their input's buffer, so the
physical layout of a tensor is decided by the op that computes it. This pass therefore
writes the layout into the IR as *logical* NHWC tensors:

* a pointwise op whose input is stored channels-last is rewritten to compute the NHWC
  tensor (``relu(permute(y, [0, 2, 3, 1]))``), so the kernel ``lower-aten`` makes for it
  writes (and reads) NHWC contiguously; its old NCHW result becomes
  ``permute(nhwc, [0, 3, 1, 2])``, a view that costs nothing. Lower-rank operands
  (batch-norm's ``[C, 1, 1]`` scale) are broadcast explicitly (``unsqueeze`` to 4-D, then
  the same permute), again only views;
* a convolution (and the pooling and batch-norm ops with the ``FollowsChannelsLast``
  trait, :mod:`kiln.dialects.aten.traits`, where ``decompose`` leaves them to ATen) whose
  input is stored channels-last is left as it is: ``lower-aten`` passes that input to ATen as a channels-last strided tensor, ATen
  returns a channels-last result (its memory-format propagation), and the extern yields it
  as an NHWC buffer, so no copy is made on either side;
* a convolution reading a function argument (the image) gets
  ``clone(x, memory_format = "channels_last")``, which ``lower-aten`` materializes as one
  NHWC copy (option ``convert-inputs=false`` leaves the image NCHW: the first convolution
  then runs on NCHW and only the kernel after it reads transposed; ``convert-weights=true``
  copies the weights as well);
* on the CPU, ShuffleNet's channel plumbing keeps the layout: a ``cat`` along C of
  channels-last tensors concatenates their NHWC forms along the last dim, a ``split``
  along C splits the NHWC form (the pieces are strided views of its buffer, which
  ``conv1x1-to-mm`` reads as strided rows), and the channel shuffle (``view`` to
  ``[N, g, C/g, H, W]``, ``permute(0, 2, 1, 3, 4)``, ``clone``, ``view`` back) becomes the
  same shuffle of the NHWC form (``[N, H, W, g, C/g]``, ``permute(0, 1, 2, 4, 3)``);
* every other consumer (reductions, views, matmuls, the function's results) reads the
  NCHW view, i.e. the NHWC buffer through strides.

```mlir
%y = aten.convolution.default(%xc, %w, ...) : (...) -> tensor<2x8x6x6xf32>
%r = aten.relu.default(%y) : (tensor<2x8x6x6xf32>) -> tensor<2x8x6x6xf32>
%z = aten.convolution.default(%r, %w2, ...) : (...) -> tensor<2x8x6x6xf32>
```
becomes
```mlir
%y = aten.convolution.default(%xc, %w, ...) : (...) -> tensor<2x8x6x6xf32>
%y_nhwc = aten.permute.default(%y, dims = [0, 2, 3, 1]) : (...) -> tensor<2x6x6x8xf32>
%r = aten.relu.default(%y_nhwc) : (tensor<2x6x6x8xf32>) -> tensor<2x6x6x8xf32>
%r_nchw = aten.permute.default(%r, dims = [0, 3, 1, 2]) : (...) -> tensor<2x8x6x6xf32>
%z = aten.convolution.default(%r_nchw, %w2, ...) : (...) -> tensor<2x8x6x6xf32>
```

Function results are contiguous NCHW buffers, so a returned value stored channels-last
would cost a copy back. The pass keeps every returned 4-D tensor NCHW, and with it the
chain of convolutions, pools, batch norms and views it is computed through (their layout
follows their input), except the results the driver lists in ``kiln.free_layout_outputs``
(a training forward's activations saved for the backward only): one stored channels-last
is returned as its NHWC tensor, seen by the caller through ``permute(k, (0, 3, 1, 2))`` in
``kiln.outputs`` (channels-last strides, no copy), and the driver reports those strides
to AOTAutograd, which compiles the backward for them.

Backward graphs have no ``convolution``: there the values stored channels-last are the
arguments the importer records with channels-last strides (``kiln.arg_strides``, the
saved activations above) and the 4-D results of other ops (``convolution_backward``,
pool backwards: ATen follows their inputs' layout) that the importer records as laid out
NHWC (``kiln.result_orders``); the pointwise ops reading them are rewritten to NHWC as
in the forward. Weights stay NCHW by default: oneDNN and cuDNN reorder them anyway, and without
freezing a copy here would be a kernel per weight per call (``convert-weights=true``).

Why a rewrite of the aten IR rather than a physical-layout pass on kernels: every later
level (loop, kernel, both backends) already handles strided views and fused index maps,
so expressing the layout as permutes needs no support anywhere else, the IR stays
verifiable and printable, and the aten interpreter checks the pass on random inputs.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, ModuleOp, StringAttr, TensorType
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Attribute, Block, BlockArgument, Operation, OpResult, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from kiln.dialects.aten.arg_layout import arg_strides
from kiln.dialects.aten.dialect import op_class
from kiln.dialects.aten.encoding import decode_value
from kiln.dialects.aten.function_attrs import (
    FREE_LAYOUT_OUTPUTS_ATTR,
    OUTPUTS_ATTR,
    free_layout_outputs,
    runs_on_cpu,
)
from kiln.dialects.aten.memory_format import NCHW, NHWC
from kiln.dialects.aten.ops import AtenOp
from kiln.dialects.aten.prepack import is_prepacked
from kiln.dialects.aten.result_layout import RESULT_ORDERS_ATTR, result_order
from kiln.dialects.aten.size_symbols import TRACED_SIZES_ATTR, traced_size_texts
from kiln.dialects.aten.traits import (
    FollowsChannelsLast,
    NondeterministicSeeded,
    Pointwise,
    ViewLike,
    has_aten_trait,
)
from kiln.passes.conv1x1_to_mm import is_pointwise_convolution

CONVOLUTION = "aten::convolution.default"
_CONVOLUTION_BACKWARD = "aten::convolution_backward.default"

_PERMUTE = "aten::permute.default"
_RESHAPES = frozenset({"aten::view.default", "aten::_unsafe_view.default", "aten::reshape.default"})
"""Views that keep a contiguous tensor contiguous (a reshape of a strided one copies)."""
_TO_COPY = "aten::_to_copy.default"
_CLONE = "aten::clone.default"
_CAT = "aten::cat.default"
_CHANNEL_SPLITS = frozenset({"aten::split_with_sizes.default", "aten::split.Tensor"})
"""Splits whose pieces are views of their input (``chunk`` decomposes to them)."""
_SHUFFLE_PERMUTE = (0, 2, 1, 3, 4)
"""``[N, groups, C / groups, H, W] -> [N, C / groups, groups, H, W]``: ShuffleNet's
channel shuffle (``view``, ``transpose(1, 2)``, ``contiguous``, ``view``)."""
_TO_COPY_LAYOUT_ARGS = ("layout", "device", "pin_memory", "memory_format")
"""``_to_copy`` is elementwise (a dtype cast) unless it also moves or re-lays-out."""


def _is_elementwise(op: AtenOp) -> bool:
    """A pure pointwise op (the ``Pointwise`` trait): each output element depends only on
    the same element of each (broadcast) input, so any layout computes the same numbers."""
    if not (has_aten_trait(op, Pointwise) or op.overload_name == _TO_COPY):
        return False
    return not op.op_schema().is_mutable and not has_aten_trait(op, NondeterministicSeeded)


def _tensor_shape(value: SSAValue) -> tuple[int, ...] | None:
    ty = value.type
    if not isinstance(ty, TensorType):
        return None
    return tuple(ty.get_shape())  # pyright: ignore[reportUnknownArgumentType, reportUnknownMemberType]


def _rank(value: SSAValue) -> int | None:
    shape = _tensor_shape(value)
    return None if shape is None else len(shape)


def _arg(op: AtenOp, name: str) -> Any:
    spec = next(a for a in op.op_schema().arguments if a.name == name)
    return decode_value(spec, op.arg_attr(name), ())


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


def _copy_traced(source: Operation, target: Operation, dims: Sequence[int]) -> None:
    """``source``'s ``kiln.traced_sizes`` (one result) on ``target``, its dims permuted."""
    traced = source.attributes.get(TRACED_SIZES_ATTR)
    if not isinstance(traced, ArrayAttr) or len(traced.data) != 1:
        return
    (sizes,) = traced.data
    if isinstance(sizes, ArrayAttr) and len(sizes.data) == len(dims):
        target.attributes[TRACED_SIZES_ATTR] = ArrayAttr([ArrayAttr([sizes.data[d] for d in dims])])


def _element_type(value: SSAValue) -> Attribute:
    ty = value.type
    assert isinstance(ty, TensorType)
    return ty.element_type  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]


def _first_tensor(op: AtenOp) -> SSAValue | None:
    for values in op.tensor_operands().values():
        return values[0] if values else None
    return None


def _is_2d_convolution(op: AtenOp) -> bool:
    if op.overload_name != CONVOLUTION or len(op.results) != 1:
        return False
    spec = next(a for a in op.op_schema().arguments if a.name == "transposed")
    transposed = decode_value(spec, op.arg_attr("transposed"), ())
    tensors = op.tensor_operands()
    weight = tensors["weight"][0]
    return (
        transposed is False
        and _rank(op.operands[0]) == 4
        and weight is not None
        and _rank(weight) == 4
        and _rank(op.results[0]) == 4
    )


def _has_layout_args(op: AtenOp) -> bool:
    if op.overload_name == _TO_COPY:
        return any(op.arg_attr(name) is not None for name in _TO_COPY_LAYOUT_ARGS)
    memory_format = op.arg_attr("memory_format") if _has_arg(op, "memory_format") else None
    return isinstance(memory_format, StringAttr) and memory_format.data != "preserve_format"


def _has_arg(op: AtenOp, name: str) -> bool:
    return any(a.name == name for a in op.op_schema().arguments)


def _follows_input_layout(op: AtenOp) -> bool:
    """A value computed by ``op`` takes its layout from ``op``'s input: views and ATen ops
    that propagate the memory format, and ``clone``, which keeps it (``preserve_format``)."""
    return (
        has_aten_trait(op, FollowsChannelsLast)
        or has_aten_trait(op, ViewLike)
        or op.overload_name == _CLONE
    )


def _permuted_type(ty: Attribute, dims: Sequence[int]) -> TensorType[Attribute]:
    assert isinstance(ty, TensorType)
    shape: tuple[int, ...] = ty.get_shape()  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    return TensorType(ty.element_type, [shape[d] for d in dims])  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]


class _FunctionRewrite:
    """The rewrite of one function body (see the module docstring)."""

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
                if _rank(v) is not None and k not in self.free_outputs
            }
        for op in reversed(list(self.block.ops)):
            if not isinstance(op, AtenOp) or not any(r in keep for r in op.results):
                continue
            if _follows_input_layout(op):
                keep.update(v for v in op.operands if _rank(v) is not None)
        return keep

    # -- building ---------------------------------------------------------------------

    def sizes(self, value: SSAValue) -> tuple[int | str, ...] | None:
        """``value``'s sizes: static dims as ints, symbolic ones as the tracer's
        expressions (``kiln.traced_sizes``, ``"s77"``), so that two symbolic sizes
        compare equal only when the tracer gave them the same expression; None when a
        symbolic size has no such record. An elementwise result has the sizes of an
        operand of its own shape (the importer records none for it; dynamo specialises
        sizes 0 and 1, so a symbolic dim never broadcasts)."""
        shape = _tensor_shape(value)
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
            if isinstance(owner, AtenOp) and _is_elementwise(owner):
                same = [v for v in owner.operands if _tensor_shape(v) == shape]
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

    def _after_definition(self, value: SSAValue) -> InsertPoint:
        owner = value.owner
        if isinstance(owner, Operation):
            return InsertPoint.after(owner)
        return InsertPoint.at_start(self.block)

    def _permute(self, value: SSAValue, dims: Sequence[int], point: InsertPoint) -> SSAValue:
        permute = op_class("permute.default")
        assert permute is not None
        op = permute.from_args(
            {"self": value, "dims": list(dims)}, [_permuted_type(value.type, dims)]
        )
        return self._insert(op, point)

    def _unsqueeze_front(self, value: SSAValue, point: InsertPoint) -> SSAValue:
        unsqueeze = op_class("unsqueeze.default")
        assert unsqueeze is not None
        ty = value.type
        assert isinstance(ty, TensorType)
        shape: tuple[int, ...] = ty.get_shape()  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        result_type = TensorType(ty.element_type, [1, *shape])  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
        return self._insert(unsqueeze.from_args({"self": value, "dim": 0}, [result_type]), point)

    def nhwc_of(self, value: SSAValue) -> SSAValue:
        """``value`` (NCHW, stored channels-last) as a logical NHWC tensor."""
        found = self.nhwc.get(value)
        if found is None:
            found = self._permute(value, NHWC, self._after_definition(value))
            if value.name_hint:
                found.name_hint = f"{value.name_hint}_nhwc"
            self.nhwc[value] = found
        return found

    def _broadcast_nhwc(self, value: SSAValue, user: Operation) -> SSAValue:
        """An operand of a rewritten pointwise op, broadcast to 4-D and permuted to NHWC
        (views only)."""
        if value in self.channels_last:
            return self.nhwc_of(value)
        rank = _rank(value)
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
            if _is_2d_convolution(op):
                changed |= self._convolution(op)
            elif has_aten_trait(op, FollowsChannelsLast):
                self._follow_input(op)
            elif not self.on_gpu and op.overload_name == _CAT:
                # CPU only (cat, split, shuffle): what they buy is conv1x1-to-mm's
                # matrix products on channel slices (CPU only); on the GPU a slice would
                # reach cuDNN as a strided view, and that was not measured.
                changed |= self._cat(op)
            elif not self.on_gpu and op.overload_name in _CHANNEL_SPLITS:
                changed |= self._channel_split(op)
            elif not self.on_gpu and op.overload_name in _RESHAPES and self._channel_shuffle(op):
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
        self._erase_unused()
        return changed

    def _recorded_nhwc(self, op: AtenOp) -> None:
        """4-D results the importer records as laid out NHWC (``kiln.result_orders``: a
        backward's ``convolution_backward`` or pool backward on channels-last tensors),
        which ``lower-aten`` yields as NHWC buffers."""
        if _is_elementwise(op):
            return  # lowered to a kernel, which writes the order it is given
        if op.overload_name == _CONVOLUTION_BACKWARD:
            self._image_for_weight_gradient(op)
        for k, result in enumerate(op.results):
            if _rank(result) == 4 and result_order(op, k) == tuple(NHWC):
                self.channels_last.add(result)

    def _image_for_weight_gradient(self, op: AtenOp) -> None:
        """The first convolution's weight gradient reads a channels-last output gradient
        and the NCHW image (a function argument, saved as it came): ATen would copy the
        gradient to the image's layout, so the image (3 channels, the smaller tensor) is
        copied channels-last instead, as the forward does. Only where no input gradient
        is computed: its recorded layout (NCHW) would cost a copy of it."""
        grad_output, x = op.operands[0], op.operands[1]
        if (
            self.convert_inputs
            and grad_output in self.channels_last
            and isinstance(x, BlockArgument)
            and x not in self.channels_last
            and _rank(x) == 4
            and not isinstance(op.results[0].type, TensorType)
        ):
            clone = op_class("clone.default")
            assert clone is not None
            copy = clone.from_args({"self": x, "memory_format": "channels_last"}, [x.type])
            # Right before its reader: the copy is not held through the whole backward.
            op.operands[1] = self._insert(copy, InsertPoint.before(op))
            if x.name_hint:
                op.operands[1].name_hint = f"{x.name_hint}_nhwc"
            # ATen then lays the weight gradient out channels-last too: the extern yields
            # it so (the importer recorded it for the NCHW image), no copy at the call.
            _record_result_order(op, 1, NHWC)

    def _return_free_nhwc(self) -> bool:
        """Returns each free-layout result stored channels-last as its NHWC tensor (no copy
        back to NCHW); ``returned_nhwc`` lists them."""
        ret = self.block.last_op
        if not isinstance(ret, ReturnOp):
            return False
        for k, value in enumerate(ret.operands):
            if (
                k in self.free_outputs
                and value in self.channels_last
                and value not in self.keep_nchw
                and not isinstance(value, BlockArgument)
                and _rank(value) == 4
            ):
                ret.operands[k] = self.nhwc_of(value)
                self.returned_nhwc.append(k)
        return bool(self.returned_nhwc)

    def _convolution(self, op: AtenOp) -> bool:
        (result,) = op.results
        if result in self.keep_nchw:
            return False
        x = op.operands[0]
        if x in self.channel_slices and not self._reads_slices_as_rows(op):
            # ATen would get a strided view that is no channels-last buffer and return
            # an NCHW result: leave the layout to it.
            return False
        if x not in self.channels_last:
            if not (self.convert_inputs and isinstance(x, BlockArgument)):
                return False
            op.operands[0] = self._input_clone(x)
        weight = op.operands[1]
        if self.convert_weights and isinstance(weight, BlockArgument):
            op.operands[1] = self._input_clone(weight)
        self.channels_last.add(result)
        return True

    def _reads_slices_as_rows(self, op: AtenOp) -> bool:
        """Whether ``conv1x1-to-mm`` will run ``op`` as a matrix product on the rows of
        its input's NHWC buffer (a channel slice's rows are strided: no copy)."""
        return not self.on_gpu and self.pointwise_as_mm and is_pointwise_convolution(op)

    def _input_clone(self, x: SSAValue) -> SSAValue:
        """``clone(x, memory_format = "channels_last")`` once per function argument."""
        found = self.input_clones.get(x)
        if found is None:
            clone = op_class("clone.default")
            assert clone is not None
            op = clone.from_args({"self": x, "memory_format": "channels_last"}, [x.type])
            found = self._insert(op, InsertPoint.at_start(self.block))
            if x.name_hint:
                found.name_hint = f"{x.name_hint}_nhwc"
            self.input_clones[x] = found
            self.channels_last.add(found)
        return found

    def _is_nchw_view_of_nhwc(self, op: AtenOp) -> bool:
        if op.overload_name != _PERMUTE or len(op.results) != 1 or _rank(op.results[0]) != 4:
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
        while isinstance(owner, AtenOp) and owner.overload_name in _RESHAPES:
            value = owner.operands[0]
            if value in self.channels_last:
                return False
            owner = value.owner
        if isinstance(value, BlockArgument):
            return True
        return isinstance(owner, AtenOp) and not (
            has_aten_trait(owner, ViewLike) or has_aten_trait(owner, FollowsChannelsLast)
        )

    def _keeps_nchw(self, op: Operation) -> bool:
        return any(r in self.keep_nchw for r in op.results)

    def _store_nhwc(self, old: SSAValue, nhwc: SSAValue, point: InsertPoint) -> SSAValue:
        """Replace ``old`` (NCHW) by the NCHW permute of ``nhwc``, its logical NHWC form."""
        nchw = self._permute(nhwc, NCHW, point)
        sizes = self.sizes(old)
        if sizes is not None:
            self.traced[nchw] = sizes
        if old.name_hint:
            nhwc.name_hint = old.name_hint
            nchw.name_hint = f"{old.name_hint}_nchw"
        old.replace_all_uses_with(nchw)
        self.channels_last.add(nchw)
        self.nhwc[nchw] = nhwc
        return nchw

    def _cat(self, op: AtenOp) -> bool:
        """``cat`` of 4-D tensors along C, one of them channels-last: the NHWC tensors
        concatenated along their last dim (ShuffleNet's branches), so the copy kernel
        writes NHWC and what follows stays channels-last."""
        tensors = [t for t in op.tensor_operands().get("tensors") or [] if t is not None]
        dim = _arg(op, "dim")
        if (
            len(op.results) != 1
            or _rank(op.results[0]) != 4
            or dim not in (1, -3)
            or not tensors
            or any(_rank(t) != 4 for t in tensors)
            or not any(t in self.channels_last for t in tensors)
            or self._keeps_nchw(op)
        ):
            return False
        point = InsertPoint.before(op)
        inputs = [
            self.nhwc_of(t) if t in self.channels_last else self._permute(t, NHWC, point)
            for t in tensors
        ]
        (result,) = op.results
        cat = type(op).from_args({"tensors": inputs, "dim": 3}, [_permuted_type(result.type, NHWC)])
        self._insert(cat, point)
        cat.location = op.location
        self._store_nhwc(result, cat.results[0], point)
        Rewriter.erase_op(op)
        return True

    def _channel_split(self, op: AtenOp) -> bool:
        """``split`` of a channels-last tensor along C: the same split of its NHWC form
        along the last dim. The pieces are strided views of the NHWC buffer
        (``channel_slices``)."""
        x = op.operands[0]
        if (
            x not in self.channels_last
            or op.sym_operands()  # symbolic split sizes: left as they are
            or _arg(op, "dim") not in (1, -3)
            or any(_rank(r) != 4 for r in op.results)
            or self._keeps_nchw(op)
        ):
            return False
        point = InsertPoint.before(op)
        args = {
            a.name: _arg(op, a.name) for a in op.op_schema().arguments if a.name not in ("self",)
        }
        split = type(op).from_args(
            {**args, "self": self.nhwc_of(x), "dim": 3},
            [_permuted_type(r.type, NHWC) for r in op.results],
        )
        split.location = op.location
        self._insert(split, point)
        for old, piece in zip(op.results, split.results, strict=True):
            self.channel_slices.add(self._store_nhwc(old, piece, point))
        Rewriter.erase_op(op)
        return True

    def _channel_shuffle(self, op: AtenOp) -> bool:
        """ShuffleNet's channel shuffle of a channels-last tensor, ``view`` to
        ``[N, g, C/g, H, W]``, ``permute(0, 2, 1, 3, 4)``, ``clone``, ``view`` back to
        ``[N, C, H, W]``, as the same shuffle of its NHWC form: ``view`` to
        ``[N, H, W, g, C/g]``, ``permute(0, 1, 2, 4, 3)``, ``clone``, ``view`` to
        ``[N, H, W, C]``, then ``clone(..., memory_format = "channels_last")`` of its
        NCHW permute, which ``lower-aten`` materializes as an NHWC buffer. One copy kernel
        either way; this one keeps the NHWC layout."""
        chain = self._shuffle_chain(op)
        if chain is None:
            return False
        split_view, permute, clone, merge_view = chain
        x = op.operands[0]
        x_shape = _tensor_shape(x)
        assert x_shape is not None
        # The sizes as the views take them: ints, and the split view's own SSA sizes
        # where they are symbolic (the same as x's, ``_shuffle_chain`` checked).
        spec = next(a for a in split_view.op_schema().arguments if a.name == "size")
        n, groups, per_group, h, w = decode_value(
            spec, split_view.arg_attr("size"), split_view.sym_operands()
        )
        c = x_shape[1]
        dims = {"n": x_shape[0], "h": x_shape[2], "w": x_shape[3]}
        point = InsertPoint.before(merge_view)
        element = _element_type(x)
        view = type(split_view).from_args(
            {"self": self.nhwc_of(x), "size": [n, h, w, groups, per_group]},
            [TensorType(element, [dims["n"], dims["h"], dims["w"], groups, per_group])],
        )
        _copy_traced(split_view, view, (0, 3, 4, 1, 2))
        self._insert(view, point)
        swapped = self._permute(view.results[0], (0, 1, 2, 4, 3), point)
        copy = type(clone).from_args(
            {"self": swapped, "memory_format": "contiguous_format"}, [swapped.type]
        )
        _copy_traced(clone, copy, (0, 3, 4, 1, 2))
        self._insert(copy, point)
        merged = type(merge_view).from_args(
            {"self": copy.results[0], "size": [n, h, w, c]},
            [TensorType(element, [dims["n"], dims["h"], dims["w"], c])],
        )
        _copy_traced(merge_view, merged, NHWC)
        self._insert(merged, point)
        # Materialized NHWC (a ``channels_last`` clone is a copy in ``lower-aten``; the
        # other clone is an alias there): the shuffle is one copy kernel, and what
        # reads it (a strided convolution's input, a channel slice's rows for
        # conv1x1-to-mm) gets a plain NHWC buffer rather than a copy of its own each.
        nchw_view = self._permute(merged.results[0], NCHW, point)
        stored = type(clone).from_args(
            {"self": nchw_view, "memory_format": "channels_last"}, [merge_view.results[0].type]
        )
        _copy_traced(merge_view, stored, (0, 1, 2, 3))
        self._insert(stored, point)
        for new, old in ((view, split_view), (copy, clone), (merged, merge_view), (stored, clone)):
            new.location = old.location
        result = merge_view.results[0]
        if result.name_hint:
            stored.results[0].name_hint = result.name_hint
        result.replace_all_uses_with(stored.results[0])
        self.channels_last.add(stored.results[0])
        for old in (merge_view, clone, permute, split_view):
            Rewriter.erase_op(old)
        return True

    def _shuffle_chain(self, op: AtenOp) -> tuple[AtenOp, AtenOp, AtenOp, AtenOp] | None:
        """``(view, permute, clone, view)`` when ``op`` starts a channel shuffle of a
        channels-last tensor whose steps have no other users, else None."""
        x = op.operands[0]
        x_sizes, sizes5 = self.sizes(x), self.sizes(op.results[0])
        if x not in self.channels_last or x_sizes is None or sizes5 is None:
            return None
        if len(x_sizes) != 4 or len(sizes5) != 5:
            return None
        n, c, h, w = x_sizes
        groups, per_group = sizes5[1:3]
        if not all(isinstance(d, int) for d in (c, groups, per_group)):
            return None
        if sizes5[0] != n or sizes5[3:] != (h, w) or groups * per_group != c:  # pyright: ignore[reportOperatorIssue]
            return None
        steps: list[AtenOp] = [op]
        for expected in (_PERMUTE, _CLONE, _RESHAPES):
            users = {u.operation for u in steps[-1].results[0].uses}
            (user,) = users if len(users) == 1 else (None,)
            if not isinstance(user, AtenOp) or user.operands[0] is not steps[-1].results[0]:
                return None
            names = expected if isinstance(expected, frozenset) else {expected}
            if user.overload_name not in names:
                return None
            steps.append(user)
        view, permute, clone, merge = steps
        if tuple(_arg(permute, "dims")) != _SHUFFLE_PERMUTE:
            return None
        memory_format = clone.arg_attr("memory_format")
        if isinstance(memory_format, StringAttr) and memory_format.data == "channels_last":
            return None
        if self.sizes(merge.results[0]) != x_sizes or self._keeps_nchw(merge):
            return None
        return view, permute, clone, merge

    def _follow_input(self, op: AtenOp) -> None:
        first = _first_tensor(op)
        if first is None or first not in self.channels_last:
            return
        for result in op.results:
            if _rank(result) == 4:
                self.channels_last.add(result)

    def _is_convertible_pointwise(self, op: AtenOp) -> bool:
        if not op.results or not _is_elementwise(op) or _has_layout_args(op):
            return False
        shapes = {_tensor_shape(r) for r in op.results}
        if len(shapes) != 1:
            return False
        (shape,) = shapes
        if shape is None or len(shape) != 4 or any(r in self.keep_nchw for r in op.results):
            return False
        ranks = [_rank(v) for v in op.operands]
        if any(r is not None and r > 4 for r in ranks):
            return False
        return any(v in self.channels_last and _tensor_shape(v) == shape for v in op.operands)

    def _pointwise(self, op: AtenOp) -> None:
        operands: list[SSAValue] = []
        mapped: dict[SSAValue, SSAValue] = {}
        for value in op.operands:
            if _rank(value) is None:
                operands.append(value)
                continue
            if value not in mapped:
                mapped[value] = self._broadcast_nhwc(value, op)
            operands.append(mapped[value])
        new = type(op).create(
            operands=operands,
            result_types=[_permuted_type(r.type, NHWC) for r in op.results],
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


@dataclass(frozen=True)
class ChannelsLastPass(ModulePass):
    """Store the activations of 2-D convolutions channels-last (see the module docstring)."""

    name: ClassVar[str] = "channels-last"  # pyright: ignore[reportIncompatibleVariableOverride]

    convert_inputs: bool = True
    """Copy a function argument a convolution reads to channels-last first."""
    convert_weights: bool = False
    """Copy the weights too (a kernel each per call: there is no freezing), sparing
    oneDNN / cuDNN their reorder of an NCHW weight."""
    pointwise_as_mm: bool = True
    """``conv1x1-to-mm`` runs after this pass (the default pipeline): a 1x1 convolution
    it turns into a matrix product does not run in ``Slow2d``, so it does not keep the
    function NCHW. Set it false when the pipeline leaves that pass out."""

    saved_nhwc: bool = True
    """On the GPU: return the results listed in ``kiln.free_layout_outputs`` (a training
    forward's saved activations) channels-last where they are stored so, and rewrite the
    pointwise ops on channels-last arguments (a backward's saved activations) and on
    results ATen lays out NHWC (``convolution_backward``) to NHWC, so that cuDNN's
    backward convolutions read NHWC (no ``nchwToNhwc`` / ``nhwcToNchw`` transposes).
    On since session 20: H200, float32 training steps, kernel ms off / on (`9fa2354`,
    torch 2.11): ResNet-18 small 1.265 / 1.246, large 6.19 / 4.81, ResNet-50 small 2.67 /
    2.45, MobileNet-v2 small 1.61 / 1.52, ShuffleNet-v2 small 1.49 / 1.53. It was off
    (session 14: 25x slower steps) because the batch norms' per-channel reductions over
    NHWC (``welford`` statistics, ``sum(g)`` with ``sum(g * (x - m))``) ran as one program
    of 64 channels over all N*H*W rows (42 ms a launch): ``tile`` now splits kernels of
    several reductions and welford statistics, and outer reductions keep 32 programs."""
    saved_nhwc_cpu: bool = False
    """The same on the CPU. Off: a torchvision ResNet-18 training step (batch 8, 96x96,
    1 thread, C++ executor, best of 15) took 342-358 ms so against 283-310 ms without,
    though MobileNet-v2's took 105-115 ms against 140-151 ms and EfficientNet-B0's 166
    against 240 ms (session 13, a loaded 2-core VM). ResNet-18's profile: ATen copies
    each NCHW weight channels-last at every call of a channels-last convolution and its
    backward (about 80 ms a step, the 3x3 512-channel layers above all), and the
    backward of those layers (batch 8, 3x3 pixels) took 28 ms a call NHWC against 18 ms
    NCHW (profiler, 1 thread)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for func in [f for f in op.walk() if isinstance(f, FuncOp)]:
            free = free_layout_outputs(func) - _alias_bases(func)
            func.attributes.pop(FREE_LAYOUT_OUTPUTS_ATTR, None)
            if not func.body.blocks:
                continue
            saved_nhwc = self.saved_nhwc if _on_gpu(op) else self.saved_nhwc_cpu
            nhwc_args = _channels_last_args(func) if saved_nhwc else []
            if not _has_2d_convolution(func) and not nhwc_args:
                continue
            if not _on_gpu(op) and _slow_cpu_convolution(func, self.pointwise_as_mm):
                continue
            rewrite = _FunctionRewrite(
                func.body.block,
                self.convert_inputs,
                self.convert_weights,
                _on_gpu(op),
                self.pointwise_as_mm,
                free if saved_nhwc else frozenset(),
                nhwc_args,
                saved_nhwc,
            )
            rewrite.run()
            if rewrite.returned_nhwc:
                _permute_returned(func, rewrite.returned_nhwc)


def _record_result_order(op: AtenOp, index: int, order: Sequence[int]) -> None:
    """Records in ``kiln.result_orders`` that ATen lays ``op``'s result ``index`` out in
    ``order`` (a wrong record costs a copy, never a wrong number)."""
    found = op.attributes.get(RESULT_ORDERS_ATTR)
    entries: list[Attribute] = (
        list(found.data) if isinstance(found, ArrayAttr) else [ArrayAttr([])] * len(op.results)  # pyright: ignore[reportUnknownArgumentType]
    )
    entries[index] = ArrayAttr([IntegerAttr(d, 64) for d in order])
    op.attributes[RESULT_ORDERS_ATTR] = ArrayAttr(entries)


def _channels_last_args(func: FuncOp) -> list[SSAValue]:
    """The 4-D arguments the importer records with channels-last strides."""
    args = func.body.block.args
    found: list[SSAValue] = []
    for k, arg in enumerate(args):
        shape = _tensor_shape(arg)
        attrs = func.arg_attrs.data[k] if func.arg_attrs is not None else None
        strides = arg_strides(attrs)
        if shape is not None and strides is not None and _is_channels_last(shape, strides):
            found.append(arg)
    return found


def _is_channels_last(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether static ``strides`` lay a 4-D ``shape`` out densely in NHWC order (dims of
    size 1 are free)."""
    if len(shape) != 4 or any(d < 0 for d in shape):
        return False
    expected = 1
    for dim in reversed(NHWC):
        if shape[dim] != 1 and strides[dim] != expected:
            return False
        expected *= shape[dim]
    return True


def _alias_bases(func: FuncOp) -> frozenset[int]:
    """The returned values that ``kiln.outputs`` replays views on (``alias(...)``, from
    ``output-layout``): a view op such as ``view`` may need its base contiguous."""
    structure = func.attributes.get(OUTPUTS_ATTR)
    if not isinstance(structure, StringAttr) or "alias(" not in structure.data:
        return frozenset()
    bases: set[int] = set()
    for node in ast.walk(ast.parse(structure.data, mode="eval")):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id == "alias" and len(node.args) > 1:
                base = node.args[1]
                if isinstance(base, ast.Constant) and type(base.value) is int:
                    bases.add(base.value)
    return frozenset(bases)


def _permute_returned(func: FuncOp, indices: Sequence[int]) -> None:
    """The function's type and ``kiln.outputs`` after results ``indices`` became NHWC."""
    ret = func.body.block.last_op
    assert isinstance(ret, ReturnOp)
    func.function_type = func.function_type.__class__.from_lists(
        list(func.function_type.inputs.data), [v.type for v in ret.operands]
    )
    structure = func.attributes.get(OUTPUTS_ATTR)
    leaves = set(indices)
    text = structure.data if isinstance(structure, StringAttr) else None
    tree = ast.parse(
        text if text is not None else f"({', '.join(map(str, range(len(ret.operands))))},)",
        mode="eval",
    )
    tree = _PermuteLeaves(leaves).visit(tree)
    func.attributes[OUTPUTS_ATTR] = StringAttr(ast.unparse(ast.fix_missing_locations(tree)))


class _PermuteLeaves(ast.NodeTransformer):
    """Wraps each leaf ``k`` (a returned value's index) of a ``kiln.outputs`` expression in
    ``permute(k, (0, 3, 1, 2))``: only leaves, not the dims of a ``permute`` or the
    result index of an ``alias``."""

    def __init__(self, leaves: set[int]) -> None:
        self.leaves = leaves

    def visit_Call(self, node: ast.Call) -> ast.AST:
        name = node.func.id if isinstance(node.func, ast.Name) else None
        position = {"permute": 0, "alias": 1}.get(name or "")
        if position is None:
            return self.generic_visit(node)
        node.args[position] = self.visit(node.args[position])
        return node

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        if type(node.value) is int and node.value in self.leaves:
            dims = ast.Tuple([ast.Constant(d) for d in NCHW], ast.Load())
            return ast.Call(ast.Name("permute", ast.Load()), [node, dims], [])
        return node


def _on_gpu(module: ModuleOp) -> bool:
    return not runs_on_cpu(module)


def _slow_cpu_convolution(func: FuncOp, pointwise_as_mm: bool) -> bool:
    """Whether ATen runs one of ``func``'s convolutions on a channels-last input with its
    reference kernel (``Slow2d``: small batch-1 convolutions, oneDNN's heuristic says no).
    That kernel computes channels-last by first copying the NCHW weight channels-last,
    on every call: ResNet-18 at 64x64 took 31 ms so against 16 ms NCHW. Such a function
    stays NCHW, as eager runs it; symbolic shapes are not asked about. A convolution
    ``prepack-weights`` marked runs in oneDNN, and (``pointwise_as_mm``) a 1x1 one that
    ``conv1x1-to-mm`` will run as a matrix product runs in neither: they do not count."""
    for op in func.body.block.ops:
        if (
            isinstance(op, AtenOp)
            and _is_2d_convolution(op)
            and not is_prepacked(op)
            and not (pointwise_as_mm and is_pointwise_convolution(op))
            and _cpu_backend(op) == "Slow2d"
        ):
            return True
    return False


def _cpu_backend(op: AtenOp) -> str | None:
    """The ATen convolution backend (``torch._C._select_conv_backend``) for ``op`` with a
    channels-last input and its weight as it comes (NCHW), or None when unknown."""
    import torch

    from kiln.dialects.aten.dtypes import type_to_dtype

    tensors = op.tensor_operands()
    x, weight = op.operands[0], tensors["weight"][0]
    bias = (tensors.get("bias") or [None])[0]
    x_shape = _tensor_shape(x)
    w_shape = _tensor_shape(weight) if weight is not None else None
    x_ty = x.type
    if x_shape is None or w_shape is None or not isinstance(x_ty, TensorType):
        return None
    if any(d < 0 for d in (*x_shape, *w_shape)):
        return None
    args = {}
    for name in ("stride", "padding", "dilation", "output_padding", "groups"):
        spec = next(a for a in op.op_schema().arguments if a.name == name)
        args[name] = decode_value(spec, op.arg_attr(name), ())
    try:
        dtype = type_to_dtype(x_ty.element_type)
        example = torch.empty(x_shape, dtype=dtype).to(memory_format=torch.channels_last)
        w = torch.empty(w_shape, dtype=dtype)
        b = torch.empty(w_shape[0], dtype=dtype) if bias is not None else None
        backend = torch._C._select_conv_backend(  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]
            example,
            w,
            b,
            args["stride"],
            args["padding"],
            args["dilation"],
            False,
            args["output_padding"],
            args["groups"],
            None,
        )
    except Exception:  # a dtype or shape ATen's selector rejects: nothing to learn
        return None
    return str(backend).rsplit(".", 1)[-1]


def _has_2d_convolution(func: FuncOp) -> bool:
    return any(
        isinstance(op, AtenOp) and op.overload_name == CONVOLUTION and _is_2d_convolution(op)
        for op in func.body.block.ops
    )

"""The state of lowering one function: value map, size symbols and op builders.

Lowerings (the per-family tables) see a :class:`LoweringContext` and an :class:`OpArgs`
for the aten op at hand. They return one :class:`TensorRef` (or SSA scalar) per result,
built with :meth:`LoweringContext.pointwise`, :meth:`LoweringContext.reduction`, view
methods of :class:`TensorRef`, or :meth:`LoweringContext.extern`; or raise
:class:`NoLowering` to leave the op to ATen.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import sympy
from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    ArrayAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    TensorType,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

from kiln.dialects.aten.encoding import decode_value
from kiln.dialects.aten.memory_format import NHWC
from kiln.dialects.aten.ops import AtenOp
from kiln.dialects.aten.result_layout import RESULT_ORDERS_ATTR, result_order
from kiln.dialects.aten.size_symbols import TRACED_SIZES_ATTR, traced_size_texts
from kiln.dialects.aten.storage import storage_layout
from kiln.dialects.aten.traits import FollowsChannelsLast, has_aten_trait
from kiln.dialects.loop.attributes import ReductionKind, ReductionKindAttr
from kiln.dialects.loop.expr import ExprSyntaxError, parse_expr
from kiln.dialects.loop.host_expr import arith_expr
from kiln.dialects.loop.ops import (
    ExternOp,
    PointwiseOp,
    ReductionOp,
    buffer_type,
    segment_sizes,
    tensor_for_buffer,
)
from kiln.passes.aten_to_loop.body import BodyBuilder, expr_attr
from kiln.passes.aten_to_loop.extern_shapes import extern_result_sizes
from kiln.passes.aten_to_loop.size_interning import SizeInterner
from kiln.passes.aten_to_loop.tensors import TensorRef
from kiln.passes.aten_to_loop.types import NoLowering, check_body_type, compute_type, is_body_type

Expr = sympy.Expr
Lowered = TensorRef | SSAValue
_INDEX = IndexType()


class LoweringError(Exception):
    """The IR cannot be lowered at all (not merely: this op runs as extern)."""


class LoweringContext:
    """Lowers the ops of one function into ``block`` (the new, memref-typed body)."""

    def __init__(self, block: Block) -> None:
        self.block = block
        self.values: dict[SSAValue, Lowered] = {}
        """Old (aten-level) value -> what it became."""
        self.symbols: dict[sympy.Symbol, SSAValue] = {}
        """Function-level size symbols -> the index value bound to each."""
        self._symbol_of: dict[SSAValue, sympy.Symbol] = {}
        self._index_values: dict[Expr, SSAValue] = {}
        self._expr_of: dict[SSAValue, Expr] = {}
        self._constants: dict[int, SSAValue] = {}
        self.interned_sizes = SizeInterner(self.symbols, lambda e: self.symbol(self.index_value(e)))
        """Divisions of sizes over size symbols of their own (what loop ops index by)."""
        self.written: set[SSAValue] = set()
        """Buffers an in-place op has written (reading them again is refused)."""
        self.device = "cpu"
        """Where the program runs (the module's ``kiln.device``: ``cuda:0``; CPU when
        absent): lowerings whose support differs by backend (atomic adds) ask it."""
        self.size_names: dict[str, Expr] = {}
        """Shape-environment symbol names (``"s77"``) -> the size each is bound to (the
        function's arguments: see :mod:`kiln.dialects.aten.size_symbols`)."""

    def cache_sizes(self) -> tuple[int, ...]:
        """The sizes of the function-wide caches that stamping checks a period does not
        grow. Not the size expressions of values (:meth:`cached_size_expr`): a period
        caches those of its own scalars (a view's ``arith.muli`` of two sizes), which a
        stamp maps to its clones instead; an expression of any other value is what
        :meth:`size_expr` computes again from the value's ops (any new symbol it needs
        shows in ``symbols``, any new index value in these caches)."""
        return (len(self._symbol_of), len(self._index_values), len(self._constants))

    def cached_size_expr(self, value: SSAValue) -> Expr | None:
        """The size expression :meth:`size_expr` has cached for ``value``, if any."""
        return self._expr_of.get(value)

    def cache_size_expr(self, value: SSAValue, e: Expr) -> None:
        """Cache ``e`` as ``value``'s size expression (a stamped clone of a value whose
        expression the template cached)."""
        self._expr_of[value] = e

    # -- values ------------------------------------------------------------------------

    def emit(self, op: Operation) -> Operation:
        self.block.add_op(op)
        return op

    def ref(self, value: SSAValue) -> TensorRef:
        lowered = self.values[value]
        if not isinstance(lowered, TensorRef):
            raise LoweringError(f"expected a tensor, got {value.type}")
        return lowered

    def scalar(self, value: SSAValue) -> SSAValue:
        lowered = self.values[value]
        if isinstance(lowered, TensorRef):
            raise LoweringError(f"expected a scalar, got a tensor {value.type}")
        return lowered

    def buffer_ref(
        self,
        buffer: SSAValue,
        dim_names: Sequence[str] = (),
        by_name: dict[str, Expr] | None = None,
        known: Sequence[Expr | None] | None = None,
    ) -> TensorRef:
        """The ref for a fresh contiguous buffer; ``?`` dims get ``memref.dim`` symbols,
        except a dim named in ``dim_names`` whose name ``by_name`` already binds (the
        dims just bound are added to it) and a dim whose size ``known`` gives (an
        extern result's, from its operands' sizes: see ``extern_shapes``)."""
        ty = buffer.type
        assert isinstance(ty, MemRefType)
        sizes: list[Expr] = []
        shape = ty.get_shape()
        if known is not None and len(known) != len(shape):
            known = None
        for k, dim in enumerate(shape):
            name = dim_names[k] if k < len(dim_names) else ""
            if dim >= 0:
                sizes.append(sympy.Integer(dim))
            elif known is not None and (size := known[k]) is not None:
                sizes.append(size)
            elif name and by_name is not None and name in by_name:
                sizes.append(by_name[name])
            else:
                index = self.index_constant(k)
                dim_op = self.emit(memref.DimOp(buffer, index))
                sizes.append(self.symbol(dim_op.results[0]))
                if name and by_name is not None:
                    by_name[name] = sizes[-1]
        return TensorRef.of_buffer(buffer, sizes)

    # -- size symbols ------------------------------------------------------------------------

    def symbol(self, value: SSAValue) -> sympy.Symbol:
        """The size symbol standing for a function-level integer value."""
        symbol = self._symbol_of.get(value)
        if symbol is None:
            if not isinstance(value.type, IndexType):
                if not isinstance(value.type, IntegerType):
                    raise NoLowering(f"symbolic {value.type} value used as a size")
                cast = self.emit(arith.IndexCastOp(value, _INDEX))
                bound = cast.results[0]
            else:
                bound = value
            symbol = sympy.Symbol(f"g{len(self.symbols)}", integer=True, positive=True)
            self.symbols[symbol] = bound
            self._symbol_of[value] = symbol
            self._index_values[symbol] = bound
        return symbol

    def size_expr(self, value: SSAValue) -> Expr:
        """The size expression of a function-level integer value: sums, differences,
        products and floor divisions of sizes stay expressions over the size symbols
        (``s0 * s1``, not a new symbol), so views over them compare structurally."""
        cached = self._expr_of.get(value)
        if cached is not None:
            return cached
        owner = value.owner
        # Arithmetic of index values only; a constant of any integer type.
        e = (
            arith_expr(owner, self.size_expr)
            if isinstance(value.type, IndexType) or isinstance(owner, arith.ConstantOp)
            else None
        )
        if e is None:
            e = self.symbol(value)
        self._expr_of[value] = e
        self._index_values.setdefault(e, value)
        return e

    def index_constant(self, value: int) -> SSAValue:
        cached = self._constants.get(value)
        if cached is None:
            cached = self.emit(arith.ConstantOp(IntegerAttr(value, _INDEX))).results[0]
            self._constants[value] = cached
        return cached

    def index_value(self, e: Expr) -> SSAValue:
        """A function-level ``index`` value computing ``e`` over the size symbols."""
        e = sympy.sympify(e)
        if e.is_Integer:
            return self.index_constant(int(e))
        cached = self._index_values.get(e)
        if cached is not None:
            return cached
        from kiln.dialects.loop.expr import FloorDiv, operands

        if isinstance(e, sympy.Pow) and e.exp.is_Integer and int(e.exp) > 0:
            base = self.index_value(e.base)
            value = base
            for _ in range(int(e.exp) - 1):
                value = self.emit(arith.MuliOp(value, base)).results[0]
            self._index_values[e] = value
            return value
        args = [self.index_value(a) for a in operands(e)]
        if isinstance(e, sympy.Add):
            op_cls: type[Operation] = arith.AddiOp
        elif isinstance(e, sympy.Mul):
            op_cls = arith.MuliOp
        elif isinstance(e, FloorDiv):
            op_cls = arith.FloorDivSIOp
        elif isinstance(e, sympy.Mod):
            op_cls = arith.RemSIOp  # operands are non-negative sizes
        else:
            raise NoLowering(f"cannot compute size {e}")
        value = args[0]
        for arg in args[1:]:
            value = self.emit(op_cls(value, arg)).results[0]  # pyright: ignore[reportCallIssue]
        self._index_values[e] = value
        return value

    # -- building loop ops ----------------------------------------------------------------

    def body(self, sizes: Sequence[Expr], reduction_sizes: Sequence[Expr] = ()) -> BodyBuilder:
        return BodyBuilder(sizes, reduction_sizes, self.symbols, self.interned_sizes)

    def _size_attrs(self, bb: BodyBuilder, sizes: Sequence[Expr]) -> ArrayAttr[Any]:
        return ArrayAttr([expr_attr(bb.localize(sympy.sympify(s))) for s in sizes])

    def pointwise(
        self,
        sizes: Sequence[Expr],
        dtype: Attribute,
        body: Callable[[BodyBuilder, list[sympy.Symbol]], SSAValue],
    ) -> TensorRef:
        """A buffer of ``dtype`` whose element ``idx`` is ``body(bb, idx)`` (cast to dtype)."""
        check_body_type(dtype)
        bb = self.body(sizes)
        size_attrs = self._size_attrs(bb, sizes)
        value = bb.cast(body(bb, bb.index), dtype)
        block = bb.finish(value)
        op = PointwiseOp.create(
            operands=[*bb.inputs, *bb.sym_values],
            result_types=[buffer_type(dtype, sizes)],
            properties={
                "sizes": size_attrs,
                "operandSegmentSizes": segment_sizes(len(bb.inputs), len(bb.sym_values)),
            },
            regions=[Region(block)],
        )
        self.emit(op)
        return TensorRef.of_buffer(op.result, sizes)

    def reduction(
        self,
        kind: ReductionKind,
        sizes: Sequence[Expr],
        reduction_sizes: Sequence[Expr],
        value_type: Attribute,
        body: Callable[[BodyBuilder, list[sympy.Symbol], list[sympy.Symbol]], SSAValue],
    ) -> list[TensorRef]:
        """Reduce ``body(bb, idx, ridx)`` (cast to ``value_type``) over the reduction space."""
        check_body_type(value_type)
        if any(sympy.sympify(s) == 0 for s in reduction_sizes):
            # A reduction of nothing: ATen gives the identity (sum, prod, any, all), NaN
            # (mean, var) or raises eager's error (max, min, argmax: no identity), where
            # a loop would return its initial value (-inf) and load from empty buffers.
            raise NoLowering(f"{kind.value} over a 0-size dim")
        bb = self.body(sizes, reduction_sizes)
        size_attrs = self._size_attrs(bb, sizes)
        reduction_attrs = self._size_attrs(bb, reduction_sizes)
        value = bb.cast(body(bb, bb.index, bb.reduction), value_type)
        block = bb.finish(value)
        if kind in (ReductionKind.ARGMAX, ReductionKind.ARGMIN):
            from xdsl.dialects.builtin import i64

            out_types = [buffer_type(i64, sizes)]
        elif kind is ReductionKind.WELFORD:
            out_types = [buffer_type(value_type, sizes)] * 3
        else:
            out_types = [buffer_type(value_type, sizes)]
        op = ReductionOp.create(
            operands=[*bb.inputs, *bb.sym_values],
            result_types=out_types,
            properties={
                "kind": ReductionKindAttr(kind),
                "sizes": size_attrs,
                "reduction_sizes": reduction_attrs,
                "operandSegmentSizes": segment_sizes(len(bb.inputs), len(bb.sym_values)),
            },
            regions=[Region(block)],
        )
        self.emit(op)
        return [TensorRef.of_buffer(r, sizes) for r in op.outputs]

    def materialize(self, ref: TensorRef, name: str | None = None) -> SSAValue:
        """A contiguous buffer holding ``ref``: its own buffer when it is one, else a copy
        (named ``name``, the tensor it holds)."""
        if ref.is_plain():
            return ref.buffer
        if not is_body_type(ref.dtype):
            return self._extern_copy(ref, name)
        copy = self.pointwise(ref.sizes, ref.dtype, lambda bb, idx: bb.load(ref, idx))
        copy.buffer.name_hint = name
        return copy.buffer

    def copy(self, ref: TensorRef, name: str | None = None) -> SSAValue:
        """A new contiguous buffer holding ``ref`` (a copy even of a plain buffer)."""
        if not is_body_type(ref.dtype):
            return self._extern_copy(ref, name)
        copy = self.pointwise(ref.sizes, ref.dtype, lambda bb, idx: bb.load(ref, idx))
        copy.buffer.name_hint = name
        return copy.buffer

    def _extern_copy(self, ref: TensorRef, name: str | None) -> SSAValue:
        """The copy of a strided view whose dtype no loop body handles (complex, float8,
        quantized): ATen's ``clone`` of the ``as_strided`` view, into a contiguous buffer."""
        from kiln.dialects.aten.dialect import op_class
        from kiln.dialects.loop.body_ops import YieldOp

        if ref.strides is None:
            raise NoLowering(f"a non-strided view of {ref.dtype} cannot be copied by ATen")
        buffer_type_ = ref.buffer.type
        assert isinstance(buffer_type_, MemRefType)
        block = Block(arg_types=[tensor_for_buffer(buffer_type_)])
        body_ops: list[Operation] = []
        syms: list[SSAValue] = []
        builder = _ExternBody(self, block, body_ops, syms, {})
        shape = [int(s) if s.is_Integer else DYNAMIC_INDEX for s in map(sympy.sympify, ref.sizes)]
        view_type = TensorType(ref.dtype, shape)
        view = builder.as_strided(block.args[0], ref, view_type)
        clone = op_class("clone.default")
        assert clone is not None
        copy = clone.from_args({"self": view, "memory_format": "contiguous_format"}, [view_type])
        body_ops += [copy, YieldOp(copy.results[0])]
        block.add_ops(body_ops)
        extern = ExternOp.build(
            operands=[[ref.buffer], syms],
            result_types=[[buffer_type(ref.dtype, ref.sizes)]],
            regions=[Region(block)],
        )
        self.emit(extern)
        result = extern.outputs[0]
        result.name_hint = name
        return result

    def _materialized_for_extern(self, operand: SSAValue, lowered: TensorRef) -> TensorRef:
        """``operand``, which no strided view expresses, as a view of a contiguous copy.

        The copy is of the value it permutes (through ``t`` / ``permute`` /
        ``transpose``) when that value has no strided form either, and replaces that
        value's lowering for the ops after this one: a linear layer's backward reads
        its output gradient ``g`` as ``g @ w`` and ``g.t() @ x`` (and sums it for the
        bias), and with ``g`` a reshape of a permute (the stacked q, k, v gradients of an
        attention) each extern copied it again, the transposed copy gathering element by
        element (ViT-S, H200: one kernel of 157 us a layer where one copy and a sum of it
        take 27 us). ATen's matmuls read the transposed view of the one copy as it is."""
        source, dims = operand, list(range(lowered.rank))
        while (step := _permuted_from(source)) is not None:
            below = self.values.get(step[0])
            if not isinstance(below, TensorRef) or below.strides is not None:
                break
            source, dims = step[0], [step[1][d] for d in dims]
        ref = self.values[source]
        assert isinstance(ref, TensorRef)
        name = f"{source.name_hint}_contiguous" if source.name_hint else None
        copy = TensorRef.of_buffer(self.materialize(ref, name), ref.sizes)
        self.values[source] = copy
        return copy.permute(dims)

    # -- extern ---------------------------------------------------------------------------

    def extern(self, op: Operation, keep_alive: Sequence[SSAValue] = ()) -> list[Lowered]:
        """``op`` run by ATen inside a ``loop.extern``; inputs pass as buffers or views.

        ``keep_alive``: buffers passed as extra inputs that the body does not read, so
        that they stay alive (not freed, reused or updated in place) until the call: a
        collective's input until its ``wait_tensor``.

        An op with the ``FollowsChannelsLast`` trait given a channels-last input returns
        channels-last 4-D results (ATen's memory-format propagation): the body yields
        them permuted to NHWC, so the result buffers are NHWC and are not copied back
        to NCHW; the results are those buffers seen in NCHW order.
        """
        channels_last = self._follows_channels_last(op)
        block = Block()
        inputs: list[SSAValue] = []
        input_args: dict[SSAValue, SSAValue] = {}
        mapping: dict[SSAValue, SSAValue] = {}
        body_ops: list[Operation] = []
        syms: list[SSAValue] = []
        sym_args: dict[SSAValue, SSAValue] = {}

        def input_arg(buffer: SSAValue) -> SSAValue:
            arg = input_args.get(buffer)
            if arg is None:
                arg = block.insert_arg(tensor_for_buffer(buffer.type), len(inputs))
                input_args[buffer] = arg
                inputs.append(buffer)
            return arg

        views: list[tuple[SSAValue, TensorRef]] = []
        eager_layout = self._eager_layout_operand(op)
        for operand in op.operands:
            if operand in mapping:
                continue
            lowered = self.values.get(operand)
            if isinstance(lowered, TensorRef) and eager_layout is not None:
                if operand is eager_layout[0]:
                    # The op's values depend on this operand's strides (kiln.storage).
                    views.append((operand, self.in_layout(lowered, eager_layout[1])))
                    continue
            if isinstance(lowered, TensorRef):
                if lowered.is_plain() and _same_shape(lowered):
                    mapping[operand] = input_arg(lowered.buffer)
                elif lowered.strides is not None and all(
                    not (st.is_Integer and int(st) < 0) for st in lowered.strides
                ):
                    views.append((operand, lowered))
                else:
                    # No strided view expresses it (a reshape torch copies too): copy.
                    views.append((operand, self._materialized_for_extern(operand, lowered)))
            elif lowered is not None:
                arg = sym_args.get(lowered)
                if arg is None:
                    syms.append(lowered)
                    arg = block.insert_arg(lowered.type, len(block.args))
                    sym_args[lowered] = arg
                mapping[operand] = arg
            else:
                raise LoweringError(f"operand of {op.name} was not lowered")
        builder = _ExternBody(self, block, body_ops, syms, sym_args)
        for buffer in keep_alive:
            input_arg(buffer)
        for operand, view in views:
            mapping[operand] = builder.as_strided(input_arg(view.buffer), view, operand.type)
        clone = op.clone(value_mapper=mapping)
        for read_here in (TRACED_SIZES_ATTR, RESULT_ORDERS_ATTR):  # not by the extern
            clone.attributes.pop(read_here, None)
        body_ops.append(clone)
        from kiln.dialects.loop.body_ops import YieldOp

        # The memory order of each result: NHWC after a channels-last input, else the
        # order ATen lays it out in where it is not contiguous (kiln.result_orders).
        orders = [
            (NHWC if _is_4d(r.type) else None) if channels_last else result_order(op, k)
            for k, r in enumerate(clone.results)
        ]
        yielded = [
            r if order is None else _permuted(r, order, body_ops)
            for r, order in zip(clone.results, orders, strict=True)
        ]
        body_ops.append(YieldOp(*yielded))
        block.add_ops(body_ops)
        result_types = [_result_buffer_type(v.type) for v in yielded]
        extern = ExternOp.build(
            operands=[inputs, syms], result_types=[result_types], regions=[Region(block)]
        )
        self.emit(extern)
        known = None if channels_last else extern_result_sizes(op, self.values)
        out: list[Lowered] = []
        for k, (result, order) in enumerate(zip(extern.outputs, orders, strict=True)):
            if not isinstance(result.type, MemRefType):
                out.append(result)
            elif order is not None:
                # The tracer's sizes (or the shape rule's) too, permuted as the buffer
                # is: fresh symbols would make every consumer fused with a value of the
                # graph's own sizes divide per element.
                sizes = known if known is not None else self.traced_sizes(op, k)
                permuted = None if sizes is None else [sizes[d] for d in order]
                out.append(self.buffer_ref(result, known=permuted).permute(_inverse(order)))
            else:
                # The graph's own sizes (the tracer's), not fresh symbols read from
                # ATen's result: views of it then stay strided views.
                sizes = known if known is not None else self.traced_sizes(op, k)
                out.append(self.buffer_ref(result, known=sizes))
        return out

    def traced_sizes(self, op: Operation, index: int) -> list[Expr | None] | None:
        """Result ``index``'s sizes as the tracer's shape environment gave them, over
        this function's size symbols (None per dim where unknown: static, or a symbol
        no argument binds); None without the importer's attribute."""
        texts = traced_size_texts(op, index)
        if texts is None:
            return None
        out = [self._traced_size(text) if text is not None else None for text in texts]
        return out if any(e is not None for e in out) else None

    def _traced_size(self, text: str) -> Expr | None:
        try:
            e = parse_expr(text)
        except ExprSyntaxError:
            return None
        mapping: dict[sympy.Basic, Expr] = {}
        for symbol in e.free_symbols:
            bound = self.size_names.get(str(symbol))
            if bound is None:
                return None
            mapping[symbol] = bound
        return cast(Expr, e.xreplace(mapping))

    def _eager_layout_operand(self, op: Operation) -> tuple[SSAValue, tuple[int, ...]] | None:
        """The ``self`` operand of a storage-dependent op and the strides eager gives it."""
        if not isinstance(op, AtenOp):
            return None
        layout = storage_layout(op)
        operand = op.tensor_operands().get("self", [None])
        if layout is None or not operand or operand[0] is None:
            return None
        return operand[0], layout[1]

    def in_layout(self, ref: TensorRef, strides: Sequence[int]) -> TensorRef:
        """``ref`` with exactly ``strides`` (a dense layout): a view when kiln already
        stores it so, else a copy whose buffer is ordered by decreasing stride."""
        if ref.strides is not None and all(
            size == 1 or a == b for size, a, b in zip(ref.sizes, ref.strides, strides, strict=True)
        ):
            return ref
        order = sorted(range(ref.rank), key=lambda k: -strides[k])
        position = [order.index(d) for d in range(ref.rank)]
        copy = self.pointwise(
            [ref.sizes[k] for k in order],
            ref.dtype,
            lambda bb, idx: bb.load(ref, [idx[position[d]] for d in range(ref.rank)]),
        )
        return copy.permute(position)

    def _follows_channels_last(self, op: Operation) -> bool:
        if not isinstance(op, AtenOp) or not has_aten_trait(op, FollowsChannelsLast):
            return False
        first = next(iter(op.tensor_operands().values()), [None])
        lowered = self.values.get(first[0]) if first and first[0] is not None else None
        return isinstance(lowered, TensorRef) and lowered.is_channels_last()


def _is_4d(ty: Attribute) -> bool:
    return isinstance(ty, TensorType) and len(ty.get_shape()) == 4


def _inverse(order: Sequence[int]) -> list[int]:
    inverse = [0] * len(order)
    for position, dim in enumerate(order):
        inverse[dim] = position
    return inverse


def _permuted(value: SSAValue, dims: Sequence[int], body_ops: list[Operation]) -> SSAValue:
    """``permute(value, dims)`` appended to an extern body."""
    from kiln.dialects.aten.dialect import op_class

    permute = op_class("permute.default")
    assert permute is not None
    ty: Attribute = value.type
    assert isinstance(ty, TensorType)
    shape: tuple[int, ...] = ty.get_shape()  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    result_type = TensorType(ty.element_type, [shape[d] for d in dims])  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
    op = permute.from_args({"self": value, "dims": list(dims)}, [result_type])
    body_ops.append(op)
    return op.results[0]


def _same_shape(ref: TensorRef) -> bool:
    ty = ref.buffer.type
    assert isinstance(ty, MemRefType)
    return len(ty.get_shape()) == ref.rank


def _result_buffer_type(ty: Attribute) -> Attribute:
    if isinstance(ty, TensorType):
        return MemRefType(ty.element_type, ty.get_shape())
    return ty


@dataclass
class _ExternBody:
    """Index arithmetic and views inside one ``loop.extern`` body."""

    ctx: LoweringContext
    block: Block
    ops: list[Operation]
    syms: list[SSAValue]
    sym_args: dict[SSAValue, SSAValue]

    def sym_arg(self, value: SSAValue) -> SSAValue:
        arg = self.sym_args.get(value)
        if arg is None:
            self.syms.append(value)
            arg = self.block.insert_arg(value.type, len(self.block.args))
            self.sym_args[value] = arg
        return arg

    def size(self, e: Expr) -> SSAValue | int:
        """An int, or an index value computing ``e`` from extern arguments."""
        e = sympy.sympify(e)
        if e.is_Integer:
            return int(e)
        # Compute at function level, pass the value in.
        return self.sym_arg(self.ctx.index_value(e))

    def as_strided(self, tensor: SSAValue, view: TensorRef, result_type: Attribute) -> SSAValue:
        """``view`` of ``tensor`` as ATen ops: ``as_strided``, then ``flip`` of the dims
        whose strides are negative (a flipped view: ATen's ``as_strided`` refuses negative
        strides, and a C++ view built with them reads before the storage)."""
        from kiln.dialects.aten.dialect import op_class

        as_strided = op_class("as_strided.default")
        assert as_strided is not None
        assert view.strides is not None
        strides = [sympy.sympify(s) for s in view.strides]
        sizes = [sympy.sympify(s) for s in view.sizes]
        flipped = [k for k, s in enumerate(strides) if _negative(s)]
        # The flipped dims' last elements are the lowest addresses: the view starts there
        # (an empty view anywhere: at 0).
        offset = sympy.sympify(view.offset) + sum(
            ((sizes[k] - 1) * strides[k] for k in flipped), sympy.S.Zero
        )
        if any(s == 0 for s in sizes):
            offset = sympy.S.Zero
        args: dict[str, Any] = {
            "self": tensor,
            "size": [self.size(s) for s in sizes],
            "stride": [self.size(-s if k in flipped else s) for k, s in enumerate(strides)],
        }
        if offset != 0:
            args["storage_offset"] = self.size(offset)
        op = as_strided.from_args(args, [result_type])
        self.ops.append(op)
        if not flipped:
            return op.results[0]
        flip = op_class("flip.default")
        assert flip is not None
        reversed_ = flip.from_args({"self": op.results[0], "dims": flipped}, [result_type])
        self.ops.append(reversed_)
        return reversed_.results[0]


def _negative(stride: Expr) -> bool:
    """Whether a (symbolic) stride is negative: a flip's is the negated stride of its
    input (``-32*s0``); a size expression whose sign sympy cannot tell is not."""
    stride = sympy.sympify(stride)
    if stride.is_negative is not None:
        return bool(stride.is_negative)
    return stride.could_extract_minus_sign()


@dataclass
class OpArgs:
    """An aten op's arguments as Python values, tensors as :class:`TensorRef`."""

    ctx: LoweringContext
    op: AtenOp

    def tensor(self, name: str) -> TensorRef:
        values = self.op.tensor_operands()[name]
        if not values or values[0] is None:
            raise LoweringError(f"{self.op.name}: missing tensor argument '{name}'")
        return self.ctx.ref(values[0])

    def opt_tensor(self, name: str) -> TensorRef | None:
        values = self.op.tensor_operands()[name]
        return self.ctx.ref(values[0]) if values and values[0] is not None else None

    def tensors(self, name: str) -> list[TensorRef | None]:
        return [None if v is None else self.ctx.ref(v) for v in self.op.tensor_operands()[name]]

    def value(self, name: str, symbolic_float: bool = False) -> Any:
        """A non-tensor argument (symbolic ints as sympy symbols; floats stay floats).

        A float computed on the host from a size (``sym_float(s0)``: the count a mean
        divides by under ``dynamic=True``) is a :class:`SymFloat` where the caller takes
        one (``symbolic_float``: it converts the size in the body); any other symbolic
        float has no loop-level form (NoLowering: the op runs as ATen)."""
        spec = next(a for a in self.op.op_schema().arguments if a.name == name)
        syms: list[Any] = []
        for v in self.op.sym_operands():
            lowered = self.ctx.scalar(v)
            if isinstance(lowered.type, IndexType | IntegerType):
                syms.append(self.ctx.size_expr(lowered))
            else:
                syms.append(self._size_as_float(lowered) or _SymbolicFloat())
        value = decode_value(spec, self.op.arg_attr(name), syms)
        values: list[Any] = value if isinstance(value, list) else [value]  # pyright: ignore[reportUnknownVariableType]
        if any(
            isinstance(v, _SymbolicFloat) or (isinstance(v, SymFloat) and not symbolic_float)
            for v in values
        ):
            raise NoLowering(f"argument '{name}' is a symbolic float")
        return value

    def _size_as_float(self, value: SSAValue) -> SymFloat | None:
        """``sitofp(index_cast(size))`` (or ``sitofp`` of an integer size) as a SymFloat."""
        if not isinstance(value.owner, arith.SIToFPOp):
            return None
        source = value.owner.input
        if isinstance(source.owner, arith.IndexCastOp):
            source = source.owner.input
        if not isinstance(source.type, IndexType | IntegerType):
            return None
        return SymFloat(self.ctx.size_expr(source))

    def result_type(self, index: int = 0) -> TensorType[Attribute]:
        ty = self.op.result_types[index]
        if not isinstance(ty, TensorType):
            raise NoLowering(f"result {index} is not a tensor")
        return ty  # pyright: ignore[reportUnknownVariableType]

    def result_dtype(self, index: int = 0) -> Attribute:
        return self.result_type(index).element_type

    def result_sizes(self, index: int, computed: Sequence[Expr]) -> list[Expr]:
        """Computed sizes, checked against (and completed by) the result type."""
        shape = self.result_type(index).get_shape()
        if len(shape) != len(computed):
            raise LoweringError(
                f"{self.op.name}: computed rank {len(computed)} but result type has rank {len(shape)}"
            )
        out: list[Expr] = []
        for dim, size in zip(shape, computed, strict=True):
            size = sympy.sympify(size)
            if dim >= 0:
                if size.is_Integer and int(size) != dim:
                    raise LoweringError(
                        f"{self.op.name}: computed size {size} but the result type says {dim}"
                    )
                out.append(sympy.Integer(dim))
            else:
                out.append(size)
        return out


Lowering = Callable[[LoweringContext, OpArgs], Sequence[Lowered]]
"""Lower one op: a value per result, or raise NoLowering to run it as extern."""


class _SymbolicFloat:
    """Placeholder for a SymFloat argument (no loop-level representation)."""


@dataclass(frozen=True)
class SymFloat:
    """A float argument that is an integer size converted on the host (``sym_float``):
    its value is ``float(expr)``, which a loop body computes from the size."""

    expr: Expr


_PERMUTING_VIEWS = ("aten::t.default", "aten::permute.default", "aten::transpose.int")


def _permuted_from(value: SSAValue) -> tuple[SSAValue, list[int]] | None:
    """``(source, dims)`` when ``value`` is ``source.permute(dims)`` written as ``t``,
    ``permute`` or ``transpose`` (result dim ``k`` is the source's ``dims[k]``)."""
    op = value.owner
    if not isinstance(op, AtenOp) or op.overload_name not in _PERMUTING_VIEWS:
        return None
    source = op.tensor_operands()["self"][0]
    if source is None or not isinstance(source.type, TensorType):
        return None
    rank = len(source.type.get_shape())  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
    dims = list(range(rank))
    if op.overload_name == "aten::t.default":
        dims.reverse()  # t is the identity below rank 2
    elif op.overload_name == "aten::transpose.int":
        if rank == 0:
            return None
        a, b = op.static_arg("dim0") % rank, op.static_arg("dim1") % rank
        dims[a], dims[b] = dims[b], dims[a]
    else:
        dims = [d % rank for d in op.static_arg("dims")]
    return source, dims


__all__ = [
    "Lowering",
    "LoweringContext",
    "LoweringError",
    "NoLowering",
    "OpArgs",
    "SymFloat",
    "compute_type",
]

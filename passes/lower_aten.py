"""``lower-aten``: the aten dialect to the loop dialect.

Each function's tensors become buffers (contiguous ``memref`` arguments and results);
each aten op is lowered by the one function its type maps to in
:func:`kiln.passes.aten_to_loop.lowering_table` (one dict lookup per op). Views become
index maps that consumers inline into their loads (no copies); pointwise ops,
reductions, indexing, concatenation, padding and creation ops become
``loop.pointwise``/``loop.reduction``; everything else, and any op whose types or
arguments have no exact lowering, becomes a ``loop.extern`` calling ATen. A view
returned from the function is materialized by a pointwise copy (results are
contiguous buffers), as is a view an extern needs that no strided layout expresses.

Buffers are immutable: an in-place op (``add_``) runs as an extern that writes a copy,
and reading the tensor it wrote afterwards is refused with a diagnostic (lower a
functionalized graph instead) rather than silently computed from the old value.

```mlir
%1 = aten.permute.default(%x, dims = [1, 0]) : (tensor<4x8xf32>) -> tensor<8x4xf32>
%2 = aten.relu.default(%1) : (tensor<8x4xf32>) -> tensor<8x4xf32>
```
becomes
```mlir
%0 = loop.pointwise [8, 4] (%x) : (memref<4x8xf32>) -> memref<8x4xf32> {
^bb0(%d0: index, %d1: index, %a: memref<4x8xf32>):
  %v = loop.load %a["d0 + 8*d1"] : memref<4x8xf32>
  %c = arith.constant 0.0 : f32
  %r = arith.maximumf %v, %c : f32
  loop.yield %r : f32
}
```
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import sympy
from xdsl.context import Context
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    FunctionType,
    IndexType,
    MemRefType,
    ModuleOp,
    StringAttr,
    TensorType,
    UnknownLoc,
)
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Attribute, Block, BlockArgument, Operation, OpResult, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import DiagnosticException

from kiln.dialects.aten.arg_layout import ARG_STRIDES_ATTR, arg_strides
from kiln.dialects.aten.dialect import ConstantOp
from kiln.dialects.aten.function_attrs import module_device
from kiln.dialects.aten.fx.importer import GET_ATTR_ATTR, NAME_ATTR
from kiln.dialects.aten.ops import AtenOp
from kiln.dialects.aten.size_symbols import SIZE_SYMBOL_ATTR, SIZE_SYMBOLS_ATTR
from kiln.dialects.aten.storage import STORAGE_ATTR
from kiln.dialects.aten.traits import AliasingView, has_aten_trait
from kiln.dialects.loop.body_ops import YieldOp
from kiln.dialects.loop.ops import ExternOp
from kiln.passes.aten_to_loop import LoweringTable, lowering_table
from kiln.passes.aten_to_loop.context import LoweringContext, LoweringError, OpArgs
from kiln.passes.aten_to_loop.creation import lower_constant
from kiln.passes.aten_to_loop.stamp import (
    REAL_PERIODS,
    STAMPED_ATTR,
    Stamper,
    StampFailed,
    context_state,
    find_period,
    same_lowering,
    stamped_note,
)
from kiln.passes.aten_to_loop.tensors import TensorRef
from kiln.passes.aten_to_loop.types import NoLowering, is_body_type


class LowerAtenError(DiagnosticException):
    """An op that cannot be lowered even as an extern call (malformed input IR)."""


def buffer_type_for(ty: Attribute) -> Attribute:
    """Tensor types become contiguous memrefs; other types are kept."""
    if isinstance(ty, TensorType):
        return MemRefType(ty.element_type, ty.get_shape())
    return ty


@dataclass
class LoweringStats:
    """What one run lowered natively and what it left to ATen (by overload)."""

    native: dict[str, int]
    extern: dict[str, int]


def lower_function(
    func: FuncOp, table: LoweringTable, stats: LoweringStats | None = None, stamp: bool = True
) -> None:
    """Lower ``func`` in place; ``stamp``: clone the lowering of a repeated region
    (:mod:`kiln.passes.aten_to_loop.stamp`) instead of lowering every repetition."""
    old_block = func.body.block
    new_block = Block(arg_types=[buffer_type_for(t) for t in old_block.arg_types])
    ctx = LoweringContext(new_block)
    ctx.device = module_device(func.parent_op())
    _bind_arguments(ctx, func, old_block, new_block)
    ops = list(old_block.ops)
    done = _lower_stamped(ctx, func, ops, table, stats) if stamp else 0
    for op in ops[done:]:
        _lower_one(ctx, op, table, stats)
    func.body.detach_block(old_block)
    func.body.add_block(new_block)
    terminator = new_block.last_op
    outputs = terminator.operand_types if isinstance(terminator, ReturnOp) else ()
    func.function_type = FunctionType.from_lists(new_block.arg_types, outputs)
    old_block.erase(safe_erase=False)


def _lower_one(
    ctx: LoweringContext, op: Operation, table: LoweringTable, stats: LoweringStats | None
) -> list[Operation]:
    """Lower ``op``; returns the ops emitted for it."""
    last = ctx.block.last_op
    try:
        _lower_op(ctx, op, table, stats)
    except (LoweringError, NoLowering) as e:
        raise LowerAtenError(f"cannot lower {op.name}: {e}") from e
    _inherit_location(op, last, ctx.block)
    return _emitted_after(last, ctx.block)


def _emitted_after(last: Operation | None, block: Block) -> list[Operation]:
    emitted: list[Operation] = []
    op = last.next_op if last is not None else block.first_op
    while op is not None:
        emitted.append(op)
        op = op.next_op
    return emitted


def _lower_stamped(
    ctx: LoweringContext,
    func: FuncOp,
    ops: list[Operation],
    table: LoweringTable,
    stats: LoweringStats | None,
) -> int:
    """Lower ``ops`` up to the end of their repeated region, stamping what the check
    allows (:mod:`kiln.passes.aten_to_loop.stamp`); returns how many ops are lowered."""
    period = find_period(ops, _argument_keys(func))
    if period is None or ctx.written:
        return 0
    for op in ops[: period.start]:
        _lower_one(ctx, op, table, stats)
    before_region = ctx.block.last_op
    for op in ops[period.first_op(0) : period.first_op(1)]:
        _lower_one(ctx, op, table, stats)
    template_ops = ops[period.first_op(1) : period.first_op(2)]
    before = _copy_stats(stats)
    template = [_lower_one(ctx, op, table, stats) for op in template_ops]
    delta = _stats_delta(before, _copy_stats(stats))
    state = context_state(ctx)
    checked = [
        emitted
        for op in ops[period.first_op(2) : period.first_op(3)]
        for emitted in _lower_one(ctx, op, table, stats)
    ]
    real_end = period.first_op(REAL_PERIODS)
    if context_state(ctx) != state or ctx.written:
        return real_end
    region_values: set[SSAValue] = {
        r for op in _emitted_after(before_region, ctx.block) for r in op.results
    }
    stamper = Stamper(ctx, ops, period, period.first_op(1), template, region_values)
    try:
        check = stamper.stamp(period.first_op(2))
    except StampFailed:
        return real_end
    same = same_lowering(check, checked, ctx)
    check.discard()
    if not same:
        return real_end
    done = 0
    for p in range(REAL_PERIODS, period.count):
        try:
            stamp = stamper.stamp(period.first_op(p))
        except StampFailed:
            break
        stamp.apply(ctx)
        if stats is not None:
            _add_stats(stats, delta)
        done += 1
    if done:
        func.attributes[STAMPED_ATTR] = stamped_note(done, period)
    return real_end + done * period.length


def _copy_stats(stats: LoweringStats | None) -> LoweringStats:
    return LoweringStats(dict(stats.native), dict(stats.extern)) if stats else LoweringStats({}, {})


def _stats_delta(before: LoweringStats, after: LoweringStats) -> LoweringStats:
    """What lowering the template added to the statistics (a stamped period adds it too)."""
    return LoweringStats(
        {k: n - before.native.get(k, 0) for k, n in after.native.items()},
        {k: n - before.extern.get(k, 0) for k, n in after.extern.items()},
    )


def _add_stats(stats: LoweringStats, delta: LoweringStats) -> None:
    for total, part in ((stats.native, delta.native), (stats.extern, delta.extern)):
        for name, n in part.items():
            if n:
                total[name] = total.get(name, 0) + n


def _argument_keys(func: FuncOp) -> list[object]:
    """What identifies each argument apart from its name (period detection)."""
    attrs = func.arg_attrs.data if func.arg_attrs is not None else ()
    keys: list[object] = []
    for k, ty in enumerate(func.function_type.inputs.data):
        extra = (
            tuple((n, v) for n, v in attrs[k].data.items() if n not in (NAME_ATTR, GET_ATTR_ATTR))
            if k < len(attrs)
            else ()
        )
        keys.append(("arg", ty, extra))
    return keys


def _bind_arguments(ctx: LoweringContext, func: FuncOp, old_block: Block, new_block: Block) -> None:
    """Map the arguments; sizes that are the same shape-environment symbol (a SymInt
    argument, a dim of a tensor argument: the importer's size-symbol attributes) get
    one size symbol, so that views over them compare structurally."""
    attrs = [a.data for a in func.arg_attrs.data] if func.arg_attrs is not None else []
    by_name = ctx.size_names
    pairs = list(zip(old_block.args, new_block.args, strict=True))
    written = _written_arguments(old_block)
    ignored: list[int] = []
    for k, (old, new) in enumerate(pairs):
        new.name_hint = old.name_hint
        if isinstance(new.type, MemRefType):
            continue
        ctx.values[old] = new
        name = attrs[k].get(SIZE_SYMBOL_ATTR) if k < len(attrs) else None
        if isinstance(name, StringAttr) and isinstance(new.type, IndexType):
            by_name.setdefault(name.data, ctx.symbol(new))
    for k, (old, new) in enumerate(pairs):
        if not isinstance(new.type, MemRefType):
            continue
        names = attrs[k].get(SIZE_SYMBOLS_ATTR) if k < len(attrs) else None
        dims = (
            [n.data if isinstance(n, StringAttr) else "" for n in names.data]
            if isinstance(names, ArrayAttr)
            else []
        )
        ref = ctx.buffer_ref(new, dims, by_name)
        strides = arg_strides(func.arg_attrs.data[k]) if k < len(attrs) else None  # pyright: ignore[reportOptionalMemberAccess]
        if strides is not None and len(strides) == ref.rank and old not in written:
            # A strided input is read where it lies (dialects/aten/arg_layout.py). No
            # buffer sizes: a view of it is never "the buffer itself" (is_plain), since
            # the tensor handed to an extern or returned is the strided one, not its
            # memory in row-major order (t(x) of a square x would read as x).
            ref = TensorRef(
                ref.buffer,
                ref.sizes,
                ref.dtype,
                tuple(sympy.Integer(s) for s in strides),
                sympy.Integer(0),
                None,
                None,
            )
        elif strides is not None:
            ignored.append(k)
        ctx.values[old] = ref
    if ignored and func.arg_attrs is not None:
        # The wrappers copy these to contiguous buffers, as the IR now reads them.
        func.arg_attrs = ArrayAttr(
            [
                DictionaryAttr({n: v for n, v in a.data.items() if n != ARG_STRIDES_ATTR})
                if k in ignored
                else a
                for k, a in enumerate(func.arg_attrs.data)
            ]
        )


def _written_arguments(block: Block) -> set[SSAValue]:
    """Arguments that an op writes or addresses by storage position, directly or through
    a chain of views: they keep a contiguous buffer (their recorded strides are ignored)."""
    aliases: dict[SSAValue, SSAValue] = {arg: arg for arg in block.args}
    written: set[SSAValue] = set()
    for op in block.ops:
        if not isinstance(op, AtenOp):
            continue
        if STORAGE_ATTR in op.attributes:
            # as_strided & co. address eager's storage: keep the contiguous copy they
            # were lowered for.
            written.update(aliases[v] for v in op.operands if v in aliases)
            continue
        mutable = _mutable_tensor_args(op)
        tensors = op.tensor_operands() if mutable else {}
        for name in mutable:
            for value in tensors[name]:
                if value is not None and value in aliases:
                    written.add(aliases[value])
        if has_aten_trait(op, AliasingView):
            base = next((aliases[v] for v in op.operands if v in aliases), None)
            if base is not None:
                for result in op.results:
                    aliases[result] = base
    return written


def _check_not_written(ctx: LoweringContext, op: Operation) -> None:
    """Value semantics: reading a tensor after an in-place op wrote it would see the
    old value, so refuse rather than compute it wrongly."""
    for operand in op.operands:
        lowered = ctx.values.get(operand)
        if isinstance(lowered, TensorRef) and lowered.buffer in ctx.written:
            raise LoweringError(
                f"{operand.name_hint or 'a tensor'} is read after an in-place op wrote it "
                "(or a view of it); lower a functionalized graph (AOTAutograd, torch.export)"
            )


def _mark_written(ctx: LoweringContext, op: AtenOp) -> None:
    mutable = _mutable_tensor_args(op)
    tensors = op.tensor_operands() if mutable else {}
    for name in mutable:
        for value in tensors[name]:
            lowered = ctx.values.get(value) if value is not None else None
            if isinstance(lowered, TensorRef):
                ctx.written.add(lowered.buffer)


def _mutable_tensor_args(op: AtenOp) -> tuple[str, ...]:
    """The tensor arguments ``op`` writes (most ops: none, and then its operands need
    not be grouped by argument, which costs more than the rest of this check)."""
    return op.op_schema().mutable_tensor_args


def _inherit_location(op: Operation, last: Operation | None, block: Block) -> None:
    """Ops emitted while lowering ``op`` carry its location (the FX node and source line),
    which the backends print as provenance."""
    if isinstance(op.location, UnknownLoc):
        return
    emitted = last.next_op if last is not None else block.first_op
    while emitted is not None:
        if isinstance(emitted.location, UnknownLoc):
            emitted.location = op.location
        emitted = emitted.next_op


def _lower_op(
    ctx: LoweringContext, op: Operation, table: LoweringTable, stats: LoweringStats | None
) -> None:
    _check_not_written(ctx, op)
    if isinstance(op, ReturnOp):
        returned: dict[SSAValue, SSAValue] = {}
        # A value returned at several positions is one tensor in eager (``return y,
        # y.contiguous()``): one buffer, however its lowering materializes it.
        buffers: dict[SSAValue, SSAValue] = {}
        for v in op.arguments:
            if v not in buffers:
                buffers[v] = _returned(ctx, v, returned)
        ctx.emit(ReturnOp(*[buffers[v] for v in op.arguments]))
        return
    if isinstance(op, AtenOp):
        results = None
        lowering = table.lookup(op)
        if lowering is not None:
            try:
                results = lowering(ctx, OpArgs(ctx, op))
            except NoLowering:
                results = None
            if results is not None and any(_uncopyable_view(r) for r in results):
                # ATen computes the view (no body handles its element type), on
                # contiguous copies of its inputs, as torch's reshape would copy.
                _materialize_operands(ctx, op)
                results = None
        name = op.overload_name
        _mark_written(ctx, op)
        if results is None:
            results = ctx.extern(op)
            if stats is not None:
                stats.extern[name] = stats.extern.get(name, 0) + 1
        elif stats is not None:
            stats.native[name] = stats.native.get(name, 0) + 1
        if len(results) != len(op.results):
            raise LoweringError(f"lowering gave {len(results)} results for {len(op.results)}")
        for old, new in zip(op.results, results, strict=True):
            ctx.values[old] = new
            buffer = new.buffer if isinstance(new, TensorRef) else new
            if buffer.name_hint is None and buffer.owner is not None and old.name_hint:
                buffer.name_hint = old.name_hint
        return
    if isinstance(op, ConstantOp):
        ctx.values[op.result] = lower_constant(ctx, op)
        return
    mapping = {}
    for operand in op.operands:
        mapping[operand] = ctx.scalar(operand)
    clone = op.clone(value_mapper=mapping)
    ctx.emit(clone)
    for old, new in zip(op.results, clone.results, strict=True):
        if isinstance(old.type, TensorType):
            raise LoweringError(f"{op.name} produces a tensor outside the aten dialect")
        ctx.values[old] = new


def _materialize_operands(ctx: LoweringContext, op: Operation) -> None:
    for operand in op.operands:
        ref = ctx.values.get(operand)
        if isinstance(ref, TensorRef) and not ref.is_plain():
            ctx.values[operand] = ctx.buffer_ref(ctx.materialize(ref, operand.name_hint))


def _uncopyable_view(result: object) -> bool:
    """A non-strided view (a reshape of a transpose) of complex, float8 or quantized
    elements: only a loop body could copy it, and none computes on those types."""
    return (
        isinstance(result, TensorRef) and result.strides is None and not is_body_type(result.dtype)
    )


def _returned(
    ctx: LoweringContext, value: SSAValue, returned: dict[SSAValue, SSAValue]
) -> SSAValue:
    """The buffer returned for ``value``. ``returned``: the buffers returned so far -> the
    aten value returned first in each."""
    lowered = ctx.values[value]
    if isinstance(lowered, SSAValue):
        return lowered
    buffer = lowered.buffer
    first = returned.get(buffer, value)
    if isinstance(value, BlockArgument) and _is_argument(ctx, buffer):
        # An argument returned unchanged is returned itself, as eager returns it, in the
        # strides it came in (the graph's contract): a strided one (a channels-last
        # gradient passed straight through) was copied into a row-major buffer.
        returned.setdefault(buffer, value)
        return buffer
    root = _eager_base(value)
    taken = _is_argument(ctx, _viewed_buffer(buffer)) or (
        first is not value and _eager_base(first) is not root
    )
    if taken and _fresh_in_eager(root):
        # Eager returns a new tensor, or a view of one (a clone, nan_to_num of integers,
        # ... lowered as aliases under value semantics; ``clone(x).view(1)``, a
        # channels-last copy returned through ``output-layout``'s permute): returning
        # the same buffer would make this output an input, or another output, so that
        # an in-place update of one changed the other.
        out = ctx.copy(lowered, value.name_hint)
    else:
        out = ctx.materialize(lowered, value.name_hint)
    returned.setdefault(buffer, value)
    return out


def _is_argument(ctx: LoweringContext, buffer: SSAValue) -> bool:
    return isinstance(buffer, BlockArgument) and buffer.block is ctx.block


def _viewed_buffer(buffer: SSAValue) -> SSAValue:
    """The buffer whose memory ``buffer`` is: itself, or, for the result of a
    ``loop.extern`` that yields an aliasing view of one of its inputs (ATen's ``view`` of
    a buffer that no strided view expresses, e.g. of a 0-d tensor), that input's."""
    while isinstance(extern := buffer.owner, ExternOp):
        assert isinstance(buffer, OpResult)
        yield_op = extern.body.block.last_op  # the verifier's: the body ends with it
        assert isinstance(yield_op, YieldOp)
        source = _eager_base(yield_op.operands[buffer.index])
        if not (
            isinstance(source, BlockArgument)
            and source.block is extern.body.block
            and source.index < len(extern.inputs)
        ):
            break
        buffer = extern.inputs[source.index]
    return buffer


def _eager_base(value: SSAValue) -> SSAValue:
    """The tensor whose storage ``value`` shares in eager: ``value`` itself, or the base
    of the aliasing views it is a chain of."""
    while isinstance(value.owner, AtenOp) and has_aten_trait(value.owner, AliasingView):
        value = value.owner.operands[0]
    return value


def _fresh_in_eager(value: SSAValue) -> bool:
    """Whether eager computes ``value`` into a tensor of its own: an aten op that is not
    an aliasing view (views, pieces of a split and arguments may share storage)."""
    op = value.owner
    return isinstance(op, AtenOp) and not has_aten_trait(op, AliasingView)


@dataclass(frozen=True)
class LowerAtenPass(ModulePass):
    """Lower every function from the aten dialect to the loop dialect."""

    name: ClassVar[str] = "lower-aten"  # pyright: ignore[reportIncompatibleVariableOverride]

    stamp: bool = True
    """Lower a repeated region (transformer layers) once and clone it for the other
    repetitions, checked against a real lowering (:mod:`kiln.passes.aten_to_loop.stamp`);
    the IR is the same either way."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        table = lowering_table()
        for func in [f for f in op.walk() if isinstance(f, FuncOp)]:
            if func.body.blocks and _has_tensors(func):
                lower_function(func, table, stamp=self.stamp)


def _has_tensors(func: FuncOp) -> bool:
    """Whether anything in ``func`` is still at the aten level (lowering is idempotent)."""
    if any(isinstance(t, TensorType) for t in func.function_type.inputs.data):
        return True
    return any(isinstance(op, AtenOp | ConstantOp) and op.parent_op() is func for op in func.walk())

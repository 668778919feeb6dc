"""Stamping: lower a repeated aten region (transformer layers) once, clone it for the rest.

A model of N identical layers gives an aten function whose ops repeat with a period of
L ops (:func:`find_period`: ops hash equal one period apart, and every operand is the
same value, a function argument, or the value one period back). ``lower-aten`` lowers
the ops before the repetition and its first three periods for real; the second period's
loop ops are then the template: for each later period they are cloned with a value map
(the previous period's buffers -> this one's, one layer's weights -> the next's), and
what carries FX names is renamed by the aten correspondence (result name hints, the
locations the backends print as provenance). Before any period is stamped, the clone of
the template for the third period must equal that period's real lowering op for op (a
structural compare, name hints and locations included) and what its aten values became;
when it does not, or the lowering of the third period changed state the clone would not
(size symbols, constants, written buffers), every period is lowered for real. The
emitted IR is the same either way (``tests/passes/test_stamp.py``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import sympy
from xdsl.dialects.builtin import LocationAttr, ModuleOp, StringAttr
from xdsl.ir import Attribute, Block, BlockArgument, Operation, OpResult, Region, SSAValue

from kiln.passes.aten_to_loop.context import Lowered, LoweringContext
from kiln.passes.aten_to_loop.tensors import TensorRef

STAMPED_ATTR = "kiln.stamped"
"""On a lowered ``func.func``: what was stamped (``"45 of 48 periods of 38 aten ops"``)."""

REAL_PERIODS = 3
"""Periods lowered for real: the first (whose lowering fills the context's caches), the
template, and the one its clone is checked against."""


@dataclass(frozen=True)
class Period:
    """``count`` repetitions of ``length`` ops starting at op ``start`` of the block."""

    start: int
    length: int
    count: int

    def first_op(self, period: int) -> int:
        return self.start + period * self.length


def find_period(ops: Sequence[Operation], arg_keys: Sequence[object]) -> Period | None:
    """The repetition of ``ops`` that stamping saves the most ops on (None: fewer than
    ``REAL_PERIODS + 1`` periods anywhere). ``arg_keys[k]``: what identifies the function's
    argument ``k`` apart from its name (its type and attributes)."""
    codes = _op_codes(ops, arg_keys)
    best: Period | None = None
    for length in sorted(_candidate_lengths(codes)):
        start, run = _longest_run(codes, length)
        count = (run + length) // length
        if (
            best is None
            or (count - REAL_PERIODS) * length > (best.count - REAL_PERIODS) * best.length
        ):
            best = Period(start, length, count)
    if best is None:
        return None
    best = _consistent_run(ops, best)
    return best if best.count > REAL_PERIODS else None


def _candidate_lengths(codes: Sequence[int]) -> set[int]:
    """Periods worth trying: distances between an op and the next (or next but one) op
    of the same code that recur at least ``REAL_PERIODS`` times (a period repeated
    ``REAL_PERIODS + 1`` times shows its length that often for every op of it whose code
    appears once or twice per period)."""
    seen: dict[int, list[int]] = {}
    for k, code in enumerate(codes):
        seen.setdefault(code, []).append(k)
    gaps: dict[int, int] = {}
    for places in seen.values():
        for step in (1, 2):
            for a, b in zip(places, places[step:], strict=False):
                gaps[b - a] = gaps.get(b - a, 0) + 1
    return {gap for gap, n in gaps.items() if n >= REAL_PERIODS and gap * 4 <= len(codes)}


def _longest_run(codes: Sequence[int], length: int) -> tuple[int, int]:
    """(start, size) of the longest run of ops equal to the op ``length`` places on."""
    best_start, best, run = 0, 0, 0
    for k in range(len(codes) - length):
        if codes[k] == codes[k + length]:
            run += 1
            if run > best:
                best, best_start = run, k + 1 - run
        else:
            run = 0
    return best_start, best


def _op_codes(ops: Sequence[Operation], arg_keys: Sequence[object]) -> list[int]:
    """One integer per op: equal when the ops are equal up to which values they use."""
    ids: dict[object, int] = {}
    codes: list[int] = []
    for op in ops:
        key = (
            op.name,
            tuple(op.properties.items()),
            tuple(op.attributes.items()),
            tuple(op.result_types),
            tuple(
                arg_keys[v.index] if isinstance(v, BlockArgument) else (v.type,)
                for v in op.operands
            ),
            len(op.regions),
            # What a region computes, roughly (loop nests' bodies; the checks compare
            # the rest): without it an exp and a neg over one buffer look alike.
            tuple(inner.name for inner in op.walk()) if op.regions else (),
        )
        codes.append(ids.setdefault(key, len(ids)))
    return codes


def _consistent_run(ops: Sequence[Operation], period: Period) -> Period:
    """The longest run of ``period``'s periods in which each period's ops read what the
    previous period's read, one period on (or the same value from before the run, or a
    function argument). The first period of a repetition often differs in what it reads
    (values computed between its ops, which the others read from before the run)."""
    index = {op: k for k, op in enumerate(ops)}
    best = (0, 1)  # (first period, periods)
    first = 0
    for p in range(1, period.count):
        candidate = dataclasses.replace(period, start=period.first_op(first))
        if not all(
            _corresponds(a, b, index, candidate)
            for j in range(period.first_op(p), period.first_op(p + 1))
            for a, b in zip(ops[j - period.length].operands, ops[j].operands, strict=True)
        ):
            first = p
        if p + 1 - first > best[1]:
            best = (first, p + 1 - first)
    return Period(period.first_op(best[0]), period.length, best[1])


def _corresponds(a: SSAValue, b: SSAValue, index: dict[Operation, int], period: Period) -> bool:
    if isinstance(a, BlockArgument) and isinstance(b, BlockArgument):
        return True
    if not isinstance(a, OpResult) or not isinstance(b, OpResult) or a.index != b.index:
        return False
    ia, ib = index.get(a.op), index.get(b.op)
    if ia is None or ib is None:
        return False
    return ib - ia == period.length or (a is b and ia < period.start)


class StampFailed(Exception):
    """This period cannot be cloned from the template: lower it for real."""


@dataclass
class Stamp:
    """One period's clone of the template: its loop ops (not yet in a block), what each
    of the period's aten values became, and the size expressions the context cached for
    the template's values, by their clones (a dynamic-shape period's scalar sizes)."""

    ops: list[Operation]
    values: dict[SSAValue, Lowered]
    size_exprs: dict[SSAValue, sympy.Expr] = dataclasses.field(
        default_factory=dict[SSAValue, sympy.Expr]
    )

    def apply(self, ctx: LoweringContext) -> None:
        """Emit the clones into the context's block, as the period's lowering."""
        ctx.block.add_ops(self.ops)
        ctx.values.update(self.values)
        for value, e in self.size_exprs.items():
            ctx.cache_size_expr(value, e)

    def discard(self) -> None:
        for op in reversed(self.ops):
            op.erase(safe_erase=False)


class Stamper:
    """Clones the lowering of the template period (``template``: the aten ops' index of
    its first op) for other periods of ``ops``."""

    def __init__(
        self,
        ctx: LoweringContext,
        ops: Sequence[Operation],
        period: Period,
        template: int,
        emitted: Sequence[Sequence[Operation]],
        region_values: set[SSAValue],
    ) -> None:
        """``emitted[k]``: the loop ops the template's ``k``-th aten op was lowered to;
        ``region_values``: every value emitted while lowering the real periods."""
        self.ctx = ctx
        self.ops = ops
        self.length = period.length
        self.template = template
        self.emitted = emitted
        inside = {r for group in emitted for op in group for r in op.results}
        outside = {v for group in emitted for op in group for v in op.operands if v not in inside}
        self.must_map = outside & region_values
        """Values the template reads that earlier periods emitted: a clone must read
        its own period's counterparts, never these."""
        self.region_values = region_values

    def stamp(self, first: int) -> Stamp:
        """The template cloned for the period whose first aten op is ``first``."""
        pairs = [(self.ops[self.template + k], self.ops[first + k]) for k in range(self.length)]
        internal = {r for t, _ in pairs for r in t.results}
        mapper: dict[SSAValue, SSAValue] = {}
        renames: dict[str, str | None] = {}
        locations = {t.location: u.location for t, u in pairs}
        for t, u in pairs:
            for a, b in zip(t.operands, u.operands, strict=True):
                _add_rename(renames, a, b)
                if a not in internal:
                    self._map_external(mapper, self._lowered(a), self._lowered(b))
            for a, b in zip(t.results, u.results, strict=True):
                _add_rename(renames, a, b)
        if not self.must_map <= mapper.keys():
            raise StampFailed("the template reads an earlier period's value directly")
        stamp = Stamp([], {})
        try:
            for group in self.emitted:
                for op in group:
                    stamp.ops.append(clone_op(op, mapper, renames, locations))
                    for result in op.results:
                        e = self.ctx.cached_size_expr(result)
                        if e is not None:
                            stamp.size_exprs[mapper[result]] = e
            for t, u in pairs:
                for a, b in zip(t.results, u.results, strict=True):
                    stamp.values[b] = self._mapped(self._lowered(a), mapper)
        except StampFailed:
            stamp.discard()  # the clones use live values: drop those uses
            raise
        return stamp

    def _lowered(self, value: SSAValue) -> Lowered:
        lowered = self.ctx.values.get(value)
        if lowered is None:
            raise StampFailed("a value was not lowered")
        return lowered

    def _map_external(
        self, mapper: dict[SSAValue, SSAValue], template: Lowered, target: Lowered
    ) -> None:
        if isinstance(template, TensorRef) and isinstance(target, TensorRef):
            if not _same_view(template, target):
                raise StampFailed("an input is viewed differently")
            _bind(mapper, template.buffer, target.buffer)
        elif isinstance(template, SSAValue) and isinstance(target, SSAValue):
            _bind(mapper, template, target)
        else:
            raise StampFailed("an input is a tensor in one period, a scalar in another")

    def _mapped(self, lowered: Lowered, mapper: dict[SSAValue, SSAValue]) -> Lowered:
        if isinstance(lowered, TensorRef):
            return dataclasses.replace(lowered, buffer=self._mapped_value(lowered.buffer, mapper))
        return self._mapped_value(lowered, mapper)

    def _mapped_value(self, value: SSAValue, mapper: dict[SSAValue, SSAValue]) -> SSAValue:
        mapped = mapper.get(value)
        if mapped is not None:
            return mapped
        if value in self.region_values:
            raise StampFailed("a value of the template has no counterpart")
        return value


def _bind(mapper: dict[SSAValue, SSAValue], template: SSAValue, target: SSAValue) -> None:
    if mapper.setdefault(template, target) is not target:
        raise StampFailed("one template value stands for two values of the period")


def _same_view(a: TensorRef, b: TensorRef) -> bool:
    """Whether ``a`` and ``b`` see their buffers the same way (general maps are closures:
    only a strided view compares)."""
    return (
        a.general is None
        and b.general is None
        and a.sizes == b.sizes
        and a.dtype == b.dtype
        and a.strides == b.strides
        and a.offset == b.offset
        and a.buffer_sizes == b.buffer_sizes
        and a.buffer.type == b.buffer.type
    )


def _add_rename(renames: dict[str, str | None], a: SSAValue, b: SSAValue) -> None:
    if a.name_hint is None or b.name_hint is None:
        return
    if renames.setdefault(a.name_hint, b.name_hint) != b.name_hint:
        renames[a.name_hint] = None  # two names: a clone must not need it


def clone_op(
    op: Operation,
    mapper: dict[SSAValue, SSAValue],
    renames: dict[str, str | None],
    locations: dict[LocationAttr, LocationAttr],
) -> Operation:
    """``op`` cloned for the target period in one walk (xDSL's ``clone`` walks twice and
    sets every operand list twice): operands through ``mapper`` (which records the
    clone's values), names through ``renames``, and an op emitted for an aten op gets the
    target's location (the FX node and source line the backends print as provenance)."""
    if op.successors:
        raise StampFailed(f"{op.name} has successors")
    regions: list[Region] = []
    for region in op.regions:
        blocks: list[Block] = []
        for block in region.blocks:
            new_block = Block(arg_types=block.arg_types)
            for old, new in zip(block.args, new_block.args, strict=True):
                mapper[old] = new
                if old.name_hint is not None:
                    new.name_hint = _renamed(old.name_hint, renames)
            new_block.add_ops([clone_op(inner, mapper, renames, locations) for inner in block.ops])
            blocks.append(new_block)
        regions.append(Region(blocks))
    clone = op.create(
        operands=[mapper.get(v, v) for v in op.operands],
        result_types=op.result_types,
        attributes=op.attributes.copy(),
        properties=op.properties.copy(),
        location=locations.get(op.location, op.location),
        regions=regions,
    )
    for old, new in zip(op.results, clone.results, strict=True):
        mapper[old] = new
        if old.name_hint is not None:
            new.name_hint = _renamed(old.name_hint, renames)
    return clone


def _renamed(name: str, renames: dict[str, str | None]) -> str:
    """``name`` in the target period: an aten value's name, or one derived from it by a
    suffix (``add_3_contiguous``); other names are the same in every period."""
    cut = len(name)
    while cut > 0:
        prefix = name[:cut]
        if prefix in renames:
            new = renames[prefix]
            if new is None:
                raise StampFailed(f"the name {prefix!r} stands for two values")
            return new + name[cut:]
        cut = name.rfind("_", 0, cut)
    return name


def same_lowering(stamp: Stamp, real: Sequence[Operation], ctx: LoweringContext) -> bool:
    """Whether ``stamp`` is what the real lowering emitted (``real``, and the context's
    values and cached size expressions): the same ops, operands, names and locations."""
    if len(stamp.ops) != len(real):
        return False
    context: dict[object, object] = {}
    for clone, op in zip(stamp.ops, real, strict=True):
        if not clone.is_structurally_equivalent(
            op,
            context,  # pyright: ignore[reportArgumentType]
        ):
            return False
        if not all(same_names(x, y) for x, y in zip(clone.walk(), op.walk(), strict=True)):
            return False
    for value, lowered in stamp.values.items():
        if not _same_lowered(lowered, ctx.values[value], context):
            return False
    return all(
        stamp.size_exprs.get(x) == ctx.cached_size_expr(y)
        for clone, op in zip(stamp.ops, real, strict=True)
        for x, y in zip(clone.results, op.results, strict=True)
    )


def same_names(x: Operation, y: Operation) -> bool:
    if x.location != y.location or [r.name_hint for r in x.results] != [
        r.name_hint for r in y.results
    ]:
        return False
    return all(
        [a.name_hint for a in bx.args] == [a.name_hint for a in by.args]
        for rx, ry in zip(x.regions, y.regions, strict=True)
        for bx, by in zip(rx.blocks, ry.blocks, strict=True)
    )


def _same_lowered(stamped: Lowered, real: Lowered, context: dict[object, object]) -> bool:
    if isinstance(stamped, SSAValue) and isinstance(real, SSAValue):
        return context.get(stamped, stamped) is real
    if not isinstance(stamped, TensorRef) or not isinstance(real, TensorRef):
        return False
    if context.get(stamped.buffer, stamped.buffer) is not real.buffer:
        return False
    if (stamped.general is None) != (real.general is None):
        return False
    if stamped.general is not None and real.general is not None:
        idx = [sympy.Symbol(f"i{k}", integer=True) for k in range(real.rank)]
        if sympy.expand(stamped.general(idx) - real.general(idx)) != 0:
            return False
    fields: Callable[[TensorRef], tuple[object, ...]] = lambda r: (  # noqa: E731
        r.sizes,
        r.dtype,
        r.strides,
        r.offset,
        r.buffer_sizes,
    )
    return fields(stamped) == fields(real)


def context_state(ctx: LoweringContext) -> tuple[int, ...]:
    """What lowering a period may add to the context besides its values: a period that
    adds any cannot be stamped (a clone would not add it)."""
    return (
        len(ctx.symbols),
        len(ctx.size_names),
        len(ctx.written),
        *ctx.cache_sizes(),
    )


def stamped_note(done: int, period: Period) -> Attribute:
    return StringAttr(f"{done} of {period.count} periods of {period.length} aten ops")


def stamped_notes(module: ModuleOp, attr: str = STAMPED_ATTR) -> list[str]:
    """The stamping notes (``attr``) of ``module``'s functions or programs."""
    return [
        note.data for op in module.ops if isinstance(note := op.attributes.get(attr), StringAttr)
    ]

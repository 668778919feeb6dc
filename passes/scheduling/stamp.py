"""Stamping in ``fuse``: schedule a window of repeated layers, repeat its middle period.

A model of N identical layers gives a loop function whose ops repeat with a period
(:func:`kiln.passes.aten_to_loop.stamp.find_period`, on the loop ops): ``A``, periods
``P0 .. P(n-1)`` of ``L`` ops, ``Z`` (the ops after them and the return). Inlining and
fusion decide locally (a producer with its consumers; a pair of groups that share a
buffer), so the middle periods of a deep model decide alike. Instead of the whole
function, ``fuse`` runs inlining and the scheduler for real on a *window*: a copy of
``A``, the first five periods and ``Z`` (reading the fifth period where it read the
last). Its third period ``P2`` (in the middle: the first and the last two periods meet
the ops around the run) is the template:

- the function becomes ``A, P0, P1, P2`` of the window (moved), ``P2`` cloned for
  ``P3 .. P(n-2)``, the window's ``P4`` cloned for ``P(n-1)`` and its ``Z`` for ``Z``,
  each clone reading the previous period's values, the layer's own weights, and
  renamed (result names, locations) by the correspondence of the loop ops before
  inlining;
- the groups homed in the template (by their first node) repeat for ``P3 .. P(n-3)``
  one period on, the window's ``P3`` groups serve ``P(n-2)``, and the groups are
  ordered as the scheduler orders them (a topological sort of the group graph by
  first node).

The checks, each of which falls back to the full schedule of the untouched function:
the window's ``P1``, ``P2`` and ``P3`` keep the same number of ops after inlining; the
template cloned for ``P3``'s place equals the window's ``P3`` (ops, operands, names,
locations); the groups homed in ``P1``, one period on, are those homed in ``P2``; no
group reaches two periods on; the ops after the run read only the last two periods;
and no size is symbolic. ``tests/passes/test_fuse_stamp.py`` compares the output with
the unstamped ``fuse`` (every kernel, the program, the generated code).
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass

import networkx as nx
from xdsl.dialects.builtin import LocationAttr, StringAttr
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Block, BlockArgument, Operation, Region, SSAValue

from kiln.dialects.loop.ops import ExternOp as LoopExternOp
from kiln.dialects.loop.ops import LoopNestOp
from kiln.passes.aten_to_loop.stamp import (
    StampFailed,
    clone_op,
    find_period,
    same_names,
)
from kiln.passes.scheduling.fusion import FusionResult, Group, Scheduler
from kiln.passes.scheduling.graph import ScheduleGraph, build_graph
from kiln.passes.scheduling.inline import inline_cheap_producers

STAMPED_FUSE_ATTR = "kiln.stamped_fuse"
"""On the ``kernel.program``: what ``fuse`` stamped (``"41 of 46 periods of 27 loop ops"``)."""

WINDOW = 5
"""Periods scheduled for real: the first, the template (the third) between two like it,
and the last two."""

TEMPLATE = 2
"""The window's period whose decisions repeat."""


@dataclass
class Stamped:
    """The stamped function's schedule graph, its groups, and the note to attach."""

    graph: ScheduleGraph
    result: FusionResult
    note: str


@dataclass
class _Window:
    """The window function and, per op of its block, its segment: 0 for ``A``,
    ``1 + p`` for period ``p``, ``WINDOW + 1`` for ``Z``."""

    func: FuncOp
    segment: dict[Operation, int]

    @property
    def block(self) -> Block:
        return self.func.body.block


def stamp_fuse(func: FuncOp, max_nodes: int, inline: bool, cpu: bool = False) -> Stamped | None:
    """Inline and schedule ``func`` by stamping (module docstring); None (``func``
    untouched) when it has no long enough repetition or a check fails."""
    block = func.body.block
    ops = list(block.ops)
    if not ops or not isinstance(ops[-1], ReturnOp):
        return None
    terminator = ops.pop()
    if not all(isinstance(op, LoopNestOp | LoopExternOp) and not op.syms for op in ops):
        return None  # symbolic sizes: groups would carry the window's size symbols
    period = find_period(ops, [(arg.type,) for arg in block.args])
    if period is None or period.count <= WINDOW:
        return None
    periods = [ops[period.first_op(p) : period.first_op(p + 1)] for p in range(period.count)]
    before = ops[: period.start]
    after = [*ops[period.first_op(period.count) :], terminator]
    if not _after_reads_last_two(after, periods, block):
        return None
    window = _window(func, before, periods, after)
    try:
        if inline:
            inlined: list[tuple[Operation, Operation]] = []
            inline_cheap_producers(window.func, pairs=inlined, cpu=cpu)
            _check_inlined(window, inlined)
        graph = build_graph(window.func)
        result = Scheduler(graph, max_nodes, cpu).run()
        stamped = _stamp(func, window, result, periods)
    except StampFailed:
        _erase_all(window.block)
        return None
    stamped.note = f"{period.count - WINDOW} of {period.count} periods of {period.length} loop ops"
    func.attributes[STAMPED_FUSE_ATTR] = StringAttr(stamped.note)
    return stamped


def _check_inlined(window: _Window, inlined: Sequence[tuple[Operation, Operation]]) -> None:
    """Whether what was inlined stays local: every op holds (its own and) inlined ops of
    its own period and the one before at most (the ops after the run: of the last two
    periods), and ops before the run went only into the first period. Otherwise the
    window decided differently from the whole function (a producer read by every
    period is weighed against five readers, not all of them) or its periods accumulate
    earlier ones (a chain inlined from period to period), which a clone cannot repeat."""
    origins: dict[Operation, set[int]] = {}
    for producer, consumer in inlined:
        held = origins.get(producer) or {window.segment[producer]}
        origins.setdefault(consumer, {window.segment[consumer]}).update(held)
    for op, held in origins.items():
        own = window.segment[op]
        lowest = own - 2 if own == WINDOW + 1 else max(own - 1, 0)
        if min(held) < lowest or (own > 1 and 0 in held):
            raise StampFailed("inlining reaches across more than one period")


def _after_reads_last_two(
    after: Sequence[Operation], periods: Sequence[Sequence[Operation]], block: Block
) -> bool:
    """Whether the ops after the run read no period but the last two, and no weight a
    period reads (the window reads its fifth period where they read the last)."""
    early = {r for period in periods[:-2] for op in period for r in op.results}
    period_args = {
        v
        for period in periods
        for op in period
        for v in op.operands
        if isinstance(v, BlockArgument)
    }
    return not any(v in early or v in period_args for op in after for v in op.operands)


def _window(
    func: FuncOp,
    before: Sequence[Operation],
    periods: Sequence[Sequence[Operation]],
    after: Sequence[Operation],
) -> _Window:
    """A copy of ``before``, the first :data:`WINDOW` periods and ``after`` (reading the
    window's last two periods where it read the function's)."""
    block = func.body.block
    new_block = Block(arg_types=block.arg_types)
    for old, new in zip(block.args, new_block.args, strict=True):
        new.name_hint = old.name_hint
    mapper: dict[SSAValue, SSAValue] = dict(zip(block.args, new_block.args, strict=True))
    segment: dict[Operation, int] = {}
    parts = [before, *periods[:WINDOW]]
    for k, part in enumerate(parts):
        for op in part:
            clone = clone_op(op, mapper, {}, {})
            segment[clone] = k
            new_block.add_op(clone)
    stand_ins: dict[SSAValue, SSAValue] = {
        r: mapper[s]
        for last, stand_in in zip(periods[-2:], periods[WINDOW - 2 : WINDOW], strict=True)
        for op, copied in zip(last, stand_in, strict=True)
        for r, s in zip(op.results, copied.results, strict=True)
    }
    mapper.update(stand_ins)
    for op in after:
        clone = clone_op(op, mapper, {}, {})
        segment[clone] = WINDOW + 1
        new_block.add_op(clone)
    window = FuncOp(func.sym_name.data, func.function_type, Region(new_block))
    return _Window(window, segment)


def _erase_all(block: Block) -> None:
    for op in reversed(list(block.ops)):
        block.erase_op(op, safe_erase=False)


@dataclass
class _Correspondence:
    """How the template's values, names and locations translate into a target period."""

    args: dict[SSAValue, SSAValue]
    renames: dict[str, str | None]
    locations: dict[LocationAttr, LocationAttr]


@dataclass(frozen=True)
class _Keys:
    """What a period's ops (before inlining) say about the period, in walk order: the
    weight (or None) of each top-level operand, each nested op's location, and the
    names of results and block arguments."""

    args: tuple[SSAValue | None, ...]
    locations: tuple[LocationAttr, ...]
    names: tuple[str | None, ...]


def _keys(period: Sequence[Operation]) -> _Keys:
    args: list[SSAValue | None] = []
    locations: list[LocationAttr] = []
    names: list[str | None] = []
    for op in period:
        args.extend(v if isinstance(v, BlockArgument) else None for v in op.operands)
        args.append(None)  # an op boundary: ops of other arities never line up
        for inner in op.walk():
            locations.append(inner.location)
            names.extend(r.name_hint for r in inner.results)
            for region in inner.regions:
                for block in region.blocks:
                    names.extend(a.name_hint for a in block.args)
            names.append(None)
    return _Keys(tuple(args), tuple(locations), tuple(names))


def _correspondence(pairs: Sequence[tuple[_Keys, _Keys]]) -> _Correspondence:
    """From periods of the function before inlining (template side, target side): the
    weights each reads, result and block-argument names, and every nested op's
    location."""
    corr = _Correspondence({}, {}, {})
    for source, target in pairs:
        if (len(source.args), len(source.locations), len(source.names)) != (
            len(target.args),
            len(target.locations),
            len(target.names),
        ):
            raise StampFailed("the periods' ops differ in structure")
        for a, b in zip(source.args, target.args, strict=True):
            if (a is None) != (b is None):
                raise StampFailed("a weight in one period, a value in another")
            if a is not None and corr.args.setdefault(a, b) is not b:  # pyright: ignore[reportArgumentType]
                raise StampFailed("a weight stands for two")
        for x, y in zip(source.locations, target.locations, strict=True):
            if corr.locations.setdefault(x, y) != y:
                raise StampFailed("a location stands for two")
        renames = corr.renames
        for a, b in zip(source.names, target.names, strict=True):
            if a is not None and b is not None and renames.setdefault(a, b) != b:
                renames[a] = None  # two names: a clone must not need it
    return corr


def _clone_period(
    template: Sequence[Operation],
    corr: _Correspondence,
    shifted: Mapping[SSAValue, SSAValue],
    fixed: Container[SSAValue],
    period_args: Container[SSAValue],
) -> list[Operation]:
    """``template`` cloned for a target period: weights through ``corr``, values of the
    earlier periods through ``shifted``, ``fixed`` values (before the run) as they are;
    anything else it reads means the template reaches further back."""
    mapper: dict[SSAValue, SSAValue] = {}
    internal = {r for op in template for r in op.results}
    for op in template:
        for v in op.operands:
            if v in internal or v in mapper:
                continue
            if v in shifted:
                mapper[v] = shifted[v]
            elif isinstance(v, BlockArgument) and v in corr.args:
                mapper[v] = corr.args[v]
            elif v in fixed or (isinstance(v, BlockArgument) and v not in period_args):
                continue
            else:
                raise StampFailed("the template reads a value the target cannot map")
    clones: list[Operation] = []
    try:
        for op in template:
            clones.append(clone_op(op, mapper, corr.renames, corr.locations))
    except StampFailed:
        _discard(clones)
        raise
    return clones


def _discard(ops: Sequence[Operation]) -> None:
    for op in reversed(ops):
        op.erase(safe_erase=False)


def _shift(source: Sequence[Operation], target: Sequence[Operation]) -> dict[SSAValue, SSAValue]:
    """Each result of ``source`` -> the same result of the op at the same place in
    ``target`` (the previous period, as the template saw it -> as the target sees it)."""
    if len(source) != len(target):
        raise StampFailed("periods of different lengths")
    return {
        r: s
        for a, b in zip(source, target, strict=True)
        for r, s in zip(a.results, b.results, strict=True)
    }


def _same_ops(clones: Sequence[Operation], real: Sequence[Operation]) -> bool:
    """Whether ``clones`` are ``real``: ops, operands, result types, names, locations."""
    if len(clones) != len(real):
        return False
    context: dict[object, object] = {}
    for clone, op in zip(clones, real, strict=True):
        if not clone.is_structurally_equivalent(op, context):  # pyright: ignore[reportArgumentType]
            return False
        for x, y in zip(clone.walk(), op.walk(), strict=True):
            if x.result_types != y.result_types or not same_names(x, y):
                return False
    return True


def _stamp(
    func: FuncOp, window: _Window, result: FusionResult, periods: Sequence[Sequence[Operation]]
) -> Stamped:
    """Check the window's template and rebuild ``func`` from it (module docstring)."""
    count = len(periods)
    block = func.body.block
    w_ops = list(window.block.ops)
    w_return = w_ops.pop()
    segments: list[list[Operation]] = [[] for _ in range(WINDOW + 2)]
    for op in w_ops:
        segments[window.segment[op]].append(op)
    segments[WINDOW + 1].append(w_return)
    length = len(segments[1 + TEMPLATE])
    if not length or not len(segments[TEMPLATE]) == length == len(segments[2 + TEMPLATE]):
        raise StampFailed("inlining left the middle periods empty or different")
    home_of = [window.segment[op] for op in w_ops]
    groups = _window_groups(result.groups, home_of, length, count)

    # The window's block becomes the function's: its arguments stand for the function's.
    as_window: dict[SSAValue, SSAValue] = dict(zip(block.args, window.block.args, strict=True))
    period_args = {
        as_window[v]
        for period in periods
        for op in period
        for v in op.operands
        if isinstance(v, BlockArgument)
    }
    fixed = {r for op in segments[0] for r in op.results}
    template = segments[1 + TEMPLATE]
    previous = segments[TEMPLATE]

    keys = [_keys(period) for period in periods]

    def corr(p: int, source: int) -> _Correspondence:
        """Template side: periods ``source - 1, source``; target: ``p - 1, p``."""
        found = _correspondence([(keys[source - 1], keys[p - 1]), (keys[source], keys[p])])
        found.args = {as_window[a]: as_window[b] for a, b in found.args.items()}
        return found

    check = _clone_period(
        template, corr(TEMPLATE + 1, TEMPLATE), _shift(previous, template), fixed, period_args
    )
    same = _same_ops(check, segments[2 + TEMPLATE])
    _discard(check)
    if not same:
        raise StampFailed("the template cloned one period on is not the window's next period")

    built: list[list[Operation]] = [template]
    try:
        for p in range(TEMPLATE + 1, count - 1):
            shifted = _shift(previous, built[-1])
            built.append(_clone_period(template, corr(p, TEMPLATE), shifted, fixed, period_args))
        last_source = segments[WINDOW]
        shifted = _shift(segments[WINDOW - 1], built[-1])
        last = _clone_period(last_source, corr(count - 1, WINDOW - 1), shifted, fixed, period_args)
        built.append(last)
        shifted = _shift(segments[WINDOW - 1], built[-2]) | _shift(last_source, last)
        tail_corr = corr(count - 1, WINDOW - 1)
        tail = _clone_period(segments[WINDOW + 1], tail_corr, shifted, fixed, period_args)
    except StampFailed:
        for clones in reversed(built[1:]):
            _discard(clones)
        raise

    new_block = window.block
    for seg in reversed(segments[2 + TEMPLATE :]):
        for op in reversed(seg):
            new_block.erase_op(op, safe_erase=False)
    for clones in built[1:]:
        new_block.add_ops(clones)
    new_block.add_ops(tail)
    # The old block is dropped whole: nothing outside it uses its ops (erasing them one
    # by one cost ~0.2 s at 48 layers).
    window.func.body.detach_block(new_block)
    func.body.detach_block(block)
    func.body.add_block(new_block)

    full = build_graph(func)
    if len(full.nodes) != len(w_ops) + (count - WINDOW) * length:
        raise AssertionError("fuse stamping: the stamped function has an unexpected size")
    ordered = _ordered(full, groups)
    return Stamped(full, FusionResult(ordered, result.decisions), "")


def _window_groups(
    groups: Sequence[Group], home_of: Sequence[int], length: int, count: int
) -> list[Group]:
    """The full function's groups from the window's (module docstring), checked;
    ``home_of[i]``: the segment of the window's node ``i``."""

    def home(group: Group) -> int:
        return home_of[group.first]

    t = 1 + TEMPLATE  # the template's segment

    def key(group: Group, shift: int) -> tuple[object, ...]:
        return (
            tuple(i + shift for i in group.nodes),
            group.numel,
            group.rnumel,
            group.reduces,
            group.fusable,
            tuple(sorted((i + shift, level) for i, level in group.levels.items())),
        )

    before_template = {key(g, length) for g in groups if home(g) == t - 1}
    in_template = {key(g, 0) for g in groups if home(g) == t}
    if before_template != in_template:
        raise StampFailed("the groups of the template differ from the period before")
    gap = (count - WINDOW) * length

    def moved(group: Group, shift: int) -> Group:
        return Group(
            group.first + shift,
            [i + shift for i in group.nodes],
            group.numel,
            group.rnumel,
            group.reduces,
            {i + shift: level for i, level in group.levels.items()},
            group.fusable,
        )

    out: list[Group] = []
    for group in groups:
        h = home(group)
        if home_of[group.nodes[-1]] > h + 1:
            raise StampFailed("a group reaches two periods on")
        if h <= t:
            out.append(moved(group, 0))
            if h == t:
                shifts = [(p - TEMPLATE) * length for p in range(TEMPLATE + 1, count - 2)]
                out.extend(moved(group, shift) for shift in shifts)
        else:
            out.append(moved(group, gap))
    return out


def _ordered(graph: ScheduleGraph, groups: list[Group]) -> list[Group]:
    """``groups`` in the scheduler's order: the topological sort of the graph of groups
    that prefers the smaller first node (:meth:`Scheduler.ordered_groups`)."""
    group_of: dict[int, int] = {}
    by_id: dict[int, Group] = {}
    for group in groups:
        by_id[group.id] = group
        for i in group.nodes:
            group_of[i] = group.id
    if len(group_of) != len(graph.nodes):
        raise AssertionError("fuse stamping: the groups do not cover the function")
    dag: nx.DiGraph = nx.DiGraph()  # pyright: ignore[reportMissingTypeArgument]
    dag.add_nodes_from(by_id)
    dag.add_edges_from(
        (group_of[u], group_of[v]) for u, v in graph.graph.edges if group_of[u] != group_of[v]
    )
    order = nx.lexicographical_topological_sort(dag, key=lambda g: by_id[g].first)
    return [by_id[g] for g in order]


__all__ = ["STAMPED_FUSE_ATTR", "Stamped", "stamp_fuse"]

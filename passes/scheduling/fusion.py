"""Which loop nodes run together: greedy fusion scored by memory traffic saved.

Like Inductor's scheduler, fusion runs in rounds. Each round lists the candidate pairs
of groups that touch a common buffer (one produces what the other reads, or both read
it), scores each by the bytes of memory traffic fusing would save (a buffer that stops
being needed outside the pair saves its write and its read, ``2 x bytes``; a value read
from registers instead of memory, or an input read once instead of twice, saves
``bytes``), breaks ties by proximity in program order, and fuses the pairs that are
still legal in that order. Rounds repeat until one fuses nothing.

A pair is legal when neither is an extern call, the merged kernel stays within
``max_nodes``, the iteration spaces fit together (:func:`level_in`), every read of a
fused producer's value happens at the same point where it is computed
(:mod:`kiln.passes.scheduling.legality`), and the graph of kernels stays acyclic
(checked with networkx on the graph of groups). Every decision is recorded for
``fuse{report=true}``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import networkx as nx
import sympy
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import SSAValue

from kiln.dialects.loop.dot import is_dot
from kiln.dialects.loop.ops import ReductionOp, ScatterOp
from kiln.passes.scheduling.graph import Node, NodeKind, ScheduleGraph, value_name
from kiln.passes.scheduling.legality import (
    Level,
    leading_split,
    read_target,
    reads_same_point,
    same_size,
    to_local,
)
from kiln.passes.scheduling.symbolic_shapes import static_inner_clash, symbolic_shapes_clash
from kiln.passes.scheduling.tiling import (
    GPU_SM_COUNT,
    OUTER_XBLOCK,
    PERSISTENT_OUTER_MAX,
    combinable,
    reads_along_reduction,
    split_factor,
)

MAX_GROUPS_PER_BUFFER = 64
"""Buffers touched by more groups pair each group only with this many neighbours."""


@dataclass
class Group:
    """Nodes that run in one kernel (or one extern / scalar op on its own)."""

    id: int
    nodes: list[int]
    numel: sympy.Expr
    rnumel: sympy.Expr
    reduces: bool
    levels: dict[int, Level]
    fusable: bool

    @property
    def first(self) -> int:
        return self.nodes[0]


def group_label(graph: ScheduleGraph, group: Group) -> str:
    """How reports name a group: its first nodes' names."""
    names = [graph.nodes[i].name for i in group.nodes]
    if len(names) > 4:
        names = [*names[:3], f"... {len(names) - 3} more"]
    return "[" + ", ".join(names) + "]"


@dataclass
class MergePlan:
    numel: sympy.Expr
    rnumel: sympy.Expr
    reduces: bool
    levels: dict[int, Level]
    how: str


@dataclass
class Decision:
    round: int
    first: str
    second: str
    fused: bool
    reason: str
    saved: int

    def line(self) -> str:
        verdict = f"fused ({self.reason})" if self.fused else f"not fused: {self.reason}"
        return f"fuse: round {self.round}: {self.first} + {self.second}: {verdict}, score {self.saved} bytes"


@dataclass
class FusionResult:
    groups: list[Group]
    """In an order that respects dependencies (kernels, externs and scalar ops)."""
    decisions: list[Decision] = field(default_factory=list[Decision])


class Scheduler:
    """Greedy fusion over one function's schedule graph."""

    def __init__(self, graph: ScheduleGraph, max_nodes: int, cpu: bool = False) -> None:
        self.graph = graph
        self.max_nodes = max_nodes
        self.cpu = cpu
        """Whether the kernels run on the CPU (for reasons only)."""
        self.groups: dict[int, Group] = {}
        self.group_of: list[int] = []
        for node in graph.nodes:
            group = self._singleton(node)
            self.groups[group.id] = group
            self.group_of.append(group.id)
        self.dag: nx.DiGraph = nx.DiGraph()  # pyright: ignore[reportMissingTypeArgument]
        self.dag.add_nodes_from(self.groups)
        self.dag.add_edges_from(graph.graph.edges)
        # A topological order of ``dag``, kept valid through every merge (see ``merge``):
        # a path can only run through groups placed between its ends, which bounds each
        # cycle check to that window instead of the whole graph (quadratic in depth).
        # Program order is one to start with (every edge runs from an earlier op).
        self.order: list[int | None] = [node.index for node in graph.nodes]
        self.pos: dict[int, int] = {node.index: node.index for node in graph.nodes}
        self.decisions: list[Decision] = []
        self._reported: set[tuple[tuple[int, ...], tuple[int, ...]]] = set()
        # Pairs refused once, by their node lists. A refusal stays true while both groups
        # keep their nodes (a group's nodes only grow, so equal lists mean the same, unmerged
        # group): every reason but the cycle reads only the two groups, and a merge of other
        # groups never removes a path, so a cycle stays one. Re-planning them each round was
        # 60 % of the plans (issue 19); they were never reported twice anyway (``_record``).
        self._refused: set[tuple[tuple[int, ...], tuple[int, ...]]] = set()
        self.skipped_plans = 0
        """Plans not made again for a pair refused before (see ``_refused``)."""
        # Group id -> (its node count when computed, its buffers): a group's nodes only
        # grow, so an equal count means the same group (see ``_buffers``).
        self._group_buffers: dict[int, tuple[int, frozenset[SSAValue]]] = {}

    @staticmethod
    def _singleton(node: Node) -> Group:
        if node.kind is NodeKind.REDUCTION:
            return Group(
                node.index,
                [node.index],
                node.numel,
                node.rnumel,
                True,
                {node.index: Level.RED},
                True,
            )
        if node.kind is NodeKind.POINTWISE:
            return Group(
                node.index,
                [node.index],
                node.numel,
                sympy.Integer(1),
                False,
                {node.index: Level.X},
                True,
            )
        return Group(node.index, [node.index], sympy.Integer(0), sympy.Integer(0), False, {}, False)

    # -- naming ------------------------------------------------------------------------

    def label(self, group: Group) -> str:
        return group_label(self.graph, group)

    # -- scoring -----------------------------------------------------------------------

    def _buffers(self, group: Group) -> frozenset[SSAValue]:
        """The buffers ``group`` reads or writes, kept per group until it merges: every
        round scores and lists candidates of mostly unchanged groups (issue 19)."""
        known = self._group_buffers.get(group.id)
        if known is not None and known[0] == len(group.nodes):
            return known[1]
        out: set[SSAValue] = set()
        for i in group.nodes:
            op = self.graph.nodes[i].op
            out.update(v for v in op.operands if isinstance(v.type, MemRefType))
            out.update(v for v in op.results if isinstance(v.type, MemRefType))
        buffers = frozenset(out)
        self._group_buffers[group.id] = (len(group.nodes), buffers)
        return buffers

    def score(self, a: Group, b: Group) -> int:
        members = set(a.nodes) | set(b.nodes)
        saved = 0
        for buffer in self._buffers(a) & self._buffers(b):
            size = self.graph.bytes_of(buffer)
            producer = self.graph.producer.get(buffer)
            if producer is not None and producer in members:
                readers = self.graph.consumers.get(buffer, [])
                local = buffer not in self.graph.returned and all(r in members for r in readers)
                saved += 2 * size if local else size
            else:
                saved += size
        return saved

    def candidates(self) -> list[tuple[int, int]]:
        touching: dict[SSAValue, set[int]] = {}
        for group in self.groups.values():
            if not group.fusable and self.graph.nodes[group.first].kind is NodeKind.OTHER:
                continue
            for buffer in self._buffers(group):
                touching.setdefault(buffer, set()).add(group.id)
        pairs: set[tuple[int, int]] = set()
        for ids in touching.values():
            ordered = sorted(ids, key=lambda g: self.groups[g].first)
            if not any(self.groups[g].fusable for g in ordered):
                continue
            for i, a in enumerate(ordered):
                for b in ordered[i + 1 : i + 1 + MAX_GROUPS_PER_BUFFER]:
                    pairs.add((a, b))
        return list(pairs)

    # -- legality ------------------------------------------------------------------------

    def plan(self, a: Group, b: Group) -> MergePlan | str:
        """How ``a`` and ``b`` would fuse, or why they cannot."""
        for group in (a, b):
            if not group.fusable:
                node = self.graph.nodes[group.first]
                what = (
                    "an extern call (ATen)"
                    if node.kind is NodeKind.EXTERN
                    else f"a {node.op.name} op"
                )
                return f"{node.name} is {what}, which is never fused"
            if group.numel == 0:
                # No kernel runs for an empty space (see build.py); fused, its nodes
                # would run over the other group's points.
                return f"{self.graph.nodes[group.first].name} has an empty iteration space"
        if len(a.nodes) + len(b.nodes) > self.max_nodes:
            return f"the kernel would have more than max-nodes={self.max_nodes} nodes"
        hazard = self._scatter_hazard(a, b) or self._dot_hazard(a, b)
        if hazard is not None:
            return hazard
        space = self._merge_space(a, b)
        if isinstance(space, str):
            return space
        numel, rnumel, reduces, levels = space
        if not a.reduces and not b.reduces:
            shapes = [self.graph.nodes[i].sizes for i in (*a.nodes, *b.nodes)]
            if symbolic_shapes_clash(shapes):
                return (
                    "their symbolic shapes have no common loop nest "
                    f"({', '.join(str(list(s)) for s in shapes)}): a division per element"
                )
            if static_inner_clash(shapes):
                cost = (
                    "in the vectorized loop on the CPU"
                    if self.cpu
                    else "and a gather per element on the GPU"
                )
                return (
                    "their shapes share no innermost loop "
                    f"({', '.join(str(list(s)) for s in shapes)}): a division per element " + cost
                )
        mismatch = self._check_reads(a, b, levels, numel, rnumel)
        if mismatch is not None:
            transposed = self._transposed(a, b, levels, numel, rnumel)
            if transposed is None:
                return mismatch
            levels = transposed
        if reduces and not self.cpu:
            unsplit = self._keeps_unsplit([*a.nodes, *b.nodes], levels, numel, rnumel)
            if unsplit is not None:
                return unsplit
        through = self._cycle(a, b)
        if through is not None:
            return f"would create a cycle (through {through})"
        how = "vertical" if self._depends(a, b) else "horizontal"
        if a.reduces != b.reduces:
            red, pw = (a, b) if a.reduces else (b, a)
            level = levels[pw.first]
            before = pw.first < red.first
            if level is Level.X:
                how += ", reduction prologue" if before else ", reduction epilogue"
            else:
                how += ", pointwise prologue" if before else ", pointwise over the reduced input"
                if level is Level.XRT:
                    how += ", column-major"
        elif a.reduces:
            how += ", reductions over one input space"
        return MergePlan(numel, rnumel, reduces, levels, how)

    def _scatter_hazard(self, a: Group, b: Group) -> str | None:
        """Why a ``loop.scatter`` may not share a kernel with the other group: its atomic
        adds land anywhere in its buffer, so no node of the kernel may read that buffer
        (a read-after-atomic hazard), and only pointwise kernels run it. Producers of
        its values and indices fuse into it, as in Inductor."""
        members = [*a.nodes, *b.nodes]
        scatters = [i for i in members if isinstance(self.graph.nodes[i].op, ScatterOp)]
        if not scatters:
            return None
        if a.reduces or b.reduces:
            return f"{self.graph.nodes[scatters[0]].name} is a scatter, which runs in a pointwise kernel"
        for i in scatters:
            result = self.graph.nodes[i].op.results[0]
            for reader in self.graph.consumers.get(result, []):
                if reader in members:
                    return (
                        f"{self.graph.nodes[reader].name} reads {value_name(result)}, which a "
                        "scatter accumulates into (atomic adds): not in the same kernel"
                    )
        return None

    def _dot_hazard(self, a: Group, b: Group) -> str | None:
        """Why a matrix product (:mod:`kiln.dialects.loop.dot`) may not share a kernel
        with the other group: its kernel is a ``tl.dot`` loop over output tiles, so it
        takes only pointwise nodes over its output space (its epilogue, or nodes beside
        it) and reads its operands from memory, never from a fused node."""
        members = [*a.nodes, *b.nodes]
        dots = [i for i in members if is_dot(self.graph.nodes[i].op)]
        if not dots:
            return None
        name = self.graph.nodes[dots[0]].name
        if a.reduces and b.reduces:
            return f"{name} is a matrix product, which shares its kernel with no other reduction"
        other = b if dots[0] in a.nodes else a
        if not same_size(other.numel, self.graph.nodes[dots[0]].numel):
            return f"{name} is a matrix product, whose kernel runs only over its output"
        for i in dots:
            for buffer in self.graph.nodes[i].loads:
                producer = self.graph.producer.get(buffer)
                if producer is not None and producer in members:
                    return (
                        f"{name} is a matrix product, which reads {value_name(buffer)} "
                        "from memory: not in the kernel that computes it"
                    )
        return None

    def _describe_space(self, group: Group) -> str:
        if group.reduces:
            return f"{group.numel} x {group.rnumel}"
        return str(group.numel)

    def _merge_space(
        self, a: Group, b: Group
    ) -> tuple[sympy.Expr, sympy.Expr, bool, dict[int, Level]] | str:
        levels = {**a.levels, **b.levels}
        if a.reduces and b.reduces:
            if same_size(a.numel, b.numel) and same_size(a.rnumel, b.rnumel):
                return a.numel, a.rnumel, True, levels
        elif a.reduces or b.reduces:
            red, pw = (a, b) if a.reduces else (b, a)
            level = None
            if same_size(pw.numel, red.numel):
                level = Level.X
            elif same_size(pw.numel, red.numel * red.rnumel):
                level = Level.XR
            if level is not None:
                levels.update({i: level for i in pw.nodes})
                return red.numel, red.rnumel, True, levels
        elif same_size(a.numel, b.numel):
            return a.numel, sympy.Integer(1), False, levels
        return f"different iteration space ({self._describe_space(a)} vs {self._describe_space(b)})"

    def _transposed(
        self,
        a: Group,
        b: Group,
        levels: dict[int, Level],
        numel: sympy.Expr,
        rnumel: sympy.Expr,
    ) -> dict[int, Level] | None:
        """``levels`` with the pointwise group's whole-space nodes column-major (``XRT``),
        where that makes every read legal: a pointwise ``[M, N]`` producer fused into the
        column sum of its result (a bias gradient beside the gradient itself, as
        Inductor's ``sum`` over the batch), or a batch norm's normalization of NHWC rows
        after its statistics. GPU kernels only (a C++ kernel's inner loop runs along
        ``r``, which would stride every load of such a node by the row), and persistent
        ones only (static ``M`` up to :data:`PERSISTENT_OUTER_MAX`)."""
        if (
            self.cpu
            or a.reduces == b.reduces
            or same_size(numel, sympy.Integer(1))
            or same_size(rnumel, sympy.Integer(1))
        ):
            return None
        if not isinstance(rnumel, sympy.Integer) or int(rnumel) > PERSISTENT_OUTER_MAX:
            # Looped, the kernel would run the pointwise work on its few reduction
            # programs: timm's Mixer token MLP (GELU's backward over 1024 x 256 points on
            # 32 programs) and the statistics of MobileNet-v2's first batch norms
            # (2048 rows) were slower fused than as a pointwise kernel beside the sum.
            return None
        pw = b if a.reduces else a
        if any(
            levels[i] is not Level.XR or leading_split(self.graph.nodes[i].sizes, rnumel) is None
            for i in pw.nodes
        ):
            return None
        shifted = {**levels, **{i: Level.XRT for i in pw.nodes}}
        if self._check_reads(a, b, shifted, numel, rnumel) is not None:
            return None
        return shifted

    def _keeps_unsplit(
        self, members: list[int], levels: dict[int, Level], numel: sympy.Expr, rnumel: sympy.Expr
    ) -> str | None:
        """Why a GPU kernel of ``members`` would keep a reduction the tile pass splits
        from splitting: a node over the whole space reading the reduced values (a batch
        norm's normalization after its statistics) needs each output's whole reduction
        in one program, so a few programs would loop over all of it (MobileNet-v2's
        first statistics over 2048 channels-last rows: 4 programs, 28 us; split, with
        the normalization a kernel of its own, as Inductor runs it: a few us)."""
        if not isinstance(numel, sympy.Integer) or not isinstance(rnumel, sympy.Integer):
            return None  # symbolic sizes are never split
        reductions = [op for i in members if isinstance(op := self.graph.nodes[i].op, ReductionOp)]
        if not reductions or not all(combinable(r) for r in reductions):
            return None
        reduced: set[SSAValue] = set()
        epilogue: int | None = None
        for i in sorted(members):
            node = self.graph.nodes[i]
            reads_reduced = any(buffer in reduced for buffer in node.loads)
            if isinstance(node.op, ReductionOp):
                if reads_reduced:
                    return None  # a reduction over reduced values never splits (softmax)
                reduced.update(node.op.results)
            elif reads_reduced:
                if levels[i] is not Level.X:
                    epilogue = i
                    break
                reduced.update(node.op.results)
        if epilogue is None:
            return None
        per_program = 1 if reads_along_a_reduction(self.graph, members) else OUTER_XBLOCK
        splits = split_factor(int(numel), int(rnumel), GPU_SM_COUNT, per_program, gpu=True)
        if splits == 1:
            return None
        return (
            f"{self.graph.nodes[epilogue].name} reads the reduced values over the whole "
            f"space: the {numel} x {rnumel} reduction would not split in {splits}"
        )

    def _check_reads(
        self,
        a: Group,
        b: Group,
        levels: dict[int, Level],
        numel: sympy.Expr,
        rnumel: sympy.Expr,
    ) -> str | None:
        side = {i: 0 for i in a.nodes} | {i: 1 for i in b.nodes}
        for c in sorted(side):
            consumer = self.graph.nodes[c]
            for buffer, loads in consumer.loads.items():
                p = self.graph.producer.get(buffer)
                if p is None or p not in side or side[p] == side[c]:
                    continue
                local_rnumel = to_local(rnumel, consumer, self.graph.symbols)  # pyright: ignore[reportArgumentType]
                local_numel = to_local(numel, consumer, self.graph.symbols)  # pyright: ignore[reportArgumentType]
                target = read_target(consumer, levels[c], levels[p], local_rnumel, local_numel)
                bad = reads_same_point(consumer, loads, target)
                if bad is not None:
                    where = "with a mask" if bad.mask is not None else f'at "{bad.index.text}"'
                    if bad.indirect:
                        where = f'indirectly at "{bad.index.text}"'
                    return (
                        f"{consumer.name} reads {value_name(buffer)} {where}, not where it is "
                        "computed in the fused kernel"
                    )
        return None

    def _depends(self, a: Group, b: Group) -> bool:
        return self.dag.has_edge(a.id, b.id) or self.dag.has_edge(b.id, a.id)

    def _cycle(self, a: Group, b: Group) -> str | None:
        """A group on a path between ``a`` and ``b`` through other groups, if any."""
        for src, dst in ((a.id, b.id), (b.id, a.id)):
            for succ in self.dag.successors(src):
                if succ == dst:
                    continue
                if self._reaches(succ, dst):
                    return self.label(self.groups[succ])
        return None

    def _reaches(self, src: int, dst: int) -> bool:
        """Whether a path leads from group ``src`` to group ``dst``: only through groups
        placed before ``dst`` in the topological order (``self.pos``)."""
        limit = self.pos[dst]
        if self.pos[src] > limit:
            return False
        seen = {src}
        stack = [src]
        # networkx's adjacency dict of dicts itself (DiGraph._succ, what its views wrap):
        # the views cost more than the search at 48 layers.
        succ = self.dag._succ  # pyright: ignore[reportAttributeAccessIssue]
        pos = self.pos
        while stack:
            for nxt in succ[stack.pop()]:
                if nxt == dst:
                    return True
                if nxt not in seen and pos[nxt] < limit:
                    seen.add(nxt)
                    stack.append(nxt)
        return False

    def _reorder(self, keep: int, gone: int) -> None:
        """Keep ``self.order`` topological when ``keep`` and ``gone`` become one group
        (called before the contraction; no path joins them through other groups: the
        cycle check). Between the two, the groups reachable from the earlier one move
        after the merged group, the others before it (Pearce and Kelly's reordering)."""
        lo, hi = sorted((self.pos[keep], self.pos[gone]))
        first = self.order[lo]
        assert first is not None
        after: set[int] = set()
        stack = [first]
        succ = self.dag.succ
        while stack:
            for nxt in succ[stack.pop()]:
                if nxt not in after and lo < self.pos[nxt] < hi:
                    after.add(nxt)
                    stack.append(nxt)
        between = [g for g in self.order[lo + 1 : hi] if g is not None]
        segment: list[int | None] = [g for g in between if g not in after]
        segment.append(keep)
        segment.extend(g for g in between if g in after)
        # Holes where groups were (gone's, and earlier merges'): positions only compare,
        # so nothing after the window shifts.
        segment.extend([None] * (hi - lo + 1 - len(segment)))
        self.order[lo : hi + 1] = segment
        for k, g in enumerate(segment):
            if g is not None:
                self.pos[g] = lo + k
        del self.pos[gone]

    # -- the rounds ------------------------------------------------------------------------

    def merge(self, a: Group, b: Group, plan: MergePlan) -> Group:
        keep, gone = (a, b) if a.first < b.first else (b, a)
        keep.nodes = sorted(keep.nodes + gone.nodes)
        keep.numel, keep.rnumel, keep.reduces = plan.numel, plan.rnumel, plan.reduces
        keep.levels = plan.levels
        for i in gone.nodes:
            self.group_of[i] = keep.id
        self._reorder(keep.id, gone.id)
        nx.contracted_nodes(self.dag, keep.id, gone.id, self_loops=False, copy=False)  # pyright: ignore[reportUnknownMemberType]
        del self.groups[gone.id]
        return keep

    def _record(
        self, round_no: int, a: Group, b: Group, fused: bool, reason: str, saved: int
    ) -> None:
        key = (tuple(a.nodes), tuple(b.nodes))
        if not fused and key in self._reported:
            return
        self._reported.add(key)
        self.decisions.append(
            Decision(round_no, self.label(a), self.label(b), fused, reason, saved)
        )

    def run(self, max_rounds: int = 16) -> FusionResult:
        for round_no in range(1, max_rounds + 1):
            scored = []
            for a_id, b_id in self.candidates():
                a, b = self.groups[a_id], self.groups[b_id]
                distance = abs(a.first - b.first)
                scored.append((-self.score(a, b), distance, a.first, b.first))
            scored.sort()
            fused_any = False
            for neg_score, _, first_a, first_b in scored:
                a = self.groups[self.group_of[first_a]]
                b = self.groups[self.group_of[first_b]]
                if a.id == b.id:
                    continue
                pair = (tuple(a.nodes), tuple(b.nodes))
                if pair in self._refused:
                    self.skipped_plans += 1
                    continue
                plan = self.plan(a, b)
                if isinstance(plan, str):
                    self._refused.add(pair)
                    self._record(round_no, a, b, False, plan, -neg_score)
                    continue
                self._record(round_no, a, b, True, plan.how, -neg_score)
                self.merge(a, b, plan)
                fused_any = True
            if not fused_any:
                break
        return FusionResult(self.ordered_groups(), self.decisions)

    def ordered_groups(self) -> list[Group]:
        order: Iterable[int] = nx.lexicographical_topological_sort(
            self.dag, key=lambda g: self.groups[g].first
        )
        return [self.groups[g] for g in order]


def reads_along_a_reduction(graph: ScheduleGraph, nodes: Iterable[int]) -> bool:
    """Whether some reduction among ``nodes`` reads contiguously along its reduction
    (:func:`~kiln.passes.scheduling.tiling.reduction_hint`'s ``inner``, judged before the
    kernel exists)."""
    for i in nodes:
        node = graph.nodes[i]
        if isinstance(node.op, ReductionOp):
            loads = [load for loads in node.loads.values() for load in loads]
            if reads_along_reduction(node.op, loads):
                return True
    return False


def group_dag(graph: ScheduleGraph, groups: Iterable[Group]) -> tuple[dict[int, int], nx.DiGraph]:  # pyright: ignore[reportMissingTypeArgument]
    """Each node's group id, and the dependency graph of the groups (for the horizontal
    merges after fusion: :mod:`.tiny_kernels`, :mod:`.sibling_reductions`)."""
    group_of = {i: g.id for g in groups for i in g.nodes}
    dag: nx.DiGraph = nx.DiGraph()  # pyright: ignore[reportMissingTypeArgument]
    dag.add_nodes_from(group_of.values())
    dag.add_edges_from(
        (group_of[a], group_of[b])
        for a, b in graph.graph.edges  # pyright: ignore[reportUnknownVariableType]
        if group_of[a] != group_of[b]  # pyright: ignore[reportUnknownArgumentType]
    )
    return group_of, dag


def schedule(graph: ScheduleGraph, max_nodes: int, cpu: bool = False) -> FusionResult:
    return Scheduler(graph, max_nodes, cpu).run()


def unfused(graph: ScheduleGraph) -> FusionResult:
    """One group per node, in program order (``max-nodes=1``)."""
    scheduler = Scheduler(graph, 1)
    return FusionResult(scheduler.ordered_groups())


__all__ = [
    "Decision",
    "FusionResult",
    "Group",
    "Scheduler",
    "group_dag",
    "group_label",
    "schedule",
    "unfused",
]

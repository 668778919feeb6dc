"""Horizontal merging of sibling reductions (GPU): independent reduction kernels over one
space that read what one kernel reads and what it writes.

A layer norm's backward is a row kernel (the input gradient, ``dx``, from per-row sums)
and a column kernel (the weight and bias gradients, column sums of what the row kernel
reads). The bias gradient of the linear layer before it is a column sum too, over the
same space, of ``dx`` plus the residual's gradient: it reads what the row kernel writes,
so it shares no buffer with the column kernel and no fusion candidate pairs them; each
transformer layer launched two such column kernels apiece. Inductor recomputes ``dx`` in
the bias gradient's loop from the row kernel's inputs, which then reads what the column
kernel reads, and fuses the two. kiln merges them as they are: reduction groups of the
same static space and read pattern (both along their reduction, or both across it: one
tiling suits both) with no path between them, in pairs where one reads a buffer that a
group writes and the other one of that group's inputs; and all of them where they read
results of one group or ATen call (BERT's q, k and v bias gradients, LLaMA's key and value
gradients summed over the heads that share them: results of one attention backward). The
CPU keeps them apart: a C++ kernel call costs next to nothing there.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx
import sympy
from xdsl.ir import SSAValue

from kiln.dialects.loop.dot import is_dot
from kiln.passes.scheduling.fusion import (
    Decision,
    FusionResult,
    Group,
    group_dag,
    group_label,
    reads_along_a_reduction,
)
from kiln.passes.scheduling.graph import ScheduleGraph


def _space(group: Group, graph: ScheduleGraph) -> tuple[int, int] | None:
    """A reducing group's static ``(numel, rnumel)`` (None: not a reduction kernel,
    symbolic, or a matrix product's: a ``tl.dot`` kernel shares with no other reduction,
    as fusion's dot hazard says; LLaMA's key and value projections, two products of one
    shape reading one normalized input, were merged into a kernel no lowering can write)."""
    if not group.reduces or not group.fusable:
        return None
    if any(is_dot(graph.nodes[i].op) for i in group.nodes):
        return None
    if not isinstance(group.numel, sympy.Integer) or not isinstance(group.rnumel, sympy.Integer):
        return None
    return int(group.numel), int(group.rnumel)


def _reads(group: Group, graph: ScheduleGraph) -> set[SSAValue]:
    return {buffer for i in group.nodes for buffer in graph.nodes[i].loads}


@dataclass
class _Merger:
    """The group graph and who reads and writes what, kept current through merges."""

    graph: ScheduleGraph
    by_id: dict[int, Group]
    group_of: dict[int, int]
    dag: nx.DiGraph  # pyright: ignore[reportMissingTypeArgument]
    spaces: dict[int, tuple[int, int]]
    inner: dict[int, bool]
    reads: dict[int, set[SSAValue]] = field(default_factory=dict[int, set[SSAValue]])
    writes: dict[int, list[SSAValue]] = field(default_factory=dict[int, list[SSAValue]])
    readers: dict[SSAValue, set[int]] = field(default_factory=dict[SSAValue, set[int]])
    decisions: list[Decision] = field(default_factory=list[Decision])

    def __post_init__(self) -> None:
        self.reads = {gid: _reads(g, self.graph) for gid, g in self.by_id.items()}
        for buffer, node in self.graph.producer.items():
            self.writes.setdefault(self.group_of[node], []).append(buffer)
        for gid, buffers in self.reads.items():
            for buffer in buffers:
                self.readers.setdefault(buffer, set()).add(gid)

    def alike(self, a: int, b: int) -> bool:
        """Whether reduction groups ``a`` and ``b`` have one space and read pattern."""
        return (
            a != b and self.spaces.get(a) == self.spaces.get(b) and self.inner[a] == self.inner[b]
        )

    def can_merge(self, a: int, b: int, max_nodes: int) -> bool:
        if len(self.by_id[a].nodes) + len(self.by_id[b].nodes) > max_nodes:
            return False
        return not (nx.has_path(self.dag, a, b) or nx.has_path(self.dag, b, a))

    def merge(self, a: int, b: int) -> int:
        """Merge groups ``a`` and ``b``; the id of the merged group."""
        first, second = self.by_id[a], self.by_id[b]
        keep, gone = (first, second) if first.first < second.first else (second, first)
        numel, rnumel = self.spaces[keep.id]
        reason = f"horizontal, sibling reductions over {numel} x {rnumel}"
        self.decisions.append(
            Decision(
                0, group_label(self.graph, keep), group_label(self.graph, gone), True, reason, 0
            )
        )
        keep.nodes = sorted(keep.nodes + gone.nodes)
        keep.levels = {**keep.levels, **gone.levels}
        nx.contracted_nodes(self.dag, keep.id, gone.id, self_loops=False, copy=False)  # pyright: ignore[reportUnknownMemberType]
        for i in gone.nodes:
            self.group_of[i] = keep.id
        gone_reads = self.reads.pop(gone.id)
        for buffer in gone_reads:
            self.readers[buffer].discard(gone.id)
            self.readers[buffer].add(keep.id)
        self.reads[keep.id] |= gone_reads
        self.writes[keep.id] = self.writes.get(keep.id, []) + self.writes.pop(gone.id, [])
        del self.by_id[gone.id]
        return keep.id

    def cousins(self, max_nodes: int) -> None:
        """Reductions reading results of one group (or ATen call): all of them, alike
        and independent, in one kernel (they belong to one layer)."""
        for source in sorted(self.writes, key=lambda g: self.by_id[g].first):
            if source not in self.by_id:
                continue
            found = {r for b in self.writes.get(source, ()) for r in self.readers.get(b, ())}
            members = sorted((r for r in found if r in self.spaces), key=self._first)
            while members:
                host, rest = members[0], []
                for other in members[1:]:
                    if self.alike(host, other) and self.can_merge(host, other, max_nodes):
                        host = self.merge(host, other)
                    else:
                        rest.append(other)
                members = rest

    def siblings(self, max_nodes: int) -> None:
        """Pairs of reductions, one reading a group's result and the other its input.
        Pairs only, each group in one at most: the residual stream's gradient runs
        through every layer, and chains would gather one layer's weight gradients into
        a later layer's kernel (buffers alive longer, for no launch saved per pair)."""
        paired: set[int] = set()
        for gid in sorted(self.spaces, key=self._first):
            if gid in paired or gid not in self.by_id:
                continue
            partners = [p for p in self._partners(gid) if p not in paired]
            for partner in sorted(partners, key=lambda p: abs(self._first(p) - self._first(gid))):
                if self.can_merge(gid, partner, max_nodes):
                    self.merge(gid, partner)
                    paired.update((gid, partner))
                    break

    def _first(self, gid: int) -> int:
        group = self.by_id.get(gid)
        return group.first if group is not None else -1

    def _partners(self, gid: int) -> set[int]:
        """Alike reductions reading an input of a group whose result ``gid`` reads."""
        found: set[int] = set()
        for buffer in self.reads[gid]:
            producer = self.graph.producer.get(buffer)
            if producer is None or (source := self.group_of[producer]) == gid:
                continue
            for shared in self.reads.get(source, ()):
                found.update(
                    r
                    for r in self.readers.get(shared, ())
                    if r != source and r in self.by_id and self.alike(gid, r)
                )
        return found


def merge_sibling_reductions(
    graph: ScheduleGraph, result: FusionResult, max_nodes: int
) -> FusionResult:
    """``result`` with sibling reductions merged (see the module docstring), in
    dependency order; each merge is a decision of the fuse report."""
    spaces = {g.id: s for g in result.groups if (s := _space(g, graph)) is not None}
    if len(spaces) < 2:
        return result
    group_of, dag = group_dag(graph, result.groups)
    by_id = {g.id: g for g in result.groups}
    inner = {gid: reads_along_a_reduction(graph, by_id[gid].nodes) for gid in spaces}
    merger = _Merger(graph, by_id, group_of, dag, spaces, inner)
    merger.cousins(max_nodes)
    merger.siblings(max_nodes)
    if not merger.decisions:
        return result
    order = nx.lexicographical_topological_sort(dag, key=lambda g: by_id[g].first)  # pyright: ignore[reportUnknownArgumentType, reportUnknownVariableType]
    return FusionResult([by_id[g] for g in order], [*result.decisions, *merger.decisions])  # pyright: ignore[reportUnknownArgumentType]


__all__ = ["merge_sibling_reductions"]

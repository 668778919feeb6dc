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
tiling suits both), no path between them, one reading a buffer that a group writes and
the other reading one of that group's inputs or outputs (LLaMA's grouped-query attention
backward: the key and value gradients, summed over the heads that share them, read two
results of one attention call). The CPU keeps them apart: a C++ kernel call
costs next to nothing there.
"""

from __future__ import annotations

import networkx as nx
import sympy
from xdsl.ir import SSAValue

from kiln.dialects.loop.body_ops import LoadOp
from kiln.dialects.loop.ops import ReductionOp
from kiln.passes.scheduling.fusion import Decision, FusionResult, Group, group_label
from kiln.passes.scheduling.graph import ScheduleGraph
from kiln.passes.scheduling.tiling import reads_along_reduction


def _space(group: Group) -> tuple[int, int] | None:
    """A reducing group's static ``(numel, rnumel)`` (None: not a reduction kernel, or
    symbolic)."""
    if not group.reduces or not group.fusable:
        return None
    if not isinstance(group.numel, sympy.Integer) or not isinstance(group.rnumel, sympy.Integer):
        return None
    return int(group.numel), int(group.rnumel)


def _inner(group: Group, graph: ScheduleGraph) -> bool:
    """Whether some reduction of ``group`` reads contiguously along its reduction
    (:func:`~kiln.passes.scheduling.tiling.reduction_hint`'s ``inner``)."""
    for i in group.nodes:
        op = graph.nodes[i].op
        if isinstance(op, ReductionOp):
            loads = [inner for inner in op.body.walk() if isinstance(inner, LoadOp)]
            if reads_along_reduction(op, loads):
                return True
    return False


def _reads(group: Group, graph: ScheduleGraph) -> set[SSAValue]:
    return {buffer for i in group.nodes for buffer in graph.nodes[i].loads}


def merge_sibling_reductions(
    graph: ScheduleGraph, result: FusionResult, max_nodes: int
) -> FusionResult:
    """``result`` with sibling reductions merged (see the module docstring), in
    dependency order; each merge is a decision of the fuse report."""
    spaces = {g.id: s for g in result.groups if (s := _space(g)) is not None}
    if len(spaces) < 2:
        return result
    group_of = {i: g.id for g in result.groups for i in g.nodes}
    by_id = {g.id: g for g in result.groups}
    dag: nx.DiGraph = nx.DiGraph()  # pyright: ignore[reportMissingTypeArgument]
    dag.add_nodes_from(group_of.values())
    dag.add_edges_from(
        (group_of[a], group_of[b])
        for a, b in graph.graph.edges  # pyright: ignore[reportUnknownVariableType]
        if group_of[a] != group_of[b]  # pyright: ignore[reportUnknownArgumentType]
    )
    reads = {g.id: _reads(g, graph) for g in result.groups}
    writes: dict[int, list[SSAValue]] = {}
    for buffer, node in graph.producer.items():
        writes.setdefault(group_of[node], []).append(buffer)
    readers: dict[SSAValue, set[int]] = {}
    for gid, buffers in reads.items():
        for buffer in buffers:
            readers.setdefault(buffer, set()).add(gid)
    inner = {gid: _inner(by_id[gid], graph) for gid in spaces}
    decisions: list[Decision] = []
    # Pairs only, each group in one at most: the residual stream's gradient runs through
    # every layer, and chains of siblings would gather one layer's weight gradients into
    # a later layer's kernel (buffers alive longer, for no launch saved per pair).
    merged: set[int] = set()
    for gid in sorted(spaces, key=lambda g: by_id[g].first):
        if gid in merged:
            continue
        group = by_id[gid]
        partners = _siblings(gid, graph, group_of, reads, writes, readers, spaces, inner)
        for partner in sorted(partners, key=lambda p: abs(by_id[p].first - group.first)):
            other = by_id[partner]
            if partner in merged or len(group.nodes) + len(other.nodes) > max_nodes:
                continue
            if nx.has_path(dag, gid, partner) or nx.has_path(dag, partner, gid):
                continue
            numel, rnumel = spaces[gid]
            reason = f"horizontal, sibling reductions over {numel} x {rnumel}"
            decisions.append(
                Decision(0, group_label(graph, other), group_label(graph, group), True, reason, 0)
            )
            keep, gone = (other, group) if other.first < group.first else (group, other)
            keep.nodes = sorted(keep.nodes + gone.nodes)
            keep.levels = {**keep.levels, **gone.levels}
            nx.contracted_nodes(dag, keep.id, gone.id, self_loops=False, copy=False)  # pyright: ignore[reportUnknownMemberType]
            for i in gone.nodes:
                group_of[i] = keep.id
            reads[keep.id] = reads[keep.id] | reads.pop(gone.id)
            writes[keep.id] = writes.get(keep.id, []) + writes.pop(gone.id, [])
            for buffers in readers.values():
                if gone.id in buffers:
                    buffers.discard(gone.id)
                    buffers.add(keep.id)
            del by_id[gone.id]
            merged.update((keep.id, gone.id))
            break
    if not decisions:
        return result
    order = nx.lexicographical_topological_sort(dag, key=lambda g: by_id[g].first)  # pyright: ignore[reportUnknownArgumentType, reportUnknownVariableType]
    return FusionResult([by_id[g] for g in order], [*result.decisions, *decisions])  # pyright: ignore[reportUnknownArgumentType]


def _siblings(
    gid: int,
    graph: ScheduleGraph,
    group_of: dict[int, int],
    reads: dict[int, set[SSAValue]],
    writes: dict[int, list[SSAValue]],
    readers: dict[SSAValue, set[int]],
    spaces: dict[int, tuple[int, int]],
    inner: dict[int, bool],
) -> list[int]:
    """Reduction groups over ``gid``'s space and read pattern that read an input or an
    output of a group whose output ``gid`` reads."""
    found: set[int] = set()
    for buffer in reads[gid]:
        producer = graph.producer.get(buffer)
        if producer is None:
            continue
        source = group_of[producer]
        if source == gid:
            continue
        for shared in (*reads.get(source, ()), *writes.get(source, ())):
            for reader in readers.get(shared, ()):
                if (
                    reader not in (gid, source)
                    and spaces.get(reader) == spaces[gid]
                    and inner[reader] == inner[gid]
                ):
                    found.add(reader)
    return list(found)


__all__ = ["merge_sibling_reductions"]

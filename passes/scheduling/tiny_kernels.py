"""Horizontal merging of tiny independent pointwise kernels (GPU).

After fusion, a training step of a network with batch norm still launches one kernel per
``num_batches_tracked += 1``: a one-element pointwise kernel per batch norm that shares
no buffer with anything else, so no fusion candidate pairs it (52 launches, 50 us of
kernel time, in MobileNet-v2's step on an H200; Inductor launches them one by one too).
On a GPU every launch costs 1 to 2 us of kernel time however little it computes, so
pointwise groups of the same small static size (at most :data:`TINY_NUMEL` points) that
no path of the group graph connects run as one kernel, each node on its own buffers
(the merged kernel's grid is that of one of them). The CPU keeps them apart: a C++
kernel call costs next to nothing there.
"""

from __future__ import annotations

from collections.abc import Sequence

import networkx as nx
import sympy

from kiln.dialects.loop.ops import ScatterOp
from kiln.passes.scheduling.fusion import Decision, FusionResult, Group
from kiln.passes.scheduling.graph import ScheduleGraph
from kiln.passes.scheduling.legality import Level

TINY_NUMEL = 4096
"""Points of a pointwise kernel that merging may take: a block or two of one program."""


def _tiny(group: Group, graph: ScheduleGraph) -> bool:
    if group.reduces or not group.fusable or not isinstance(group.numel, sympy.Integer):
        return False
    if int(group.numel) > TINY_NUMEL:
        return False
    return not any(isinstance(graph.nodes[i].op, ScatterOp) for i in group.nodes)


def _label(group: Group, graph: ScheduleGraph) -> str:
    names = [graph.nodes[i].name for i in group.nodes]
    if len(names) > 4:
        names = [*names[:3], f"... {len(names) - 3} more"]
    return "[" + ", ".join(names) + "]"


def merge_tiny_kernels(graph: ScheduleGraph, result: FusionResult, max_nodes: int) -> FusionResult:
    """``result`` with tiny independent pointwise groups of one size merged (see the module
    docstring), in dependency order; each merge is a decision of the fuse report."""
    groups = list(result.groups)
    group_of = {i: g.id for g in groups for i in g.nodes}
    dag: nx.DiGraph = nx.DiGraph()  # pyright: ignore[reportMissingTypeArgument]
    dag.add_nodes_from(g.id for g in groups)
    dag.add_edges_from(
        (group_of[a], group_of[b])
        for a, b in graph.graph.edges  # pyright: ignore[reportUnknownVariableType]
        if group_of[a] != group_of[b]  # pyright: ignore[reportUnknownArgumentType]
    )
    by_id = {g.id: g for g in groups}
    buckets: dict[int, list[Group]] = {}
    for group in groups:
        if _tiny(group, graph):
            buckets.setdefault(int(group.numel), []).append(group)
    decisions: list[Decision] = []
    for bucket in buckets.values():
        open_groups: list[Group] = []  # merged groups of this size still taking members
        for group in bucket:
            host = next(
                (
                    g
                    for g in open_groups
                    if len(g.nodes) + len(group.nodes) <= max_nodes
                    and not nx.has_path(dag, g.id, group.id)
                    and not nx.has_path(dag, group.id, g.id)
                ),
                None,
            )
            if host is None:
                open_groups.append(group)
                continue
            decisions.append(
                Decision(
                    0,
                    _label(host, graph),
                    _label(group, graph),
                    True,
                    f"horizontal, tiny kernels of {group.numel} points",
                    0,
                )
            )
            host.nodes = sorted(host.nodes + group.nodes)
            host.levels = {**host.levels, **{i: Level.X for i in group.nodes}}
            nx.contracted_nodes(dag, host.id, group.id, self_loops=False, copy=False)  # pyright: ignore[reportUnknownMemberType]
            del by_id[group.id]
    if not decisions:
        return result
    order: Sequence[int] = list(
        nx.lexicographical_topological_sort(dag, key=lambda g: by_id[g].first)  # pyright: ignore[reportUnknownArgumentType]
    )
    return FusionResult([by_id[g] for g in order], [*result.decisions, *decisions])


__all__ = ["TINY_NUMEL", "merge_tiny_kernels"]

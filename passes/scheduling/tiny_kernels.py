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

Each size has one merged group taking members at a time: a group that a path connects to
it starts the next one. That keeps the path checks to two per tiny group (a small model
whose every kernel is tiny has hundreds, mostly connected).
"""

from __future__ import annotations

import networkx as nx
import sympy

from kiln.dialects.loop.ops import ScatterOp
from kiln.passes.scheduling.fusion import (
    Decision,
    FusionResult,
    Group,
    group_dag,
    group_label,
)
from kiln.passes.scheduling.graph import ScheduleGraph

TINY_NUMEL = 4096
"""Points of a pointwise kernel that merging may take: a block or two of one program."""


def _tiny(group: Group, graph: ScheduleGraph) -> bool:
    if group.reduces or not group.fusable or not isinstance(group.numel, sympy.Integer):
        return False
    if int(group.numel) > TINY_NUMEL:
        return False
    return not any(isinstance(graph.nodes[i].op, ScatterOp) for i in group.nodes)


def merge_tiny_kernels(graph: ScheduleGraph, result: FusionResult, max_nodes: int) -> FusionResult:
    """``result`` with tiny independent pointwise groups of one size merged (see the module
    docstring), in dependency order; each merge is a decision of the fuse report."""
    buckets: dict[int, list[Group]] = {}
    for group in result.groups:
        if _tiny(group, graph):
            buckets.setdefault(int(group.numel), []).append(group)
    if all(len(bucket) < 2 for bucket in buckets.values()):
        return result
    _, dag = group_dag(graph, result.groups)
    by_id = {g.id: g for g in result.groups}
    decisions: list[Decision] = []
    for bucket in buckets.values():
        host = bucket[0]
        for group in bucket[1:]:
            if (
                len(host.nodes) + len(group.nodes) > max_nodes
                or nx.has_path(dag, host.id, group.id)
                or nx.has_path(dag, group.id, host.id)
            ):
                host = group
                continue
            reason = f"horizontal, tiny kernels of {group.numel} points"
            decisions.append(
                Decision(0, group_label(graph, host), group_label(graph, group), True, reason, 0)
            )
            host.nodes = sorted(host.nodes + group.nodes)
            host.levels = {**host.levels, **group.levels}
            nx.contracted_nodes(dag, host.id, group.id, self_loops=False, copy=False)  # pyright: ignore[reportUnknownMemberType]
            del by_id[group.id]
    if not decisions:
        return result
    order = nx.lexicographical_topological_sort(dag, key=lambda g: by_id[g].first)  # pyright: ignore[reportUnknownArgumentType, reportUnknownVariableType]
    return FusionResult([by_id[g] for g in order], [*result.decisions, *decisions])  # pyright: ignore[reportUnknownArgumentType]


__all__ = ["TINY_NUMEL", "merge_tiny_kernels"]

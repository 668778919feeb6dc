"""The scheduler's per-layer cost (issue 19) without changing a single decision.

The cycle check walks only the groups that a maintained topological order places between
the two ends of a candidate path (instead of searching the whole graph with networkx):
after every merge the order must still be topological, every reachability answer must be
networkx's, and the fusion decisions must be those of the unpruned search.
"""

from __future__ import annotations

import networkx as nx
import torch
from fuse_checks import assert_schedule_preserves, schedule
from torch import nn
from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.dialects.func import FuncOp
from xdsl.ir import SSAValue

from kiln.dialects.kernel import KernelOp
from kiln.dialects.loop.ops import LoopNestOp
from kiln.examples import GPTBlock
from kiln.frontends.capture import capture_make_fx
from kiln.frontends.fx import import_graph
from kiln.passes.inline_producers import inline_producers
from kiln.passes.scheduling.build import remove_dead_nodes
from kiln.passes.scheduling.fusion import Group, MergePlan, Scheduler
from kiln.passes.scheduling.graph import ScheduleGraph, build_graph
from kiln.passes.scheduling.stamp import stamp_fuse


def _graph(layers: int) -> ScheduleGraph:
    model = nn.Sequential(*[GPTBlock(dim=16, heads=2, seed=k) for k in range(layers)]).eval()
    module: ModuleOp = import_graph(capture_make_fx(model, torch.randn(1, 4, 16)).gm)
    schedule(module, "decompose,lower-aten")
    func = next(op for op in module.ops if isinstance(op, FuncOp))
    remove_dead_nodes(func)
    inline_producers(func)
    return build_graph(func)


class _Checked(Scheduler):
    """Checks the order after every merge and the pruned search against networkx."""

    merges = 0

    def _reaches(self, src: int, dst: int) -> bool:
        found = super()._reaches(src, dst)
        assert found == nx.has_path(self.dag, src, dst), (src, dst)
        return found

    def merge(self, a: Group, b: Group, plan: MergePlan) -> Group:
        kept = super().merge(a, b, plan)
        self.merges += 1
        placed = [g for g in self.order if g is not None]
        assert sorted(placed) == sorted(self.groups)
        assert all(self.order[self.pos[g]] == g for g in self.groups)
        for u, v in self.dag.edges:
            assert self.pos[u] < self.pos[v], (u, v)
        for group in self.groups.values():
            assert self._buffers(group) == _fresh_buffers(self, group), group.nodes
        return kept


def _fresh_buffers(scheduler: Scheduler, group: Group) -> set[SSAValue]:
    """A group's buffers computed from its nodes (what the cached ones must equal)."""
    out: set[SSAValue] = set()
    for i in group.nodes:
        op = scheduler.graph.nodes[i].op
        out.update(v for v in (*op.operands, *op.results) if isinstance(v.type, MemRefType))
    return out


class _Unpruned(Scheduler):
    """The search as it was: networkx over the whole graph."""

    def _reaches(self, src: int, dst: int) -> bool:
        return nx.has_path(self.dag, src, dst)


def test_cycle_checks_agree_with_networkx_and_decisions_are_unchanged() -> None:
    checked = _Checked(_graph(2), 64)
    result = checked.run()
    assert checked.merges > 10
    reference = _Unpruned(_graph(2), 64).run()
    assert [d.line() for d in result.decisions] == [d.line() for d in reference.decisions]
    assert [g.nodes for g in result.groups] == [g.nodes for g in reference.groups]
    assert any("would create a cycle" in d.reason for d in result.decisions)


class _Forgetful(set[tuple[tuple[int, ...], tuple[int, ...]]]):
    """A refusal memory that keeps nothing: every pair is planned again each round."""

    def add(self, element: tuple[tuple[int, ...], tuple[int, ...]]) -> None:
        pass


def test_refused_pairs_are_not_planned_again_and_decisions_are_unchanged() -> None:
    remembering = Scheduler(_graph(2), 64)
    result = remembering.run()
    forgetting = Scheduler(_graph(2), 64)
    forgetting._refused = _Forgetful()  # pyright: ignore[reportPrivateUsage]
    reference = forgetting.run()
    assert remembering.skipped_plans > 0
    assert forgetting.skipped_plans == 0
    assert [d.line() for d in result.decisions] == [d.line() for d in reference.decisions]
    assert [g.nodes for g in result.groups] == [g.nodes for g in reference.groups]
    assert [(g.numel, g.rnumel, g.levels) for g in result.groups] == [
        (g.numel, g.rnumel, g.levels) for g in reference.groups
    ]


def test_kernels_take_the_loop_nests_themselves() -> None:
    """``ProgramBuilder`` moves each loop nest into its kernel (the function is dropped
    afterwards) instead of cloning it: the kernels hold the very ops ``inline-producers``
    left, and the program computes what the loop function did."""
    model = nn.Sequential(GPTBlock(dim=16, heads=2, seed=0)).eval()
    module: ModuleOp = import_graph(capture_make_fx(model, torch.randn(1, 4, 16)).gm)
    schedule(module, "decompose,lower-aten,inline-producers")
    assert_schedule_preserves(module, "fuse")
    func = next(op for op in module.ops if isinstance(op, FuncOp))
    loops = [op for op in func.body.block.ops if isinstance(op, LoopNestOp)]
    schedule(module, "fuse")
    in_kernels = [
        op for kernel in module.ops if isinstance(kernel, KernelOp) for op in kernel.body.block.ops
    ]
    moved = [op for op in in_kernels if isinstance(op, LoopNestOp)]
    assert moved
    assert all(any(op is loop for loop in loops) for op in moved)


def test_stamped_groups_are_the_full_schedules() -> None:
    """Stamping (``kiln.passes.scheduling.stamp``): the groups it repeats from a window
    are the full scheduler's on the whole function, in its order, to the levels."""
    model = nn.Sequential(*[GPTBlock(dim=16, heads=2, seed=k) for k in range(8)]).eval()
    module: ModuleOp = import_graph(capture_make_fx(model, torch.randn(1, 4, 16)).gm)
    schedule(module, "decompose,lower-aten")
    stamped_module = module.clone()
    func = next(op for op in stamped_module.ops if isinstance(op, FuncOp))
    remove_dead_nodes(func)
    stamped = stamp_fuse(func, 64, inline=True)
    assert stamped is not None
    reference_func = next(op for op in module.ops if isinstance(op, FuncOp))
    remove_dead_nodes(reference_func)
    inline_producers(reference_func)
    reference = Scheduler(build_graph(reference_func), 64).run()
    assert [g.nodes for g in stamped.result.groups] == [g.nodes for g in reference.groups]
    assert [(g.numel, g.rnumel, g.levels, g.fusable) for g in stamped.result.groups] == [
        (g.numel, g.rnumel, g.levels, g.fusable) for g in reference.groups
    ]

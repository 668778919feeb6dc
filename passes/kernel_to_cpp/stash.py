"""Keeping an expensive per-(x, r) value in a later output instead of recomputing it.

Softmax needs ``e = exp(x - max)`` in two r-loops: for the sum, then for ``e / sum``.
Recomputing ``e`` costs a second ``exp`` per element; instead the first r-loop stores
``e`` into the output buffer of ``e / sum`` (same element, same dtype) and the second
reads it back just before overwriting it, as eager PyTorch's softmax does. A value is
stashed when recomputing it would call a transcendental function and some output of a
later r-loop, written after every other read of the value, can hold it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from xdsl.dialects.builtin import MemRefType
from xdsl.ir import SSAValue

from kiln.dialects.loop.ops import LoopNestOp, ReductionOp
from kiln.passes.kernel_to_cpp.analysis import Level

if TYPE_CHECKING:
    from kiln.passes.kernel_to_cpp.kernel import KernelLowering


@dataclass(frozen=True)
class Stash:
    """Where a recomputed value is kept: the output of ``holder`` (a yielded result)."""

    holder: SSAValue
    written: int
    """The r-loop that computes the value and stores it."""
    until: int
    """The r-loop whose output overwrites it (reads up to there come from memory)."""


def _expensive(lowering: KernelLowering, node: LoopNestOp, needed: set[LoopNestOp]) -> bool:
    """Whether computing ``node`` (with the XR producers it needs) calls a math function."""
    seen: set[LoopNestOp] = set()
    work = [node]
    while work:
        current = work.pop()
        if current in seen:
            continue
        seen.add(current)
        if any(op.dialect_name() == "math" for op in current.body.block.ops):
            return True
        work += [p for p in lowering.analysis.inputs_in_kernel(current) if p in needed]
    return False


def plan_stashes(lowering: KernelLowering) -> dict[LoopNestOp, Stash]:
    analysis = lowering.analysis
    stages = analysis.num_stages
    needed: list[list[LoopNestOp]] = []
    for stage in range(stages):
        roots = [
            n
            for n in analysis.nodes
            if analysis.stage[n] == stage
            and (
                analysis.level[n] is Level.RED
                or (analysis.level[n] is Level.XR and any(r in analysis.yielded for r in n.results))
            )
        ]
        needed.append(lowering.needed_xr(roots, stage))
    stashes: dict[LoopNestOp, Stash] = {}
    taken: set[SSAValue] = set()
    for node in analysis.nodes:
        if (
            analysis.level[node] is not Level.XR
            or isinstance(node, ReductionOp)
            or len(node.results) != 1
        ):
            continue
        if any(r in analysis.yielded for r in node.results):
            continue
        uses = [k for k in range(stages) if node in needed[k]]
        if len(uses) < 2 or not _expensive(lowering, node, set(needed[uses[-1]])):
            continue
        result = node.results[0]
        ty = result.type
        assert isinstance(ty, MemRefType)
        index = lowering.store_index(node)
        for holder_node in analysis.nodes:
            if (
                analysis.level[holder_node] is not Level.XR
                or analysis.stage[holder_node] < uses[-1]
                or len(holder_node.results) != 1
            ):
                continue
            holder = holder_node.results[0]
            holder_type = holder.type
            if holder not in analysis.yielded or holder in taken:
                continue
            assert isinstance(holder_type, MemRefType)
            if (
                holder_type.element_type != ty.element_type
                or lowering.store_index(holder_node) != index
            ):
                continue
            last = analysis.stage[holder_node]
            if last in uses and not _read_before(lowering, node, holder_node, needed[last]):
                continue
            stashes[node] = Stash(holder, uses[0], last)
            taken.add(holder)
            break
    return stashes


def _read_before(
    lowering: KernelLowering, value_node: LoopNestOp, holder: LoopNestOp, order: list[LoopNestOp]
) -> bool:
    """Whether, in this r-loop, every reader of ``value_node`` runs before ``holder``."""
    position = order.index(holder) if holder in order else len(order)
    for k, node in enumerate(order):
        if value_node in lowering.analysis.inputs_in_kernel(node) and k > position:
            return False
    return True


__all__ = ["Stash", "plan_stashes"]

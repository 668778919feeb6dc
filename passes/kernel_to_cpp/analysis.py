"""What a kernel computes where: each node's level and stage.

A ``kernel.kernel`` iterates over ``numel`` x ``rnumel`` points ``(x, r)``. On the CPU
each ``x`` is one (scalar) iteration of the outer loops and the reduction space is
walked by one or more *r-loops* inside it:

* an ``X`` node (no ``r0`` in its ``kernel.vars``) runs once per ``x``, as scalar code;
* an ``XR`` node (a pointwise node over ``numel * rnumel`` points) runs inside an r-loop;
* a ``RED`` node accumulates inside an r-loop; its results exist after that loop.

The *stage* of a node says when its inputs are ready: r-loop ``k`` runs after the X
nodes of stage ``k`` and before those of stage ``k + 1``; a reduction in r-loop ``k``
gives results at stage ``k + 1``. Softmax is max (r-loop 0), sum of exp (r-loop 1),
then the normalised values (r-loop 2). An XR value needed in a later r-loop than the
one it was first computed in is recomputed there (it is pure), as Inductor does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum, auto

from xdsl.ir import SSAValue

from kiln.dialects.kernel.kernel_ops import KernelOp, node_vars
from kiln.dialects.loop.expr import flat_index, reduction_var
from kiln.dialects.loop.ops import LoopNestOp, ReductionOp


class Level(Enum):
    X = auto()
    XR = auto()
    RED = auto()


class UnsupportedKernel(ValueError):
    """A kernel this backend cannot lower (the message says why)."""


@dataclass
class KernelAnalysis:
    """Levels, stages and in-kernel producers of a kernel's nodes."""

    kernel: KernelOp
    nodes: list[LoopNestOp] = field(default_factory=list[LoopNestOp])
    level: dict[LoopNestOp, Level] = field(default_factory=dict[LoopNestOp, Level])
    stage: dict[LoopNestOp, int] = field(default_factory=dict[LoopNestOp, int])
    producer: dict[SSAValue, LoopNestOp] = field(default_factory=dict[SSAValue, LoopNestOp])
    """The node computing each in-kernel value."""
    yielded: set[SSAValue] = field(default_factory=set[SSAValue])

    @property
    def num_stages(self) -> int:
        """How many r-loops the kernel needs (0 for a pointwise kernel)."""
        loops = [s + 1 for n, s in self.stage.items() if self.level[n] is not Level.X]
        return max(loops, default=0)

    def inputs_in_kernel(self, node: LoopNestOp) -> list[LoopNestOp]:
        """The fused producers ``node`` reads (each once, in operand order)."""
        out: list[LoopNestOp] = []
        for value in node.inputs:
            producer = self.producer.get(value)
            if producer is not None and producer not in out:
                out.append(producer)
        return out


def analyze(kernel: KernelOp) -> KernelAnalysis:
    analysis = KernelAnalysis(kernel)
    r = reduction_var(0)
    for node in kernel.nodes():
        analysis.nodes.append(node)
        uses_r = any(r in e.free_symbols for e in node_vars(node))
        if isinstance(node, ReductionOp):
            level = Level.RED
        elif uses_r:
            level = Level.XR
        else:
            level = Level.X
        analysis.level[node] = level
        for result in node.results:
            analysis.producer[result] = node
    analysis.yielded = set(kernel.yield_op().values)
    for node in analysis.nodes:
        analysis.stage[node] = _stage(analysis, node)
    return analysis


def _stage(analysis: KernelAnalysis, node: LoopNestOp) -> int:
    level = analysis.level[node]
    stage = 0
    for producer in analysis.inputs_in_kernel(node):
        p_level = analysis.level[producer]
        p_stage = analysis.stage[producer]
        if p_level is Level.RED:
            ready = p_stage + 1
        else:
            ready = p_stage
        if p_level is Level.XR and level is Level.X:
            raise UnsupportedKernel(
                f"{node.name} reads the per-(x, r) values of {producer.name} once per x"
            )
        stage = max(stage, ready)
    return stage


__all__ = ["KernelAnalysis", "Level", "UnsupportedKernel", "analyze", "flat_index"]

"""``fuse``: the scheduler. Loop-level functions become kernels and a program.

For each ``func.func`` of loop IR (after ``lower-aten``), builds the dependency graph of
its loop nodes, extern calls and scalar ops (:mod:`kiln.passes.scheduling.graph`),
fuses loop nodes greedily by memory traffic saved (:mod:`kiln.passes.scheduling.fusion`:
vertical and horizontal fusion, reductions with their prologues and epilogues, several
reductions over one input space; never across an extern, never closing a cycle), and
replaces the function by ``kernel.kernel`` ops and a ``kernel.program`` of the same name
(:mod:`kiln.passes.scheduling.build`). An intermediate used only inside one kernel
never becomes a buffer.

After fusing, a kernel that only copies an ATen result in order into a buffer of
another shape (a reshape) is folded into the extern call (the ``elide-extern-copies``
pass, :mod:`kiln.passes.elide_extern_copies`).

Before fusing, cheap pointwise producers are inlined into their consumers where
recomputing them moves fewer bytes than storing them (the ``inline-producers`` pass,
:mod:`kiln.passes.inline_producers`).

A repeated region (the layers of a deep model) is scheduled on a window of five of its
periods and the middle one's kernels repeated for the others, with checks that fall
back to the full schedule (:mod:`kiln.passes.scheduling.stamp`; ``stamp=false`` turns
it off); the program then carries ``kiln.stamped_fuse``.

On a GPU, tiny pointwise kernels of one size that nothing connects (a batch norm's
``num_batches_tracked += 1``, one per layer) then run as one kernel
(:mod:`kiln.passes.scheduling.tiny_kernels`).

Options: ``max-nodes`` caps the nodes per kernel (``max-nodes=1``: one loop node per
kernel, no fusion, no inlining); ``inline=false`` turns inlining off; ``report`` prints
every candidate pair considered and why it was or was not fused, on stderr:

```console
$ kiln-opt m.mlir -p 'lower-aten,fuse{report=true}'
fuse: @forward: 5 nodes
fuse: round 1: [%add] + [%sum]: fused (vertical, pointwise prologue), score 128 bytes
fuse: round 1: [%relu] + [%mm]: not fused: %mm is an extern call (ATen), which is never fused, score 128 bytes
fuse: round 1: [%relu] + [%add, %sum]: not fused: would create a cycle (through [%mm]), score 128 bytes
```
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import DiagnosticException

from kiln.diagnostics import OpError
from kiln.dialects.aten.function_attrs import runs_on_cpu
from kiln.dialects.kernel.kernel_ops import KernelOp
from kiln.dialects.loop.ops import ExternOp as LoopExternOp
from kiln.dialects.loop.ops import LoopNestOp
from kiln.passes.elide_extern_copies import elide_in_program
from kiln.passes.inline_producers import inline_producers
from kiln.passes.scheduling.build import ProgramBuilder, remove_dead_nodes
from kiln.passes.scheduling.fusion import schedule, unfused
from kiln.passes.scheduling.graph import build_graph
from kiln.passes.scheduling.scatter_onto_addend import scatter_onto_addend
from kiln.passes.scheduling.sibling_reductions import merge_sibling_reductions
from kiln.passes.scheduling.stamp import stamp_fuse
from kiln.passes.scheduling.tiny_kernels import merge_tiny_kernels


class FuseError(DiagnosticException):
    """Input the scheduler cannot handle (not loop-level IR)."""


def _is_loop_level(func: FuncOp) -> bool:
    return any(isinstance(op, LoopNestOp | LoopExternOp) for op in func.body.block.ops)


@dataclass(frozen=True)
class FusePass(ModulePass):
    """Schedule loop nodes into fused kernels and a kernel.program."""

    name: ClassVar[str] = "fuse"  # pyright: ignore[reportIncompatibleVariableOverride]

    max_nodes: int = 64
    """At most this many loop nodes per kernel (1: no fusion)."""
    inline: bool = True
    """Inline cheap pointwise producers into their consumers first (see
    :mod:`kiln.passes.scheduling.inline`)."""
    report: bool = False
    """Print every candidate pair and the reason it was or was not fused (stderr)."""
    stamp: bool = True
    """Schedule a window of a repeated region (transformer layers) and repeat its middle
    period's kernels for the other repetitions, checked against the window
    (:mod:`kiln.passes.scheduling.stamp`); the output is the same either way."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.max_nodes < 1:
            raise FuseError(f"fuse: max-nodes must be at least 1, got {self.max_nodes}")
        names = [k.sym_name.data for k in op.ops if isinstance(k, KernelOp)]
        for func in [f for f in op.ops if isinstance(f, FuncOp)]:
            if not func.body.blocks:
                continue
            self._schedule_function(op, func, names)

    def _schedule_function(self, module: ModuleOp, func: FuncOp, names: list[str]) -> None:
        for inner in func.body.block.ops:
            if inner.dialect_name() == "aten":
                raise OpError(
                    inner, f"fuse: @{func.sym_name.data} still has aten ops; run lower-aten first"
                )
        remove_dead_nodes(func)
        cpu = runs_on_cpu(module)
        stamped = None
        if self.stamp and self.max_nodes > 1:
            stamped = stamp_fuse(func, self.max_nodes, self.inline, cpu)
        if stamped is not None:
            graph, result = stamped.graph, stamped.result
        else:
            if self.inline and self.max_nodes > 1:
                inline_producers(func, cpu=cpu)
            graph = build_graph(func)
            result = schedule(graph, self.max_nodes, cpu) if self.max_nodes > 1 else unfused(graph)
        if not cpu and self.max_nodes > 1:
            result = merge_tiny_kernels(graph, result, self.max_nodes)
            result = merge_sibling_reductions(graph, result, self.max_nodes)
        if self.report:
            print(f"fuse: @{func.sym_name.data}: {len(graph.nodes)} nodes", file=sys.stderr)
            if stamped is not None:
                print(
                    f"fuse: @{func.sym_name.data}: stamped {stamped.note}: the decisions below "
                    "are those of a window of the first five periods and the ops around them; "
                    "the other periods repeat the third's",
                    file=sys.stderr,
                )
            for decision in result.decisions:
                print(decision.line(), file=sys.stderr)
        builder = ProgramBuilder(graph, result, names)
        program = builder.build()
        block = module.body.block
        for kernel in builder.kernels:
            block.insert_op_before(kernel, func)
        block.insert_op_before(program, func)
        block.erase_op(func, safe_erase=False)
        elide_in_program(block, program)
        scatter_onto_addend(block, program)

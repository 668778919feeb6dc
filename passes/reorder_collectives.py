"""``reorder-collectives``: overlap communication with independent compute.

On kernel IR (after ``fuse``/``tile``, before ``buffer-reuse``). A functional collective
runs as a ``kernel.extern`` that starts the communication and returns; its
``wait_tensor`` extern blocks until it is done (see
:mod:`kiln.passes.aten_to_loop.collectives`). Whatever the program runs between the two
overlaps with the communication. As Inductor's ``reorder_compute_and_comm_for_overlap``
(``raise_comms`` then ``sink_waits``), this pass

1. moves each collective as early as its inputs allow: just after the last op that
   defines or writes one of its operands, and never above an earlier collective (every
   rank must issue the collectives in the same order);
2. moves each wait as late as its first use allows: just before the first op that reads
   its result or touches one of its operands (the collective's buffers), never past
   another wait (they keep their order) nor the ``kernel.return``;
3. moves the compute that follows a wait, up to the next collective or wait, above the
   wait where it does not depend on it (Inductor's ``reorder_compute_for_overlap``): a
   wait whose result is used at once (as traced graphs have it) still overlaps the
   independent work after that use.

Only the order of program ops changes; kernels, externs and buffers are the same, so the
numbers are too. With ``report=true`` it prints, per program, how many launches and
non-collective externs run between each collective and its wait, before and after::

    reorder-collectives: @forward: 2 collectives, 2 waits; compute ops overlapping communication 0 -> 5

```mlir
%h = kernel.alloc : memref<8x8xf32>
kernel.launch @kernel0(%x) outs(%h) ...
%ar = kernel.extern (%h) ... { _c10d_functional.all_reduce ... }
%w = kernel.extern (%ar, %h) ... { _c10d_functional.wait_tensor ... }
%y = kernel.alloc : memref<8x8xf32>
kernel.launch @kernel1(%x) outs(%y) ...            // independent of the all-reduce
kernel.launch @kernel2(%w, %y) outs(%z) ...
```
becomes (the independent launch between the collective and its wait)
```mlir
kernel.launch @kernel0(%x) outs(%h) ...
%ar = kernel.extern (%h) ... { _c10d_functional.all_reduce ... }
%y = kernel.alloc : memref<8x8xf32>
kernel.launch @kernel1(%x) outs(%y) ...
%w = kernel.extern (%ar, %h) ... { _c10d_functional.wait_tensor ... }
kernel.launch @kernel2(%w, %y) outs(%z) ...
```
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.traits import Pure

from kiln.dialects.aten.ops import AtenOp
from kiln.dialects.aten.traits import Collective, CollectiveWait, has_aten_trait
from kiln.dialects.kernel.lifetimes import buffer_effects
from kiln.dialects.kernel.program_ops import (
    ExternOp,
    FreeOp,
    LaunchOp,
    ProgramOp,
    ReturnOp,
    ReuseOp,
)
from kiln.passes.scheduling.levels import require_kernel_level


def _extern_kind(op: Operation) -> type[Collective] | type[CollectiveWait] | None:
    """``Collective`` or ``CollectiveWait`` for an extern that is one, else None."""
    if not isinstance(op, ExternOp):
        return None
    kinds = {
        kind
        for inner in op.body.block.ops
        for kind in (Collective, CollectiveWait)
        if has_aten_trait(inner, kind)
    }
    return kinds.pop() if len(kinds) == 1 else None


def is_collective(op: Operation) -> bool:
    return _extern_kind(op) is Collective


def is_wait(op: Operation) -> bool:
    return _extern_kind(op) is CollectiveWait


def _defined_or_changed(op: Operation) -> set[SSAValue]:
    """Values ``op`` defines or whose buffer it writes, begins or ends."""
    effects = buffer_effects(op)
    return {*op.results, *effects.writes, *effects.begins, *effects.ends}


def _can_raise_over(collective: Operation, op: Operation) -> bool:
    """Whether ``collective`` may run before ``op`` (which precedes it)."""
    if is_collective(op):
        return False  # collectives keep their order on every rank
    return not (_defined_or_changed(op) & set(collective.operands))


def _can_sink_past(wait: Operation, op: Operation) -> bool:
    """Whether ``wait`` may run after ``op`` (which follows it)."""
    if isinstance(op, ReturnOp) or is_wait(op):
        return False
    used = set(op.operands) | _defined_or_changed(op)
    return not (used & ({*wait.results} | set(wait.operands)))


def raise_collectives(block: Block) -> int:
    """Move each collective up to its earliest legal place; returns how many moved."""
    moved = 0
    for collective in [op for op in block.ops if is_collective(op)]:
        anchor = collective.prev_op
        while anchor is not None and _can_raise_over(collective, anchor):
            anchor = anchor.prev_op
        if anchor is collective.prev_op:
            continue
        collective.detach()
        if anchor is None:
            first = block.first_op
            assert first is not None
            block.insert_op_before(collective, first)
        else:
            block.insert_op_after(collective, anchor)
        moved += 1
    return moved


def sink_waits(block: Block) -> int:
    """Move each wait down to its latest legal place; returns how many moved."""
    moved = 0
    for wait in reversed([op for op in block.ops if is_wait(op)]):
        anchor = wait.next_op
        while anchor is not None and _can_sink_past(wait, anchor):
            anchor = anchor.next_op
        if anchor is wait.next_op or anchor is None:
            continue
        wait.detach()
        block.insert_op_before(wait, anchor)
        moved += 1
    return moved


def _has_effects(op: Operation) -> bool:
    """An extern calling something other than pure ATen ops (random numbers, checks,
    unknown overloads): such calls keep their relative order (the random stream)."""
    return isinstance(op, ExternOp) and any(
        not inner.has_trait(Pure) for inner in op.body.block.ops if isinstance(inner, AtenOp)
    )


def _is_communication(op: Operation) -> bool:
    return _extern_kind(op) is not None


def hoist_independent(block: Block) -> int:
    """Move the ops after each wait (up to the next collective, wait or the return) that
    do not depend on it above it, in their order; returns how many moved."""
    moved = 0
    for wait in [op for op in block.ops if is_wait(op)]:
        staying_defs: set[SSAValue] = set(wait.results)
        staying_uses: set[SSAValue] = set(wait.operands)
        hoisted: list[Operation] = []
        effect_stays = False
        op = wait.next_op
        while op is not None and not isinstance(op, ReturnOp) and not _is_communication(op):
            effects = buffer_effects(op)
            uses = {*op.operands, *effects.reads, *effects.touches}
            defines = _defined_or_changed(op)
            effectful = _has_effects(op)
            if (
                isinstance(op, FreeOp | ReuseOp)  # they end a buffer: keep them where they are
                or uses & staying_defs
                or defines & (staying_uses | staying_defs)
                or (effectful and effect_stays)  # ATen calls with effects keep their order
            ):
                staying_defs |= defines
                staying_uses |= uses
                effect_stays = effect_stays or effectful
            else:
                hoisted.append(op)
            op = op.next_op
        # Compute moves; allocations and size arithmetic only with a computation that
        # needs them (moving them alone would only hold memory longer).
        needed: set[SSAValue] = set()
        chosen: list[Operation] = []
        for op in reversed(hoisted):
            if isinstance(op, LaunchOp | ExternOp) or set(op.results) & needed:
                chosen.append(op)
                needed.update(op.operands)
        for op in reversed(chosen):
            op.detach()
            block.insert_op_before(op, wait)
        moved += len(chosen)
    return moved


def _is_compute(op: Operation) -> bool:
    return isinstance(op, LaunchOp) or (isinstance(op, ExternOp) and _extern_kind(op) is None)


def overlapping_compute(block: Block) -> int:
    """Launches and (non-collective) externs between each collective and its wait, summed."""
    ops = list(block.ops)
    position = {op: i for i, op in enumerate(ops)}
    total = 0
    for i, op in enumerate(ops):
        if not is_wait(op) or not op.operands:
            continue
        source = op.operands[0].owner
        start = position.get(source) if isinstance(source, Operation) else None
        if start is not None:
            total += sum(1 for between in ops[start + 1 : i] if _is_compute(between))
    return total


@dataclass(frozen=True)
class ReorderCollectivesPass(ModulePass):
    """Start collectives early and wait for them late (module docstring)."""

    name: ClassVar[str] = "reorder-collectives"  # pyright: ignore[reportIncompatibleVariableOverride]

    report: bool = False
    """Print the compute that overlaps communication, before and after, on stderr."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_kernel_level(op, self.name)
        for program in [p for p in op.ops if isinstance(p, ProgramOp)]:
            block = program.body.block
            before = overlapping_compute(block) if self.report else 0
            raise_collectives(block)
            sink_waits(block)
            hoist_independent(block)
            if self.report:
                collectives = sum(1 for o in block.ops if is_collective(o))
                waits = sum(1 for o in block.ops if is_wait(o))
                print(
                    f"reorder-collectives: @{program.sym_name.data}: {collectives} collectives, "
                    f"{waits} waits; compute ops overlapping communication "
                    f"{before} -> {overlapping_compute(block)}",
                    file=sys.stderr,
                )

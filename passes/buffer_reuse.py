"""``buffer-reuse``: frees, buffer reuse and in-place updates in ``kernel.program``.

Works on each program after ``fuse`` (and ``tile``), from the liveness of its buffers
(:mod:`kiln.dialects.kernel.liveness`):

1. **in place**: a kernel output whose buffer would be freshly allocated is written into
   an input buffer that dies at that launch instead, when the types match (dynamic
   shapes: when the sizes provably match, see :func:`same_sizes`) and the
   kernel's access pattern allows it (:mod:`kiln.passes.scheduling.inplace`); an extern
   result of another shape is first reshaped inside the extern to match
   (:mod:`kiln.passes.scheduling.reshape_in_place`);
2. **frees**: every buffer the program owns is freed right after its last use (returned
   buffers are not);
3. **reuse**: an allocation takes the memory of a freed buffer of the same dtype, memory
   space and size (``kernel.reuse``) when holding that memory until then never raises the
   peak, of the owned buffers and of those plus the arguments each held until its last
   use (a backward graph's saved activations, released as it runs).

Existing frees are recomputed, so the pass is idempotent. With ``report=true`` it prints
the peak memory as the program was written, with frees only, and after reuse and
in-place updates, plus allocator calls, on stderr:

```console
buffer-reuse: @forward: peak 2560 B as written, 1920 B with frees, 1280 B after reuse and in-place; allocations 5 -> 2, 2 reused, 1 in place
```
"""

from __future__ import annotations

import itertools
import sys
from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from kiln.dialects.aten import AtenOp
from kiln.dialects.aten.result_layout import SMALLER_THAN_META
from kiln.dialects.kernel.kernel_ops import KernelOp
from kiln.dialects.kernel.lifetimes import is_buffer
from kiln.dialects.kernel.liveness import (
    MemoryProfile,
    argument_timeline,
    buffer_bytes,
    liveness,
    memory_timeline,
)
from kiln.dialects.kernel.program_ops import (
    AllocOp,
    ExternOp,
    FreeOp,
    LaunchOp,
    ProgramOp,
    ReuseOp,
    byte_size,
)
from kiln.passes.scheduling.buffer_sizes import BufferSizes
from kiln.passes.scheduling.inplace import can_update_in_place
from kiln.passes.scheduling.levels import require_kernel_level
from kiln.passes.scheduling.reshape_in_place import reshape_for_in_place


@dataclass(frozen=True)
class ReuseStats:
    """Memory of one program before and after the pass."""

    as_written: MemoryProfile
    with_frees: MemoryProfile
    """Frees at last use, without reuse or in-place updates."""
    after: MemoryProfile
    in_place: int

    def line(self, name: str) -> str:
        dynamic = (
            f" ({self.after.dynamic_buffers} dynamic-shape buffers not counted)"
            if self.after.dynamic_buffers
            else ""
        )
        return (
            f"buffer-reuse: @{name}: peak {self.as_written.peak} B as written, "
            f"{self.with_frees.peak} B with frees, {self.after.peak} B after reuse and in-place"
            f"{dynamic}; allocations {self.as_written.allocations} -> {self.after.allocations}, "
            f"{self.after.reuses} reused, {self.in_place} in place"
        )


def strip_frees(program: ProgramOp) -> None:
    block = program.body.block
    for op in [op for op in block.ops if isinstance(op, FreeOp)]:
        block.erase_op(op)


def _size_trusted(value: SSAValue) -> bool:
    """``value``'s memory is as large as its type says: not a result of an extern calling
    one of :data:`~kiln.dialects.aten.result_layout.SMALLER_THAN_META` (a segfault in the
    OpInfo gradient sweep: a kernel wrote past the end of bfloat16 ``embedding_bag``'s
    empty ``offset2bag``)."""
    owner = value.owner
    return not isinstance(owner, ExternOp) or not any(
        isinstance(op, AtenOp) and op.overload_name in SMALLER_THAN_META for op in owner.body.walk()
    )


def update_in_place(program: ProgramOp, kernels: dict[str, KernelOp]) -> int:
    """Write outputs into dying inputs where legal; returns how many."""
    info = liveness(program)
    sizes = BufferSizes()
    block = program.body.block
    dead_allocs: list[Operation] = []
    count = 0
    for launch in [op for op in block.ops if isinstance(op, LaunchOp)]:
        kernel = kernels.get(launch.kernel.string_value())
        if kernel is None:
            continue
        here = info.position[launch]
        args = list(launch.args)
        taken: set[SSAValue] = set()
        for j, out in enumerate(list(launch.outs)):
            alloc = out.owner
            if not isinstance(alloc, AllocOp) or any(
                info.position[use.operation] < here for use in out.uses
            ):
                continue
            for i, arg in enumerate(args):
                if (
                    not is_buffer(arg)
                    or arg in taken
                    or args.count(arg) > 1
                    or arg in launch.outs
                    or arg.type != out.type
                    or not _size_trusted(arg)
                    or not same_sizes(arg, out, sizes)
                    or not info.dies_at(arg, here)
                    or not can_update_in_place(kernel, i, j)
                ):
                    continue
                last = info.last_use.get(out, here)
                out.replace_all_uses_with(arg)
                info.last_use[arg] = last
                if out in info.returned:
                    info.returned.add(arg)
                dead_allocs.append(alloc)
                taken.add(arg)
                count += 1
                break
    for alloc in dead_allocs:
        block.erase_op(alloc)
    return count


def same_sizes(a: SSAValue, b: SSAValue, sizes: BufferSizes | None = None) -> bool:
    """Whether two buffers of one type provably have the same sizes at run time. Static
    types: always. Dynamic ones (``memref<?x?xf32>`` twice may be 8x6 and 4x12): only
    where the program spells both buffers' sizes (allocations' operands, an extern
    result's through its body, see :class:`BufferSizes`) and they are equal; anything
    else (an argument, an ATen result of no known rule) has sizes it does not spell."""
    ty = a.type
    if isinstance(ty, MemRefType) and ty.has_static_shape():
        return True
    return (sizes or BufferSizes()).same_sizes(a, b)


def insert_frees(program: ProgramOp) -> None:
    info = liveness(program)
    block = program.body.block
    for value, last in sorted(info.last_use.items(), key=lambda item: item[1], reverse=True):
        if not info.owned(value) or value in info.returned or value in info.ended:
            continue
        anchor = info.ops[last]
        free = FreeOp(value)
        if anchor.next_op is None:
            block.insert_op_before(free, anchor)
        else:
            block.insert_op_after(free, anchor)


def _reuse_key(ty: MemRefType) -> tuple[object, ...]:
    """Buffers with the same key can share memory (see ``can_reuse``)."""
    size = byte_size(ty)
    return (ty.element_type, ty.memory_space, size) if size is not None else (ty,)


def reuse_freed(program: ProgramOp) -> None:
    """Turn a free and a later allocation of the same size into a reuse, where holding
    the memory in between keeps the peak. The latest compatible free wins."""
    profile = memory_timeline(program)
    live = list(profile.live)
    peak = profile.peak
    # The same with the arguments each held until its last use (AOTAutograd hands the
    # list over): a backward graph's saved activations shrink as it runs, so a buffer
    # held for a late reuse can raise the real peak although the owned buffers' peak
    # (all gradients, at the end) stays. Which arguments the caller keeps (parameters)
    # is unknown here, so the hold must fit under what is live at some point after the
    # free, not under the call's peak (its start, with every argument held).
    with_args = [a + b for a, b in zip(live, argument_timeline(program), strict=True)]
    # Computed once: accepted holds only raise with_args, so these stay lower bounds.
    after = list(itertools.accumulate(reversed(with_args), max))[::-1]
    ops = list(program.body.block.ops)
    block = program.body.block
    sizes = BufferSizes()
    frees: dict[tuple[object, ...], list[tuple[int, FreeOp]]] = {}
    for i, op in enumerate(ops):
        if isinstance(op, FreeOp) and _size_trusted(op.buffer):
            assert isinstance(op.buffer.type, MemRefType)
            frees.setdefault(_reuse_key(op.buffer.type), []).append((i, op))
    used: set[int] = set()
    for p, op in enumerate(ops):
        if not isinstance(op, AllocOp):
            continue
        ty = op.result.type
        assert isinstance(ty, MemRefType)
        best: tuple[int, FreeOp] | None = None
        hold = hold_with_args = 0  # the most live bytes between a free and this allocation
        end = p
        for f_pos, free in reversed(frees.get(_reuse_key(ty), [])):
            if f_pos >= p or f_pos in used:
                continue
            hold = max(hold, max(live[f_pos:end], default=0))
            hold_with_args = max(hold_with_args, max(with_args[f_pos:end], default=0))
            end = f_pos
            old = free.buffer
            size = buffer_bytes(old)
            if size is None:
                # Dynamic shape: the same type and provably the same sizes (the reuse
                # takes the old buffer's shape). Their bytes are unknown here, so the
                # peak is not weighed: the latest such free wins, as in Inductor's
                # reuse of symbolic-size buffers.
                if old.type != ty or not sizes.same_sizes(old, op.result):
                    continue
            elif hold + size > peak or hold_with_args + size > after[f_pos]:
                break  # earlier frees would hold the memory even longer
            best = (f_pos, free)
            break
        if best is None:
            continue
        f_pos, free = best
        used.add(f_pos)
        size = buffer_bytes(free.buffer) or 0
        for k in range(f_pos, p):
            live[k] += size
            with_args[k] += size
        reuse = ReuseOp(free.buffer, ty)
        reuse.result.name_hint = op.result.name_hint
        block.insert_op_before(reuse, op)
        op.result.replace_all_uses_with(reuse.result)
        block.erase_op(op)
        block.erase_op(free)


def plan_program(
    program: ProgramOp, kernels: dict[str, KernelOp], *, in_place: bool = True, reuse: bool = True
) -> ReuseStats:
    as_written = memory_timeline(program)
    frees_only = program.clone()
    strip_frees(frees_only)
    insert_frees(frees_only)
    with_frees = memory_timeline(frees_only)
    strip_frees(program)
    if in_place:
        reshape_for_in_place(program, kernels)
    count = update_in_place(program, kernels) if in_place else 0
    insert_frees(program)
    if reuse:
        reuse_freed(program)
    return ReuseStats(as_written, with_frees, memory_timeline(program), count)


@dataclass(frozen=True)
class BufferReusePass(ModulePass):
    """Free buffers after their last use, reuse freed memory, update in place."""

    name: ClassVar[str] = "buffer-reuse"  # pyright: ignore[reportIncompatibleVariableOverride]

    in_place: bool = True
    """Write kernel outputs into inputs that die at that kernel, where legal."""
    reuse: bool = True
    """Give freed buffers' memory to later allocations of the same size."""
    report: bool = False
    """Print peak memory before and after, on stderr."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_kernel_level(op, self.name)
        kernels = {k.sym_name.data: k for k in op.ops if isinstance(k, KernelOp)}
        for program in [p for p in op.ops if isinstance(p, ProgramOp)]:
            stats = plan_program(program, kernels, in_place=self.in_place, reuse=self.reuse)
            if self.report:
                print(stats.line(program.sym_name.data), file=sys.stderr)

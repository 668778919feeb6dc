"""Liveness and memory accounting over ``kernel.program``.

Positions are indices of the program's top-level ops. A buffer the program owns lives
from the op that creates it (``kernel.alloc``, ``kernel.reuse``, ``kernel.extern``) to
its last use; returned buffers live to the end. :func:`memory_timeline` replays the
program's allocations, frees and reuses as written and gives the bytes of live owned
buffers after each op, and so the peak; buffers with dynamic shapes are counted
separately (their size is unknown at compile time).

An analysis over kernel IR, so it lives with the dialect: ``buffer-reuse`` plans with it
and both backends' wrappers release arguments with :func:`argument_releases`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.dialects.builtin import MemRefType
from xdsl.ir import BlockArgument, Operation, SSAValue

from kiln.dialects.kernel.lifetimes import buffer_effects, is_buffer
from kiln.dialects.kernel.program_ops import FreeOp, ProgramOp, ReturnOp, ReuseOp, byte_size


@dataclass
class Liveness:
    """Where each buffer of a program is created and last used."""

    ops: list[Operation]
    position: dict[Operation, int]
    created: dict[SSAValue, int] = field(default_factory=dict[SSAValue, int])
    last_use: dict[SSAValue, int] = field(default_factory=dict[SSAValue, int])
    returned: set[SSAValue] = field(default_factory=set[SSAValue])
    ended: set[SSAValue] = field(default_factory=set[SSAValue])
    """Buffers whose life a ``kernel.free`` or ``kernel.reuse`` ends explicitly."""

    def owned(self, value: SSAValue) -> bool:
        return value in self.created and not isinstance(value, BlockArgument)

    def dies_at(self, value: SSAValue, index: int) -> bool:
        """Whether ``value`` is owned, not returned, and ``index`` is its last use."""
        return (
            self.owned(value) and value not in self.returned and self.last_use.get(value) == index
        )


def liveness(program: ProgramOp) -> Liveness:
    ops = list(program.body.block.ops)
    info = Liveness(ops, {op: i for i, op in enumerate(ops)})
    for i, op in enumerate(ops):
        effects = buffer_effects(op)
        for value in [*effects.reads, *effects.touches, *effects.writes, *effects.ends]:
            info.last_use[value] = i
        info.ended.update(effects.ends)
        for value in effects.begins:
            info.created[value] = i
            info.last_use.setdefault(value, i)
        if isinstance(op, ReturnOp):
            info.returned.update(v for v in op.values if is_buffer(v))
    return info


@dataclass(frozen=True)
class MemoryProfile:
    """Bytes of live owned buffers after each op, as the program is written."""

    live: tuple[int, ...]
    allocations: int
    """Buffers obtained from the allocator (allocs and extern results)."""
    reuses: int
    dynamic_buffers: int
    """Owned buffers of dynamic shape, not counted in the bytes."""

    @property
    def peak(self) -> int:
        return max(self.live, default=0)


def buffer_bytes(value: SSAValue) -> int | None:
    ty = value.type
    assert isinstance(ty, MemRefType)
    return byte_size(ty)


def memory_timeline(program: ProgramOp) -> MemoryProfile:
    live = 0
    timeline: list[int] = []
    allocations = reuses = dynamic = 0
    for op in program.body.block.ops:
        effects = buffer_effects(op)
        if isinstance(op, ReuseOp):
            reuses += 1
        else:
            for value in effects.begins:
                size = buffer_bytes(value)
                allocations += 1
                if size is None:
                    dynamic += 1
                else:
                    live += size
            if isinstance(op, FreeOp):
                live -= buffer_bytes(op.buffer) or 0
        timeline.append(live)
    return MemoryProfile(tuple(timeline), allocations, reuses, dynamic)


def argument_timeline(program: ProgramOp) -> tuple[int, ...]:
    """Bytes of buffer arguments still held after each op, when the wrapper owns its
    argument list (the boxed convention: each is released after its last use, returned
    ones at the end). Arguments of dynamic shape count 0."""
    info = liveness(program)
    count = len(info.ops)
    delta = [0] * (count + 1)
    for arg in program.body.block.args:
        if not is_buffer(arg):
            continue
        size = buffer_bytes(arg) or 0
        last = count if arg in info.returned else info.last_use.get(arg)
        if last is None or not size:
            continue
        delta[0] += size
        delta[last] -= size  # released after its last op
    held: list[int] = []
    running = 0
    for k in range(count):
        running += delta[k]
        held.append(running)
    return tuple(held)


def argument_releases(program: ProgramOp) -> dict[Operation | None, list[SSAValue]]:
    """Per op, the buffer arguments whose last use it is (returned ones excluded), and
    under ``None`` those nothing uses: where a wrapper that owns its argument list can
    drop its references to them."""
    info = liveness(program)
    released: dict[Operation | None, list[SSAValue]] = {}
    for arg in program.body.block.args:
        if is_buffer(arg) and arg not in info.returned:
            last = info.last_use.get(arg)
            released.setdefault(None if last is None else info.ops[last], []).append(arg)
    return released


def argument_first_uses(program: ProgramOp) -> dict[Operation, list[SSAValue]]:
    """Per op, the buffer arguments it is the first to use: where a wrapper converts an
    argument (a contiguous copy of a strided one, a device move) just in time, instead of
    holding every converted copy from the call's start."""
    block = program.body.block
    pending = {arg for arg in block.args if is_buffer(arg)}
    first: dict[Operation, list[SSAValue]] = {}
    for op in block.ops:
        if not pending:
            break
        for value in op.operands:
            if value in pending:
                pending.discard(value)
                first.setdefault(op, []).append(value)
    return first


__all__ = [
    "Liveness",
    "MemoryProfile",
    "argument_first_uses",
    "argument_releases",
    "argument_timeline",
    "buffer_bytes",
    "liveness",
    "memory_timeline",
]

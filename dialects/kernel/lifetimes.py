"""Buffer lifetimes in ``kernel.program``: what each op does to the buffers it touches.

:func:`buffer_effects` classifies an op's memref operands and results (read, written,
ended, begun); :func:`check_lifetimes` is the program verifier's walk over them: a buffer
is written before it is read, only owned buffers are freed, none twice, and none is
used after its ``kernel.free`` or ``kernel.reuse``. Liveness analysis (``buffer-reuse``)
uses the same effects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum, auto

from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.utils.exceptions import VerifyException

from kiln.dialects.kernel.program_ops import (
    AllocOp,
    ExternOp,
    FreeOp,
    LaunchOp,
    ReturnOp,
    ReuseOp,
)


@dataclass
class BufferEffects:
    """What one program op does to buffers."""

    reads: list[SSAValue] = field(default_factory=list[SSAValue])
    """Buffers whose contents the op reads."""
    touches: list[SSAValue] = field(default_factory=list[SSAValue])
    """Buffers the op needs alive without reading their contents (``memref.dim``)."""
    writes: list[SSAValue] = field(default_factory=list[SSAValue])
    """Existing buffers the op writes (``kernel.launch``'s outs)."""
    begins: list[SSAValue] = field(default_factory=list[SSAValue])
    """Buffers the op creates: allocated (unwritten) or, for externs, already written."""
    ends: list[SSAValue] = field(default_factory=list[SSAValue])
    """Buffers whose life the op ends (``kernel.free``, ``kernel.reuse``)."""
    begins_written: bool = False


def is_buffer(value: SSAValue) -> bool:
    return isinstance(value.type, MemRefType)


def buffer_effects(op: Operation) -> BufferEffects:
    if isinstance(op, AllocOp):
        return BufferEffects(begins=[op.result])
    if isinstance(op, ReuseOp):
        return BufferEffects(begins=[op.result], ends=[op.source])
    if isinstance(op, FreeOp):
        return BufferEffects(ends=[op.buffer])
    if isinstance(op, LaunchOp):
        return BufferEffects(reads=[a for a in op.args if is_buffer(a)], writes=list(op.outs))
    if isinstance(op, ExternOp):
        return BufferEffects(
            reads=list(op.inputs),
            begins=[r for r in op.outputs if is_buffer(r)],
            begins_written=True,
        )
    if isinstance(op, ReturnOp):
        return BufferEffects(reads=[v for v in op.values if is_buffer(v)])
    return BufferEffects(
        touches=[v for v in op.operands if is_buffer(v)],
        begins=[r for r in op.results if is_buffer(r)],
        begins_written=True,
    )


def describe(value: SSAValue) -> str:
    """A buffer as a diagnostic names it."""
    if value.name_hint:
        return f"%{value.name_hint}"
    if isinstance(value, BlockArgument):
        return f"argument #{value.index}"
    owner = value.owner
    assert isinstance(owner, Operation)
    return f"the buffer from {owner.name}"


class _State(Enum):
    ARGUMENT = auto()
    ALLOCATED = auto()
    WRITTEN = auto()
    FREED = auto()
    REUSED = auto()


def check_lifetimes(block: Block) -> None:
    """Verify the buffer rules over the body of a ``kernel.program``."""
    state: dict[SSAValue, _State] = {a: _State.ARGUMENT for a in block.args if is_buffer(a)}

    def require_alive(op: Operation, value: SSAValue) -> _State:
        current = state.get(value)
        if current is _State.FREED:
            raise VerifyException(f"{op.name} uses {describe(value)} after its kernel.free")
        if current is _State.REUSED:
            raise VerifyException(
                f"{op.name} uses {describe(value)} after kernel.reuse gave its memory away"
            )
        if current is None:
            raise VerifyException(
                f"{op.name} uses {describe(value)}, which the program does not define"
            )
        return current

    for op in block.ops:
        effects = buffer_effects(op)
        for value in effects.reads:
            if require_alive(op, value) is _State.ALLOCATED:
                raise VerifyException(
                    f"{op.name} reads {describe(value)} before anything writes it"
                )
        for value in effects.touches:
            require_alive(op, value)
        for value in effects.writes:
            if require_alive(op, value) is _State.ARGUMENT:
                raise VerifyException(
                    f"{op.name} writes program argument {describe(value)}; arguments are read-only"
                )
        for value in effects.ends:
            if state.get(value) is _State.FREED and isinstance(op, FreeOp):
                raise VerifyException(f"{op.name}: {describe(value)} is freed twice")
            current = require_alive(op, value)
            if current is _State.ARGUMENT:
                raise VerifyException(
                    f"{op.name}: {describe(value)} is a program argument; only buffers the "
                    "program allocated can be freed or reused"
                )
            state[value] = _State.REUSED if isinstance(op, ReuseOp) else _State.FREED
        for value in effects.writes:
            state[value] = _State.WRITTEN
        for value in effects.begins:
            state[value] = _State.WRITTEN if effects.begins_written else _State.ALLOCATED


__all__ = ["BufferEffects", "buffer_effects", "check_lifetimes", "describe", "is_buffer"]

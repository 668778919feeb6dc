"""``elide-extern-copies``: fold an in-order copy of an ATen result into the extern call.

On kernel IR (after ``fuse``): a ``kernel.launch`` of a kernel that only copies an
extern's result, element by element in order, into a buffer of another shape (a reshape
of a matmul's output) is removed, and the extern yields ATen's result reshaped instead
(:mod:`kiln.passes.scheduling.copy_elision`)::

    %mm = kernel.extern (%a, %w) : (...) -> memref<128x1024xf32> { ... aten.mm ... }
    %view = kernel.alloc : memref<2x64x1024xf32>
    kernel.launch @kernel13(%mm) outs(%view) : (memref<128x1024xf32>) -> (memref<2x64x1024xf32>)

becomes one ``kernel.extern`` returning ``memref<2x64x1024xf32>`` (an ``aten.reshape`` in
its body), and ``@kernel13``, launched no more, is erased.

``fuse`` runs it on every program it builds; it is registered on its own so that it can
be run and tested alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block
from xdsl.passes import ModulePass

from kiln.dialects.kernel.kernel_ops import KernelOp
from kiln.dialects.kernel.program_ops import LaunchOp, ProgramOp
from kiln.passes.scheduling.copy_elision import elide_extern_copies
from kiln.passes.scheduling.levels import require_kernel_level


def _launched(program: ProgramOp) -> set[str]:
    return {op.kernel.string_value() for op in program.walk() if isinstance(op, LaunchOp)}


def elide_in_program(block: Block, program: ProgramOp) -> int:
    """Elide the copies of ``program`` (in the module body ``block``) and erase the kernels
    it no longer launches; returns how many copies went."""
    before = _launched(program)
    folded = elide_extern_copies(program)
    if folded:
        gone = before - _launched(program)
        for kernel in [k for k in block.ops if isinstance(k, KernelOp)]:
            if kernel.sym_name.data in gone:
                block.erase_op(kernel)
    return folded


@dataclass(frozen=True)
class ElideExternCopiesPass(ModulePass):
    """Fold in-order copies of extern results into the externs (module docstring)."""

    name: ClassVar[str] = "elide-extern-copies"  # pyright: ignore[reportIncompatibleVariableOverride]

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_kernel_level(op, self.name)
        block = op.body.block
        for program in [p for p in block.ops if isinstance(p, ProgramOp)]:
            elide_in_program(block, program)


__all__ = ["ElideExternCopiesPass", "elide_in_program"]

"""``cpp-hoist-invariants``: move loop-invariant work out of vectorized C++ loops.

On cpp IR (``lower-to-cpp`` output): in every ``cpp.for simd`` / ``parallel_simd`` loop,
pure scalar ops, plain loads of buffers the loop does not write, and bounds checks whose
operands are all defined outside the loop move before it
(:mod:`kiln.passes.kernel_to_cpp.invariants` says what is safe to move and why)::

    cpp.for simd (%x1) = (%c0) to (%c64) {
      %id = cpp.load %in_ptr0["i0"](%x0) : memref<9xi64>
      ...

becomes the same loop with the ``%id`` load before it (read once per row, so the row it
selects is a contiguous vector read).

``lower-to-cpp`` runs it on every function it lowers; it is registered on its own so
that it can be run and tested alone. Running it again changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from kiln.dialects.cpp.func_ops import FuncOp
from kiln.passes.kernel_to_cpp.invariants import hoist_invariants


@dataclass(frozen=True)
class CppHoistInvariantsPass(ModulePass):
    """Hoist loop-invariant work out of the vectorized loops of every ``cpp.func``."""

    name: ClassVar[str] = "cpp-hoist-invariants"  # pyright: ignore[reportIncompatibleVariableOverride]

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for func in [f for f in op.ops if isinstance(f, FuncOp)]:
            hoist_invariants(func)


__all__ = ["CppHoistInvariantsPass"]

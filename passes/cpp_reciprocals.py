"""``cpp-reciprocals``: divide by a loop invariant as multiplying by its reciprocal.

On cpp IR (``lower-to-cpp`` output): an ``f32``/``f64`` ``arith.divf`` inside a vectorized
loop whose divisor is computed outside it (a reduction's result, softmax's row sum)
becomes a multiplication by ``1 / divisor``, in a version of the loop nest that runs only
when the reciprocal is a normal number; the exact division runs otherwise
(:mod:`kiln.passes.kernel_to_cpp.reciprocals` has the error bound and the versioning)::

    cpp.for simd (%x1) = ... { ... %q = arith.divf %e, %sum : f32 ... }

becomes ``%reciprocal = arith.divf %one, %sum``, a guard, and two one-trip loops: one
with ``arith.mulf %e, %reciprocal``, one with the original division.

``lower-to-cpp`` runs it on every function it lowers (after ``cpp-hoist-invariants``); it
is registered on its own so that it can be run and tested alone. Running it again changes
nothing (a divisor that already has its guarded reciprocal is left alone).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from kiln.dialects.cpp.func_ops import FuncOp
from kiln.passes.kernel_to_cpp.reciprocals import use_reciprocals


@dataclass(frozen=True)
class CppReciprocalsPass(ModulePass):
    """Multiply by reciprocals of loop-invariant divisors in every ``cpp.func``."""

    name: ClassVar[str] = "cpp-reciprocals"  # pyright: ignore[reportIncompatibleVariableOverride]

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for func in [f for f in op.ops if isinstance(f, FuncOp)]:
            use_reciprocals(func)


__all__ = ["CppReciprocalsPass"]

"""``cpp-uniform-masks``: version vectorized loops whose loads are masked by conditions
that hold for the whole loop (a padded window over channels-last data).

On cpp IR (``lower-to-cpp`` output): a ``cpp.for simd`` whose ``cpp.load``\\ s are masked
by ``i1`` values computed outside it becomes two one-trip guards, one running a copy with
plain loads when every mask holds, one running the original otherwise
(:mod:`kiln.passes.kernel_to_cpp.uniform_masks` has the figures)::

    cpp.for simd (%x3) = ... { %a = cpp.load %in[...] if %in_row else -inf ... }

``lower-to-cpp`` runs it on every function it lowers (after ``cpp-reciprocals``); it is
registered on its own so that it can be run and tested alone. Running it again changes
nothing (the masked original is marked ``kiln.masks_versioned``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from kiln.dialects.cpp.func_ops import FuncOp
from kiln.passes.kernel_to_cpp.uniform_masks import version_uniform_masks


@dataclass(frozen=True)
class CppUniformMasksPass(ModulePass):
    """Version masked vectorized loops on their loop-invariant masks in every ``cpp.func``."""

    name: ClassVar[str] = "cpp-uniform-masks"  # pyright: ignore[reportIncompatibleVariableOverride]

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for func in [f for f in op.ops if isinstance(f, FuncOp)]:
            version_uniform_masks(func)


__all__ = ["CppUniformMasksPass"]

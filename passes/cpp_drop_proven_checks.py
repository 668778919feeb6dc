"""``cpp-drop-proven-checks``: erase the index checks that the loop bounds prove.

On cpp IR (``lower-to-cpp`` output): a ``cpp.check_index`` whose index interval
arithmetic bounds inside ``[0, bound)``, and the ``checked`` flag of a load whose address
it bounds inside the buffer (:mod:`kiln.passes.kernel_to_cpp.bounds` says how)::

    cpp.for parallel (%x0) = (%c0) to (%c56) {
      %r = arith.remsi %x0_plus_3, %c56 : i64
      %i = arith.index_cast %r : i64 to index
      cpp.check_index %i, %c56
      %v = cpp.load %in_ptr0["5376*i0 + i1"](%i, %x1) checked : memref<1x56x56x96xf32>

keeps the load, unchecked, and no check: ``(x0 + 3) % 56`` lies in ``[0, 56)``. Loops
left with nothing that may fail are vectorized (``torch.roll``'s gather).

``lower-to-cpp`` runs it on every function it lowers (before ``cpp-hoist-invariants``);
it is registered on its own so that it can be run and tested alone. Running it again
changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from kiln.dialects.cpp.func_ops import FuncOp
from kiln.passes.kernel_to_cpp.bounds import drop_proven_checks


@dataclass(frozen=True)
class CppDropProvenChecksPass(ModulePass):
    """Erase the index checks of every ``cpp.func`` that its loop bounds prove."""

    name: ClassVar[str] = "cpp-drop-proven-checks"  # pyright: ignore[reportIncompatibleVariableOverride]

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for func in [f for f in op.ops if isinstance(f, FuncOp)]:
            drop_proven_checks(func)


__all__ = ["CppDropProvenChecksPass"]

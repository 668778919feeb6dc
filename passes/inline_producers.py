"""``inline-producers``: recompute cheap pointwise producers in their consumers.

On loop IR (after ``lower-aten``): a ``loop.pointwise`` node whose buffer only loop nests
read is copied into each reader, at the loaded position, where recomputing it moves
fewer bytes than storing and reloading it (:mod:`kiln.passes.scheduling.inline` weighs
the two and says which bodies are cheap enough)::

    %e = loop.pointwise [8, 16] (%x) { ... math.exp ... loop.yield }
    %s = loop.reduction sum [8] x [16] (%e) { %v = loop.load %e["16*i0 + r0"] ... }

becomes a reduction that loads ``%x`` and takes its ``exp`` itself, and ``%e`` is gone.

``fuse`` runs it first (unless ``fuse{inline=false}`` or ``max-nodes=1``); it is
registered on its own so that it can be run and tested alone. ``max-rounds`` bounds the
rounds (an inlined node can make its consumer cheap enough to inline in turn).

```console
$ kiln-opt m.mlir -p 'lower-aten,inline-producers'
```
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp
from xdsl.passes import ModulePass

from kiln.diagnostics import OpError
from kiln.dialects.aten.function_attrs import runs_on_cpu
from kiln.passes.scheduling.inline import inline_cheap_producers


def inline_producers(func: FuncOp, max_rounds: int = 8, cpu: bool = False) -> int:
    """Inline the cheap producers of one loop-level function; returns how many."""
    return inline_cheap_producers(func, max_rounds, cpu=cpu)


@dataclass(frozen=True)
class InlineProducersPass(ModulePass):
    """Inline cheap pointwise producers into the loop nests that read them."""

    name: ClassVar[str] = "inline-producers"  # pyright: ignore[reportIncompatibleVariableOverride]

    max_rounds: int = 8
    """At most this many rounds over the function."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for func in [f for f in op.ops if isinstance(f, FuncOp)]:
            if not func.body.blocks:
                continue
            for inner in func.body.block.ops:
                if inner.dialect_name() == "aten":
                    raise OpError(
                        inner,
                        f"inline-producers: @{func.sym_name.data} still has aten ops; "
                        "run lower-aten first",
                    )
            inline_producers(func, self.max_rounds, runs_on_cpu(op))


__all__ = ["InlineProducersPass", "inline_producers"]

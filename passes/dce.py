"""``dce``: dead code elimination.

xDSL's liveness-based ``region_dce``, registered under kiln's registry. An op is
removed when none of its results is used and it has no effect beyond its results:
unused ``Pure`` aten ops go, while random ops (which advance the generator), ops that
write an argument, ``aten.generic`` (opaque) and terminators stay.

```mlir
%0 = aten.neg.default(%x) : (tensor<4xf32>) -> tensor<4xf32>     // unused: removed
%1 = aten.rand.default(size = [4]) : () -> tensor<4xf32>         // unused: kept
func.return %x : tensor<4xf32>
```
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.transforms.dead_code_elimination import region_dce


@dataclass(frozen=True)
class DCEPass(ModulePass):
    """Erase unused side-effect-free ops (see the module docstring)."""

    name = "dce"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        region_dce(op.body)

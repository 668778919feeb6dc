"""``cse``: common subexpression elimination.

xDSL's driver (``xdsl.transforms.common_subexpression_elimination``), registered under
kiln's registry. Two ops are merged when they have the same name, operands,
properties, attributes and result types and are free of side effects: aten ops are
``Pure`` unless their schema mutates an argument or draws random numbers
(``nondeterministic_seeded``: ``aten.rand``, ``aten.dropout``, ...), and
``aten.generic`` is opaque, so those are never merged.

```mlir
%0 = aten.neg.default(%x) : (tensor<4xf32>) -> tensor<4xf32>
%1 = aten.neg.default(%x) : (tensor<4xf32>) -> tensor<4xf32>
%2 = aten.add.Tensor(%0, %1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// kiln-opt --cse:
%0 = aten.neg.default(%x) : (tensor<4xf32>) -> tensor<4xf32>
%2 = aten.add.Tensor(%0, %0) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
```
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.transforms.common_subexpression_elimination import cse


@dataclass(frozen=True)
class CSEPass(ModulePass):
    """Merge identical side-effect-free ops (see the module docstring)."""

    name = "cse"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        cse(op)

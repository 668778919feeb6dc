"""``canonicalize``: apply every op's canonicalization patterns and folders, then DCE.

xDSL's greedy driver (``xdsl.transforms.canonicalize``), registered under kiln's
registry. It collects patterns from each op's ``HasCanonicalizationPatternsTrait``:
every generated aten op carries :class:`~kiln.dialects.aten.ops.AtenCanonicalization`,
whose single pattern dispatches on the op name through a dict
(:mod:`kiln.dialects.aten.canonicalization`), so the cost per op is one lookup however
many aten patterns exist. Unused side-effect-free ops are erased along the way.

```mlir
%0 = aten.view.default(%x, size = [8, 4]) : (tensor<4x8xf32>) -> tensor<8x4xf32>
%1 = aten.view.default(%0, size = [32]) : (tensor<8x4xf32>) -> tensor<32xf32>
// kiln-opt --canonicalize:
%1 = aten.view.default(%x, size = [32]) : (tensor<4x8xf32>) -> tensor<32xf32>
```
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import GreedyRewritePatternApplier, PatternRewriteWalker
from xdsl.transforms.canonicalize import CanonicalizationRewritePattern
from xdsl.transforms.dead_code_elimination import region_dce


@dataclass(frozen=True)
class CanonicalizePass(ModulePass):
    """Canonicalize to a fixpoint (see the module docstring)."""

    name = "canonicalize"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        pattern = GreedyRewritePatternApplier(
            [CanonicalizationRewritePattern()], ctx=ctx, folding_enabled=True
        )
        PatternRewriteWalker(pattern, post_walk_func=region_dce).rewrite_module(op)

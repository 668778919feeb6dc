"""A kiln plugin used by the tests: it reaches kiln-opt and xdsl-opt by all three routes.

* ``kiln-opt --load-plugin tests/plugins/kiln_test_plugin.py`` (or the module name
  ``kiln_test_plugin`` with ``tests/plugins`` on ``PYTHONPATH``);
* the ``kiln.plugins`` entry point ``kiln_test = kiln_test_plugin``;
* the ``xdsl.universe`` entry point ``kiln_test = kiln_test_plugin:UNIVERSE``.

Passes:

* ``test-count-ops{op-name=...}`` sets ``kiln_test.op_count`` on the module to the
  number of ops (named ``op-name``, or all of them), so a test can check it ran;
* ``test-raise`` raises from a rewrite pattern at the first ``aten.neg.default``;
* ``test-break-ir`` inserts an ``aten.neg.default`` with an invalid result type at the
  start of each function, so verification after the pass fails.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i32, i64
from xdsl.dialects.func import FuncOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern

from kiln.plugins import plugin_universe
from kiln.registry import Registry


@dataclass(frozen=True)
class CountOpsPass(ModulePass):
    """Record the op count as the module attribute ``kiln_test.op_count``."""

    name = "test-count-ops"

    op_name: str = ""
    """Count only ops with this name (all ops when empty)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        count = sum(
            1 for inner in op.walk() if inner is not op and self.op_name in ("", inner.name)
        )
        op.attributes["kiln_test.op_count"] = IntegerAttr(count, i64)


class _RaiseOnNeg(RewritePattern):
    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        if op.name == "aten.neg.default":
            raise RuntimeError("refusing to rewrite this op")


@dataclass(frozen=True)
class RaisingPass(ModulePass):
    """Raise from a rewrite pattern (to test how kiln-opt reports a failing pass)."""

    name = "test-raise"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(_RaiseOnNeg()).rewrite_module(op)


@dataclass(frozen=True)
class BreakIRPass(ModulePass):
    """Insert an invalid op (to test verification after a pass)."""

    name = "test-break-ir"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        neg = ctx.get_op("aten.neg.default")
        for func in op.walk():
            if isinstance(func, FuncOp) and func.body.blocks and func.args:
                bad = neg.create(operands=[func.args[0]], result_types=[i32])
                func.body.blocks[0].insert_op_before(bad, func.body.blocks[0].first_op)  # pyright: ignore[reportArgumentType]


def register(registry: Registry) -> None:
    """The plugin hook: add this plugin's passes to kiln's registry."""
    for pass_class in (CountOpsPass, RaisingPass, BreakIRPass):
        registry.add_pass_class(pass_class)


UNIVERSE = plugin_universe(register)
"""For the ``xdsl.universe`` entry point (the stock ``xdsl-opt``)."""

"""``unfuse-addmm``: ``addmm`` whose result only feeds pointwise ops becomes ``mm`` + ``add``.

The bias add then fuses into the pointwise kernel that reads the product anyway, and the
matrix multiply runs without a bias: cuBLAS/MKL implement ``addmm`` by first writing
the broadcast bias into the output and then accumulating the product onto it (``beta =
1``), an extra pass over the output, and cuBLAS picks slower tiles for it. Inductor does
the same rewrite on GPUs (``unfuse_bias_add_to_pointwise``); kiln does it on both
backends, measured faster on each (figures: docs/benchmarks/design-notes.md)::

    %0 = aten.addmm.default(%b, %x, %w) : (tensor<8xf32>, tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
    %1 = aten.relu.default(%0) : (tensor<4x8xf32>) -> tensor<4x8xf32>

becomes::

    %mm = aten.mm.default(%x, %w) : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
    %0 = aten.add.Tensor(%mm, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %1 = aten.relu.default(%0) : (tensor<4x8xf32>) -> tensor<4x8xf32>

Only ``alpha = beta = 1`` is rewritten, and only when every use of the result is a
pointwise op (the ``Pointwise`` trait), or a view (``ViewLike``) whose uses are: otherwise the add
would be a kernel of its own. Low-precision results round twice (product, then sum)
instead of once, as under Inductor.

A single-op rewrite: one :class:`UnfuseAddmm` pattern, driven by xDSL's
``PatternRewriteWalker``.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from kiln.dialects.aten import AtenOp
from kiln.dialects.aten.dialect import op_class
from kiln.dialects.aten.encoding import decode_value
from kiln.dialects.aten.traits import Pointwise, ViewLike, has_aten_trait

_METADATA = frozenset({"aten::sym_size.int", "aten::sym_numel.default"})
"""Ops that read only a tensor's sizes, the same for ``mm`` + ``add``: under
``dynamic=True`` the traced graph reads a projection's sequence length with
``sym_size.int`` (DistilBERT's queries and keys kept ``addmm``, 0.02 ms of a 0.75 ms call)."""


def _is_metadata(op: Operation) -> bool:
    return isinstance(op, AtenOp) and op.overload_name in _METADATA


def feeds_only_pointwise(value: SSAValue) -> bool:
    users = [use.operation for use in value.uses if not _is_metadata(use.operation)]
    if not users:
        return False
    for user in users:
        if not isinstance(user, AtenOp):
            return False
        if has_aten_trait(user, Pointwise):
            continue
        if not has_aten_trait(user, ViewLike) or not all(
            feeds_only_pointwise(r) for r in user.results
        ):
            return False
    return True


def is_one(op: AtenOp, name: str) -> bool:
    """Whether scalar argument ``name`` of ``op`` is 1 (absent: its default, 1)."""
    attr = op.arg_attr(name)
    if attr is None:
        return True
    spec = next(a for a in op.op_schema().arguments if a.name == name)
    return decode_value(spec, attr, ()) == 1


def _is_candidate(op: Operation) -> bool:
    return (
        isinstance(op, AtenOp)
        and op.overload_name == "aten::addmm.default"
        and not op.sym_operands()
        and is_one(op, "alpha")
        and is_one(op, "beta")
        and feeds_only_pointwise(op.results[0])
    )


class UnfuseAddmm(RewritePattern):
    """``addmm(b, x, w)`` -> ``add(mm(x, w), b)`` where the add fuses."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: AtenOp, rewriter: PatternRewriter) -> None:
        if not _is_candidate(op):
            return
        mm_class, add_class = op_class("mm.default"), op_class("add.Tensor")
        assert mm_class is not None
        assert add_class is not None
        bias, mat1, mat2 = op.operands[:3]
        result = op.results[0]
        mm = mm_class.from_args({"self": mat1, "mat2": mat2}, [result.type])
        mm.results[0].name_hint = "mm"
        add = add_class.from_args({"self": mm.results[0], "other": bias}, [result.type])
        for new in (mm, add):
            new.location = op.location
        name = result.name_hint
        rewriter.replace(op, [mm, add])
        add.results[0].name_hint = name


@dataclass(frozen=True)
class UnfuseAddmmPass(ModulePass):
    """Split ``addmm`` into ``mm`` + ``add`` where the add fuses (see the module docstring)."""

    name = "unfuse-addmm"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        # One walk: the ops it creates (mm, add) are never addmm.
        PatternRewriteWalker(UnfuseAddmm(), apply_recursively=False).rewrite_module(op)


__all__ = ["UnfuseAddmm", "UnfuseAddmmPass", "feeds_only_pointwise", "is_one"]

"""``scale-after-bmm``: a batched product of scaled operands becomes the scaled product.

PyTorch's decomposition of scaled dot-product attention (what short CPU sequences run,
see ``decompose``) scales the queries and the keys by the square root of the softmax
scale each, before their product. Each scaled operand is a tensor of its own, so kiln
wrote a copy kernel per operand (the queries and the transposed keys into head-major
order, scaled): two launches per attention that do nothing but scale and move data,
although ATen's ``bmm`` reads the unscaled projections as strided views as they lie.
Scaling the product instead (``(a*s)(b*t) = (ab)*(st)``) leaves the operands as views
and moves the scale into the softmax kernel, which reads the product anyway::

    %qs = aten.mul.Scalar(%q, other = 0.42) : (tensor<1x4x32x32xf32>) -> tensor<1x4x32x32xf32>
    %ks = aten.mul.Scalar(%kt, other = 0.42) : (tensor<1x4x32x32xf32>) -> tensor<1x4x32x32xf32>
    %a = aten.view.default(%qs, size = [4, 32, 32]) : (tensor<1x4x32x32xf32>) -> tensor<4x32x32xf32>
    %b = aten.view.default(%ks, size = [4, 32, 32]) : (tensor<1x4x32x32xf32>) -> tensor<4x32x32xf32>
    %p = aten.bmm.default(%a, %b) : (tensor<4x32x32xf32>, tensor<4x32x32xf32>) -> tensor<4x32x32xf32>

becomes::

    %a = aten.view.default(%q, size = [4, 32, 32]) : (tensor<1x4x32x32xf32>) -> tensor<4x32x32xf32>
    %b = aten.view.default(%kt, size = [4, 32, 32]) : (tensor<1x4x32x32xf32>) -> tensor<4x32x32xf32>
    %p0 = aten.bmm.default(%a, %b) : (tensor<4x32x32xf32>, tensor<4x32x32xf32>) -> tensor<4x32x32xf32>
    %p = aten.mul.Scalar(%p0, other = 0.1767766952966369) : (tensor<4x32x32xf32>) -> tensor<4x32x32xf32>

Rewritten only where both operands of a ``bmm`` are ``mul.Scalar`` by a float constant
(through views: ``expand``, ``view``, ``_unsafe_view``, ``reshape``) that nothing else
reads, of a tensor no pointwise op computes (a projection, an argument: the copy is the
scaling's own kernel), in float32, float64 or bfloat16. Not in float16: the unscaled product can
overflow its range where the scaled operands' product does not (PyTorch scales before
the product for that reason). The result differs from the decomposition's by rounding
only (one scaling of the product against two of the operands), as the fused attention
kernels it stands for differ from it.

It runs before ``unfuse-addmm``: a projection whose only reader is now the product keeps
its bias inside ``addmm`` (its add would otherwise be a kernel of its own, in place of
the copy removed). BART small: 41 kernel launches a call -> 29. Views with symbolic sizes
(``dynamic=True``) are passed through like static ones: T5 small compiled dynamic kept
both copies per attention (12 launches a call more than its static compile).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import BFloat16Type, Float32Type, Float64Type, ModuleOp, TensorType
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint

from kiln.dialects.aten import AtenOp
from kiln.dialects.aten.dialect import op_class
from kiln.dialects.aten.traits import Pointwise, ViewLike, has_aten_trait

_VIEWS = frozenset(
    {
        "aten::expand.default",
        "aten::view.default",
        "aten::_unsafe_view.default",
        "aten::reshape.default",
    }
)
"""Views an operand may pass through between its scaling and the product."""

_RANGE_SAFE = (Float32Type, Float64Type, BFloat16Type)
"""Element types whose range the unscaled product cannot leave where the scaled one stays."""


def _single_use(value: SSAValue) -> bool:
    return value.has_one_use()


def _scaling(operand: SSAValue) -> tuple[AtenOp, float] | None:
    """The ``mul.Scalar`` by a float constant that ``operand`` views (through single-use
    views), read by nothing else, and its factor."""
    value = operand
    while True:
        op = value.owner
        if not isinstance(op, AtenOp):
            return None
        if op.overload_name in _VIEWS and _single_use(value):
            # A view's symbolic sizes (dynamic=True) are operands it keeps as they are.
            value = op.operands[0]
            continue
        if op.overload_name != "aten::mul.Scalar" or op.sym_operands() or not _single_use(value):
            return None
        factor = op.static_arg("other")
        if isinstance(factor, bool) or not isinstance(factor, int | float):
            return None
        source = op.operands[0]
        if source.type != value.type or _computed_pointwise(source):
            return None
        return op, factor


def _computed_pointwise(value: SSAValue) -> bool:
    """Whether ``value`` is (a view of) a pointwise op's result: its kernel exists anyway
    and the scaling costs nothing there (LLaMA's rotary embedding), while without the
    scaling it may no longer fuse with its neighbour (Mistral's queries and keys, of
    different head counts, took two kernels instead of one)."""
    while isinstance(value.owner, AtenOp) and has_aten_trait(value.owner, ViewLike):
        value = value.owner.operands[0]
    owner = value.owner
    return isinstance(owner, AtenOp) and has_aten_trait(owner, Pointwise)


def _range_safe(value: SSAValue) -> bool:
    ty = value.type
    return isinstance(ty, TensorType) and isinstance(ty.element_type, _RANGE_SAFE)


class ScaleAfterBmm(RewritePattern):
    """``bmm(views(x*s), views(y*t))`` -> ``bmm(views(x), views(y)) * (s*t)``."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: AtenOp, rewriter: PatternRewriter) -> None:
        if op.overload_name != "aten::bmm.default" or op.sym_operands():
            return
        result = op.results[0]
        if not _range_safe(result):
            return
        scalings = [_scaling(operand) for operand in op.operands[:2]]
        if any(s is None for s in scalings):
            return
        factor: float = 1.0
        for scaling in scalings:
            assert scaling is not None
            mul, s = scaling
            factor *= s
            rewriter.replace_all_uses_with(mul.results[0], mul.operands[0])
            rewriter.erase(mul)
        mul_class = op_class("mul.Scalar")
        assert mul_class is not None
        scaled = mul_class.from_args({"self": result, "other": factor}, [result.type])
        scaled.location = op.location
        rewriter.insert(scaled, InsertPoint.after(op))
        name = result.name_hint
        rewriter.replace_uses_with_if(
            result, scaled.results[0], lambda use: use.operation is not scaled
        )
        result.name_hint = f"{name}_unscaled" if name else None
        scaled.results[0].name_hint = name


@dataclass(frozen=True)
class ScaleAfterBmmPass(ModulePass):
    """Scale batched products instead of their operands (see the module docstring)."""

    name = "scale-after-bmm"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(ScaleAfterBmm(), apply_recursively=False).rewrite_module(op)


__all__ = ["ScaleAfterBmm", "ScaleAfterBmmPass"]

"""``output-layout``: return tensors with the strides eager PyTorch gives them.

kiln's buffers are contiguous, but eager returns ``x.t() * 2`` with the transposed
strides of ``x`` (TensorIterator keeps the input's layout), and code after a compiled
region may depend on them (``.view`` succeeds or fails by strides). The importer records
eager's strides of each output (``kiln.output_strides``); for an output whose strides
are a dense permutation of a contiguous layout, this pass returns the permuted tensor
instead (materialised contiguous, usually by the kernel that computes it: the permute
costs nothing) and records in ``kiln.outputs`` that the caller sees it through the
inverse permutation, a view with exactly eager's strides::

    func.func @f(%x: tensor<4x8xf32>) -> tensor<8x4xf32>
        attributes {kiln.outputs = "(0,)", kiln.output_strides = [[1, 8]]} {
      %t = aten.t.default(%x) : (tensor<4x8xf32>) -> tensor<8x4xf32>
      %y = aten.mul.Scalar(%t, other = 2) : (tensor<8x4xf32>) -> tensor<8x4xf32>
      func.return %y : tensor<8x4xf32>
    }

becomes::

    func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32>
        attributes {kiln.outputs = "(permute(0, (1, 0)),)"} {
      ...
      %0 = aten.permute.default(%y, dims = [1, 0]) : (tensor<8x4xf32>) -> tensor<4x8xf32>
      func.return %0 : tensor<4x8xf32>
    }

Outputs that are function arguments, have symbolic sizes or overlapping / non-dense
strides are returned contiguous, as before.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr, TensorType
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import BlockArgument
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from kiln.dialects.aten.dialect import op_class
from kiln.frontends.fx.outputs import (
    OUTPUT_STRIDES_ATTR,
    OUTPUTS_ATTR,
    contiguous_strides,
    output_strides,
)


def stride_order(shape: Sequence[int], strides: Sequence[int]) -> list[int] | None:
    """The dims from outermost to innermost when ``strides`` are a dense permuted layout
    of ``shape`` (None otherwise; the identity when they are contiguous)."""
    if any(d < 0 for d in shape) or len(shape) != len(strides):
        return None
    # Size-1 dims have no meaningful stride: they keep their places among the others.
    big = sorted((k for k in range(len(shape)) if shape[k] > 1), key=lambda k: (-strides[k], k))
    order = _with_unit_dims(big, shape)
    permuted = [shape[k] for k in order]
    want = contiguous_strides(permuted)
    if any(permuted[j] > 1 and strides[order[j]] != want[j] for j in range(len(order))):
        return None
    return order


def _with_unit_dims(big: list[int], shape: Sequence[int]) -> list[int]:
    """``big`` (dims of size > 1, outer to inner) with the unit dims put back at their
    original positions."""
    it = iter(big)
    return [k if shape[k] <= 1 else next(it) for k in range(len(shape))]


def _inverse(order: Sequence[int]) -> tuple[int, ...]:
    inverse = [0] * len(order)
    for position, dim in enumerate(order):
        inverse[dim] = position
    return tuple(inverse)


class _Rewrap(ast.NodeTransformer):
    """Wraps leaf ``k`` of a ``kiln.outputs`` expression in ``permute(k, dims)``."""

    def __init__(self, dims: dict[int, tuple[int, ...]]) -> None:
        self.dims = dims

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        if type(node.value) is int and node.value in self.dims:
            dims = ast.Tuple([ast.Constant(d) for d in self.dims[node.value]], ast.Load())
            return ast.Call(ast.Name("permute", ast.Load()), [node, dims], [])
        return node


def _apply(func: FuncOp) -> None:
    strides = output_strides(func)
    ret = func.body.block.last_op
    structure = func.attributes.get(OUTPUTS_ATTR)
    if strides is None or not isinstance(ret, ReturnOp) or not isinstance(structure, StringAttr):
        return
    permute_class = op_class("permute.default")
    assert permute_class is not None
    views: dict[int, tuple[int, ...]] = {}
    values = list(ret.arguments)
    for k, (value, recorded) in enumerate(zip(values, strides, strict=True)):
        ty = value.type
        if recorded is None or not isinstance(ty, TensorType) or isinstance(value, BlockArgument):
            continue
        shape = list(ty.get_shape())
        order = stride_order(shape, recorded)
        if order is None or order == list(range(len(shape))):
            continue
        permuted = TensorType(ty.element_type, [shape[d] for d in order])
        permute = permute_class.from_args({"self": value, "dims": order}, [permuted])
        permute.location = ret.location
        Rewriter.insert_op(permute, InsertPoint.before(ret))
        values[k] = permute.results[0]
        views[k] = _inverse(order)
    del func.attributes[OUTPUT_STRIDES_ATTR]
    if not views:
        return
    tree = _Rewrap(views).visit(ast.parse(structure.data, mode="eval"))
    func.attributes[OUTPUTS_ATTR] = StringAttr(ast.unparse(ast.fix_missing_locations(tree)))
    Rewriter.replace_op(ret, ReturnOp(*values))
    func.function_type = func.function_type.__class__.from_lists(
        list(func.function_type.inputs.data), [v.type for v in values]
    )


@dataclass(frozen=True)
class OutputLayoutPass(ModulePass):
    """Return outputs with eager's strides (see the module docstring)."""

    name = "output-layout"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for func in [f for f in op.ops if isinstance(f, FuncOp)]:
            _apply(func)


__all__ = ["OutputLayoutPass", "stride_order"]

"""Creation ops: buffers whose elements are a constant or a function of the index.

``full``, ``zeros``, ``ones``, ``scalar_tensor``, the ``*_like``/``new_*`` forms, ``fill``,
``empty`` (filled with zeros: deterministic, and as good as any value), ``arange``
(from ``loop.index``), and splat ``aten.constant`` become one ``loop.pointwise`` each.
A non-splat constant becomes a ``loop.extern`` holding the ``aten.constant``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import sympy
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, TensorType, f32, f64
from xdsl.ir import Attribute, SSAValue

from kiln.dialects.aten.dialect import ConstantOp
from kiln.passes.lowering.body import BodyBuilder
from kiln.passes.lowering.context import Lowered, LoweringContext, OpArgs
from kiln.passes.lowering.pointwise import scalar
from kiln.passes.lowering.tensors import TensorRef, expr
from kiln.passes.lowering.types import NoLowering, is_float, is_low_precision

Expr = sympy.Expr


def filled(ctx: LoweringContext, sizes: Sequence[Expr], dtype: Attribute, value: Any) -> TensorRef:
    """A buffer of ``sizes`` holding ``value`` everywhere."""
    return ctx.pointwise(sizes, dtype, lambda bb, idx: scalar(bb, value, dtype))


def _full_of(
    value: Any, size_arg: str | None = "size", like: str | None = None
) -> Callable[[LoweringContext, OpArgs], list[Lowered]]:
    """``full``-like ops: the constant ``value`` (or the op's ``fill_value`` when None)."""

    def lower(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
        fill = args.value("fill_value") if value is None else value
        if like is not None:
            sizes: list[Expr] = list(args.tensor(like).sizes)
        else:
            assert size_arg is not None
            sizes = [expr(s) for s in args.value(size_arg)]
        sizes = args.result_sizes(0, sizes)
        return [filled(ctx, sizes, args.result_dtype(), fill)]

    return lower


def _scalar_tensor(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    return [filled(ctx, [], args.result_dtype(), args.value("s"))]


def _fill_scalar(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    x = args.tensor("self")
    return [filled(ctx, x.sizes, args.result_dtype(), args.value("value"))]


def _fill_tensor(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    x, value = args.tensor("self"), args.tensor("value")
    if value.rank != 0:
        raise NoLowering("fill with a non-scalar tensor")
    return [ctx.pointwise(x.sizes, args.result_dtype(), lambda bb, idx: bb.load(value, []))]


def _arange_values(
    args: OpArgs, start: Any, end: Any, step: Any
) -> tuple[float | int, float | int]:
    for v in (start, end, step):
        if isinstance(v, sympy.Expr) and not v.is_Number:
            raise NoLowering("symbolic arange bounds")
    start_v = 0 if start is None else start
    step_v = 1 if step is None else step
    return start_v, step_v


def _arange(ctx: LoweringContext, args: OpArgs, start: Any, step: Any) -> list[Lowered]:
    ty = args.result_dtype()
    shape = args.result_type().get_shape()
    if len(shape) != 1 or shape[0] < 0:
        raise NoLowering("arange with a symbolic length")
    sizes = [sympy.Integer(shape[0])]
    start_v, step_v = _arange_values(args, start, None, step)
    # ATen accumulates in double for float/double results and in float for half types.
    acc = f64 if is_float(ty) and not is_low_precision(ty) else (f32 if is_float(ty) else ty)

    def body(bb: BodyBuilder, idx: Sequence[Expr]) -> SSAValue:
        i = bb.index_as(idx[0], acc)
        if step_v != 1:
            i = bb.mul(i, scalar(bb, step_v, acc))
        if start_v != 0:
            i = bb.add_(scalar(bb, start_v, acc), i)
        return i

    return [ctx.pointwise(sizes, ty, body)]


def _arange_end(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    return _arange(ctx, args, 0, 1)


def _arange_start(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    return _arange(ctx, args, args.value("start"), 1)


def _arange_start_step(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    return _arange(ctx, args, args.value("start"), args.value("step"))


def lower_constant(ctx: LoweringContext, op: ConstantOp) -> Lowered:
    """A splat constant becomes a fill; any other constant an extern holding it."""
    value = op.value
    ty = value.type
    assert isinstance(ty, TensorType)
    if isinstance(value, DenseIntOrFPElementsAttr) and value.is_splat():
        sizes = [sympy.Integer(d) for d in ty.get_shape()]
        element = _splat_value(value)
        if element is not None:
            try:
                return filled(ctx, sizes, ty.element_type, element)
            except NoLowering:
                pass
    (result,) = ctx.extern(op)
    return result


def _splat_value(value: DenseIntOrFPElementsAttr) -> float | int | None:
    values = value.get_values()  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    if not values:
        return None
    first = values[0]  # pyright: ignore[reportUnknownVariableType]
    if isinstance(first, float) and math.isnan(first):
        return math.nan
    return first  # pyright: ignore[reportUnknownVariableType, reportReturnType]


LOWERINGS: dict[str, Callable[[LoweringContext, OpArgs], list[Lowered]]] = {
    "full": _full_of(None),
    "zeros": _full_of(0),
    "ones": _full_of(1),
    "empty.memory_format": _full_of(0),
    "empty_strided": _full_of(0),
    "new_zeros": _full_of(0),
    "new_ones": _full_of(1),
    "new_full": _full_of(None),
    "new_empty": _full_of(0),
    "full_like": _full_of(None, like="self"),
    "zeros_like": _full_of(0, like="self"),
    "ones_like": _full_of(1, like="self"),
    "empty_like": _full_of(0, like="self"),
    "scalar_tensor": _scalar_tensor,
    "fill.Scalar": _fill_scalar,
    "fill.Tensor": _fill_tensor,
    "arange": _arange_end,
    "arange.start": _arange_start,
    "arange.start_step": _arange_start_step,
}

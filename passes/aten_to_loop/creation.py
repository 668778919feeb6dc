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
from kiln.dialects.loop.expr import floordiv
from kiln.passes.aten_to_loop.body import BodyBuilder
from kiln.passes.aten_to_loop.context import Lowered, Lowering, LoweringContext, OpArgs
from kiln.passes.aten_to_loop.pointwise import scalar
from kiln.passes.aten_to_loop.tensors import TensorRef, expr
from kiln.passes.aten_to_loop.types import NoLowering, is_float, is_low_precision

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


def _arange(ctx: LoweringContext, args: OpArgs, start: Any, end: Any, step: Any) -> list[Lowered]:
    """``start + step*i``; a symbolic length is ``ceil((end - start) / step)`` (ATen checks
    that ``end >= start`` for a positive step, so the traced graph's guards ensure it)."""
    ty = args.result_dtype()
    shape = args.result_type().get_shape()
    if len(shape) != 1:
        raise NoLowering("arange result is not 1-D")
    if shape[0] >= 0:
        sizes = [sympy.Integer(shape[0])]
    elif (
        isinstance(step, int)
        and step > 0
        and isinstance(start, int | sympy.Expr)
        and isinstance(end, int | sympy.Expr)
    ):
        sizes = [floordiv(expr(end) - expr(start) + step - 1, step)]
    else:
        raise NoLowering("arange with a symbolic length")
    # ATen accumulates in double for float/double results and in float for half types.
    acc = f64 if is_float(ty) and not is_low_precision(ty) else (f32 if is_float(ty) else ty)

    def body(bb: BodyBuilder, idx: Sequence[Expr]) -> SSAValue:
        i = bb.index_as(idx[0], acc)
        if step != 1:
            i = bb.mul(i, scalar(bb, step, acc))
        if start != 0:
            i = bb.add_(scalar(bb, start, acc), i)
        return i

    return [ctx.pointwise(sizes, ty, body)]


def _arange_end(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    return _arange(ctx, args, 0, args.value("end"), 1)


def _arange_start(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    return _arange(ctx, args, args.value("start"), args.value("end"), 1)


def _arange_start_step(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    return _arange(ctx, args, args.value("start"), args.value("end"), args.value("step"))


def _iota(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    """``prims.iota(length, start, step)``: integers ``start + step*i``."""
    start, step, length = args.value("start"), args.value("step"), args.value("length")
    return _arange(ctx, args, start, expr(start) + expr(step) * expr(length), step)


def lower_constant(ctx: LoweringContext, op: ConstantOp) -> Lowered:
    """A splat constant becomes a fill; any other constant (an empty one too: xDSL's
    ``is_splat`` fails on no elements) an extern holding it."""
    value = op.value
    ty = value.type
    assert isinstance(ty, TensorType)
    if (
        isinstance(value, DenseIntOrFPElementsAttr)
        and math.prod(ty.get_shape()) > 0
        and value.is_splat()
    ):
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


LOWERINGS: dict[str, Lowering] = {
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
    "prims::iota": _iota,
}

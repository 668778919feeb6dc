"""Casts and copies: ``_to_copy``/``to.dtype``/``type_as`` (a view when the dtype stays)
and ``copy`` (a broadcast load)."""

from __future__ import annotations

from kiln.passes.aten_to_loop.context import Lowered, Lowering, LoweringContext, OpArgs


def _to_dtype(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    """``_to_copy``/``to``/``type_as``: a view when the dtype stays, else a cast."""
    x = args.tensor("self")
    ty = args.result_dtype()
    if ty == x.dtype:
        return [x]
    return [ctx.pointwise(x.sizes, ty, lambda bb, idx: bb.load(x, idx))]


def _convert_element_type(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    """``prims.convert_element_type(a, dtype)``: dynamo's ``dynamic=True`` passes a float
    attribute (RMSNorm's ``eps``) as a 0-d float64 tensor and casts it twice; as ATen
    calls those were four Python round trips per LLaMA block call."""
    x = args.tensor("a")
    ty = args.result_dtype()
    if ty == x.dtype:
        return [x]
    return [ctx.pointwise(x.sizes, ty, lambda bb, idx: bb.load(x, idx))]


def _copy(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    x, src = args.tensor("self"), args.tensor("src")
    sizes = args.result_sizes(0, list(x.sizes))
    es = src.expand(sizes)
    return [ctx.pointwise(sizes, args.result_dtype(), lambda bb, idx: bb.load(es, idx))]


LOWERINGS: dict[str, Lowering] = {
    # casts
    "_to_copy": _to_dtype,
    "to.dtype": _to_dtype,
    "type_as": _to_dtype,
    "copy": _copy,
    "prims::convert_element_type": _convert_element_type,
}

__all__ = ["LOWERINGS"]

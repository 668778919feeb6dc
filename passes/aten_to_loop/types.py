"""Element types during lowering: classification, compute types and torch's promotion."""

from __future__ import annotations

from functools import cache

from xdsl.dialects.builtin import (
    AnyFloat,
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IndexType,
    IntegerType,
    Signedness,
    f32,
)
from xdsl.ir import Attribute


class NoLowering(Exception):
    """This op (with these types or arguments) has no exact lowering: use ``loop.extern``."""


def is_float(ty: Attribute) -> bool:
    return isinstance(ty, AnyFloat)


def is_bool(ty: Attribute) -> bool:
    return isinstance(ty, IntegerType) and ty.width.data == 1


def is_int(ty: Attribute) -> bool:
    """A signed integer (signless in IR) other than bool, or index."""
    return (isinstance(ty, IntegerType) and ty.width.data > 1) or isinstance(ty, IndexType)


def is_unsigned(ty: Attribute) -> bool:
    return isinstance(ty, IntegerType) and ty.signedness.data is Signedness.UNSIGNED


def is_low_precision(ty: Attribute) -> bool:
    return isinstance(ty, Float16Type | BFloat16Type)


_BODY_FLOATS = Float16Type | BFloat16Type | Float32Type | Float64Type


def is_body_type(ty: Attribute) -> bool:
    """Whether loop bodies can load, compute and store elements of ``ty``."""
    try:
        check_body_type(ty)
    except NoLowering:
        return False
    return True


def check_body_type(ty: Attribute) -> None:
    """Loop bodies compute on signless ``arith`` types: floats, ``i1`` and signed ints.

    Unsigned tensors (``ui8``) would need unsigned ops throughout; they run as extern.
    """
    if is_unsigned(ty):
        raise NoLowering(f"unsigned element type {ty}")
    # Not is_float: float8 types are AnyFloat too, but no body computes on them.
    if not isinstance(ty, _BODY_FLOATS | IntegerType):
        raise NoLowering(f"element type {ty}")


def compute_type(ty: Attribute) -> Attribute:
    """The type a value of ``ty`` is computed in: half and bfloat16 compute in f32."""
    return f32 if is_low_precision(ty) else ty


def bitwidth(ty: Attribute) -> int:
    if isinstance(ty, IntegerType):
        return ty.width.data
    if isinstance(ty, IndexType):
        return 64
    assert isinstance(ty, AnyFloat)
    return ty.bitwidth


@cache
def promote(operands: tuple[tuple[Attribute, int], ...], scalars: tuple[type, ...]) -> Attribute:
    """torch's result type of an elementwise op on tensors and Python scalars.

    ``operands`` are ``(element type, rank)`` pairs: zero-dim tensors take part in
    promotion only within their category, as in ``torch.result_type``.
    """
    import torch
    from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

    from kiln.dialects.aten.dtypes import dtype_to_type, type_to_dtype

    args: list[object] = [
        torch.empty((1,) * min(rank, 1), dtype=type_to_dtype(ty), device="meta")
        for ty, rank in operands
    ]
    samples = {bool: True, int: 1, float: 1.0, complex: 1j}
    args += [samples[kind] for kind in scalars]
    _, result = elementwise_dtypes(
        *args,  # pyright: ignore[reportArgumentType]
        type_promotion_kind=ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT,
    )
    return dtype_to_type(result)

"""Shape queries on ``aten`` values that several passes ask."""

from __future__ import annotations

from xdsl.dialects.builtin import TensorType
from xdsl.ir import SSAValue


def static_shape(value: SSAValue | None, rank: int | None = None) -> tuple[int, ...] | None:
    """``value``'s sizes when it is a tensor whose sizes are all static (and, where
    ``rank`` is given, of that many dimensions); else None."""
    ty = value.type if value is not None else None
    if not isinstance(ty, TensorType):
        return None
    shape: tuple[int, ...] = tuple(ty.get_shape())  # pyright: ignore[reportUnknownArgumentType, reportUnknownMemberType, reportUnknownVariableType]
    if rank is not None and len(shape) != rank:
        return None
    return None if any(d < 0 for d in shape) else shape


__all__ = ["static_shape"]

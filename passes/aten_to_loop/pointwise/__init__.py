"""Elementwise ops: one ``loop.pointwise`` each, broadcasting through the load index.

One module per op family, each with its ``LOWERINGS``: :mod:`.unary` (math functions,
activations, rounding, tests), :mod:`.binary` (arithmetic, division, bitwise, logical,
comparisons, powers), :mod:`.ternary` (``where``, ``clamp``, ``masked_fill``,
``addcmul``, ``lerp``), :mod:`.casts`; what they share (broadcasting, scalar operands,
the ``unary``/``binary`` builders) is :mod:`.common`.

Types follow torch: the aten result type already holds the promoted dtype, so
arithmetic computes in it (half and bfloat16 in f32, rounded once at the end, as
Inductor does); comparisons compute in the promoted type of their inputs; logical ops
test each input against zero. Where no exact formula exists for a dtype, the op raises
:class:`~kiln.passes.aten_to_loop.types.NoLowering` and runs as ``loop.extern``.
"""

from __future__ import annotations

from kiln.passes.aten_to_loop.context import Lowering
from kiln.passes.aten_to_loop.pointwise import binary, casts, ternary, unary
from kiln.passes.aten_to_loop.pointwise.common import (
    Formula,
    Value,
    broadcast_sizes,
    elementwise,
    scalar,
    sigmoid,
)

LOWERINGS: dict[str, Lowering] = {
    **unary.LOWERINGS,
    **binary.LOWERINGS,
    **ternary.LOWERINGS,
    **casts.LOWERINGS,
}

__all__ = ["LOWERINGS", "Formula", "Value", "broadcast_sizes", "elementwise", "scalar", "sigmoid"]

"""Comparisons of an index with a constant, as divisions by it.

A ``cat`` selects its inputs by comparing the concatenated coordinate with their
offsets (``c < 116``); after a view it is an expression of it
(``c // 2 + 116*(c % 2) < 116`` under ShuffleNet's channel shuffle). ``E < T`` is
``E // T < 1`` (floor division, any integer ``E``, ``T > 0``), and written so the
comparison takes part in choosing the kernel's loops like any division: the loop space
splits the channels at the offset (``[2, 29, 2, 2]`` for 232 channels, :mod:`.space`)
and the comparison, simplified over it, reads one outer variable (``x0 < 1``). It is
then the same for every lane of the vectorized loop, computed outside it
(``cpp-hoist-invariants``), and the loop is versioned on it (``cpp-uniform-masks``):
plain vector loads, where a per-lane mask made every load conditional.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy
from xdsl.dialects import arith

from kiln.dialects.loop.body_ops import IndexOp
from kiln.dialects.loop.expr import FloorDiv

_BELOW = {"slt": 0, "sle": 1}
"""``E < T`` / ``E <= T``: ``E`` below ``T + offset``."""
_AT_LEAST = {"sge": 0, "sgt": 1}
"""``E >= T`` / ``E > T``: ``E`` at least ``T + offset``."""
_SWAPPED = {"slt": "sgt", "sle": "sge", "sgt": "slt", "sge": "sle"}
"""The predicate with its operands swapped (``T < E`` is ``E > T``)."""


@dataclass(frozen=True)
class Threshold:
    """``expr < value`` (``below``) or ``expr >= value``, ``value`` a positive integer;
    ``expr`` over the node's variables."""

    expr: sympy.Expr
    value: int
    below: bool

    def quotient(self, expr: sympy.Expr) -> sympy.Expr:
        """``expr // value``: the comparison is ``quotient < 1`` (or ``>= 1``)."""
        return FloorDiv(expr, sympy.Integer(self.value))  # pyright: ignore[reportReturnType]


def threshold(op: arith.CmpiOp) -> Threshold | None:
    """The comparison of an index with a positive constant that ``op`` is, if it is one
    (signed predicates on ``loop.index`` values)."""
    lhs, rhs = op.lhs.owner, op.rhs.owner
    if not (isinstance(lhs, IndexOp) and isinstance(rhs, IndexOp)):
        return None
    predicate = arith.CMPI_COMPARISON_OPERATIONS[op.predicate.value.data]
    expr, constant = lhs.expr.data, rhs.expr.data
    if expr.is_Integer and not constant.is_Integer:
        expr, constant = constant, expr
        predicate = _SWAPPED.get(predicate, predicate)
    if not constant.is_Integer or expr.is_Integer:
        return None
    if predicate in _BELOW:
        value, below = int(constant) + _BELOW[predicate], True
    elif predicate in _AT_LEAST:
        value, below = int(constant) + _AT_LEAST[predicate], False
    else:
        return None
    return Threshold(expr, value, below) if value > 0 else None


__all__ = ["Threshold", "threshold"]

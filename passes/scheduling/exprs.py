"""Typed wrappers over the sympy operations the schedulers use on index expressions
(sympy's own annotations return ``Basic`` where an ``Expr`` is meant)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

import sympy

from kiln.dialects.loop.expr import FloorDiv
from kiln.dialects.loop.expr import mod as expr_mod


def substitute(expr: sympy.Expr, mapping: Mapping[sympy.Symbol, sympy.Expr]) -> sympy.Expr:
    """``expr`` with symbols replaced simultaneously (no re-simplification loops)."""
    return cast(sympy.Expr, sympy.sympify(expr).xreplace(dict(mapping)))


def floordiv(a: sympy.Expr, b: sympy.Expr | int) -> sympy.Expr:
    return cast(sympy.Expr, FloorDiv(a, sympy.sympify(b)))


def mod(a: sympy.Expr, b: sympy.Expr | int) -> sympy.Expr:
    """``a % b`` (0 for an empty dim's size, see :class:`~kiln.dialects.loop.expr.FloorDiv`),
    as :func:`kiln.dialects.loop.expr.mod` builds it."""
    return expr_mod(a, sympy.sympify(b))


__all__ = ["floordiv", "mod", "substitute"]

"""Typed wrappers over the sympy operations the schedulers use on index expressions
(sympy's own annotations return ``Basic`` where an ``Expr`` is meant)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

import sympy

from kiln.dialects.loop.expr import FloorDiv


def substitute(expr: sympy.Expr, mapping: Mapping[sympy.Symbol, sympy.Expr]) -> sympy.Expr:
    """``expr`` with symbols replaced simultaneously (no re-simplification loops)."""
    return cast(sympy.Expr, sympy.sympify(expr).xreplace(dict(mapping)))


def floordiv(a: sympy.Expr, b: sympy.Expr | int) -> sympy.Expr:
    return cast(sympy.Expr, FloorDiv(a, sympy.sympify(b)))


def mod(a: sympy.Expr, b: sympy.Expr | int) -> sympy.Expr:
    if b == 0:
        return sympy.Integer(0)  # an empty dim's size (see kiln.dialects.loop.expr.FloorDiv)
    return cast(sympy.Expr, sympy.Mod(a, sympy.sympify(b)))


__all__ = ["floordiv", "mod", "substitute"]

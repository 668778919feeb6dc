"""Evaluating index expressions on whole index spaces at once.

:func:`compile_expr` turns a sympy index expression into a Python closure over an
environment ``{"d0": tensor, "s0": 12, ...}``; index variables are int64 tensors
shaped to broadcast against each other (``d0`` is ``[n0, 1]``, ``d1`` is ``[1, n1]``),
so one call computes the expression for every point of the iteration space. Python's
``//`` and ``%`` floor on ints and on torch tensors alike, which is exactly the
semantics of :class:`~kiln.dialects.loop.expr.FloorDiv` and ``Mod``.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from functools import cache, reduce
from typing import Any

import sympy

from kiln.dialects.loop.expr import FloorDiv

Env = Mapping[str, Any]
Compiled = Callable[[Env], Any]


@cache
def compile_expr(expr: sympy.Expr) -> Compiled:
    """A closure computing ``expr`` from an environment of variable values."""
    if expr.is_Integer:
        value = int(expr)
        return lambda env: value
    if isinstance(expr, sympy.Symbol):
        name = expr.name
        return lambda env: env[name]
    parts = [compile_expr(a) for a in expr.args]
    if isinstance(expr, sympy.Add):
        return lambda env: reduce(operator.add, (p(env) for p in parts))
    if isinstance(expr, sympy.Mul):
        return lambda env: reduce(operator.mul, (p(env) for p in parts))
    if isinstance(expr, sympy.Pow):
        base, exponent = parts
        return lambda env: base(env) ** exponent(env)
    if isinstance(expr, FloorDiv):
        num, den = parts
        return lambda env: num(env) // den(env)
    if isinstance(expr, sympy.Mod):
        num, den = parts
        return lambda env: num(env) % den(env)
    raise ValueError(f"cannot evaluate index expression {expr}")


def evaluate_size(expr: sympy.Expr, sizes: Env) -> int:
    """A size expression's value given the size symbols' values."""
    return int(compile_expr(expr)(sizes))

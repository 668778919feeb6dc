"""Host-side scalar arithmetic of a ``kernel.program`` as Python, for both wrappers.

A program computes sizes and scalars from its arguments' sizes on the host: integer
arithmetic on ``index`` values (``s0 // 6``), and, with dynamic shapes, float arithmetic
too (``sym_float(s0) / 3``, SDPA's ``1 / sqrt(head_dim)``, ``trunc(s1 * 1.5)`` in
``interpolate``), casts between them, comparisons and selects. The C++ and the Triton
wrappers are Python functions, so both print these ops with :func:`scalar_python`;
the helpers it names are in :data:`HELPERS`, which each wrapper puts in its namespace.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from xdsl.dialects import arith
from xdsl.dialects import math as xmath
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, IntegerType
from xdsl.ir import Operation

from kiln.backends.host.runtime import SCALAR_HELPERS

HELPERS: dict[str, Callable[..., Any]] = SCALAR_HELPERS
"""Names :func:`scalar_python` uses, for the wrapper's namespace (defined in
:mod:`kiln.backends.host.runtime`, which a graph from the graph cache runs with)."""

_BINARY: dict[type[Operation], str] = {
    arith.AddiOp: "({0} + {1})",
    arith.SubiOp: "({0} - {1})",
    arith.MuliOp: "({0} * {1})",
    arith.FloorDivSIOp: "({0} // {1})",
    arith.CeilDivSIOp: "(-((-{0}) // {1}))",
    arith.DivSIOp: "_host_divsi({0}, {1})",
    arith.RemSIOp: "_host_remsi({0}, {1})",
    arith.MaxSIOp: "max({0}, {1})",
    arith.MinSIOp: "min({0}, {1})",
    arith.AndIOp: "({0} & {1})",
    arith.OrIOp: "({0} | {1})",
    arith.XOrIOp: "({0} ^ {1})",
    arith.AddfOp: "({0} + {1})",
    arith.SubfOp: "({0} - {1})",
    arith.MulfOp: "({0} * {1})",
    arith.DivfOp: "_host_divf({0}, {1})",
    arith.MaximumfOp: "_host_maximumf({0}, {1})",
    arith.MinimumfOp: "_host_minimumf({0}, {1})",
    arith.MaxnumfOp: "max({0}, {1})",
    arith.MinnumfOp: "min({0}, {1})",
    xmath.PowFOp: "_host_powf({0}, {1})",
    xmath.IPowIOp: "({0} ** {1})",
    xmath.FPowIOp: "({0} ** {1})",
}

_UNARY: dict[type[Operation], str] = {
    arith.IndexCastOp: "{0}",
    arith.ExtSIOp: "{0}",
    arith.ExtUIOp: "int({0})",
    arith.SIToFPOp: "float({0})",
    arith.FPToSIOp: "int({0})",  # rounds toward zero, as fptosi does
    arith.NegfOp: "(-{0})",
    arith.ExtFOp: "{0}",
    xmath.FloorOp: "float(_host_floor({0}))",
    xmath.CeilOp: "float(_host_ceil({0}))",
    xmath.TruncOp: "float(_host_trunc({0}))",
    xmath.SqrtOp: "_host_sqrt({0})",
    xmath.AbsFOp: "abs({0})",
    xmath.AbsIOp: "abs({0})",
}

_CMPI = {"eq": "==", "ne": "!=", "slt": "<", "sle": "<=", "sgt": ">", "sge": ">="}
_CMPF = {"oeq": "==", "une": "!=", "olt": "<", "ole": "<=", "ogt": ">", "oge": ">="}
"""Python's comparisons of floats are the ordered ones (false with a NaN), and its
``!=`` the unordered one (true with a NaN)."""


def constant_python(op: arith.ConstantOp) -> str | None:
    """A Python literal for a scalar constant (None for other constants)."""
    value = op.value
    if isinstance(value, IntegerAttr):
        number = int(value.value.data)
        if isinstance(value.type, IntegerType) and value.type.width.data == 1:
            return "True" if number else "False"
        return str(number)
    if isinstance(value, FloatAttr):
        number = float(value.value.data)
        return repr(number) if math.isfinite(number) else f"float('{number}')"
    return None


def scalar_python(op: Operation, a: list[str]) -> str | None:
    """Python for one host scalar op over operands named ``a`` (None if unknown)."""
    template = _BINARY.get(type(op))
    if template is not None:
        return template.format(*a)
    template = _UNARY.get(type(op))
    if template is not None:
        return template.format(*a)
    if isinstance(op, arith.SelectOp):
        return f"({a[1]} if {a[0]} else {a[2]})"
    if isinstance(op, arith.CmpiOp | arith.CmpfOp):
        names = (
            arith.CMPI_COMPARISON_OPERATIONS
            if isinstance(op, arith.CmpiOp)
            else arith.CMPF_COMPARISON_OPERATIONS
        )
        predicate = names[int(op.predicate.value.data)]
        symbol = (_CMPI if isinstance(op, arith.CmpiOp) else _CMPF).get(predicate)
        return None if symbol is None else f"({a[0]} {symbol} {a[1]})"
    return None


__all__ = ["HELPERS", "constant_python", "scalar_python"]

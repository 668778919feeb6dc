"""Index expressions (sympy, :mod:`kiln.dialects.loop.expr`) as C ``int64_t`` arithmetic.

``//`` and ``%`` floor like Python's; C's ``/`` and ``%`` truncate. They agree when the
dividend is non-negative and the divisor positive, which is the usual case (loop
variables and sizes): then the plain operators are printed; otherwise
``kiln_floordiv``/``kiln_mod`` (see :mod:`kiln.backends.cpp.prelude`). Which is which
is decided by :mod:`kiln.dialects.loop.index_sign`, shared with the Triton lowering.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import cast

import sympy

from kiln.dialects.loop.expr import FloorDiv, var
from kiln.dialects.loop.index_sign import is_nonnegative as _nonnegative
from kiln.dialects.loop.index_sign import is_positive as _positive

_ATOM, _MUL, _DIV, _ADD = 0, 1, 2, 3
"""Binding strength of a printed form: a product's factor that is a division or a
modulo needs parentheses (C's ``a*b/c`` is ``(a*b)/c``)."""


def _bind(expr: sympy.Expr, names: Sequence[str], nonnegative: Sequence[bool]) -> sympy.Expr:
    symbols: dict[sympy.Symbol, sympy.Expr] = {}
    for k, (name, nonneg) in enumerate(zip(names, nonnegative, strict=True)):
        symbols[var(f"i{k}")] = (
            sympy.Symbol(name, integer=True, nonnegative=True)
            if nonneg
            else sympy.Symbol(name, integer=True)
        )
    return cast(sympy.Expr, sympy.sympify(expr).xreplace(symbols))


def c_index(expr: sympy.Expr, names: Sequence[str], nonnegative: Sequence[bool]) -> str:
    """``expr`` over ``i0..`` as C, ``i<k>`` being ``names[k]`` (known >= 0 where
    ``nonnegative[k]``)."""
    return _c_index_cached(sympy.sympify(expr), tuple(names), tuple(nonnegative))


@lru_cache(maxsize=16384)
def _c_index_cached(expr: sympy.Expr, names: tuple[str, ...], nonnegative: tuple[bool, ...]) -> str:
    """Cached: a kernel prints the same addresses over the same variables in its vector
    loop and its tail (and a reduction's lanes), and binding the names and proving
    signs is sympy work (a pure function of the arguments)."""
    return _c(_bind(expr, names, nonnegative))[0]


def is_nonnegative(expr: sympy.Expr, nonnegative: Sequence[bool]) -> bool:
    """Whether ``expr`` over ``i0..`` is provably >= 0 (``i<k>`` >= 0 where ``nonnegative[k]``)."""
    return _nonnegative(_bind(expr, [f"v{k}" for k in range(len(nonnegative))], nonnegative))


def _arg(e: sympy.Expr, k: int) -> sympy.Expr:
    return cast(sympy.Expr, e.args[k])


def _literal(value: int) -> str:
    if -(2**31) < value < 2**31:
        return str(value)
    return f"{value}LL"


def _wrap(text_prec: tuple[str, int], limit: int) -> str:
    text, prec = text_prec
    return text if prec <= limit else f"({text})"


def _c(e: sympy.Expr) -> tuple[str, int]:
    if e.is_Integer:
        value = int(e)
        return (_literal(value), _ATOM if value >= 0 else _ADD)
    if isinstance(e, sympy.Symbol):
        return (e.name, _ATOM)
    if isinstance(e, sympy.Add):
        terms = sorted(e.args, key=lambda t: (t.is_Number, sympy.default_sort_key(t)))
        out = ""
        for i, term in enumerate(terms):
            coeff, _ = term.as_coeff_Mul()
            negative = coeff.is_Number and coeff < 0
            body = _wrap(_c(-term if negative else term), _DIV)
            if i == 0:
                out = f"-{body}" if negative else body
            else:
                out += f" - {body}" if negative else f" + {body}"
        return (out, _ADD)
    if isinstance(e, sympy.Mul):
        coeff, rest = e.as_coeff_Mul()
        factors = [_wrap(_c(f), _MUL) for f in sympy.Mul.make_args(rest)]
        if coeff == -1:
            return ("-" + "*".join(factors), _ADD)
        if coeff != 1:
            factors.insert(0, _wrap(_c(coeff), _ATOM))
        return ("*".join(factors), _MUL)
    if isinstance(e, sympy.Pow):
        base = _wrap(_c(e.base), _ATOM)
        return ("*".join([base] * int(e.exp)), _MUL)
    if isinstance(e, FloorDiv | sympy.Mod):
        a, b = _arg(e, 0), _arg(e, 1)
        plain = _nonnegative(a) and _positive(b)
        left, right = _c(a)[0], _c(b)[0]
        if plain:
            op = "/" if isinstance(e, FloorDiv) else "%"
            return (f"{_wrap(_c(a), _DIV)} {op} {_wrap(_c(b), _ATOM)}", _DIV)
        helper = "kiln_floordiv" if isinstance(e, FloorDiv) else "kiln_mod"
        return (f"{helper}({left}, {right})", _ATOM)
    raise ValueError(f"not an index expression: {e}")


__all__ = ["c_index", "is_nonnegative"]

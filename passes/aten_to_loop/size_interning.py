"""Divisions of sizes written over size symbols of their own (``lower-aten``).

Under symbolic sizes a strided convolution's output is ``(g1 - 1) // 2 + 1``, and every
index, numel and tile of every kernel after it would carry that division multiplied out
(``32*d0*((g1 - 1) // 2)**2 + 64*d0*((g1 - 1) // 2) + 32*d0``), paying sympy's price for
``FloorDiv`` atoms in every fusion check, tiling and C++ index split. A
:class:`SizeInterner` writes each division or remainder of sizes alone over a new size
symbol bound to a function-level ``index`` value that computes it on the host, shifted by
its lower bound so that the symbol is a positive integer like every size symbol
(``(g1 - 1) // 2`` becomes ``u - 1`` with ``u = (g1 - 1) // 2 + 1``): loop ops then
index by polynomials in their sizes, as in a static compile, and ops reading the same
division share its one value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import cast

import sympy
from xdsl.ir import SSAValue

from kiln.dialects.loop.expr import Expr, FloorDiv
from kiln.dialects.loop.simplify import Bounds, interval


def _size_bounds(symbol: sympy.Symbol) -> Bounds:
    """A function-level size symbol's bounds: a positive integer."""
    return (1 if symbol.is_positive else None), None


class SizeInterner:
    """Interns the divisions of the function-level size symbols ``symbols`` (see the
    module docstring); ``bind(e)`` returns a new size symbol bound to a host value
    computing ``e``."""

    def __init__(
        self,
        symbols: Mapping[sympy.Symbol, SSAValue],
        bind: Callable[[Expr], sympy.Symbol],
    ) -> None:
        self._symbols = symbols
        self._bind = bind
        self._atoms: dict[Expr, Expr] = {}
        self._exprs: dict[Expr, Expr] = {}

    def __call__(self, e: Expr) -> Expr:
        """``e`` with each division or remainder of sizes alone replaced."""
        if not e.has(FloorDiv, sympy.Mod):
            return e
        done = self._exprs.get(e)
        if done is not None:
            return done
        sizes = self._symbols.keys()
        atoms = [
            a for a in e.atoms(FloorDiv, sympy.Mod) if a.free_symbols and sizes >= a.free_symbols
        ]
        outermost = [a for a in atoms if not any(b is not a and b.has(a) for b in atoms)]
        mapping: dict[sympy.Basic, sympy.Basic] = {}
        for atom in outermost:
            replacement = self._atoms.get(atom)
            if replacement is None:
                lo = interval(atom, _size_bounds)[0]
                if lo is None:
                    continue
                replacement = self._atoms[atom] = self._bind(atom - lo + 1) + lo - 1
            mapping[atom] = replacement
        out = cast(Expr, sympy.expand(e.xreplace(mapping))) if mapping else e
        self._exprs[e] = out
        return out


__all__ = ["SizeInterner"]

"""What a masked load's mask says about its index.

A ``loop.load ... if %mask`` reads nothing where its mask is false, so its index (and
the position of a producer inlined at it) only has to be right where the mask holds.
The mask of a ``cat``'s input is a comparison of the concatenated coordinate with the
input's offset (``d3 >= 58``), and after a ``view`` of the result it is one of an
expression (``d3 // 2 + 58*(d3 % 2) >= 58`` under ShuffleNet's channel shuffle): over
the whole loop that coordinate minus the offset is negative half the time, so the
producer's position, unflattened from the load's flat index, divides and wraps
(``(28*d1 + d2 + d3 % 2 - 1) // 784``) at every element, where the mask says the
coordinate lies within the input.

:func:`mask_facts` reads the conjunction of ``arith.cmpi`` of ``loop.index`` values that
a mask is, and keeps (1) the tighter upper bounds on loop variables by sizes
(``d3 < 16``: the ranges narrowed), and (2) for each expression it bounds by integers
more tightly than the loop ranges do, a proxy variable ``m<k>`` for the expression
minus its lower bound, ranging over what the mask allows. :meth:`MaskFacts.simplify`
writes an index in the proxies, simplifies it with their ranges (the divisions and
wraps drop out) and writes the proxies back as their expressions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import sympy
from xdsl.dialects import arith

from kiln.dialects.loop.body_ops import IndexOp, LoadOp
from kiln.dialects.loop.expr import replace_symbols, var, var_kind
from kiln.dialects.loop.simplify import integer_bounds, simplify_with_ranges

Expr = sympy.Expr

_STRICT = {"slt": 1, "ult": 1, "sgt": 1, "ugt": 1, "sle": 0, "ule": 0, "sge": 0, "uge": 0}
"""How much a strict comparison moves the bound (``a < c`` is ``a <= c - 1``)."""
_UPPER = {"slt", "ult", "sle", "ule"}
"""Predicates that bound their left operand from above (their right one from below)."""


@dataclass(frozen=True)
class Proxy:
    """``m<k> = expr - lower``, ranging over ``[0, size)`` where the mask holds."""

    expr: Expr
    lower: int
    size: int


@dataclass(frozen=True)
class MaskFacts:
    """A masked load's facts: ``ranges`` (the loop's, narrowed by the mask's upper
    bounds on variables by sizes) and the proxies of the expressions it bounds."""

    ranges: Mapping[sympy.Symbol, Expr]
    proxies: Mapping[sympy.Symbol, Proxy] = field(default_factory=dict)

    def simplify(self, expr: Expr, ranges: Mapping[sympy.Symbol, Expr] | None = None) -> Expr:
        """``expr`` simplified with ``ranges`` (default: the facts' own) and the
        proxies', in the loop's variables again."""
        ranges = self.ranges if ranges is None else ranges
        if not self.proxies:
            return simplify_with_ranges(expr, ranges)
        written = sympy.expand(self.write(expr))
        extended = {**ranges, **{m: sympy.Integer(p.size) for m, p in self.proxies.items()}}
        simplified = simplify_with_ranges(written, extended)
        back: dict[sympy.Basic, Expr] = {m: p.expr - p.lower for m, p in self.proxies.items()}
        return sympy.expand(replace_symbols(simplified, back))

    def write(self, expr: Expr) -> Expr:
        """``expr`` with each proxied expression written as its proxy plus its bound."""
        for m, p in self.proxies.items():
            expr = _replace(expr, p.expr, m + p.lower)
        return expr


def mask_facts(load: LoadOp, ranges: Mapping[sympy.Symbol, Expr]) -> MaskFacts:
    """What ``load``'s mask (a conjunction of ``loop.index`` comparisons) says, valid
    wherever the masked load reads; nothing when it has no mask or says nothing new."""
    if load.mask is None:
        return MaskFacts(ranges)
    narrowed = dict(ranges)
    limits: dict[Expr, list[int | None]] = {}
    pending = [load.mask]
    while pending:
        owner = pending.pop().owner
        if isinstance(owner, arith.AndIOp):
            pending += [owner.lhs, owner.rhs]
            continue
        if not isinstance(owner, arith.CmpiOp):
            continue
        lhs, rhs = owner.lhs.owner, owner.rhs.owner
        if not (isinstance(lhs, IndexOp) and isinstance(rhs, IndexOp)):
            continue
        predicate = arith.CMPI_COMPARISON_OPERATIONS[owner.predicate.value.data]
        if predicate not in _STRICT:
            continue
        a, b = lhs.expr.data, rhs.expr.data
        strict = _STRICT[predicate]
        # ``a <= b - strict`` for an upper predicate, ``a >= b + strict`` for a lower.
        for subject, bound, upper in ((a, b, predicate in _UPPER), (b, a, predicate not in _UPPER)):
            if not _sizes_only(bound):
                continue
            if upper:
                limit = bound - strict  # inclusive upper bound of subject
                _narrow_symbol(narrowed, subject, limit + 1)
            else:
                limit = bound + strict  # inclusive lower bound of subject
            if limit.is_Integer and subject.free_symbols:
                entry = limits.setdefault(subject, [None, None])
                k = 1 if upper else 0
                value = int(limit)
                if entry[k] is None or (value < entry[k] if upper else value > entry[k]):  # type: ignore[operator]
                    entry[k] = value
    proxies: dict[sympy.Symbol, Proxy] = {}
    for subject, (lo_mask, hi_mask) in limits.items():
        lo, hi = integer_bounds(subject, narrowed)
        if lo is None or hi is None:
            continue
        new_lo = lo if lo_mask is None else max(lo, lo_mask)
        new_hi = hi if hi_mask is None else min(hi, hi_mask)
        if new_lo > new_hi or (new_lo, new_hi) == (lo, hi):
            continue  # never read, or nothing new
        if isinstance(subject, sympy.Symbol) and new_lo == lo:
            continue  # an upper bound on a variable: the narrowed range has it
        proxies[var(f"m{len(proxies)}")] = Proxy(subject, new_lo, new_hi - new_lo + 1)
    return MaskFacts(narrowed, proxies)


def _narrow_symbol(ranges: dict[sympy.Symbol, Expr], subject: Expr, bound: Expr) -> None:
    """``ranges[subject] = bound`` for a loop variable and a bound provably tighter
    (sizes are positive): never a loose one."""
    if not isinstance(subject, sympy.Symbol) or subject not in ranges:
        return
    if bound.is_positive and (ranges[subject] - bound).is_nonnegative:
        ranges[subject] = bound


def _sizes_only(e: Expr) -> bool:
    return all(var_kind(s)[0] == "s" for s in e.free_symbols)  # pyright: ignore[reportArgumentType]


def _replace(expr: Expr, old: Expr, new: Expr) -> Expr:
    """``expr`` with the sum ``old`` replaced by ``new`` wherever a sum holds all of
    ``old``'s variable terms with the same coefficients (times one integer), and a
    variable ``old`` everywhere."""
    if isinstance(old, sympy.Symbol):
        return replace_symbols(expr, {old: new})
    constant, variable = old.as_coeff_Add()
    terms = {
        t: sympy.Integer(c) if isinstance(c, int) else c
        for t, c in variable.as_coefficients_dict().items()
    }
    return _replace_sum(expr, terms, variable, new - constant)


def _replace_sum(
    expr: Expr, terms: Mapping[sympy.Basic, sympy.Expr], variable: Expr, new: Expr
) -> Expr:
    if not expr.args:
        return expr
    args = [_replace_sum(a, terms, variable, new) for a in expr.args]  # pyright: ignore[reportArgumentType]
    if any(a is not b for a, b in zip(args, expr.args, strict=True)):
        expr = expr.func(*args)
    if isinstance(expr, sympy.Add):
        own = expr.as_coefficients_dict()
        first, c0 = next(iter(terms.items()))
        ratio = sympy.sympify(own.get(first, 0)) / c0
        if (
            ratio != 0
            and ratio.is_Integer
            and all(own.get(t, 0) == ratio * c for t, c in terms.items())
        ):
            return sympy.expand(expr - ratio * variable + ratio * new)
    return expr


__all__ = ["MaskFacts", "Proxy", "mask_facts"]

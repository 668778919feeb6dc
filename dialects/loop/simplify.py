"""Index expressions simplified with the ranges of their variables (``simplify_with_ranges``):
divisions and remainders that the ranges decide are dropped, and ``b*(x // b) + x % b`` is
joined back into ``x``, so that a chain of views stays linear. The expressions and their
constructors (:class:`FloorDiv`, :func:`floordiv`, :func:`mod`) are
:mod:`kiln.dialects.loop.expr`'s."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from functools import cache, lru_cache
from typing import cast

import sympy

from kiln.dialects.loop.expr import (
    Expr,
    FloorDiv,
    _has_negative_power,  # pyright: ignore[reportPrivateUsage]
    as_int,
    floordiv,
    mod,
    operands,
)


def simplify_with_ranges(expr: Expr, ranges: Mapping[sympy.Symbol, Expr]) -> Expr:
    """Simplify ``//`` and ``%`` knowing ``0 <= v < ranges[v]`` for index variables.

    Removes divisions whose numerator is known to lie in ``[0, divisor)`` and joins
    ``b*(x // b) + x % b`` back into ``x`` (what reshapes of contiguous data produce).
    Ranges and divisors may be symbolic (sizes ``s<k>``, positive integers): the terms
    of a numerator whose size coefficients the divisor divides exactly leave the
    division (``(x1 + s2*x0) // s2 == x0 + x1 // s2``), and a remainder proven to lie
    in ``[0, divisor)`` from the ranges drops it (``x1 // s2 == 0`` for ``x1 < s2``),
    as Inductor's ``simplify_with_ranges`` does: a chain of views stays linear.
    """
    if not expr.has(FloorDiv, sympy.Mod):
        return expr
    return _simplify_cached(expr, frozenset(ranges.items()))


@cache
def _simplify_cached(expr: Expr, ranges: frozenset[tuple[sympy.Symbol, Expr]]) -> Expr:
    return _simplify(expr, dict(ranges), {})


def _simplify(e: Expr, ranges: Mapping[sympy.Symbol, Expr], memo: dict[Expr, Expr]) -> Expr:
    """``memo``: the subexpressions already simplified (a composed view repeats them)."""
    if not e.args or not e.has(FloorDiv, sympy.Mod):
        return e
    if _is_size(e):
        return _simplify_sizes(e)
    if (done := memo.get(e)) is None:
        done = memo[e] = _simplify_node(e, ranges, memo)
    return done


@cache
def _simplify_sizes(e: Expr) -> Expr:
    """A size expression's simplification, which no loop variable's range changes: the
    same sizes (a convolution's output ``(s1 - 1) // 2 + 1``) recur in every index of
    every kernel, each time under other ranges."""
    return _simplify_node(e, {}, {})


def _simplify_node(e: Expr, ranges: Mapping[sympy.Symbol, Expr], memo: dict[Expr, Expr]) -> Expr:
    args = [_simplify(a, ranges, memo) for a in operands(e)]
    if isinstance(e, FloorDiv | sympy.Mod):
        base, divisor = args
        lo, hi = integer_bounds(base, ranges)
        if divisor.is_Integer and lo is not None and hi is not None and lo >= 0:
            d = int(divisor)
            if isinstance(e, FloorDiv):
                if lo // d == hi // d:
                    return sympy.Integer(lo // d)
            elif hi < d:
                return base
        if divisor.is_Integer and (split := _split_small_terms(base, int(divisor), ranges)):
            g, big, small = split
            if isinstance(e, FloorDiv):
                return _simplify(floordiv(big, int(divisor) // g), ranges, memo)
            return _simplify(g * mod(big, int(divisor) // g) + small, ranges, memo)
        if not (divisor.is_Integer and _static(base, ranges)):
            symbolic = _symbolic_divmod(isinstance(e, FloorDiv), base, divisor, ranges)
            if symbolic is not None:
                return symbolic
            if (split_sym := _split_small_symbolic(base, divisor, ranges)) is not None:
                g, big, small = split_sym
                rest = polynomial_quotient(sympy.expand(divisor), g)
                assert rest is not None  # g was chosen among the divisor's factors
                if isinstance(e, FloorDiv):
                    return _simplify(floordiv(big, rest), ranges, memo)
                return _simplify(g * mod(big, rest) + small, ranges, memo)
        return floordiv(base, divisor) if isinstance(e, FloorDiv) else mod(base, divisor)
    rebuilt = e.func(*args)
    if isinstance(rebuilt, sympy.Add):
        return _join_divmod(rebuilt)
    return rebuilt


def _split_small_terms(
    base: Expr, divisor: int, ranges: Mapping[sympy.Symbol, Expr]
) -> tuple[int, Expr, Expr] | None:
    """Write ``base = g*big + small`` with ``g`` dividing ``divisor`` and
    ``0 <= small < g``; then ``base // divisor == big // (divisor/g)`` and
    ``base % divisor == g*(big % (divisor/g)) + small``. The largest such ``g > 1``."""
    terms = sympy.Add.make_args(base)
    if len(terms) < 2:
        return None
    coeffs = [t.as_coeff_Mul()[0] for t in terms]
    if not all(c.is_Integer for c in coeffs):
        return None
    candidates = sorted({math.gcd(divisor, int(c)) for c in coeffs}, reverse=True)
    for g in candidates:
        if g <= 1:
            break
        big = [t for t, c in zip(terms, coeffs, strict=True) if int(c) % g == 0]
        small = [t for t, c in zip(terms, coeffs, strict=True) if int(c) % g != 0]
        if not big or not small:
            continue
        rest = sympy.Add(*small)
        lo, hi = integer_bounds(rest, ranges)
        if lo is not None and hi is not None and lo >= 0 and hi < g:
            return g, sympy.Add(*[t / g for t in big]), rest
    return None


def _split_small_symbolic(
    base: Expr, divisor: Expr, ranges: Mapping[sympy.Symbol, Expr]
) -> tuple[Expr, Expr, Expr] | None:
    """:func:`_split_small_terms` for a divisor of sizes: ``base = g*big + small`` with
    ``g`` a factor of ``divisor`` and ``0 <= small < g`` proven from the ranges (then
    ``base // divisor == big // (divisor/g)``). What a reshape of a transposed or
    flattened dim leaves under symbolic sizes: ``(32*s1*d0 + 32*d1 + d2) // (128*s1)``
    with ``d1 < s1``, ``d2 < 32`` is ``d0 // 4``. The candidates ``g`` are the common
    factors of the divisor with each term's size coefficient, most sizes first."""
    if not _positive_size(divisor):
        return None
    if isinstance(divisor, sympy.Add):
        return _split_small_content(base, divisor, ranges)
    terms = [t for t in sympy.Add.make_args(sympy.expand(base))]
    if len(terms) < 2:
        return None
    coeffs: list[Expr] = []
    for t in terms:
        coeffs.append(sympy.Mul(*[f for f in sympy.Mul.make_args(t) if f.is_Number or _is_size(f)]))
    candidates: list[Expr] = []
    for c in coeffs:
        g = cast(Expr, sympy.gcd(c, divisor))
        if g != 1 and g not in candidates and _positive_size(g):
            candidates.append(g)
    candidates.sort(key=lambda g: (-len(g.free_symbols), -sample_sizes(g)))
    for g in candidates:
        big: list[Expr] = []
        small: list[Expr] = []
        for t, c in zip(terms, coeffs, strict=True):
            q = polynomial_quotient(sympy.expand(c), g)
            if q is None:
                small.append(t)
            else:
                big.append(sympy.expand(t / g))
        if not big or not small or polynomial_quotient(sympy.expand(divisor), g) is None:
            continue
        rest = sympy.Add(*small)
        if _within(rest, g, ranges):
            return g, sympy.Add(*big), rest
    return None


def _split_small_content(
    base: Expr, divisor: sympy.Add, ranges: Mapping[sympy.Symbol, Expr]
) -> tuple[Expr, Expr, Expr] | None:
    """:func:`_split_small_symbolic` for a divisor that is a sum of sizes with an integer
    content (``116*f + 116`` for ``f = (s1 - 1) // 16``, a strided convolution's output
    size multiplied out): :func:`_split_small_terms` by that content. What
    a channel-last ``cat`` of matrix-product rows leaves under symbolic sizes:
    ``(116*d2 + 116*d3 + d4 - 116) // (116*f + 116)`` with ``d4 < 116`` is
    ``(d2 + d3 - 1) // (f + 1)`` (the division leaves the vectorized channel loop)."""
    content, _ = divisor.primitive()
    if not content.is_Integer or int(content) < 2:
        return None
    split = _split_small_terms(sympy.expand(base), int(content), ranges)
    if split is None:
        return None
    g, big, small = split
    return sympy.Integer(g), big, small


def _join_divmod(e: sympy.Add) -> Expr:
    """``c*b*(x // b) + c*(x % b)`` -> ``c*x`` (repeatedly; ``c`` may hold sizes:
    ``32*s2*((x // s2) % s1) + 32*s1*s2*(x // (s1*s2))`` is ``32*s2*(x // s2)``), and
    ``c*(x % b) + c*b*((x // b) % m)`` -> ``c*(x % (b*m))`` (Inductor's merge of
    ``ModularIndexing``: a chunk of a reduction over two contiguous dims, ``r % 112 +
    112*((r // 112) % 112)``, reads runs of 12544, not of 112)."""
    terms = list(sympy.Add.make_args(e))
    changed = True
    while changed:
        changed = False
        for t in terms:
            coeff, core = _mod_factor(t)
            if core is None:
                continue
            x, b = core.args
            if (merged := _mod_partner(terms, coeff * b, cast(Expr, FloorDiv(x, b)))) is not None:
                terms.remove(t)
                terms.remove(merged[0])
                terms.append(coeff * mod(x, b * merged[1]))
                changed = True
                break
            partner = coeff * b * FloorDiv(x, b)
            if partner in terms:
                partners = [partner]
            elif b.has(sympy.Add):
                partners = _spread_partner(terms, coeff * b, floordiv(*operands(core)))
                if partners is None:
                    continue
            else:
                continue
            terms.remove(t)
            for p in partners:
                terms.remove(p)
            terms.append(coeff * x)
            changed = True
            break
    return sympy.Add(*terms)


def _mod_partner(terms: list[Expr], coefficient: Expr, quotient: Expr) -> tuple[Expr, Expr] | None:
    """The term ``coefficient * (quotient % m)`` and its ``m``, else None."""
    for u in terms:
        c, core = _mod_factor(u)
        if core is not None and core.args[0] == quotient and sympy.expand(c - coefficient) == 0:
            return u, cast(Expr, core.args[1])
    return None


def _spread_partner(terms: list[Expr], coefficient: Expr, quotient: Expr) -> list[Expr] | None:
    """The terms ``k_i * quotient`` whose coefficients add up to ``coefficient``, else
    None: a divisor that is a sum of sizes (a convolution's output size
    ``(s1 - 1) // 2 + 1``) is spread over several terms once multiplied out
    (``64*f*(x // (f + 1)) + 64*(x // (f + 1))``)."""
    found = [u for u in terms if quotient in sympy.Mul.make_args(u)]
    if not found:
        return None
    total = sympy.Add(*[u / quotient for u in found])
    if total.has(quotient) or sympy.expand(total - coefficient) != 0:
        return None
    return found


def _mod_factor(term: Expr) -> tuple[Expr, sympy.Mod | None]:
    """``term`` as ``coeff * (x % b)`` (the other factors numbers and sizes), else
    ``(term, None)``."""
    if isinstance(term, sympy.Mod):
        return sympy.Integer(1), term
    if not isinstance(term, sympy.Mul):
        return term, None
    mods = [f for f in term.args if isinstance(f, sympy.Mod)]
    if len(mods) != 1:
        return term, None
    rest = [f for f in term.args if f is not mods[0]]
    if not all(f.is_Number or _positive_power(f) for f in rest):
        return term, None
    return sympy.Mul(*rest), mods[0]


def _positive_power(f: Expr) -> bool:
    """A positive symbol or a positive integer power of one: ``s1``, ``s1**2`` (the
    ``s1*s1`` row stride of attention scores, ``[4*s0*s1, s1]`` rows of ``[s0, 4, s1, s1]``)."""
    if isinstance(f, sympy.Pow):
        base, exp = f.args
        return (
            isinstance(base, sympy.Symbol) and bool(base.is_positive) and exp.is_Integer and exp > 0
        )
    return isinstance(f, sympy.Symbol) and bool(f.is_positive)


Bounds = tuple[int | None, int | None]
"""Inclusive integer bounds ``(lo, hi)``, None where unknown."""


def integer_bounds(e: Expr, ranges: Mapping[sympy.Symbol, Expr]) -> Bounds:
    """Integer bounds of ``e`` knowing ``0 <= v < ranges[v]`` (None where unknown)."""

    def of(symbol: sympy.Symbol) -> Bounds:
        size = ranges.get(symbol)
        lo = 0 if symbol.is_nonnegative or size is not None else None
        if size is None or not sympy.sympify(size).is_Integer:
            return lo, None
        return lo, int(size) - 1

    return interval(e, of)


def interval(e: Expr, of: Callable[[sympy.Symbol], Bounds]) -> Bounds:
    """Integer bounds of ``e`` by interval arithmetic, given each symbol's (``of``)."""
    if e.is_Integer:
        return int(e), int(e)
    if isinstance(e, sympy.Symbol):
        return of(e)
    if isinstance(e, sympy.Add):
        lo_sum: int | None = 0
        hi_sum: int | None = 0
        for a in e.args:
            lo, hi = interval(a, of)
            lo_sum = None if lo is None or lo_sum is None else lo_sum + lo
            hi_sum = None if hi is None or hi_sum is None else hi_sum + hi
        return lo_sum, hi_sum
    if isinstance(e, sympy.Mul):
        coeff, rest = e.as_coeff_Mul()
        if coeff.is_Integer and not isinstance(rest, sympy.Mul):
            lo, hi = interval(rest, of)
            c = int(coeff)
            if lo is None or hi is None:
                return (None, None)
            return (min(c * lo, c * hi), max(c * lo, c * hi))
        return None, None
    if isinstance(e, FloorDiv):
        num, den = operands(e)
        lo, hi = interval(num, of)
        if den.is_Integer and as_int(den) > 0:
            d = as_int(den)
            return (None if lo is None else lo // d, None if hi is None else hi // d)
        return None, None
    if isinstance(e, sympy.Mod):
        num, den = operands(e)
        lo, hi = interval(num, of)
        if den.is_Integer and as_int(den) > 0 and lo is not None and lo >= 0:
            d = as_int(den)
            return (lo, hi) if hi is not None and hi < d else (0, d - 1)
        return None, None
    return None, None


# --- symbolic sizes: exact division by size polynomials, bounds over symbolic ranges ----


def _is_size(e: Expr) -> bool:
    """Whether ``e`` depends on sizes only (every free symbol a positive ``s<k>``)."""
    return all(cast(sympy.Symbol, s).is_positive for s in e.free_symbols)


def _static(e: Expr, ranges: Mapping[sympy.Symbol, Expr]) -> bool:
    """No size symbol in ``e`` nor in the ranges of its variables (the integer rules
    above have decided it already)."""
    return not any(
        cast(sympy.Symbol, v).is_positive
        or not sympy.sympify(ranges.get(cast(sympy.Symbol, v), 0)).is_Integer
        for v in e.free_symbols
    )


def _positive_size(divisor: Expr) -> bool:
    """A divisor of sizes only. Index expressions divide by sizes and products of sizes
    (see :class:`FloorDiv`), positive wherever an index is evaluated (a 0 size empties
    the space), so only a constant can be seen to be non-positive."""
    return _is_size(divisor) and not (divisor.is_Number and divisor <= 0)


def _symbolic_divmod(
    is_div: bool, base: Expr, divisor: Expr, ranges: Mapping[sympy.Symbol, Expr]
) -> Expr | None:
    """``base // divisor`` or ``base % divisor`` for a positive size ``divisor``: the
    terms of ``base`` that ``divisor`` divides exactly (grouped by their index part,
    so that ``s0*s2*x - s2*q*x`` divides by ``s0*s2 - s2*q``) leave the division, and
    the rest drops it where the ranges prove it lies in ``[0, divisor)``. None: no
    change."""
    if not _positive_size(divisor):
        return None
    if not isinstance(base, sympy.Add | sympy.Mul) and divisor != 1:
        # A variable (or a division) alone: nothing leaves the division, only the
        # ranges can decide it (every node coordinate of a kernel, d0 // (16*h*w)).
        if _within(base, divisor, ranges):
            return sympy.Integer(0) if is_div else sympy.expand(base)
        return None
    quotient, rest = _exact_quotient(base, divisor)
    if _within(rest, divisor, ranges):
        return sympy.expand(quotient) if is_div else rest
    if quotient == 0:
        return None
    return sympy.expand(quotient) + floordiv(rest, divisor) if is_div else mod(rest, divisor)


def _exact_quotient(base: Expr, divisor: Expr) -> tuple[Expr, Expr]:
    """``base == divisor*quotient + rest`` with ``quotient`` integer-valued: the groups of
    terms (by index part) whose size coefficient ``divisor`` divides exactly."""
    groups: dict[Expr, Expr] = {}
    for term in sympy.Add.make_args(sympy.expand(base)):
        size_part: list[Expr] = []
        index_part: list[Expr] = []
        for f in sympy.Mul.make_args(term):
            (size_part if f.is_Number or _is_size(f) else index_part).append(f)
        key = sympy.Mul(*index_part)
        groups[key] = groups.get(key, sympy.Integer(0)) + sympy.Mul(*size_part)
    quotient: Expr = sympy.Integer(0)
    rest: Expr = sympy.Integer(0)
    for key, coeff in groups.items():
        q = polynomial_quotient(sympy.expand(coeff), divisor)
        if q is None:
            rest += coeff * key
        else:
            quotient += q * key
    return quotient, rest


@cache
def polynomial_quotient(coeff: Expr, divisor: Expr) -> Expr | None:
    """``coeff / divisor`` where that is a polynomial with integer coefficients, else None
    (both expanded; sizes, and divisions of sizes, are the polynomial's variables)."""
    if coeff == 0:
        return sympy.Integer(0)
    if divisor.is_Integer:
        q = coeff / divisor
        return q if _integer_coefficients(q) else None
    if not isinstance(divisor, sympy.Add):
        q = sympy.expand(coeff / divisor)
        return q if _integer_coefficients(q) and not _has_negative_power(q) else None
    try:
        q, r = sympy.div(coeff, divisor)
    except (sympy.PolynomialError, ValueError):
        return None
    if r != 0:
        return None
    q = sympy.expand(q)
    return q if _integer_coefficients(q) else None


def _integer_coefficients(e: Expr) -> bool:
    return all(cast(Expr, c).is_Integer for c in sympy.expand(e).as_coefficients_dict().values())


def _within(e: Expr, divisor: Expr, ranges: Mapping[sympy.Symbol, Expr]) -> bool:
    """Whether ``0 <= e < divisor`` for every value of the ranges (proven, not guessed)."""
    bounds = _sym_bounds(e, ranges)
    if bounds is None:
        return False
    lo, hi = bounds
    gap = divisor - 1 - hi
    # A sample of sizes refutes most candidates before the (costlier) proof.
    if sample_sizes(lo) < 0 or sample_sizes(gap) < 0:
        return False
    return _nonneg(lo) and _nonneg(gap)


@lru_cache(maxsize=16384)
def sample_sizes(e: Expr) -> int | float:
    """``e`` at one point of the sizes (large, distinct); ``inf`` where not a number.
    A negative sample refutes ``e >= 0`` for all sizes before a costlier proof."""
    point = {
        s: sympy.Integer(1009 + 37 * k)
        for k, s in enumerate(sorted(e.free_symbols, key=str))
        if cast(sympy.Symbol, s).is_positive
    }
    value = e.xreplace(point)
    return as_int(value) if value.is_Integer else math.inf


@cache
def _nonneg(e: Expr) -> bool:
    """Proven ``e >= 0`` for all positive integer sizes: with every size ``s = t + 1``
    (``t >= 0``), the expanded polynomial has no negative coefficient (a sufficient test,
    cheap where sympy's assumption queries are not: ``s1*s2 - s2`` passes)."""
    e = sympy.expand(e)
    if e.is_Number:
        return bool(e >= 0)
    if _nonneg_terms(e):
        return True
    sizes = [cast(sympy.Symbol, s) for s in e.free_symbols]
    shift = {s: s + 1 for s in sizes if s.is_positive}
    return _nonneg_terms(sympy.expand(e.xreplace(shift)))


def _nonneg_terms(e: Expr) -> bool:
    """Every term a non-negative number times non-negative atoms (sizes, their powers,
    floor divisions and remainders of non-negative sums)."""
    for term in sympy.Add.make_args(e):
        coeff, rest = term.as_coeff_Mul()
        if coeff < 0:
            return False
        for f in sympy.Mul.make_args(rest):
            if isinstance(f, sympy.Pow) and f.exp.is_Integer and as_int(f.exp) > 0:
                f = f.base
            if isinstance(f, sympy.Symbol):
                if not f.is_nonnegative:
                    return False
            elif isinstance(f, FloorDiv | sympy.Mod):
                num, den = operands(f)
                if not (_is_size(f) and den.is_positive and _nonneg_terms(sympy.expand(num))):
                    return False
            elif not f.is_Number:
                return False
    return True


def _sym_bounds(e: Expr, ranges: Mapping[sympy.Symbol, Expr]) -> tuple[Expr, Expr] | None:
    """Bounds ``lo <= e <= hi`` as size expressions (None where unknown)."""
    if e.is_Number or _is_size(e):
        return e, e
    if isinstance(e, sympy.Symbol):
        size = ranges.get(e)
        if size is None or not e.is_nonnegative:
            return None
        return sympy.Integer(0), size - 1
    if isinstance(e, sympy.Add):
        lo_sum: Expr = sympy.Integer(0)
        hi_sum: Expr = sympy.Integer(0)
        for a in operands(e):
            b = _sym_bounds(a, ranges)
            if b is None:
                return None
            lo_sum, hi_sum = lo_sum + b[0], hi_sum + b[1]
        return lo_sum, hi_sum
    if isinstance(e, sympy.Mul):
        factors = operands(e)
        size = sympy.Mul(*[f for f in factors if f.is_Number or _is_size(f)])
        rest = [f for f in factors if not (f.is_Number or _is_size(f))]
        lo: Expr = sympy.Integer(1)
        hi: Expr = sympy.Integer(1)
        for f in rest:  # products of non-negative index factors
            b = _sym_bounds(f, ranges)
            if b is None or not _nonneg(b[0]):
                return None
            lo, hi = lo * b[0], hi * b[1]
        if _nonneg(size):
            return size * lo, size * hi
        if _nonneg(-size):
            return size * hi, size * lo
        return None
    if isinstance(e, FloorDiv):
        num, den = operands(e)
        b = _sym_bounds(num, ranges)
        if b is None or not _positive_size(den):
            return None
        return floordiv(b[0], den), floordiv(b[1], den)
    if isinstance(e, sympy.Mod):
        _, den = operands(e)
        if _positive_size(den):
            return sympy.Integer(0), den - 1
        return None
    return None

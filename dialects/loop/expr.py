"""Index expressions: sympy expressions over index variables, with exact text syntax.

An index expression is an integer-valued sympy expression over these symbols:

=========  ====================================================================
``d0..``   the loop op's index variables (one per output dimension)
``r0..``   its reduction variables (``loop.reduction`` only)
``s0..``   its size symbols: the k-th ``syms`` operand of the loop op
``i0..``   indirect indices: the k-th ``indirect`` operand of a ``loop.load``
=========  ====================================================================

The text syntax is Python's for integers: ``+ - * ** // %`` and parentheses, e.g.
``"8*d0 + d1"``, ``"(d0 + 3) // 4"``, ``"d0 % 8"``. ``//`` and ``%`` floor like Python
(:class:`FloorDiv` and sympy's ``Mod``); index variables are non-negative integers, size
symbols positive integers. :func:`parse_expr` and :func:`format_expr` round-trip
exactly: ``parse_expr(format_expr(e)) == e`` for every expression they produce.

This module needs only sympy (no torch, no xDSL), so that printing and parsing IR stay
cheap.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from functools import cache, lru_cache
from typing import Any, cast

import sympy

Expr = sympy.Expr

VAR_KINDS = ("d", "r", "s", "i")
"""Symbol prefixes: index, reduction, size, indirect."""


class ExprSyntaxError(ValueError):
    """Text that is not an index expression; ``pos`` is the offending character."""

    def __init__(self, message: str, pos: int) -> None:
        super().__init__(message)
        self.pos = pos


@cache
def var(name: str) -> sympy.Symbol:
    """The canonical symbol for ``d3``, ``r0``, ``s1`` or ``i0`` (with assumptions)."""
    if name[:1] == "s":
        return sympy.Symbol(name, integer=True, positive=True)
    if name[:1] == "i":
        return sympy.Symbol(name, integer=True)
    return sympy.Symbol(name, integer=True, nonnegative=True)


def index_var(k: int) -> sympy.Symbol:
    return var(f"d{k}")


def reduction_var(k: int) -> sympy.Symbol:
    return var(f"r{k}")


def size_var(k: int) -> sympy.Symbol:
    return var(f"s{k}")


def indirect_var(k: int) -> sympy.Symbol:
    return var(f"i{k}")


def var_kind(symbol: sympy.Symbol) -> tuple[str, int]:
    """``d3`` -> ``("d", 3)``."""
    return symbol.name[0], int(symbol.name[1:])


class FloorDiv(sympy.Function):
    """Floor division of integers, ``a // b`` (``b`` a positive integer or size).

    Simplifies on construction where exact for all integer values: constant folding,
    ``x // 1``, nested divisions, terms of ``a`` that ``b`` divides exactly
    (``(8*d0 + d1) // 8 == d0 + d1 // 8``) and common integer factors.
    """

    nargs = 2
    is_integer = True

    @classmethod
    def eval(cls, base: Expr, divisor: Expr) -> Expr | None:  # pyright: ignore[reportIncompatibleMethodOverride]
        if divisor == 1:
            return base
        if divisor == 0:
            # Index expressions divide by sizes and strides, which are 0 only where a
            # dim is empty: no index of that space is ever evaluated, so any value will
            # do (torch.eye(0), sums over a 0-size dim, block_diag with an empty block).
            return sympy.Integer(0)
        if base.is_Integer and divisor.is_Integer:
            return sympy.Integer(as_int(base) // as_int(divisor))
        if base == 0:
            return sympy.Integer(0)
        if base == -1 and divisor.is_positive:
            # A range's upper bound (``(s**2 - 1) // s == s - 1``): -1 // s == -1.
            return sympy.Integer(-1)
        if isinstance(base, FloorDiv):
            inner, inner_divisor = operands(base)
            return floordiv(inner, inner_divisor * divisor)
        terms = cast(tuple[Expr, ...], sympy.Add.make_args(base))
        quotients = [_term_quotient(t, divisor) for t in terms]
        if any(q is not None for q in quotients):
            rest = sympy.Add(*[t for t, q in zip(terms, quotients, strict=True) if q is None])
            exact = sympy.Add(*[q for q in quotients if q is not None])
            return exact + floordiv(rest, divisor)
        if not divisor.is_Integer:
            common = _common_size_factor(terms, divisor)
            if common is not None:
                # Positive sizes cancel: floor(a*g / (b*g)) == floor(a / b).
                return floordiv(sympy.Add(*[t / common for t in terms]), divisor / common)
        if divisor.is_Integer:
            g = as_int(divisor)
            for t in terms:
                coeff = t.as_coeff_Mul()[0]
                g = math.gcd(g, as_int(coeff)) if coeff.is_Integer else 1
            if g > 1:
                return floordiv(sympy.Add(*[t / g for t in terms]), divisor / g)
        return None


def _common_size_factor(terms: Sequence[Expr], divisor: Expr) -> Expr | None:
    """The product of the divisor's size-symbol factors (``s<k>``, positive) that are
    factors of every term of the numerator (structurally), or None."""
    common: list[Expr] = []
    term_factors = [sympy.Mul.make_args(t) for t in terms]
    for f in sympy.Mul.make_args(divisor):
        if isinstance(f, sympy.Symbol) and f.is_positive and all(f in fs for fs in term_factors):
            common.append(f)
    return sympy.Mul(*common) if common else None


def _has_negative_power(e: Expr) -> bool:
    return any(
        isinstance(p, sympy.Pow) and not (p.exp.is_Integer and int(p.exp) > 0)
        for p in sympy.preorder_traversal(e)
    )


def _term_quotient(term: Expr, divisor: Expr) -> Expr | None:
    """``term / divisor`` where that is an integer for all values, else None. A quotient
    left with a denominator is not (asked structurally first: sympy's assumption query
    on a rational function of sizes is slow and nearly always undecided)."""
    if divisor.is_Integer and isinstance(term, sympy.Mul):
        q = _content_quotient(term, as_int(divisor))
        if q is not None:
            return q
    q = term / divisor
    if _has_negative_power(q):
        return None
    return q if q.is_integer else None


def _content_quotient(term: sympy.Mul, divisor: int) -> Expr | None:
    """``term / divisor`` when the integer content of ``term``'s factors is a multiple
    of ``divisor``: ``d0*(h + 1)*(32*h + 32) / 32 == d0*(h + 1)**2`` (a stride of a
    symbolic image size, ``32*((s - 1) // 2 + 1)`` multiplied out). sympy's ``Mod``
    finds these by its own evaluation (0.05-0.15 s of assumption queries a call on
    MobileNet-v2's dynamic flat indices); ``term / divisor`` alone leaves ``1/32``."""
    content = 1
    factors: list[Expr] = []
    for factor in cast(tuple[Expr, ...], term.args):
        base, exponent = factor, 1
        if isinstance(factor, sympy.Pow) and factor.exp.is_Integer and int(factor.exp) > 0:
            base, exponent = cast(Expr, factor.base), int(factor.exp)
        if base.is_Integer:
            content *= as_int(base) ** exponent
            continue
        if isinstance(base, sympy.Add):
            c, primitive = base.primitive()
            if not c.is_Integer:
                return None
            content *= as_int(c) ** exponent
            base = primitive
        factors.append(base**exponent)
    if content % divisor != 0:
        return None
    q = cast(Expr, sympy.Integer(content // divisor) * sympy.Mul(*factors))
    return q if q.is_integer else None


def flat_index(variables: Sequence[Expr], sizes: Sequence[Expr]) -> Expr:
    """Row-major position of ``variables`` in a space of ``sizes`` (what the scheduler
    and both kernel lowerings use to number a loop nest's elements)."""
    return _flat_index(tuple(variables), tuple(sizes))


@lru_cache(maxsize=16384)
def _flat_index(variables: tuple[Expr, ...], sizes: tuple[Expr, ...]) -> Expr:
    """Cached: every fusion check, inlining and kernel lowering numbers the same loop
    nests again, and under symbolic sizes each ``expand`` multiplies out products of
    compound sizes (EfficientNet-b0's dynamic compile: 1221 calls, 0.4 s of expand)."""
    out: Expr = sympy.Integer(0)
    for var, size in zip(variables, sizes, strict=True):
        out = out * size + var
    return sympy.expand(out)


@lru_cache(maxsize=16384)
def same_value(a: Expr, b: Expr) -> bool:
    """Whether ``a`` and ``b`` are the same expression once multiplied out
    (``expand(a - b) == 0``). Cached: the schedulers and lowerings compare the same
    sizes and indices again and again, and under symbolic sizes each ``expand`` costs
    a millisecond or more; structurally equal operands need none."""
    return a == b or sympy.expand(a - b) == 0


def floordiv(base: Expr | int, divisor: Expr | int) -> Expr:
    """``base // divisor``, simplified (a typed front for :class:`FloorDiv`)."""
    return cast(Expr, FloorDiv(base, divisor))


@lru_cache(maxsize=4096)
def mod(base: Expr | int, divisor: Expr | int) -> Expr:
    """``base % divisor`` (Python's sign rule), simplified; 0 for a 0 divisor (an empty
    dim's size: see :meth:`FloorDiv.eval`). Cached: sympy's evaluation of a symbolic
    ``Mod`` asks assumption queries (0.1-0.8 s each on the dynamic scheduler's
    expressions), and a model's repeated layers ask for the same ones (bert, seq 64: 153
    calls, 52 distinct; sympy's own cache had evicted them)."""
    if divisor == 0:
        return sympy.Integer(0)
    terms = sympy.Add.make_args(base) if isinstance(base, sympy.Add) else ()
    kept = [t for t in terms if _term_quotient(cast(Expr, t), sympy.sympify(divisor)) is None]
    if len(kept) < len(terms):
        # Multiples of the divisor leave the remainder (``(384*d1 + d2) % 384 ==
        # d2 % 384``), as sympy's evaluation drops them first too, but without its
        # assumption queries over the whole sum (0.03-0.09 s each on the dynamic
        # scheduler's flat indices): the same expression, sooner.
        return mod(sympy.Add(*kept), divisor)
    if _opaque_mod(base, divisor):
        # What sympy's evaluation returns too, without its assumption queries (0.1 s
        # each on FloorDiv(d0, 128*s1) % s0, the dynamic scheduler's common case).
        return cast(Expr, sympy.Mod(base, divisor, evaluate=False))
    return cast(Expr, sympy.Mod(base, divisor))


def replace_symbols(expr: Expr, mapping: Mapping[sympy.Basic, Expr]) -> Expr:
    """``expr.xreplace(mapping)``, but each ``%`` over replaced operands is rebuilt by
    :func:`mod` (its shortcuts and cache) rather than by sympy's ``Mod`` evaluation:
    the same expression, without 0.05-0.35 s of assumption queries per ``%`` over
    symbolic sizes (choosing a C++ kernel's loops substitutes loop variables into every
    node index: 2.1 s of ResNet-18's dynamic compile)."""
    replaced = mapping.get(expr)
    if replaced is not None:
        return replaced
    if not expr.args:
        return expr
    args = [replace_symbols(cast(Expr, a), mapping) for a in expr.args]
    if all(a is b for a, b in zip(args, expr.args, strict=True)):
        return expr
    if isinstance(expr, sympy.Mod):
        return mod(args[0], args[1])
    return cast(Expr, expr.func(*args))


def _opaque_mod(base: Expr | int, divisor: Expr | int) -> bool:
    """``base % divisor`` that no rule simplifies: a floor division by sizes modulo a
    product of sizes (positive symbols and a positive constant) that does not contain it,
    or a sum over a compound size (:func:`_opaque_sum_mod`) or over sizes
    (:func:`_opaque_polynomial_mod`)."""
    if isinstance(base, sympy.Add) and isinstance(divisor, sympy.Add):
        return _opaque_sum_mod(base, divisor) or _opaque_polynomial_mod(base, divisor)
    if isinstance(base, sympy.Add) and isinstance(divisor, sympy.Symbol | sympy.Mul):
        return _opaque_polynomial_mod(base, divisor)
    base, divisor = sympy.sympify(base), sympy.sympify(divisor)
    if _is_unbounded(base) and (_is_size(divisor) or (divisor.is_Integer and divisor > 1)):
        # ``d0 % (h + 1)**2``, ``d3 // (64*h + 64) % (h + 1)``, ``d0 % 512`` (merging a
        # kernel's loops): no bound on the base, nothing to evaluate.
        return True
    if not isinstance(base, FloorDiv) or not isinstance(divisor, sympy.Symbol | sympy.Mul):
        return False
    if divisor.has(base) or base.has(divisor):
        return False
    return all(
        (isinstance(f, sympy.Symbol) and f.is_positive) or (f.is_Integer and f > 1)
        for f in sympy.Mul.make_args(divisor)
    )


def _opaque_sum_mod(base: sympy.Add, divisor: sympy.Add) -> bool:
    """``(d1 + (16*d2 + d3) // (16*h + 16)) % (h + 1)`` (MobileNet-v2's dynamic
    unflattening, ``h = (s1 - 1) // 2``): a sum of integer multiples of loop variables
    and floor divisions, one of them a loop variable with coefficient 1 that the divisor
    lacks, modulo a sum of sizes with content 1 and a positive constant. The sum shares
    no factor with the divisor (it is linear in that variable, with coefficient 1) and
    none of its terms reduces modulo it, so sympy's evaluation returns it unchanged, after
    0.05-0.1 s of assumption queries."""
    if any(not (isinstance(s, sympy.Symbol) and s.is_positive) for s in divisor.free_symbols):
        return False
    constant, rest = divisor.as_coeff_Add()
    if not (constant.is_Integer and constant > 0) or rest.primitive()[0] != 1:
        return False
    unit_variable = False
    for term in cast(tuple[Expr, ...], base.args):
        coefficient, factor = term.as_coeff_Mul()
        if not coefficient.is_Integer:
            return False
        if isinstance(factor, sympy.Symbol) and factor.is_nonnegative and not factor.is_positive:
            # A loop variable (sizes are positive, loop variables only nonnegative).
            unit_variable = unit_variable or (coefficient == 1 and not divisor.has(factor))
        elif not isinstance(factor, FloorDiv) or divisor.has(factor) or factor.has(divisor):
            return False
    return unit_variable


def _is_loop_variable(e: sympy.Basic) -> bool:
    """A loop variable: sizes are positive symbols, loop variables only nonnegative."""
    return isinstance(e, sympy.Symbol) and bool(e.is_nonnegative) and not e.is_positive


def _is_unbounded(e: sympy.Basic) -> bool:
    """A loop variable, or a floor division of a sum of loop-variable terms with
    nonnegative integer coefficients by a positive size: nonnegative, and with no upper
    bound sympy could use."""
    if _is_loop_variable(e):
        return True
    if not isinstance(e, FloorDiv):
        return False
    numerator, denominator = cast(tuple[Expr, ...], e.args)
    if not (_is_size(denominator) or (denominator.is_Integer and denominator > 0)):
        return False
    terms = sympy.Add.make_args(numerator)
    return any(_is_loop_variable(t) for t in terms) and all(
        t.as_coeff_Mul()[0].is_Integer
        and t.as_coeff_Mul()[0] > 0
        and all(
            _is_loop_variable(f) or _is_size(f) for f in sympy.Mul.make_args(t.as_coeff_Mul()[1])
        )
        for t in terms
    )


def _is_size(e: sympy.Basic) -> bool:
    """An expression of sizes alone (positive symbols), with a positive value."""
    return bool(e.free_symbols) and all(
        isinstance(s, sympy.Symbol) and s.is_positive for s in e.free_symbols
    )


def _opaque_polynomial_mod(base: sympy.Add, divisor: Expr) -> bool:
    """``(d0*(h + 1)**2 + d1*(h + 1) + d2 + d3 // 64) % (h + 1)`` multiplied out (a
    flat index unflattened over a convolution's symbolic output size ``h + 1``, ResNet
    and MobileNet under ``dynamic=True``; or ``(d1 + (3*d2 + d3) // (3*s1)) % s1``): a
    sum whose every term holds a loop variable (a factor, or inside a floor division),
    one of them a loop variable with coefficient 1 that
    no other term multiplies and the divisor lacks, modulo a positive size. The sum is
    then linear in that variable with coefficient 1, so it shares no factor with the
    divisor; no term is a multiple of the divisor (:func:`mod` dropped those) and none is
    bounded (a loop variable has no upper bound here), so sympy's evaluation, term by
    term and then by their gcd, returns it unchanged, after 0.05-0.35 s of assumption
    queries each."""
    if not _is_size(divisor) or (divisor.is_Add and not _is_size(divisor.as_coeff_Add()[1])):
        return False
    multiplied: set[sympy.Basic] = set()
    lone: list[sympy.Symbol] = []
    for term in cast(tuple[Expr, ...], base.args):
        coefficient, rest = term.as_coeff_Mul()
        if not coefficient.is_Integer or _term_quotient(term, divisor) is not None:
            return False
        factors = sympy.Mul.make_args(rest)
        if coefficient == 1 and len(factors) == 1 and _is_loop_variable(factors[0]):
            lone.append(cast(sympy.Symbol, factors[0]))
            continue
        variables = 0
        for factor in factors:
            if _is_loop_variable(factor):
                variables += 1
                multiplied.add(factor)
            elif isinstance(factor, FloorDiv) and not _is_size(factor):
                variables += 1  # of loop variables: unbounded, like one
                multiplied.update(factor.free_symbols)
            elif not _is_size(factor):
                return False
        if variables == 0:
            return False
    return any(v not in multiplied and not divisor.has(v) for v in lone)


def operands(e: sympy.Basic) -> tuple[Expr, ...]:
    """``e.args`` as expressions (sympy types them as Basic)."""
    return cast(tuple[Expr, ...], e.args)


def as_int(e: sympy.Basic | int) -> int:
    return int(cast(Any, e))


@lru_cache(maxsize=16384)
def is_index_expr(expr: Expr) -> bool:
    """Whether every node is one the text syntax can print. Cached: every index
    attribute built is verified, and the passes build the same indices again and again
    (under symbolic sizes, large ones)."""
    for node in sympy.preorder_traversal(expr):
        if isinstance(node, sympy.Symbol):
            if not _NAME.fullmatch(node.name):
                return False
        elif isinstance(node, sympy.Pow):
            if not (node.exp.is_Integer and int(node.exp) > 0):
                return False
        elif isinstance(node, sympy.Number):
            if not node.is_Integer:
                return False
        elif not isinstance(node, sympy.Add | sympy.Mul | FloorDiv | sympy.Mod):
            return False
    return True


MAX_INDEX_NODES = 256
"""The most sympy nodes an index expression should have. Views compose index maps, and a
reshape torch could not view divides and takes remainders of the flat index; chained,
and with symbolic sizes that nothing folds, those nest without bound (one kernel had a
250,000-character index). Lowering materializes a contiguous copy rather than build a
larger expression, and inlining does not compose past it: a chain of N views stays
O(N)."""


@lru_cache(maxsize=8192)
def expr_nodes(expr: Expr, limit: int = MAX_INDEX_NODES) -> int:
    """The number of nodes of ``expr``, counted up to ``limit + 1`` (cached: inlining and
    reshapes ask it of the same loads in every layer of a deep model)."""
    count = 0
    for _ in sympy.preorder_traversal(expr):
        count += 1
        if count > limit:
            break
    return count


# --- printing ---------------------------------------------------------------------

_ATOM, _POW, _MUL, _ADD = 0, 1, 2, 3
"""Binding strength of a printed form (lower binds tighter)."""


@cache
def format_expr(expr: Expr) -> str:
    """The text syntax of ``expr`` (see the module docstring)."""
    return _fmt(sympy.sympify(expr))[0]


def _wrap(text_prec: tuple[str, int], max_prec: int) -> str:
    text, prec = text_prec
    return text if prec <= max_prec else f"({text})"


def _fmt(e: Expr) -> tuple[str, int]:
    if e.is_Integer:
        value = int(e)
        return (str(value), _ATOM if value >= 0 else _ADD)
    if isinstance(e, sympy.Symbol):
        return (e.name, _ATOM)
    if isinstance(e, sympy.Add):
        return (_fmt_add(e), _ADD)
    if isinstance(e, sympy.Mul):
        return _fmt_mul(e)
    if isinstance(e, sympy.Pow):
        if not (e.exp.is_Integer and int(e.exp) > 0):
            raise ValueError(f"not an index expression: {e}")
        return (f"{_wrap(_fmt(e.base), _ATOM)}**{int(e.exp)}", _POW)
    if isinstance(e, FloorDiv | sympy.Mod):
        op = "//" if isinstance(e, FloorDiv) else "%"
        num, den = operands(e)
        left = _wrap(_fmt(num), _MUL)
        right = _wrap(_fmt(den), _POW)
        return (f"{left} {op} {right}", _MUL)
    raise ValueError(f"not an index expression: {e}")


def _fmt_add(e: sympy.Add) -> str:
    out = ""
    for i, term in enumerate(_ordered_terms(e)):
        coeff, _rest = term.as_coeff_Mul()
        negative = coeff.is_Number and coeff < 0
        body = _fmt(-term)[0] if negative else _wrap(_fmt(term), _ADD)
        # A leading minus binds tighter than // and %: -(a // b) needs its parentheses.
        if negative and isinstance(-term, sympy.Add | FloorDiv | sympy.Mod):
            body = f"({body})"
        if i == 0:
            out = f"-{body}" if negative else body
        else:
            out += f" - {body}" if negative else f" + {body}"
    return out


def _ordered_terms(e: sympy.Add) -> list[Expr]:
    """Non-constant terms in sympy's print order, then the constant."""
    terms = cast(list[Expr], list(e.as_ordered_terms()))
    constants = [t for t in terms if t.is_Number]
    return [t for t in terms if not t.is_Number] + constants


def _fmt_mul(e: sympy.Mul) -> tuple[str, int]:
    coeff, rest = e.as_coeff_Mul()
    factors = list(sympy.Mul.make_args(rest))
    parts = [_wrap(_fmt(f), _POW) for f in sorted(factors, key=sympy.default_sort_key)]
    if coeff == -1:
        return ("-" + "*".join(parts), _ADD)
    if coeff != 1:
        parts.insert(0, str(int(coeff)))
    return ("*".join(parts), _MUL if coeff > 0 else _ADD)


# --- parsing ----------------------------------------------------------------------

_NAME = re.compile(r"[drsi](0|[1-9][0-9]*)")
_TOKEN = re.compile(r"(?P<int>[0-9]+)|(?P<name>[A-Za-z_][A-Za-z_0-9]*)|(?P<op>\*\*|//|[-+*%()])")


MAX_EXPONENT = 64
"""The largest exponent the text syntax accepts (index expressions are polynomials of
low degree; a huge power would make sympy compute for minutes)."""


def parse_expr(text: str) -> Expr:
    """Parse the text syntax; raises :class:`ExprSyntaxError` with a position."""
    return _Parser(text).parse()


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[tuple[str, str, int]] = []
        pos = 0
        while pos < len(text):
            if text[pos].isspace():
                pos += 1
                continue
            m = _TOKEN.match(text, pos)
            if m is None:
                raise ExprSyntaxError(f"unexpected character {text[pos]!r}", pos)
            kind = m.lastgroup or "op"
            self.tokens.append((kind, m.group(kind), m.start(kind)))
            pos = m.end()
        self.k = 0

    def peek(self) -> tuple[str, str, int] | None:
        return self.tokens[self.k] if self.k < len(self.tokens) else None

    def take(self, op: str) -> bool:
        tok = self.peek()
        if tok is not None and tok[0] == "op" and tok[1] == op:
            self.k += 1
            return True
        return False

    def parse(self) -> Expr:
        if not self.tokens:
            raise ExprSyntaxError("empty index expression", 0)
        e = self.sum()
        if (tok := self.peek()) is not None:
            raise ExprSyntaxError(f"unexpected {tok[1]!r}", tok[2])
        return e

    def sum(self) -> Expr:
        e = self.product()
        while True:
            if self.take("+"):
                e = e + self.product()
            elif self.take("-"):
                e = e - self.product()
            else:
                return e

    def product(self) -> Expr:
        e = self.unary()
        while True:
            if self.take("*"):
                e = e * self.unary()
            elif self.take("//"):
                e = floordiv(e, self._divisor())
            elif self.take("%"):
                e = mod(e, self._divisor())
            else:
                return e

    def _divisor(self) -> Expr:
        tok = self.peek()
        pos = tok[2] if tok is not None else len(self.text)
        d = self.unary()
        if d == 0:
            raise ExprSyntaxError("division by zero", pos)
        return d

    def unary(self) -> Expr:
        if self.take("-"):
            return -self.unary()
        return self.power()

    def power(self) -> Expr:
        base = self.atom()
        if self.take("**"):
            tok = self.peek()
            if tok is None or tok[0] != "int":
                raise ExprSyntaxError(
                    "expected a positive integer exponent", tok[2] if tok else len(self.text)
                )
            self.k += 1
            exponent = int(tok[1])
            if exponent > MAX_EXPONENT:
                # A size to the power of a million is a typo, and would hang sympy.
                raise ExprSyntaxError(f"exponent {exponent} is above {MAX_EXPONENT}", tok[2])
            return base**exponent
        return base

    def atom(self) -> Expr:
        tok = self.peek()
        if tok is None:
            raise ExprSyntaxError("unexpected end of index expression", len(self.text))
        kind, text, pos = tok
        self.k += 1
        if kind == "int":
            if len(text) > 19 or int(text) >= 2**63:
                raise ExprSyntaxError(f"integer {text[:24]} does not fit in 64 bits", pos)
            return sympy.Integer(int(text))
        if kind == "name":
            if not _NAME.fullmatch(text):
                raise ExprSyntaxError(
                    f"unknown symbol {text!r} (expected d<k>, r<k>, s<k> or i<k>)", pos
                )
            return var(text)
        if text == "(":
            e = self.sum()
            if not self.take(")"):
                t = self.peek()
                raise ExprSyntaxError("expected ')'", t[2] if t else len(self.text))
            return e
        raise ExprSyntaxError(f"unexpected {text!r}", pos)

"""Index expressions: exact text round trip, parse errors, and simplifications that are
checked numerically against Python's own ``//`` and ``%``."""

from __future__ import annotations

import itertools
import re

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from kiln.dialects.loop.expr import (
    ExprSyntaxError,
    as_int,
    floordiv,
    format_expr,
    mod,
    parse_expr,
    replace_symbols,
    var,
)
from kiln.dialects.loop.index_eval import compile_expr
from kiln.dialects.loop.simplify import simplify_with_ranges

d0, d1, d2, s0, i0 = var("d0"), var("d1"), var("d2"), var("s0"), var("i0")


@pytest.mark.parametrize(
    ("expr", "text"),
    [
        (8 * d0 + d1, "8*d0 + d1"),
        (floordiv(d0 + 3, 4), "(d0 + 3) // 4"),
        (mod(d0, 8), "d0 % 8"),
        (d0 - 8, "d0 - 8"),
        (-d0 + 3, "-d0 + 3"),
        (s0 * d1 + d0, "d0 + d1*s0"),
        (2 * s0**2 * d0 - 3 * d1 + 5, "2*d0*s0**2 - 3*d1 + 5"),
        (2 * mod(floordiv(d0, 4), 3), "2*(d0 // 4 % 3)"),
        (-2 * floordiv(d0, 3), "-2*(d0 // 3)"),
        (1 - floordiv(d0, 2), "-(d0 // 2) + 1"),
        (16 * i0 + d1, "d1 + 16*i0"),
        (sympy.Integer(-4), "-4"),
    ],
)
def test_format_and_parse(expr: sympy.Expr, text: str) -> None:
    assert format_expr(expr) == text
    assert parse_expr(text) == expr


def test_floordiv_simplifies_exactly_divisible_terms() -> None:
    assert floordiv(8 * d0 + d1, 8) == d0 + floordiv(d1, 8)
    assert floordiv(4 * d0, 8) == floordiv(d0, 2)
    assert floordiv(floordiv(d0, 2), 4) == floordiv(d0, 8)
    assert floordiv(s0 * d0 + d1, s0) == d0 + floordiv(d1, s0)
    assert floordiv(sympy.Integer(-7), 2) == -4


def test_floordiv_cancels_common_size_factors() -> None:
    """``view(-1, 4, c)`` of ``[s0, s1]`` resolves the -1 as ``(s0*s1) // (4*s1)``:
    positive sizes cancel (``s0 // 4``), index variables do not."""
    s1 = var("s1")
    assert floordiv(s0 * s1, 4 * s1) == floordiv(s0, 4)
    assert floordiv(s1 * d0 + s0 * s1, 4 * s1) == floordiv(d0 + s0, 4)
    assert floordiv(d0 * d1, 4 * d1) != floordiv(d0, 4)  # d1 may be 0: not cancelled
    assert floordiv(s0 * s1 + d0, 4 * s1) == floordiv(s0 * s1 + d0, 4 * s1)


def test_mod_of_a_floor_division_by_sizes_is_sympys_without_its_queries() -> None:
    """``mod`` skips sympy's evaluation (0.1 s a call) only where it would return the
    same expression: a floor division modulo a product of sizes not containing it."""
    s1 = var("s1")
    for base, divisor in [
        (floordiv(d0, 128 * s1), s0),
        (floordiv(d0, 32), 4 * s1),
        (floordiv(d0 + s0, s1), s0 * s1),
        (floordiv(d0, s0), s0),
        (floordiv(d0, 32 * s1), 4),
    ]:
        assert mod(base, divisor) == sympy.Mod(base, divisor)


@pytest.mark.parametrize(
    ("text", "message", "pos"),
    [
        ("d0 +", "unexpected end", 4),
        ("x0", "unknown symbol 'x0'", 0),
        ("3 // 0", "division by zero", 5),
        ("(d0", "expected ')'", 3),
        ("d0 ** -1", "positive integer exponent", 6),
        ("", "empty", 0),
        ("d0 $ 1", "unexpected character '$'", 3),
        # A digit inserted into an exponent or a constant (as the kiln-opt fuzzer mutates
        # IR) made sympy compute a number of millions of digits (a hang, a traceback).
        ("6 ** 99999999 + d0", "exponent 99999999 is above 64", 5),
        ("(6*d0 + d1)**999", "exponent 999 is above 64", 13),
        ("d0 + 99999999999999999999", "does not fit in 64 bits", 5),
    ],
)
def test_parse_errors(text: str, message: str, pos: int) -> None:
    with pytest.raises(ExprSyntaxError, match=re.escape(message)) as info:
        parse_expr(text)
    assert info.value.pos == pos


def test_range_simplification_joins_reshape_splits() -> None:
    ranges = {d0: sympy.Integer(32), d1: sympy.Integer(8), d2: sympy.Integer(16)}
    assert simplify_with_ranges(8 * floordiv(d0, 8) + mod(d0, 8), ranges) == d0
    assert simplify_with_ranges(floordiv(d1, 8) + mod(d1, 8), ranges) == d1
    # (256*d0 + 16*d1 + d2) // 1024 with d1, d2 < 16: the small terms never carry.
    e = floordiv(256 * d0 + 16 * d1 + d2, 1024)
    assert simplify_with_ranges(e, ranges) == floordiv(d0, 4)


# --- numeric checks: whatever the simplifier does, values must not change ------------

_atoms = st.sampled_from([d0, d1, d2])
_consts = st.integers(min_value=-9, max_value=12)


@st.composite
def _exprs(draw: st.DrawFn, depth: int = 3) -> sympy.Expr:
    if depth == 0 or draw(st.booleans()):
        return draw(_atoms) if draw(st.booleans()) else sympy.Integer(draw(_consts))
    left = draw(_exprs(depth - 1))
    kind = draw(st.sampled_from(["+", "*", "//", "%"]))
    if kind == "+":
        return left + draw(_exprs(depth - 1))
    divisor = draw(st.integers(min_value=1, max_value=9))
    if kind == "*":
        return left * draw(_consts)
    return floordiv(left, divisor) if kind == "//" else mod(left, divisor)


@settings(max_examples=300, deadline=None)
@given(_exprs())
def test_text_round_trip_and_simplification_keep_values(e: sympy.Expr) -> None:
    text = format_expr(e)
    parsed = parse_expr(text)
    assert parsed == e
    assert format_expr(parsed) == text
    sizes = {d0: 5, d1: 3, d2: 4}
    simplified = simplify_with_ranges(e, {k: sympy.Integer(v) for k, v in sizes.items()})
    before, after = compile_expr(e), compile_expr(simplified)
    for values in itertools.product(*(range(n) for n in sizes.values())):
        env = {str(k): v for k, v in zip(sizes, values, strict=True)}
        assert before(env) == after(env), f"{text} -> {format_expr(simplified)} at {env}"


def test_mod_of_a_sum_over_a_compound_size_is_sympys_without_its_queries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """MobileNet-v2's dynamic unflattening asks ``(d1 + (16*d2 + d3) // (16*h + 16)) %
    (h + 1)`` with ``h = (s1 - 1) // 2``, which sympy's evaluation returns unchanged after
    0.05-0.1 s of assumption queries (18 s of a 78 s compile in all): ``mod`` builds it
    unevaluated. A divisor with content (``2*h + 2``) or sharing a term still goes
    through sympy."""
    s1, d3 = var("s1"), var("d3")
    h, g = floordiv(s1 - 1, 2), floordiv(s1 - 1, 4)
    opaque = [
        (d1 + floordiv(16 * d2 + d3, 16 * h + 16), h + 1),
        (d1 + floordiv(32 * d2 + d3, 32 * g + 32), g + 1),
        (d1 + 3 * d2, h + 1),
    ]
    evaluated = [(d1 + h, h + 1), (2 * d1 + 2, 2 * h + 2), (floordiv(d3, 16) + d1 * h, h + 1)]

    def no_evaluation(*args: object) -> None:
        raise AssertionError(f"sympy evaluated Mod{args}")

    mod.cache_clear()
    with monkeypatch.context() as patch:
        patch.setattr(sympy.Mod, "eval", classmethod(no_evaluation))
        got = {case: mod(*case) for case in opaque}
    mod.cache_clear()
    got.update({case: mod(*case) for case in evaluated})
    # After: sympy caches its own results (asked first, they would hide an evaluation).
    assert got == {case: sympy.Mod(*case) for case in opaque + evaluated}


def test_mod_of_a_polynomial_in_sizes_is_sympys_without_its_queries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ResNet-18's dynamic unflattening asks ``(d0*(h + 1)**2 + d1*(h + 1) + d2 + d3 //
    64) % (h + 1)`` multiplied out (``h = (s1 - 1) // 2``), and its loop choice
    ``(d1 + (3*d2 + d3) // (3*s1)) % s1``: sympy's evaluation returns them unchanged
    after 0.05-0.35 s of assumption queries each (10 s of an 18 s compile in all);
    ``mod`` builds them unevaluated, and substituting loop variables into a ``%``
    (``replace_symbols``) goes through ``mod``. Terms that are multiples of the
    divisor, or of sizes alone, or no lone loop variable, still go through sympy."""
    s1, d3, x = var("s1"), var("d3"), var("x")
    h = floordiv(s1 - 1, 2)
    opaque = [
        (sympy.expand(d0 * (h + 1) ** 2 + d1 * (h + 1) + d2 + floordiv(d3, 64)), h + 1),
        (d1 + floordiv(3 * d2 + d3, 3 * s1), s1),
        (d2 * s1 + d1 + floordiv(d3, 3), s1 + 2),
        (d0, (h + 1) ** 2),  # merging a kernel's loops
        (floordiv(64 * d0 + d3, 64 * h + 64), h + 1),
        (d0, sympy.Integer(512)),
    ]
    evaluated = [
        (sympy.expand(d0 * (h + 1) + d1), h + 1),  # a multiple of the divisor
        (d1 + h + 2, h + 1),  # a term of sizes alone
        (d1 * h + d2 * h, h + 1),  # no lone loop variable
        (d1 + d1 * s1 + d2, s1),
    ]

    def no_evaluation(*args: object) -> None:
        raise AssertionError(f"sympy evaluated Mod{args}")

    mod.cache_clear()
    with monkeypatch.context() as patch:
        patch.setattr(sympy.Mod, "eval", classmethod(no_evaluation))
        got = {case: mod(*case) for case in opaque}
        substituted = replace_symbols(sympy.Mod(x + d2, s1, evaluate=False), {x: d1 * s1 + d0})
    mod.cache_clear()
    got.update({case: mod(*case) for case in evaluated})
    assert got == {case: sympy.Mod(*case) for case in opaque + evaluated}
    assert substituted == sympy.Mod(d0 + d2, s1)
    for base, divisor in opaque + evaluated:  # and numerically, Python's own %
        for values in itertools.product(range(3), range(4), range(5), [0, 7, 64], [1, 4, 9]):
            point = dict(zip((d0, d1, d2, d3, s1), values, strict=True))
            want = as_int(base.xreplace(point)) % as_int(divisor.xreplace(point))
            assert as_int(got[base, divisor].xreplace(point)) == want

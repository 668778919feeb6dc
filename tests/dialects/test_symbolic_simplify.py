"""Index simplification over symbolic sizes (issue 21): ``simplify_with_ranges`` with
ranges and divisors that are size symbols, as the C++ and Triton lowerings meet them
under ``dynamic=True``. Each rewrite is also checked numerically at random points."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any, cast

import sympy

from kiln.dialects.loop.expr import (
    FloorDiv,
    expr_nodes,
    floordiv,
    mod,
    var,
)
from kiln.dialects.loop.simplify import simplify_with_ranges

s0, s1, s2, s3 = (var(f"s{k}") for k in range(4))
d0, d1, d2, d3 = (var(f"d{k}") for k in range(4))
q = floordiv(s0, 3)
a = s0 - q  # a narrowed dim: torch's ``s0 - s0 // 3``


def same_values(
    before: sympy.Expr, after: sympy.Expr, ranges: Mapping[sympy.Symbol, sympy.Expr]
) -> None:
    rng = random.Random(0)
    for _ in range(60):
        sizes = {s: sympy.Integer(rng.randint(1, 9)) for s in (s0, s1, s2, s3)}
        point = dict(sizes)
        for v, size in ranges.items():
            n = int(cast(Any, sympy.sympify(size).xreplace(sizes)))
            if n <= 0:
                break
            point[v] = sympy.Integer(rng.randrange(n))
        else:
            assert before.xreplace(point) == after.xreplace(point), point


def test_divisions_inside_their_symbolic_range_drop() -> None:
    ranges = {d0: s0, d1: s1, d2: s2}
    e = (
        d0 * s1 * s2
        + s1 * s2 * floordiv(d1 * s2 + d2, s1 * s2)
        + s2 * mod(d1 + floordiv(d2, s2), s1)
        + mod(d2, s2)
    )
    got = simplify_with_ranges(e, ranges)
    assert got == d0 * s1 * s2 + d1 * s2 + d2
    same_values(e, got, ranges)


def test_terms_a_compound_size_divides_leave_the_division() -> None:
    # The flat index of a [2, a, s1, s2*a] space, expanded (as the C++ loop nest
    # rewrites it): dividing by s2*a must give back the outer coordinates.
    ranges = {d0: sympy.Integer(2), d1: a, d2: s1, d3: s2 * a}
    flat = sympy.expand(d3 + s2 * a * d2 + s1 * s2 * a * d1 + s1 * s2 * a * a * d0)
    div = floordiv(flat, sympy.expand(s2 * a))
    assert simplify_with_ranges(mod(flat, sympy.expand(s2 * a)), ranges) == d3
    assert simplify_with_ranges(mod(div, s1), ranges) == d2
    assert simplify_with_ranges(div, ranges) == sympy.expand(d2 + s1 * d1 + s1 * a * d0)
    for e in (div, mod(div, s1), mod(flat, sympy.expand(s2 * a))):
        same_values(e, simplify_with_ranges(e, ranges), ranges)


def test_nothing_is_dropped_without_proof() -> None:
    ranges = {d0: s0, d1: s1, d2: s2}
    kept = [
        floordiv(d1, s2),  # d1 < s1, not s2
        mod(d2 + 1, s2),  # d2 + 1 may equal s2
        floordiv(d0, a),  # d0 < s0 may exceed s0 - s0 // 3
        mod(d1 * s2 + d2, s1 * s2 - 1),
    ]
    for e in kept:
        got = simplify_with_ranges(e, ranges)
        assert got.has(FloorDiv, sympy.Mod), (e, got)
        same_values(e, got, ranges)


def test_a_chain_of_reshapes_stays_small() -> None:
    # reshape [s0, s1, s2] -> [s0*s1, s2] -> [s0, s1*s2] -> [s0, s1, s2], each through the
    # flat index: with symbolic ranges the chain folds back to the identity.
    ranges = {d0: s0, d1: s1, d2: s2}
    flat = d0 * s1 * s2 + d1 * s2 + d2
    idx = [floordiv(flat, s1 * s2), mod(floordiv(flat, s2), s1), mod(flat, s2)]
    for _ in range(4):
        flat = idx[0] * s1 * s2 + idx[1] * s2 + idx[2]
        idx = [
            simplify_with_ranges(e, ranges)
            for e in (floordiv(flat, s1 * s2), mod(floordiv(flat, s2), s1), mod(flat, s2))
        ]
    assert idx == [d0, d1, d2]
    assert max(expr_nodes(e) for e in idx) == 1


def test_a_factor_of_a_symbolic_divisor_splits_off_small_terms() -> None:
    # A dim merged with a batch-like dim under a transposed layout (attention's
    # ``_unsafe_view`` of [s0, 4, s1, 32] to [4*s0, s1, 32]): the terms below the
    # factor 32*s1 of the divisor cannot carry into it, so the division is d0 // 4.
    ranges = {d0: 4 * s0, d1: s1, d2: sympy.Integer(32)}
    e = floordiv(32 * s1 * d0 + 32 * d1 + d2, 128 * s1)
    got = simplify_with_ranges(e, ranges)
    assert got == floordiv(d0, 4)
    same_values(e, got, ranges)
    m = mod(32 * s1 * d0 + 32 * d1 + d2, 128 * s1)
    got = simplify_with_ranges(m, ranges)
    assert not got.has(FloorDiv)
    assert got.count(sympy.Mod) == 1
    same_values(m, got, ranges)


def test_a_flattened_dim_rejoins_under_a_symbolic_divisor() -> None:
    # [s0*s1, 512] read through a [s0, s1, 512] view: the row index 512*d0 + d1 again.
    ranges = {d0: s0 * s1, d1: sympy.Integer(512)}
    e = d1 + 512 * s1 * floordiv(512 * d0 + d1, 512 * s1) + 512 * mod(d0, s1)
    got = simplify_with_ranges(e, ranges)
    assert got == 512 * d0 + d1
    same_values(e, got, ranges)


def test_a_symbolic_factor_split_needs_proof() -> None:
    # d1 may reach s1 + 1 here (range s1 + 2): 32*d1 + d2 can carry into the factor 32*s1.
    ranges = {d0: s0, d1: s1 + 2, d2: sympy.Integer(32)}
    e = floordiv(32 * s1 * d0 + 32 * d1 + d2, 128 * s1)
    got = simplify_with_ranges(e, ranges)
    assert got != floordiv(d0, 4)
    same_values(e, got, ranges)


def test_divmod_pairs_with_size_coefficients_join() -> None:
    """The flat index of an NHWC buffer over a merged ``[s0*s1*s2, 32]`` loop space:
    ``32*s2*((d0 // s2) % s1) + 32*s1*s2*(d0 // (s1*s2)) + 32*(d0 % s2) + d1`` is
    ``32*d0 + d1`` (the join of ``b*(x // b) + x % b`` with a coefficient of sizes);
    it divided three times per row of ResNet's batch-norm kernels."""
    ranges = {d0: s0 * s1 * s2, d1: sympy.Integer(32)}
    before = (
        32 * s2 * mod(floordiv(d0, s2), s1)
        + 32 * s1 * s2 * floordiv(d0, s1 * s2)
        + 32 * mod(d0, s2)
        + d1
    )
    after = simplify_with_ranges(before, ranges)
    assert after == 32 * d0 + d1
    same_values(before, after, ranges)


def test_remainder_of_a_quotient_below_its_divisor_drops() -> None:
    """``(d0 // s1) % s1`` with ``d0 < s1**2`` is ``d0 // s1``: the bound
    ``(s1**2 - 1) // s1`` is ``s1 - 1`` (``-1 // s1 == -1`` for a positive size)."""
    ranges = {d0: s1 * s1}
    assert floordiv(-1, s1) == -1
    before = s1 * mod(floordiv(d0, s1), s1) + mod(d0, s1)
    after = simplify_with_ranges(before, ranges)
    assert after == d0
    same_values(before, after, ranges)


def test_divmod_pairs_with_squared_size_coefficients_join() -> None:
    """The row offset of ``[s0, 4, s1, s1]`` attention scores over ``[4*s0*s1]`` rows:
    ``s1*(d0 % s1) + s1**2*((d0 // s1) % 4) + 4*s1**2*(d0 // (4*s1))`` is ``s1*d0``
    (a coefficient ``s1**2`` joins like ``s1``); it divided four times per row of BERT's
    softmax."""
    ranges = {d0: 4 * s0 * s1}
    before = (
        s1 * mod(d0, s1) + s1 * s1 * mod(floordiv(d0, s1), 4) + 4 * s1 * s1 * floordiv(d0, 4 * s1)
    )
    after = simplify_with_ranges(before, ranges)
    assert after == s1 * d0
    same_values(before, after, ranges)


def test_divmod_pairs_over_a_compound_size_join() -> None:
    """A strided convolution's output size ``h = (s1 - 1) // 2 + 1`` multiplied out spreads
    ``64*h*(d0 // h)`` over two terms: ``64*f*(d0 // h) + 64*(d0 // h) + 64*(d0 % h)``
    is ``64*d0``, and so is the next merge over ``h**2`` (three terms). ResNet-18's
    dynamic batch-norm kernels ran as ``[s0, h, h, 64]`` loop nests, the index
    recomputing ``(s1 - 1) // 2`` per element, 3-6x slower than the static kernels."""
    f = floordiv(s1 - 1, 2)
    h = f + 1
    ranges = {d0: h * h, d1: s0}
    before = (
        64 * d1 + 64 * floordiv(d0, h) + 64 * mod(d0, h) + 128 * d1 * f + 64 * d1 * f * f
    ) + 64 * f * floordiv(d0, h)
    after = simplify_with_ranges(before, ranges)
    assert after == 64 * d0 + sympy.expand(64 * d1 * h**2)
    same_values(before, after, ranges)
    ranges2 = {d2: s0 * h * h}
    merged = cast(sympy.Expr, after.xreplace({d1: floordiv(d2, h**2), d0: mod(d2, h**2)}))
    assert simplify_with_ranges(merged, ranges2) == 64 * d2
    same_values(merged, simplify_with_ranges(merged, ranges2), ranges2)


def test_a_compound_divisor_joins_only_with_its_whole_coefficient() -> None:
    """``64*(d0 // h) + 64*(d0 % h)`` lacks the ``64*f*(d0 // h)`` term: no join."""
    h = floordiv(s1 - 1, 2) + 1
    before = 64 * floordiv(d0, h) + 64 * mod(d0, h)
    after = simplify_with_ranges(before, {d0: 3 * h})
    assert after.has(sympy.Mod)
    same_values(before, after, {d0: 3 * h})


def test_multiples_of_a_constant_inside_a_compound_stride_divide_out() -> None:
    """MobileNet-v2's dynamic flat indices have strides ``32*h + 32`` of a strided
    convolution's output size ``h = (s1 - 1) // 2 + 1`` multiplied out; ``// 32`` and
    ``% 32`` take the constant out of them (``floordiv`` left a ``//`` of the whole sum,
    and ``mod`` asked sympy's evaluation, 0.05-0.15 s of assumption queries a call)."""
    f = floordiv(s1 - 1, 2)
    flat = d0 * (f + 1) * (32 * f + 32) + d1 * (32 * f + 32) + 32 * d2 + d3
    quotient = floordiv(flat, 32)
    assert quotient == d0 * (f + 1) ** 2 + d1 * (f + 1) + d2 + floordiv(d3, 32)
    assert mod(flat, 32) == sympy.Mod(d3, 32)
    ranges = {d0: s0, d1: f + 1, d2: f + 1, d3: sympy.Integer(32)}
    same_values(cast(sympy.Expr, FloorDiv(flat, 32, evaluate=False)), quotient, ranges)
    # A content that is not a multiple stays: (16*f + 16) // 32 is not exact.
    half = d1 * (16 * f + 16) + d3
    assert floordiv(half, 32) == FloorDiv(half, 32)


def test_division_by_a_sum_of_sizes_leaves_the_channel_loop() -> None:
    """A channels-last ``cat`` of matrix-product rows under symbolic sizes divides by
    ``116*f + 116`` (``f = (s1 - 1) // 16``, a strided convolution's output size
    multiplied out): the channel variable (``d4 < 116``) leaves the division, so the
    division no longer depends on the vectorized loop (ShuffleNet-v2 dynamic). Checked
    against Python's ``//`` and ``%`` at random points."""
    s1 = var("s1")
    f = floordiv(s1 - 1, 16)
    d2, d3, d4 = var("d2"), var("d3"), var("d4")
    ranges = {d2: f + 1, d3: sympy.Integer(2), d4: sympy.Integer(116)}
    base = 116 * d2 + 116 * d3 + d4 - 116
    div = simplify_with_ranges(floordiv(base, 116 * f + 116), ranges)
    rem = simplify_with_ranges(mod(base, 116 * f + 116), ranges)
    assert div == floordiv(d2 + d3 - 1, f + 1)
    assert rem == d4 + 116 * mod(d2 + d3 - 1, f + 1)
    rng = random.Random(0)
    for _ in range(500):
        size = rng.randint(1, 200)
        point = {s1: size, d2: rng.randrange((size - 1) // 16 + 1), d3: rng.randrange(2)}
        point[d4] = rng.randrange(116)
        value = 116 * point[d2] + 116 * point[d3] + point[d4] - 116
        divisor = 116 * ((size - 1) // 16) + 116
        assert int(div.subs(point)) == value // divisor
        assert int(rem.subs(point)) == value % divisor


def test_a_variable_alone_is_decided_by_its_range_only() -> None:
    # Every node coordinate of a kernel: d0 // (s1*s2) and (d0 // s2) % s1.
    wide = {d0: s0 * s1 * s2}
    assert simplify_with_ranges(floordiv(d0, s1 * s2), wide) == floordiv(d0, s1 * s2)
    assert simplify_with_ranges(mod(floordiv(d0, s2), s1), wide) == mod(floordiv(d0, s2), s1)
    narrow = {d0: s1 * s2}
    assert simplify_with_ranges(floordiv(d0, s1 * s2), narrow) == 0
    assert simplify_with_ranges(mod(floordiv(d0, s2), s1), narrow) == floordiv(d0, s2)
    for e in (floordiv(d0, s1 * s2), mod(floordiv(d0, s2), s1)):
        same_values(e, simplify_with_ranges(e, narrow), narrow)


def test_divisions_of_sizes_alone_simplify_alike_under_any_ranges() -> None:
    # A strided output size inside an index: its own division is the same under the
    # ranges of every kernel it appears in (cached once for all of them).
    h = floordiv(s1 - 1, 2) + 1
    e = floordiv(d0, 16 * h * h) + mod(d1, h)
    got = [simplify_with_ranges(e, ranges) for ranges in ({d0: s0, d1: s2}, {d0: s3, d1: h})]
    assert got[0] == e
    assert got[1] == floordiv(d0, 16 * h * h) + d1
    same_values(e, got[1], {d0: s3, d1: h})

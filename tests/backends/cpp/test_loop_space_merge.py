"""Merging a kernel's loop dims (``merge_dims``) decides plain-algebra merges without
simplifying: an index linear in the two variables is joined exactly where it reads the
merged dims contiguously, and a merge that must add a division is rejected from a
lower bound. Each case is checked against the rule itself: every expression
substituted and simplified over the merged ranges, the merge kept only where that
adds no division or modulo."""

from __future__ import annotations

import pytest
import sympy

from kiln.dialects.loop.expr import floordiv, mod, var
from kiln.passes.kernel_to_cpp.space import (
    LoopSpace,
    _divmod_count,  # pyright: ignore[reportPrivateUsage]
    _linear_parts,  # pyright: ignore[reportPrivateUsage]
    _try_merge,  # pyright: ignore[reportPrivateUsage]
    loop_symbol,
    merge_dims,
    simplify,
    substitute,
)

s0, s1 = var("s0"), var("s1")
h = floordiv(s1 - 1, 2) + 1  # a stride-2 convolution's output size
x0, x1, x2 = (loop_symbol("x", k) for k in range(3))


def by_simplifying(space: LoopSpace, exprs: list[sympy.Expr], k: int) -> list[sympy.Expr] | None:
    """The merge of x dims ``k``, ``k + 1`` as the rule states it (None: rejected)."""
    merged = sympy.Symbol(f"_mx{k}", integer=True, nonnegative=True)
    inner = space.x_sizes[k + 1]
    subs = {space.x_syms[k]: floordiv(merged, inner), space.x_syms[k + 1]: mod(merged, inner)}
    sizes = [*space.x_sizes[:k], space.x_sizes[k] * inner, *space.x_sizes[k + 2 :]]
    syms = [*space.x_syms[:k], merged, *space.x_syms[k + 2 :]]
    ranges = dict(zip(syms, sizes, strict=True))
    out = [simplify(substitute(e, subs), ranges) for e in exprs]
    if _divmod_count(out) > _divmod_count(exprs):
        return None
    final = LoopSpace.of(sizes, [])
    return [substitute(e, dict(zip(syms, final.x_syms, strict=True))) for e in out]


CASES = {
    # channels-last rows over a symbolic spatial size: contiguous, and a bias
    "contiguous": ([s0, h * h, 288], [sympy.expand(288 * h * h * x0 + 288 * x1 + x2), x2], 0),
    "inner contiguous": ([s0, h * h, 288], [sympy.expand(288 * h * h * x0 + 288 * x1 + x2)], 1),
    "broadcast channel": (
        [s0, h * h, 288],
        [sympy.expand(288 * h * h * x0 + 288 * x1 + x2), x2],
        1,
    ),
    "transposed": ([s0, h, 16], [sympy.expand(16 * h * x0 + x1 + h * x2)], 1),
    "a division of another variable": ([4, s1, 6], [6 * s1 * x0 + 6 * x1 + x2, mod(x2, 3)], 0),
    "a product of the variables": ([s0, 5, 7], [x0 * x1 + 7 * x1 + x2], 0),
    "a size-1 dim": ([s0, 1, 8], [8 * x0 + 8 * x1 + x2], 0),
    "static": ([6, 10, 3], [30 * x0 + 3 * x1 + x2, 10 * x0 + x1], 0),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_merge_is_what_simplifying_every_index_decides(name: str) -> None:
    sizes, exprs, k = CASES[name]
    space = LoopSpace.of([sympy.sympify(s) for s in sizes], [])
    expected = by_simplifying(space, exprs, k)
    got = _try_merge(space, exprs, "x", k)
    if expected is None:
        assert got is None
    else:
        assert got is not None
        assert got[1] == expected


def test_a_contiguous_channels_last_read_merges_into_one_loop() -> None:
    space = LoopSpace.of([s0, h * h, sympy.Integer(288)], [])
    read = sympy.expand(288 * h * h * x0 + 288 * x1 + x2)
    merged, exprs = merge_dims(space, [read])
    assert merged.x_sizes == [288 * s0 * h**2]
    assert exprs == [x0]


def test_linear_parts_need_each_variable_once_and_undivided() -> None:
    assert _linear_parts(sympy.expand(3 * h * x0 + 3 * x1 + s0), x0, x1) == (
        sympy.expand(3 * h),
        sympy.Integer(3),
        s0,
    )
    assert _linear_parts(x0 * x1, x0, x1) is None
    assert _linear_parts(x0**2 + x1, x0, x1) is None
    assert _linear_parts(floordiv(x0, 2) + x1, x0, x1) is None
    assert _linear_parts(x2 + h, x0, x1) == (sympy.Integer(0), sympy.Integer(0), x2 + h)


def test_replaying_the_merges_joins_what_simplifying_gives() -> None:
    space = LoopSpace.of([s0, h * h, sympy.Integer(288)], [])
    read = sympy.expand(288 * h * h * x0 + 288 * x1 + x2)
    merged, _ = merge_dims(space, [read])
    assert len(merged.merges) == 2
    nodes = [read, x2, x1, sympy.expand(288 * h * h * x0 + 288 * x1 + x2 + s0), 3 * x0 + x1]
    for e in nodes:
        slow = e
        for merge in merged.merges:
            slow = substitute(merge.simplify(slow), merge.rename)
        assert merged.replay(e) == slow

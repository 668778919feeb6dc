"""Printing index expressions as C is cached (session 11, training compile time): a kernel
prints the same address in its vector loop and its tail, and over a reduction's lanes;
the cache is keyed on everything the text depends on (the expression, the variables'
names, which are known non-negative), so a hit is the text printing would give."""

from __future__ import annotations

import sympy
import torch

from kiln.backends.cpp import index_exprs
from kiln.backends.cpp.index_exprs import c_index
from kiln.dialects.loop.expr import floordiv, var


def _uncached(expr: sympy.Expr, names: list[str], nonnegative: list[bool]) -> str:
    return index_exprs._c(index_exprs._bind(expr, names, nonnegative))[0]  # pyright: ignore[reportPrivateUsage]


def test_a_cached_index_is_the_text_printing_gives() -> None:
    i0, i1 = var("i0"), var("i1")
    exprs = [
        16 * i0 + i1,
        floordiv(i0, 4) + sympy.Mod(i1, 7),
        floordiv(i0 - 3, 4) * 8 - i1,
    ]
    for expr in exprs:
        for names in (["x0", "x1"], ["r0_block", "l"]):
            for nonnegative in ([True, True], [False, True], [True, False]):
                for _ in range(2):  # the second call is a cache hit
                    assert c_index(expr, names, nonnegative) == _uncached(expr, names, nonnegative)
    # The sign knowledge is part of the key: the same expression prints differently.
    assert c_index(floordiv(i0, 4), ["a"], [True]) == "a / 4"
    assert c_index(floordiv(i0, 4), ["a"], [False]) == "kiln_floordiv(a, 4)"


def test_a_reduction_with_a_tail_prints_its_addresses_once() -> None:
    import kiln

    cached = index_exprs._c_index_cached  # pyright: ignore[reportPrivateUsage]
    cached.cache_clear()

    def f(x: torch.Tensor) -> torch.Tensor:
        return (x * 2).sum(dim=1) + x[:, :3].amax(dim=1)

    x = torch.randn(5, 37)  # 37: a block of lanes and a tail
    compiled = kiln.compile(f, graph_cache=False)
    torch.testing.assert_close(compiled(x), f(x))
    info = cached.cache_info()
    assert info.hits > 0, info

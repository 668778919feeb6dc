"""``view_strides``: torch's ``computeStride`` over symbolic sizes, whether a view of a
strided tensor needs no copy, and the strides it has then."""

from __future__ import annotations

import sympy

from kiln.dialects.loop.expr import floordiv, var
from kiln.passes.aten_to_loop.tensors import (
    _known_greater,  # pyright: ignore[reportPrivateUsage]
    view_strides,
)

s0, s1, s2 = (var(f"s{k}") for k in range(3))
h = floordiv(s1 - 1, 2) + 1
ONE = sympy.Integer(1)


def test_splitting_and_merging_contiguous_dims_is_a_view() -> None:
    assert view_strides([s0, s1 * s2], [s1 * s2, ONE], [s0, s1, s2]) == [s1 * s2, s2, ONE]
    assert view_strides([s0, h, h, 16], [16 * h * h, 16 * h, 16, ONE], [s0, 16 * h * h]) == [
        16 * h * h,
        ONE,
    ]


def test_merging_transposed_dims_needs_a_copy() -> None:
    assert view_strides([s1, s0], [ONE, s1], [s0 * s1]) is None
    assert view_strides([s0, h, 16], [ONE, 16 * s0, s0 * h * 16], [16 * s0 * h]) is None


def test_known_greater_is_proven_or_false() -> None:
    assert _known_greater(s0 * s1 + 1, s0 * s1)
    assert _known_greater(sympy.Integer(7), sympy.Integer(6))
    assert not _known_greater(sympy.Integer(16), s0 * h * 16)  # refuted by a sample
    assert not _known_greater(s0 * s1, s0)  # equal where s1 == 1
    assert not _known_greater(s0, s1)

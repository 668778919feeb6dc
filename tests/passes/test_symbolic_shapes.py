"""Common loop nests of symbolic shapes (``passes/scheduling/symbolic_shapes.py``)."""

from __future__ import annotations

import sympy

from kiln.dialects.loop.expr import floordiv
from kiln.passes.scheduling.symbolic_shapes import (
    shapes_refine,
    static_inner_clash,
    symbolic_shapes_clash,
)

s0, s1 = sympy.symbols("s0 s1", integer=True, positive=True)
N = sympy.Integer


def test_a_flattened_shape_refines_with_its_split() -> None:
    assert shapes_refine([[s0 * s1, N(128)], [s0, s1, N(128)]])
    assert shapes_refine([[4 * s0, s1, N(32)], [s0, N(4), s1, N(32)], [128 * s0 * s1]])


def test_crossing_dims_do_not_refine() -> None:
    assert not shapes_refine([[4 * s0, s1, N(32)], [4 * s0, N(32), s1]])
    assert symbolic_shapes_clash([[4 * s0, s1, N(32)], [4 * s0, N(32), s1]])


def test_static_shapes_are_left_to_the_cpp_lowering() -> None:
    assert not symbolic_shapes_clash([[N(8), N(64), N(32)], [N(8), N(32), N(64)]])


def test_static_shapes_clash_only_in_the_innermost_loop() -> None:
    # a window attention's keys and their transpose: 32 and 49 cross in the inner loop
    assert static_inner_clash([[N(128), N(3), N(49), N(32)], [N(128), N(3), N(32), N(49)]])
    # boundaries that cross further out leave an inner loop of 16
    assert not static_inner_clash([[N(6), N(4), N(16)], [N(4), N(6), N(16)]])
    assert not static_inner_clash([[N(10), N(16)], [N(160)]])
    assert not static_inner_clash([[N(8), N(64), N(32)], [N(8), N(32), N(64)]])
    assert not static_inner_clash([[4 * s0, s1, N(32)], [4 * s0, N(32), s1]])  # symbolic


def test_strided_output_sizes_refine_by_polynomial_division() -> None:
    # EfficientNet's channels-last rows [n, h*w, c] and [n, h, w, c] with h = w the
    # output size of a strided convolution, (s1 - 1) // 32 + 1.
    h = floordiv(s1 - 1, 32) + 1
    assert shapes_refine([[s0, h * h, N(1152)], [s0, h, h, N(1152)], [s0 * h * h * 1152]])
    assert not symbolic_shapes_clash([[s0, h * h, N(1152)], [s0, h, h, N(1152)]])
    # a transposed view crosses them
    assert not shapes_refine([[s0, h, N(1152), h], [s0, h, h, N(1152)]])
    assert not shapes_refine([[s0, N(2), h], [s0, h, N(2)]])

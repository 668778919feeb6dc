"""Whether pointwise nodes of different shapes can share one loop nest under symbolic
sizes without a per-element division.

The C++ lowering splits a kernel's flat space back into dims, the common refinement of
its nodes' shapes (``[s0*s1, 128]`` and ``[s0, s1, 128]`` run as ``[s0, s1, 128]``;
see ``kernel_to_cpp/space.py``). Shapes whose dim boundaries cross, such as attention's
``[4*s0, s1, 32]`` and the transposed ``[4*s0, 32, s1]``, have none when ``s1`` is
symbolic (static sizes refine to ``[8, 32, 2, 32]``): one of them would be indexed by
``//`` and ``%`` of the flat position by ``s1`` at every element, in the vectorized
inner loop, which costs more than the launch that fusing them saves.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import sympy

from kiln.dialects.loop.expr import same_value
from kiln.dialects.loop.simplify import polynomial_quotient, sample_sizes


def _divides(a: sympy.Expr, b: sympy.Expr) -> bool:
    """``b / a`` is a polynomial in the sizes (sympy's ``cancel`` decides the same at
    ~10x the cost where sizes hold divisions: a strided convolution's output)."""
    return polynomial_quotient(sympy.expand(b), sympy.expand(a)) is not None


def _cuts(shapes: Sequence[Sequence[sympy.Expr]]) -> list[sympy.Expr]:
    """The shapes' dim boundaries: the suffix products of each, without repeats."""
    cuts: list[sympy.Expr] = []
    for shape in shapes:
        dims = [d for d in shape if d != 1]
        product: sympy.Expr = sympy.Integer(1)
        for d in reversed(dims[1:]):
            product = sympy.expand(product * d)
            if not any(same_value(product, c) for c in cuts):
                cuts.append(product)
    return cuts


def shapes_refine(shapes: Sequence[Sequence[sympy.Expr]]) -> bool:
    """Whether the shapes (of one element count) have a common refinement: their suffix
    products, together, form a chain each of which divides the next."""
    cuts = sorted(_cuts(shapes), key=sample_sizes)
    return all(_divides(a, b) for a, b in itertools.pairwise(cuts))


def static_inner_clash(shapes: Sequence[Sequence[sympy.Expr]]) -> bool:
    """Static shapes whose innermost loop no nest can share: the smallest dim boundary
    does not divide every other (``[.., 49, 32]`` and the transposed ``[.., 32, 49]``
    of a window attention's keys). The C++ lowering then indexes one of them by ``//``
    and ``%`` of the position in the vectorized inner loop, a division and a gather per
    element (Swin's q/k/v split: 4.9 ms a call on one CPU thread). Boundaries that cross only
    further out (``[6, 4, 16]`` and ``[4, 6, 16]``) keep a clean inner loop of 16."""
    if not all(all(sympy.sympify(d).is_Integer for d in s) for s in shapes):
        return False
    cuts = sorted(int(c) for c in _cuts(shapes))
    return bool(cuts) and any(c % cuts[0] for c in cuts[1:])


def symbolic_shapes_clash(shapes: Sequence[Sequence[sympy.Expr]]) -> bool:
    """Symbolic shapes that :func:`shapes_refine` rejects (static ones are left to the
    C++ lowering's own refinement, and on the CPU to :func:`static_inner_clash`)."""
    if all(all(sympy.sympify(d).is_Integer for d in s) for s in shapes):
        return False
    return not shapes_refine(shapes)


__all__ = ["shapes_refine", "static_inner_clash", "symbolic_shapes_clash"]

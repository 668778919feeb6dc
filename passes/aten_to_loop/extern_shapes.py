"""The sizes of an extern's result as expressions of its operands' sizes, where the op
fixes them (matrix products): ``bmm([4*s0, s1, 32], [4*s0, 32, s1])`` is ``[4*s0, s1, s1]``.

Without them, an extern result's symbolic dims get fresh size symbols read from the
tensor ATen returns (``memref.dim``), which nothing relates to the graph's own sizes: a
view of the result (``bmm.view(s0, 4, s1, s1)``) then compares ``s2`` with ``4*s0`` and
falls back to a general reshape, per-element ``//`` and ``%`` over the flat index, in
every consumer kernel. The sizes here are what ATen's own shape checks require, so they
are the result's sizes whenever the call succeeds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import sympy
from xdsl.ir import Operation, SSAValue

from kiln.dialects.aten.ops import AtenOp
from kiln.passes.aten_to_loop.tensors import TensorRef

Expr = sympy.Expr

_OPERANDS: dict[str, tuple[str, str]] = {
    "aten::mm.default": ("self", "mat2"),
    "aten::addmm.default": ("mat1", "mat2"),
    "aten::bmm.default": ("self", "mat2"),
    "aten::baddbmm.default": ("batch1", "batch2"),
}
"""The two factors of each matrix product: result ``[*batch, rows of a, cols of b]``."""


def extern_result_sizes(op: Operation, values: Mapping[SSAValue, object]) -> list[Expr] | None:
    """The sizes of ``op``'s (single) result, or None where the op does not fix them."""
    if not isinstance(op, AtenOp) or len(op.results) != 1:
        return None
    names = _OPERANDS.get(op.overload_name)
    if names is None:
        return None
    tensors = op.tensor_operands()
    refs: list[TensorRef] = []
    for name in names:
        operand = tensors.get(name, [None])
        ref = values.get(operand[0]) if operand and operand[0] is not None else None
        if not isinstance(ref, TensorRef):
            return None
        refs.append(ref)
    a, b = refs
    if a.rank != b.rank or a.rank not in (2, 3):
        return None
    return [*_batch(a.sizes, b.sizes), a.sizes[-2], b.sizes[-1]]


def _batch(a: Sequence[Expr], b: Sequence[Expr]) -> list[Expr]:
    return list(a[:-2])  # bmm/baddbmm: equal batch sizes (ATen checks); mm: none


__all__ = ["extern_result_sizes"]

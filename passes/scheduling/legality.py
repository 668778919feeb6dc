"""When a node may read a fused producer's value: same iteration point, same element.

A kernel iterates over ``numel`` x ``rnumel`` points ``(x, r)``. Each node in it runs at
a *level*:

* ``X``: a pointwise node over the ``numel`` space (once per ``x``): a reduction's
  epilogue, or a pointwise node of a pointwise kernel;
* ``XR``: a pointwise node over the whole ``numel * rnumel`` space (once per ``(x, r)``);
  its flat position ``p`` is ``x * rnumel + r``;
* ``XRT``: the same, its points enumerated column-major: ``p`` is ``r * numel + x``.
  A pointwise ``[M, N]`` producer of a column sum (``sum(g, 0)``, a bias gradient: the
  reduction's ``x`` is the column, its ``r`` the row) computes element ``(m, n)`` where
  the sum reads it, at ``x = n, r = m``; row-major, it would be at ``x = p // M``;
* ``RED``: a reduction: its index variables flatten to ``x``, its reduction variables
  to ``r``; its outputs live at ``X`` level.

Positions flatten row-major, whatever the node's own dimensions are, so two nodes with
different shapes but the same number of points line up element by element. A fused
consumer may read a producer's buffer only where the producer computed it *at the same
point* (in registers, not memory): an ``XR`` producer's element ``p`` at ``p`` (by an
``XR`` node or a reduction), an ``X`` producer's element ``x`` at ``x`` (by any node: a
broadcast along ``r``). :func:`read_target` gives that index in the consumer's own
variables; :func:`reads_same_point` checks every load against it.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from enum import Enum, auto

import sympy

from kiln.dialects.loop.body_ops import LoadOp
from kiln.dialects.loop.expr import flat_index, index_var, reduction_var, same_value
from kiln.dialects.loop.ops import LoopNestOp
from kiln.dialects.loop.simplify import simplify_with_ranges
from kiln.passes.scheduling.exprs import floordiv, mod, substitute
from kiln.passes.scheduling.graph import Node, NodeKind


class Level(Enum):
    X = auto()
    XR = auto()
    XRT = auto()
    RED = auto()

    @property
    def output_level(self) -> Level:
        """The level at which the node's results are available."""
        return Level.X if self is Level.RED else self


def same_size(a: sympy.Expr, b: sympy.Expr) -> bool:
    return same_value(a, b)


def _local_sizes(node: Node) -> tuple[list[sympy.Expr], list[sympy.Expr]]:
    """The node's sizes over its *own* ``s<k>`` symbols (as its load indices use them)."""
    loop = node.loop
    return [s.data for s in loop.sizes.data], [s.data for s in loop.reduction_sizes_list()]


def node_ranges(node: Node) -> dict[sympy.Symbol, sympy.Expr]:
    return loop_ranges(node.loop)


def loop_ranges(loop: LoopNestOp) -> dict[sympy.Symbol, sympy.Expr]:
    """Each loop variable of ``loop`` and its size (over the op's own ``s<k>``)."""
    sizes = [s.data for s in loop.sizes.data]
    rsizes = [s.data for s in loop.reduction_sizes_list()]
    ranges = {index_var(k): s for k, s in enumerate(sizes)}
    ranges.update({reduction_var(k): s for k, s in enumerate(rsizes)})
    return ranges


def read_target(
    consumer: Node,
    consumer_level: Level,
    producer_level: Level,
    rnumel_local: sympy.Expr,
    numel_local: sympy.Expr,
) -> sympy.Expr | None:
    """The index at which ``consumer`` must read a producer's buffer to get the element
    computed at its own point (None: it cannot read it at all).

    ``numel_local`` and ``rnumel_local`` are the kernel's sizes over the consumer's own
    size symbols.
    """
    sizes, rsizes = _local_sizes(consumer)
    d = [index_var(k) for k in range(len(sizes))]
    r = [reduction_var(k) for k in range(len(rsizes))]
    produced = producer_level.output_level
    if produced is Level.XR or produced is Level.XRT:
        if consumer_level is produced:
            return flat_index(d, sizes)
        if consumer_level is not Level.RED:
            return None
        if produced is Level.XR:
            return flat_index([*d, *r], [*sizes, *rsizes])
        return flat_index(r, rsizes) * numel_local + flat_index(d, sizes)
    if consumer_level is Level.XR:
        return floordiv(flat_index(d, sizes), rnumel_local)
    if consumer_level is Level.XRT:
        return mod(flat_index(d, sizes), numel_local)
    return flat_index(d, sizes)


def same_index(a: sympy.Expr, b: sympy.Expr, ranges: dict[sympy.Symbol, sympy.Expr]) -> bool:
    """Whether ``a`` and ``b`` are the same position for every point of ``ranges``."""
    return _same_index(a, b, frozenset(ranges.items()))


@functools.lru_cache(maxsize=8192)
def _same_index(
    a: sympy.Expr, b: sympy.Expr, range_items: frozenset[tuple[sympy.Symbol, sympy.Expr]]
) -> bool:
    # Cached: every layer of a deep model asks the same questions, and sympy's expand
    # and simplification are most of a fusion legality check (expressions are immutable
    # and compare structurally, assumptions included).
    ranges = dict(range_items)
    # A variable over a size-1 dimension is always 0.
    zero = {v: sympy.Integer(0) for v, size in ranges.items() if size == 1}
    a, b = substitute(a, zero), substitute(b, zero)
    a = simplify_with_ranges(sympy.expand(a), ranges)
    b = simplify_with_ranges(sympy.expand(b), ranges)
    return same_value(a, b)


def reads_same_point(
    consumer: Node, loads: Sequence[LoadOp], target: sympy.Expr | None
) -> LoadOp | None:
    """The first load that does not read ``target`` (None if all do)."""
    ranges = node_ranges(consumer)
    for load in loads:
        if target is None or load.indirect or load.mask is not None:
            return load
        if not same_index(load.index.data, target, ranges):
            return load
    return None


def to_local(expr: sympy.Expr, node: Node, symbols: dict[object, sympy.Symbol]) -> sympy.Expr:
    """A global-symbol expression over ``node``'s own ``s<k>`` symbols."""
    from kiln.dialects.loop.expr import size_var

    mapping: dict[sympy.Symbol, sympy.Expr] = {
        symbols[v]: size_var(k) for k, v in enumerate(node.loop.syms) if v in symbols
    }
    return substitute(expr, mapping)


def leading_split(sizes: Sequence[sympy.Expr], count: sympy.Expr) -> int | None:
    """The ``k`` whose leading ``sizes[:k]`` span ``count`` points exactly (None: none
    do): where a node's dimensions divide between a kernel's ``x`` and ``r`` without a
    division that cuts a dimension."""
    prefix: sympy.Expr = sympy.Integer(1)
    for k in range(len(sizes) + 1):
        if same_size(prefix, count):
            return k
        if k < len(sizes):
            prefix = prefix * sizes[k]
    return None


def level_in(node: Node, numel: sympy.Expr, rnumel: sympy.Expr) -> Level | None:
    """The level of ``node`` in a kernel over ``numel`` x ``rnumel`` (None: it does not fit)."""
    if node.kind is NodeKind.REDUCTION:
        if same_size(node.numel, numel) and same_size(node.rnumel, rnumel):
            return Level.RED
        return None
    if same_size(node.numel, numel):
        return Level.X
    if same_size(node.numel, numel * rnumel):
        return Level.XR
    return None


__all__ = [
    "Level",
    "flat_index",
    "leading_split",
    "level_in",
    "loop_ranges",
    "node_ranges",
    "read_target",
    "reads_same_point",
    "same_index",
    "same_size",
    "to_local",
]

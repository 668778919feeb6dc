"""The loop nest a kernel runs as: its pointwise and reduction spaces split into dims.

A kernel's ``kernel.vars`` describe every node over a *flat* ``x`` and ``r``; indexing
flat positions costs a division and a modulo per dimension and hides contiguity from
the vectorizer. So the flat spaces are split back into dimensions (the common
refinement of the nodes' own shapes: ``[10, 16]`` and ``[2, 5, 16]`` give
``[2, 5, 16]``), every index expression is rewritten over those loop variables, and
adjacent dimensions are merged again wherever that adds no division or modulo (an
elementwise op over ``[2, 5, 16]`` runs as one loop of 160; a bias broadcast over the
last dim keeps it separate: ``[10, 16]``), which is what Inductor's loop simplification
does too.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import cast

import sympy

from kiln.dialects.kernel.kernel_ops import KernelOp
from kiln.dialects.loop.expr import (
    FloorDiv,
    index_var,
    mod,
    reduction_var,
    replace_symbols,
    same_value,
    size_var,
)
from kiln.dialects.loop.ops import LoopNestOp
from kiln.dialects.loop.simplify import simplify_with_ranges
from kiln.passes.kernel_to_cpp.analysis import KernelAnalysis, Level, flat_index


def substitute(expr: sympy.Expr, mapping: Mapping[sympy.Symbol, sympy.Expr]) -> sympy.Expr:
    """``expr`` with the symbols replaced simultaneously (typed ``xreplace``)."""
    return _substitute_cached(sympy.sympify(expr), frozenset(mapping.items()))


@lru_cache(maxsize=16384)
def _substitute_cached(
    expr: sympy.Expr, mapping: frozenset[tuple[sympy.Symbol, sympy.Expr]]
) -> sympy.Expr:
    """Cached: choosing a loop space substitutes the same node indices for each
    candidate (bert under symbolic sizes: 571 calls of which 452 repeat one before); and
    ``%`` is rebuilt by :func:`~kiln.dialects.loop.expr.mod`, not by sympy's ``Mod``
    evaluation (assumption queries)."""
    return replace_symbols(expr, dict(mapping))


def floordiv(a: sympy.Expr | int, b: sympy.Expr | int) -> sympy.Expr:
    return cast(sympy.Expr, FloorDiv(sympy.sympify(a), sympy.sympify(b)))


def loop_symbol(prefix: str, k: int) -> sympy.Symbol:
    """An internal loop variable (``_x0``, ``_r1``): never clashes with IR symbols."""
    return sympy.Symbol(f"_{prefix}{k}", integer=True, nonnegative=True)


@dataclass(frozen=True)
class Merge:
    """One merge of two adjacent loop dims, ``outer`` and ``inner`` (of ``inner_size``
    points): they become ``merged // inner_size`` and ``merged % inner_size``, simplified
    over ``ranges`` (the merged space's), then the merged space's variables are renamed
    to the canonical ``_x<k>``/``_r<k>`` (``rename``)."""

    outer: sympy.Symbol
    inner: sympy.Symbol
    inner_size: sympy.Expr
    merged: sympy.Symbol
    ranges: dict[sympy.Symbol, sympy.Expr]
    rename: dict[sympy.Symbol, sympy.Expr]

    def apply(self, expr: sympy.Expr) -> sympy.Expr:
        parts = self.linear_parts(expr)
        joined = self.join(parts) if parts is not None else None
        return substitute(joined if joined is not None else self.simplify(expr), self.rename)

    def linear_parts(self, expr: sympy.Expr) -> tuple[sympy.Expr, sympy.Expr, sympy.Expr] | None:
        """:func:`_linear_parts` of ``expr`` in the two variables; None also where a
        dim has one point (its variable is simplified to 0)."""
        if 1 in self.ranges.values():
            return None
        return _linear_parts(expr, self.outer, self.inner)

    def join(self, parts: tuple[sympy.Expr, sympy.Expr, sympy.Expr]) -> sympy.Expr | None:
        """The index ``a*outer + b*inner + rest`` over the merged variable by plain
        algebra, where it reads the merged dims contiguously: ``a == b*inner_size``
        gives ``b*merged + rest`` (:func:`simplify` reaches the same through joining
        ``b*inner_size*(m // inner_size) + b*(m % inner_size)``, at many times the cost
        under symbolic sizes). None: it keeps a division of the merged variable."""
        a, b, rest = parts
        if not same_value(a, b * self.inner_size):
            return None
        return sympy.expand(b * self.merged + rest)

    def simplify(self, expr: sympy.Expr) -> sympy.Expr:
        """``expr`` over the merged variable, simplified over the merged ranges."""
        subs = {
            self.outer: floordiv(self.merged, self.inner_size),
            self.inner: mod(self.merged, self.inner_size),
        }
        return simplify(substitute(expr, subs), self.ranges)


@dataclass
class LoopSpace:
    """``x = flat(x_syms over x_sizes)`` and ``r = flat(r_syms over r_sizes)``."""

    x_sizes: list[sympy.Expr]
    r_sizes: list[sympy.Expr]
    x_syms: list[sympy.Symbol]
    r_syms: list[sympy.Symbol]
    base: LoopSpace | None = None
    """The space this one was merged from (None: not merged)."""
    merges: tuple[Merge, ...] = ()
    """The merges from ``base`` to this space, in order."""

    def replay(self, expr: sympy.Expr) -> sympy.Expr:
        """An expression over ``base``'s variables, over this space's: the merges one by
        one, as :func:`merge_dims` judged them. Composing with this space's flat index
        in one step instead divides by the product of several sizes at once, which
        simplifies back only for static sizes (``(64*x0 + x1) // (64*h**2)`` with ``h`` a
        convolution's symbolic output size ``(s1 - 1) // 2 + 1`` stays)."""
        for merge in self.merges:
            expr = merge.apply(expr)
        return expr

    @staticmethod
    def of(x_sizes: Sequence[sympy.Expr], r_sizes: Sequence[sympy.Expr]) -> LoopSpace:
        return LoopSpace(
            list(x_sizes),
            list(r_sizes),
            [loop_symbol("x", k) for k in range(len(x_sizes))],
            [loop_symbol("r", k) for k in range(len(r_sizes))],
        )

    def ranges(self) -> dict[sympy.Symbol, sympy.Expr]:
        out = dict(zip(self.x_syms, self.x_sizes, strict=True))
        out.update(zip(self.r_syms, self.r_sizes, strict=True))
        return out

    def flat_x(self) -> sympy.Expr:
        return flat_index(list(self.x_syms), self.x_sizes)

    def flat_r(self) -> sympy.Expr:
        return flat_index(list(self.r_syms), self.r_sizes)

    def kernel_substitution(self) -> dict[sympy.Symbol, sympy.Expr]:
        """The kernel's ``d0``/``r0`` in terms of the loop variables."""
        return {index_var(0): self.flat_x(), reduction_var(0): self.flat_r()}


def simplify(expr: sympy.Expr, ranges: dict[sympy.Symbol, sympy.Expr]) -> sympy.Expr:
    return _simplify_cached(sympy.sympify(expr), frozenset(ranges.items()))


@lru_cache(maxsize=16384)
def _simplify_cached(
    expr: sympy.Expr, ranges: frozenset[tuple[sympy.Symbol, sympy.Expr]]
) -> sympy.Expr:
    """Pure sympy work (``expand`` and :func:`simplify_with_ranges`), cached: choosing a
    kernel's loop space composes the same node indices for every candidate space, and
    a model's repeated layers lower the same kernels (bert under symbolic sizes: 233
    calls of which 142 repeat one before)."""
    zero: dict[sympy.Symbol, sympy.Expr] = {v: sympy.Integer(0) for v, size in ranges if size == 1}
    expr = substitute(expr, zero) if zero else expr
    return simplify_with_ranges(sympy.expand(expr), dict(ranges))


def node_sizes_in_kernel(
    node: LoopNestOp, kernel: KernelOp
) -> tuple[list[sympy.Expr], list[sympy.Expr]]:
    """The node's sizes and reduction sizes over the kernel's ``s<k>``."""
    mapping = to_kernel_symbols(node, kernel)
    sizes = [substitute(s.data, mapping) for s in node.sizes.data]
    rsizes = [substitute(s.data, mapping) for s in node.reduction_sizes_list()]
    return sizes, rsizes


def to_kernel_symbols(node: LoopNestOp, kernel: KernelOp) -> dict[sympy.Symbol, sympy.Symbol]:
    """The node's own ``s<k>`` -> the kernel's ``s<j>`` (same SSA size)."""
    kernel_syms = list(kernel.sym_args())
    return {size_var(k): size_var(kernel_syms.index(v)) for k, v in enumerate(node.syms)}


def _candidates(
    analysis: KernelAnalysis, numel: sympy.Expr, rnumel: sympy.Expr
) -> tuple[list[list[sympy.Expr]], list[list[sympy.Expr]]]:
    xs: list[list[sympy.Expr]] = []
    rs: list[list[sympy.Expr]] = []
    for node in analysis.nodes:
        sizes, rsizes = node_sizes_in_kernel(node, analysis.kernel)
        level = analysis.level[node]
        if level is Level.XR:
            prefix: sympy.Expr = sympy.Integer(1)
            for k in range(len(sizes) + 1):
                if same_value(prefix, numel):
                    xs.append(sizes[:k])
                    rs.append(sizes[k:])
                    break
                if k < len(sizes):
                    prefix = prefix * sizes[k]
            continue
        xs.append(sizes)
        if level is Level.RED:
            rs.append(rsizes)
    drop_ones = lambda dims: [d for d in dims if d != 1]  # noqa: E731
    return [drop_ones(c) for c in xs], [drop_ones(c) for c in rs]


def refine(candidates: Sequence[Sequence[sympy.Expr]], total: sympy.Expr) -> list[sympy.Expr]:
    """The common refinement of several factorizations of ``total`` (static sizes), else
    the one with the most dimensions."""
    if total == 1:
        return []
    valid = [list(c) for c in candidates if same_value(sympy.Mul(*c), total)]
    if not valid:
        return [total]
    if total.is_Integer and all(all(d.is_Integer for d in c) for c in valid):
        suffixes: set[int] = set()
        for c in valid:
            product = 1
            for d in reversed(c[1:]):
                product *= int(d)
                suffixes.add(product)
        dims = _chain_dims(sorted(suffixes), int(total))
        if dims is not None:
            return [d for d in dims if d != 1]
    return max(valid, key=len)


def _chain_dims(chain: Sequence[int], whole: int) -> list[sympy.Expr] | None:
    """The dims (outermost first) of ``whole`` points whose inner products are ``chain``
    (sorted), or None unless each divides the next and ``whole``."""
    if any(b % a for a, b in itertools.pairwise(chain)) or any(whole % c for c in chain):
        return None
    bounds = [1, *chain, whole]
    return [sympy.Integer(bounds[i + 1] // bounds[i]) for i in reversed(range(len(bounds) - 1))]


def _divmod_count(exprs: Sequence[sympy.Expr]) -> int:
    return sum(_divmods(e) for e in exprs)


@lru_cache(maxsize=16384)
def _divmods(e: sympy.Expr) -> int:
    """Cached: every merge tried counts the divisions of all the kernel's indices."""
    return sum(1 for node in sympy.preorder_traversal(e) if isinstance(node, FloorDiv | sympy.Mod))


def merge_dims(space: LoopSpace, exprs: Sequence[sympy.Expr]) -> tuple[LoopSpace, list[sympy.Expr]]:
    """Merge adjacent dimensions (x with x, r with r) wherever the expressions of the
    kernel (over the space's variables) need no more divisions or modulos for it."""
    exprs = list(exprs)
    changed = True
    while changed:
        changed = False
        for which in ("x", "r"):
            count = len(space.x_sizes if which == "x" else space.r_sizes)
            for k in reversed(range(count - 1)):
                trial = _try_merge(space, exprs, which, k)
                if trial is not None:
                    space, exprs = trial
                    changed = True
                    break
    return space, exprs


def _try_merge(
    space: LoopSpace, exprs: list[sympy.Expr], which: str, k: int
) -> tuple[LoopSpace, list[sympy.Expr]] | None:
    sizes = list(space.x_sizes if which == "x" else space.r_sizes)
    syms = list(space.x_syms if which == "x" else space.r_syms)
    merged = sympy.Symbol(f"_m{which}{k}", integer=True, nonnegative=True)
    new_sizes = [*sizes[:k], sizes[k] * sizes[k + 1], *sizes[k + 2 :]]
    new_syms = [*syms[:k], merged, *syms[k + 2 :]]
    if which == "x":
        candidate = LoopSpace(new_sizes, space.r_sizes, new_syms, space.r_syms)
    else:
        candidate = LoopSpace(space.x_sizes, new_sizes, space.x_syms, new_syms)
    # Rename to the canonical _x<k>/_r<k> so later merges see fresh names.
    final = LoopSpace.of(candidate.x_sizes, candidate.r_sizes)
    rename: dict[sympy.Symbol, sympy.Expr] = dict(
        zip([*candidate.x_syms, *candidate.r_syms], [*final.x_syms, *final.r_syms], strict=True)
    )
    merge = Merge(syms[k], syms[k + 1], sizes[k + 1], merged, candidate.ranges(), rename)
    # Decided without simplifying where the merge is plain algebra (Merge.join): an
    # index linear in the two variables that does not join gains a division at least.
    budget = _divmod_count(exprs)
    new_exprs: list[sympy.Expr | None] = []
    at_least = 0
    for e in exprs:
        parts = merge.linear_parts(e)
        joined = merge.join(parts) if parts is not None else None
        new_exprs.append(joined)
        if joined is not None:
            at_least += _divmod_count([joined])
        elif parts is not None:
            at_least += _divmod_count([e]) + 1
        if at_least > budget:
            return None
    done = [
        j if j is not None else merge.simplify(e) for j, e in zip(new_exprs, exprs, strict=True)
    ]
    if _divmod_count(done) > budget:
        return None
    final.base = space.base or space
    final.merges = (*space.merges, merge)
    return final, [substitute(e, rename) for e in done]


@lru_cache(maxsize=16384)
def _linear_parts(
    e: sympy.Expr, outer: sympy.Symbol, inner: sympy.Symbol
) -> tuple[sympy.Expr, sympy.Expr, sympy.Expr] | None:
    """``(a, b, rest)`` with ``e == a*outer + b*inner + rest`` and neither variable in
    ``a``, ``b``, ``rest`` nor under a division (``e`` expanded; divisions of sizes
    only), else None. Merging the two dims (``outer = m // n``, ``inner = m % n``) then
    gives ``b*m + rest`` where ``a == b*n``, and otherwise keeps a division of ``m``.
    Cached: each merge tried, and then its replay, splits the same indices."""
    if any(
        not cast(sympy.Symbol, v).is_positive
        for node in sympy.preorder_traversal(e)
        if isinstance(node, FloorDiv | sympy.Mod)
        for v in node.free_symbols
    ):
        return None  # a division of loop variables: the ranges may decide it
    a: list[sympy.Expr] = []
    b: list[sympy.Expr] = []
    rest: list[sympy.Expr] = []
    for term in sympy.Add.make_args(e):
        factors = sympy.Mul.make_args(term)
        if not term.has(outer, inner):
            rest.append(term)
            continue
        var = outer if outer in factors else inner
        coeff = [f for f in factors if f != var]
        if len(coeff) != len(factors) - 1 or any(f.has(outer, inner) for f in coeff):
            return None  # a power or product of the variables
        (a if var == outer else b).append(sympy.Mul(*coeff))
    return sympy.Add(*a), sympy.Add(*b), sympy.Add(*rest)


def choose_space(
    analysis: KernelAnalysis, all_exprs: Callable[[LoopSpace], list[sympy.Expr]]
) -> LoopSpace:
    """The loop space for a kernel; ``all_exprs`` gives every index expression the
    kernel computes (loads, stores, index values) over a candidate space."""
    kernel = analysis.kernel
    numel = kernel.numel.data
    rnumel = kernel.rnumel.data
    xs, rs = _candidates(analysis, numel, rnumel)
    space = LoopSpace.of(refine(xs, numel), refine(rs, rnumel))
    exprs = all_exprs(space)
    split = split_by_periods(space, exprs)
    space, merged = merge_dims(space, exprs)
    if split is not None:
        # Kept only where it leaves fewer divisions than the nodes' shapes alone.
        split_space, split_merged = merge_dims(split, all_exprs(split))
        if _divmod_count(split_merged) < _divmod_count(merged):
            return split_space
    return space


def _periods(space: LoopSpace, exprs: Sequence[sympy.Expr]) -> dict[sympy.Symbol, set[int]]:
    """The constant divisors each loop variable is divided by (``v // d``, ``v % d``)."""
    syms = set(space.x_syms) | set(space.r_syms)
    found: dict[sympy.Symbol, set[int]] = {}
    for e in exprs:
        if not e.has(FloorDiv, sympy.Mod):
            continue
        for node in sympy.preorder_traversal(e):
            if isinstance(node, FloorDiv | sympy.Mod):
                base, divisor = node.args
                if base in syms and isinstance(divisor, sympy.Integer):
                    found.setdefault(cast(sympy.Symbol, base), set()).add(int(divisor))
    return found


def _split_dim(size: sympy.Expr, periods: set[int]) -> list[sympy.Expr] | None:
    """``size`` split at ``periods`` when they divide each other and it (a chain)."""
    if not size.is_Integer:
        return None
    whole = int(size)
    chain = sorted(d for d in periods if 1 < d < whole and whole % d == 0)
    return _chain_dims(chain, whole) if chain else None


def split_by_periods(space: LoopSpace, exprs: Sequence[sympy.Expr]) -> LoopSpace | None:
    """``space`` with each static dim split where the index expressions divide its
    variable by constants, or None when none is. A reduction over a channel ``cat``
    of strided slices (Swin's patch merging: ``r // 192``, ``r % 96``, ``r // 96 % 2``
    over 384) runs as ``[2, 2, 96]``: no division per element, and a contiguous inner
    loop, as Inductor's loop splitting by the indexing's divisors gives."""
    periods = _periods(space, exprs)
    if not periods:
        return None

    def split(sizes: list[sympy.Expr], syms: list[sympy.Symbol]) -> list[sympy.Expr]:
        out: list[sympy.Expr] = []
        for size, sym in zip(sizes, syms, strict=True):
            out.extend(_split_dim(size, periods.get(sym, set())) or [size])
        return out

    x_sizes = split(space.x_sizes, space.x_syms)
    r_sizes = split(space.r_sizes, space.r_syms)
    if len(x_sizes) == len(space.x_sizes) and len(r_sizes) == len(space.r_sizes):
        return None
    return LoopSpace.of(x_sizes, r_sizes)


__all__ = [
    "LoopSpace",
    "Merge",
    "choose_space",
    "loop_symbol",
    "merge_dims",
    "node_sizes_in_kernel",
    "refine",
    "simplify",
    "split_by_periods",
    "to_kernel_symbols",
]

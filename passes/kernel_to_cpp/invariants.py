"""Moving loop-invariant work out of vectorized loops.

The lowering translates every node's body at each point, so a value that does not
depend on the vectorized dim (the row of an embedding gather, ``ids[x0]``, read inside
the loop over ``x1``) is still loaded inside the SIMD loop. The C compiler cannot hoist
such a load itself (a store of the loop might alias it), so the load stays, and an
address computed from it is no longer affine in the loop variable: the access becomes a
gather instead of a contiguous vector load. ``#pragma omp simd`` already lets iterations
run concurrently, so reading an invariant element once before the loop is what the
pragma allows anyway.

Hoisted: ops whose operands are all defined outside the loop that are pure (``cpp.index``,
``arith``/``math`` scalar ops, except integer divisions by a divisor that may be zero, which
raise an error flag)
or plain loads (no mask, no bounds check: an out-of-range indirect index must raise its
error only when the loop runs) of a buffer the loop does not store to; and
``cpp.check_index`` of an invariant index (an embedding row's id, checked once per row
rather than once per element: the index was read at a valid position, and eager checks
every index whatever the other dims). With :mod:`kiln.backends.cpp.emit`'s guarded
checked loads this speeds up an embedding gather (docs/benchmarks/design-notes.md).

Also hoisted: the part of a load's or store's address that does not depend on the loop
and holds divisions (``//``, ``%`` by symbolic sizes: views of ``dynamic=True`` graphs),
as a ``cpp.index`` before the loop that the address adds. The C compiler does not move
them itself (the address of a masked load is computed only where the mask holds), so a
channel loop of ShuffleNet's dynamic ``cat`` divided ten times per element. Only out of
loops with a static trip count (the hoisted divisions then run exactly when the loop's
first iteration would) and only divisions by sizes that are positive for every size
(at least 1: ``116*((s1 - 1) // 16) + 116``), so that no hoisted division can divide
by zero where the masked load would not have run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import sympy
from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import BlockArgument, Operation, SSAValue
from xdsl.rewriter import Rewriter
from xdsl.traits import is_side_effect_free

from kiln.dialects.cpp.attributes import LoopKind
from kiln.dialects.cpp.errors import may_divide_by_zero
from kiln.dialects.cpp.func_ops import FuncOp
from kiln.dialects.cpp.loop_ops import ForOp
from kiln.dialects.cpp.memory_ops import CheckIndexOp, IndexOp, LoadOp, StoreOp
from kiln.dialects.loop.expr import FloorDiv, as_int, indirect_var, var_kind


def _defined_outside(value: SSAValue, loop: ForOp) -> bool:
    owner = value.owner
    return not loop.is_ancestor(owner)


def _stored_buffers(loop: ForOp) -> set[SSAValue]:
    return {op.buffer for op in loop.walk() if isinstance(op, StoreOp)}


def _hoistable(op: Operation, loop: ForOp, stored: set[SSAValue]) -> bool:
    if op.regions or may_divide_by_zero(op):
        return False
    if not all(_defined_outside(v, loop) for v in op.operands):
        return False
    if isinstance(op, LoadOp):
        return op.mask is None and op.checked is None and op.buffer not in stored
    if isinstance(op, CheckIndexOp):
        # An invariant index (an embedding row, read once per row) is checked once per
        # row. If the loop runs zero times nothing reads the index's row either, but the
        # index itself was read at a valid position, and eager checks every index.
        return True
    return is_side_effect_free(op)


def hoist_from(loop: ForOp) -> int:
    """Move the invariant ops of ``loop``'s body (in order) before it; returns how many."""
    stored = _stored_buffers(loop)
    parent = loop.parent_block()
    assert parent is not None
    moved = 0
    for op in list(loop.body.block.ops):
        if _hoistable(op, loop, stored):
            op.detach()
            parent.insert_op_before(op, loop)
            moved += 1
    return moved


def _static_trip_count(loop: ForOp) -> int | None:
    """The loop's trip count when its bounds are integer constants (one variable)."""
    if len(loop.ivs) != 1:
        return None
    bounds: list[int] = []
    for value in (loop.lower_bounds[0], loop.upper_bounds[0]):
        owner = value.owner
        if isinstance(owner, IndexOp) and owner.expr.data.is_Integer:
            bounds.append(int(owner.expr.data))
        elif isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
            bounds.append(int(owner.value.value.data))  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
        else:
            return None
    return bounds[1] - bounds[0]


def _lower_bound(e: sympy.Expr, sizes: frozenset[sympy.Symbol]) -> int | None:
    """A lower bound of ``e`` for every value of ``sizes`` (each at least 1), from its
    structure; None where unknown (a loop variable, a negative factor)."""
    if e.is_Integer:
        return as_int(e)
    if isinstance(e, sympy.Symbol):
        return 1 if e in sizes else None
    args = cast(tuple[sympy.Expr, ...], e.args)
    if isinstance(e, sympy.Add):
        bounds = [_lower_bound(t, sizes) for t in args]
        return None if any(b is None for b in bounds) else sum(b for b in bounds if b is not None)
    if isinstance(e, sympy.Mul):
        total = 1
        for factor in args:
            b = _lower_bound(factor, sizes)
            if b is None or b < 0:
                return None
            total *= b
        return total
    if isinstance(e, sympy.Pow) and args[1].is_Integer and as_int(args[1]) > 0:
        b = _lower_bound(args[0], sizes)
        return None if b is None or b < 0 else b ** as_int(args[1])
    if isinstance(e, FloorDiv):
        b = _lower_bound(args[0], sizes)
        if b is None or not args[1].is_Integer or as_int(args[1]) <= 0:
            return None
        return b // as_int(args[1])
    return None


def _divides_safely(e: sympy.Expr, sizes: frozenset[sympy.Symbol]) -> bool:
    """Every division and remainder of ``e`` is by an expression of ``sizes`` that is
    at least 1."""
    for node in sympy.preorder_traversal(e):
        if isinstance(node, FloorDiv | sympy.Mod):
            bound = _lower_bound(cast(sympy.Expr, node.args[1]), sizes)
            if bound is None or bound < 1:
                return False
    return True


def _split_address(
    expr: sympy.Expr, indices: Sequence[SSAValue], loop: ForOp
) -> tuple[sympy.Expr, sympy.Expr] | None:
    """``expr`` as (the terms that depend on the loop, the invariant terms) when the
    invariant terms hold a division that can move out, else None."""
    if not expr.has(FloorDiv, sympy.Mod):  # most addresses: nothing to look at
        return None
    # The kernel's index arguments are its symbolic sizes (``lower-to-cpp`` passes
    # them), at least 1 wherever the kernel runs (a 0 size empties its space).
    sizes = frozenset(
        indirect_var(k)
        for k, v in enumerate(indices)
        if isinstance(v, BlockArgument) and isinstance(v.owner.parent_op(), FuncOp)
    )
    variant: list[sympy.Expr] = []
    invariant: list[sympy.Expr] = []
    for term in sympy.Add.make_args(expr):
        operands = [
            indices[var_kind(s)[1]]
            for s in term.free_symbols
            if isinstance(s, sympy.Symbol) and var_kind(s)[0] == "i"
        ]
        if all(_defined_outside(v, loop) for v in operands):
            invariant.append(term)
        else:
            variant.append(term)
    rest = sympy.Add(*invariant)
    if not rest.has(FloorDiv, sympy.Mod) or not _divides_safely(rest, sizes):
        return None
    return sympy.Add(*variant), rest


def hoist_address_divisions(loop: ForOp) -> int:
    """Move the invariant, dividing part of each address in ``loop`` before it (see the
    module docstring); returns how many addresses changed."""
    trips = _static_trip_count(loop)
    if trips is None or trips <= 0:
        return 0
    parent = loop.parent_block()
    assert parent is not None
    changed = 0
    for op in [o for o in loop.walk() if isinstance(o, LoadOp | StoreOp)]:
        indices = list(op.indices)
        split = _split_address(op.index.data, indices, loop)
        if split is None:
            continue
        variant, invariant = split
        used = sorted(
            {var_kind(s)[1] for s in invariant.free_symbols if var_kind(s)[0] == "i"}  # pyright: ignore[reportArgumentType]
        )
        renumbered = cast(
            sympy.Expr,
            invariant.xreplace({indirect_var(k): indirect_var(j) for j, k in enumerate(used)}),
        )
        base = IndexOp(renumbered, [indices[k] for k in used])
        parent.insert_op_before(base, loop)
        indices.append(base.result)
        # The address keeps only the operands it still reads, renumbered.
        address = variant + indirect_var(len(indices) - 1)
        kept = sorted({var_kind(s)[1] for s in address.free_symbols if var_kind(s)[0] == "i"})  # pyright: ignore[reportArgumentType]
        address = cast(
            sympy.Expr,
            address.xreplace({indirect_var(k): indirect_var(j) for j, k in enumerate(kept)}),
        )
        indices = [indices[k] for k in kept]
        if isinstance(op, LoadOp):
            new: LoadOp | StoreOp = LoadOp(
                op.buffer, address, indices, op.mask, op.fill, op.checked is not None
            )
        else:
            new = StoreOp(op.value, op.buffer, address, indices)
        Rewriter.replace_op(op, new)
        changed += 1
    return changed


def hoist_invariants(func: FuncOp) -> None:
    """Hoist the invariant work of every vectorized loop of ``func`` (see the module
    docstring)."""
    loops = [
        op
        for op in func.walk()
        if isinstance(op, ForOp) and op.loop_kind in (LoopKind.SIMD, LoopKind.PARALLEL_SIMD)
    ]
    for loop in loops:
        hoist_from(loop)
        hoist_address_divisions(loop)


__all__ = ["hoist_address_divisions", "hoist_from", "hoist_invariants"]

"""Whether a pointwise producer is worth inlining into its consumers: the cost model of
:mod:`kiln.passes.scheduling.inline` (bytes moved, body size, launches saved on a GPU,
and the index expressions a recomputed gather would grow), apart from how it inlines."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import cast

import sympy
from xdsl.dialects import math as xmath
from xdsl.dialects.builtin import IntegerType, MemRefType
from xdsl.ir import SSAValue

from kiln.dialects.loop.body_eval import torch_dtype
from kiln.dialects.loop.body_ops import CheckIndexOp, IndexOp, LoadOp, YieldOp
from kiln.dialects.loop.expr import (
    MAX_INDEX_NODES,
    expr_nodes,
    flat_index,
    index_var,
    indirect_var,
    same_value,
    size_var,
    var_kind,
)
from kiln.dialects.loop.ops import LoopNestOp, PointwiseOp
from kiln.dialects.loop.simplify import integer_bounds, polynomial_quotient, simplify_with_ranges
from kiln.passes.scheduling.build import unflatten
from kiln.passes.scheduling.exprs import substitute
from kiln.passes.scheduling.graph import SIZE_HINT
from kiln.passes.scheduling.legality import loop_ranges, same_index
from kiln.passes.scheduling.mask_facts import mask_facts

MAX_BODY_OPS = 8
"""Scalar ops (loads, constants and index ops not counted) a body may have to be inlined."""
MAX_READS = 4
"""At most this many loads of the producer's buffer, over all consumers."""
MAX_INDEX_ONLY_OPS = 24
MAX_INDEX_ONLY_READS = 16
"""The bounds, on a GPU, for a producer that reads no buffer (a function of its position only:
``arange``, and what masks and position ids compute from it), its reads counted per
consumer: recomputed, it costs a few integer ops and no memory traffic. LLaMA's prologue
(``cache_position`` from an ``arange``, the ``diff != 1`` of transformers' packed-sequence
check, its ``cumsum``) was three kernels of 32 points before the cumsum's on the H200;
Inductor runs one. Counting per consumer keeps the decision the same for a window of a
model's layers as for all of them (``stamp``)."""
TINY_INLINE_BYTES = 4096
"""Recomputing a producer whose inputs its consumers then read this many bytes more, or
fewer, is always worth it: it may save the producer its own launch (microseconds on a
GPU, where moving 4 KB takes nanoseconds), as for the masks of an embedding's backward."""
TINY_CONSUMER_POINTS = 1 << 16
"""The most points a consumer of a tiny producer may iterate over (:func:`_tiny`)."""
GPU_LAUNCH_BYTES = 1 << 20
"""On a GPU, inlining is worth up to this many bytes of extra traffic over storing: a
producer kept costs a kernel of its own (a launch, and 1 to 2 us of kernel time however
small it is), while an H200 moves 1 MB in a third of a microsecond. ReLU's backward mask
(``x <= 0``, a bool buffer its batch norm's reduction and its gradient both read) was one
kernel per batch norm of a CNN's training step; Inductor recomputes it in both."""

_TRANSCENDENTAL = (
    xmath.ExpOp,
    xmath.Exp2Op,
    xmath.ExpM1Op,
    xmath.LogOp,
    xmath.Log1pOp,
    xmath.Log2Op,
    xmath.Log10Op,
    xmath.TanhOp,
    xmath.ErfOp,
    xmath.SinOp,
    xmath.CosOp,
    xmath.TanOp,
    xmath.PowFOp,
    xmath.AtanOp,
    xmath.Atan2Op,
)


def _body_cost(op: PointwiseOp) -> tuple[int, int]:
    """(scalar ops, transcendental ops) of a body."""
    ops = 0
    expensive = 0
    for inner in op.body.block.ops:
        if isinstance(inner, LoadOp | IndexOp | YieldOp) or inner.name == "arith.constant":
            continue
        ops += 1
        if isinstance(inner, _TRANSCENDENTAL):
            expensive += 1
    return ops, expensive


def _element_bytes(value: SSAValue) -> int:
    ty = value.type
    assert isinstance(ty, MemRefType)
    return torch_dtype(ty.element_type).itemsize


def worth_inlining(
    producer: PointwiseOp,
    consumers: Sequence[LoopNestOp],
    cpu: bool = False,
    siblings: Mapping[LoopNestOp, Sequence[LoopNestOp]] | None = None,
) -> bool:
    """Whether recomputing ``producer`` in every consumer moves fewer bytes than storing it.

    Per element: storing writes the element once and each consumer reads it; inlining
    makes each consumer read what the producer reads instead, except the inputs that a
    sibling of the consumer already reads at those points (``siblings``: per consumer,
    the reductions over the same space, which ``fuse`` runs in one kernel with it; see
    :func:`_read_by_siblings`). On the CPU (``cpu``) a gather is not recomputed where a
    consumer broadcasts it (:func:`_broadcast_gather`); on a GPU up to
    :data:`GPU_LAUNCH_BYTES` more traffic is worth the kernel the producer would cost.
    """
    ops, expensive = _body_cost(producer)
    loose = index_only(producer, cpu) or _tiny(producer, consumers, cpu)
    limit = (
        MAX_INDEX_ONLY_OPS if loose or _computed_once(producer, consumers, cpu) else MAX_BODY_OPS
    )
    if ops > limit or (expensive and len(consumers) > 1):
        return False
    if cpu and _broadcast_gather(producer, consumers):
        return False
    read_by = [(c, load) for c in consumers for load in loads_of(c, producer.result)]
    reads = [load for _, load in read_by]
    if loose:
        if max(Counter(c for c, _ in read_by).values(), default=0) > MAX_INDEX_ONLY_READS:
            return False
    elif len(reads) > MAX_READS:
        return False
    if not all(_position_follows(producer, c, load) for c, load in read_by if load.indirect):
        return False
    if _index_blowup(producer, consumers):
        return False
    own = _bytes(producer.result)
    points = own // _element_bytes(producer.result)
    input_bytes: dict[SSAValue, int] = {}
    for outer, arg in zip(producer.inputs, producer.input_args(), strict=True):
        loads = sum(1 for use in arg.uses if isinstance(use.operation, LoadOp))
        # A broadcast or gathered input is read at most whole, at most once per load.
        input_bytes[outer] = input_bytes.get(outer, 0) + min(
            _bytes(outer), points * loads * _element_bytes(outer)
        )
    store_cost = own * (1 + len(reads))
    inline_cost = 0
    for consumer, load in read_by:
        shared = _read_by_siblings(producer, consumer, load, (siblings or {}).get(consumer, ()))
        inline_cost += sum(b for outer, b in input_bytes.items() if outer not in shared)
    slack = 0 if cpu else GPU_LAUNCH_BYTES
    return inline_cost <= store_cost + slack or inline_cost <= TINY_INLINE_BYTES


def index_only(producer: PointwiseOp, cpu: bool) -> bool:
    """Whether ``producer`` reads no buffer and the kernels run on a GPU (the bounds of
    :data:`MAX_INDEX_ONLY_OPS`). On the CPU a kernel costs next to nothing to call, and a
    recomputed body (T5's relative-position buckets take a log) runs again at every point
    it is broadcast to."""
    return not producer.inputs and not cpu


def _tiny(producer: PointwiseOp, consumers: Sequence[LoopNestOp], cpu: bool) -> bool:
    """Whether, on a GPU, ``producer`` computes integers or booleans (positions,
    indices, masks: what :data:`MAX_INDEX_ONLY_OPS`'s bounds are for), it and every buffer
    it reads are at most :data:`TINY_INLINE_BYTES`, and every consumer iterates over at
    most :data:`TINY_CONSUMER_POINTS` (static sizes). Recomputed, it reads a few cached
    bytes at a few points, so it takes the bounds of a producer that reads no buffer.
    GPT-2's mask prologue (the ``diff != 1`` of 32 position ids, read by their
    ``cumsum``; the four 32-point gathers the mask's ``where`` reads) was four kernels of
    32 to 1,024 points where Inductor runs two. A large consumer keeps the usual bounds:
    a kernel of its own costs little beside it, and the body would run at each of its
    points."""
    if cpu or producer.syms or not _integer(producer.result):
        return False
    for v in (producer.result, *producer.inputs):
        if _bytes(v) > TINY_INLINE_BYTES or any(d < 0 for d in _shape(v)):
            return False
    for consumer in consumers:
        points = _points(consumer)
        if points is None or points > TINY_CONSUMER_POINTS:
            return False
    return True


def _computed_once(producer: PointwiseOp, consumers: Sequence[LoopNestOp], cpu: bool) -> bool:
    """Whether, on a GPU, ``producer``'s only consumer reads it once per point over as
    many points (a permuted copy of it, say): inlined, its body still runs once per
    element, so only the bound on the body's size (:data:`MAX_INDEX_ONLY_OPS`) applies.
    A three-way ``cat`` (ViT's q, k and v gradients, nine ops of masks and selects) read
    by the copy that the QKV projection's gradient products take was a kernel of its
    own in each layer; inlined, the copy and its bias gradient are one kernel."""
    if cpu or len(consumers) != 1:
        return False
    (consumer,) = consumers
    reads = loads_of(consumer, producer.result)
    if len(reads) != 1 or reads[0].indirect or reads[0].mask is not None:
        return False
    own = _points(producer)
    return own is not None and _points(consumer) == own


def _integer(value: SSAValue) -> bool:
    ty = value.type
    return isinstance(ty, MemRefType) and isinstance(ty.element_type, IntegerType)


def _shape(value: SSAValue) -> tuple[int, ...]:
    ty = value.type
    assert isinstance(ty, MemRefType)
    return tuple(ty.get_shape())


def _read_by_siblings(
    producer: PointwiseOp, consumer: LoopNestOp, load: LoadOp, siblings: Sequence[LoopNestOp]
) -> set[SSAValue]:
    """The producer's inputs that, inlined at ``load`` of ``consumer``, it would read only
    where a sibling of the consumer (a reduction over the same space) already reads
    them: fused into one kernel, those reads are shared. Batch norm's backward reduces
    ``grad`` and ``grad * (x - mean)`` per channel; the product read back from memory
    cost a kernel and two passes over the activations per batch norm, as it only paid
    off counting reads its sibling makes anyway."""
    if not siblings or load.indirect or load.mask is not None or producer.syms:
        return set()
    reads: dict[SSAValue, list[sympy.Expr]] = {}
    for sibling in siblings:
        for outer, arg in zip(sibling.inputs, sibling.input_args(), strict=True):
            for use in arg.uses:
                op = use.operation
                if isinstance(op, LoadOp) and op.buffer is arg and not op.indirect:
                    if op.mask is None:
                        reads.setdefault(outer, []).append(op.index.data)
    if not any(outer in reads for outer in producer.inputs):
        return set()
    sizes = [s.data for s in producer.sizes.data]
    substitution = {index_var(k): c for k, c in enumerate(unflatten(load.index.data, sizes))}
    ranges = loop_ranges(consumer)
    shared: set[SSAValue] = set()
    for outer, arg in zip(producer.inputs, producer.input_args(), strict=True):
        loads = [use.operation for use in arg.uses if isinstance(use.operation, LoadOp)]
        if (
            outer in reads
            and loads
            and all(
                not own.indirect
                and own.mask is None
                and any(
                    same_index(sympy.expand(own.index.data.xreplace(substitution)), index, ranges)
                    for index in reads[outer]
                )
                for own in loads
            )
        ):
            shared.add(outer)
    return shared


def _points(loop: LoopNestOp) -> int | None:
    """The points ``loop`` runs over (None: symbolic)."""
    total = sympy.Mul(*loop_ranges(loop).values())
    return int(total) if total.is_Integer else None


def _broadcast_gather(producer: PointwiseOp, consumers: Sequence[LoopNestOp]) -> bool:
    """Whether ``producer`` gathers (an indirect load) and a consumer runs over more
    points than it, reading it broadcast. Inlined, the gather and its bounds check run
    again at every point of the consumer, which keeps the consumer's loop from being
    vectorized on the CPU (a checked index is a serial loop there: ``backends/cpp/emit.py``):
    Swin's relative-position bias (``table[index]``, 3 x 49 x 49) was gathered again
    for each of 128 windows, in each of the softmax's three passes. Stored, it is a small
    kernel and the softmax reads it contiguously."""
    if not any(isinstance(op, LoadOp) and op.indirect for op in producer.body.walk()):
        return False
    own = _points(producer)
    if own is None:
        return False
    return any((points := _points(c)) is not None and points > own for c in consumers)


def _index_blowup(producer: PointwiseOp, consumers: Sequence[LoopNestOp]) -> bool:
    """Whether composing a consumer's load index with the producer's own load indices
    would exceed :data:`MAX_INDEX_NODES` (chains of reshapes under symbolic sizes:
    the stored intermediate keeps every kernel's index small)."""
    own = [op.index.data for op in producer.body.walk() if isinstance(op, LoadOp)]
    own += [op.expr.data for op in producer.body.walk() if isinstance(op, IndexOp)]
    if not own:
        return False
    biggest = max(expr_nodes(e) for e in own)
    sizes = [s.data for s in producer.sizes.data]
    for consumer in consumers:
        rename = _consumer_symbols(producer, consumer)
        sizes_here = [substitute(s, rename) for s in sizes] if rename is not None else None
        for load in loads_of(consumer, producer.result):
            outer = expr_nodes(load.index.data)
            if biggest * (outer + 4) <= MAX_INDEX_NODES:
                continue  # cheap bound: cannot exceed
            ranges = loop_ranges(consumer)
            if (
                biggest <= MAX_INDEX_NODES
                and sizes_here is not None
                and (
                    reads_in_order(load, sizes_here, ranges)
                    or permuted_read(load, sizes_here, ranges) is not None
                )
            ):
                continue  # the composition renames the producer's own indices
            # Composed as inline_into composes them (with what a mask says about the
            # index: ShuffleNet's shuffled ``cat`` reads unflattened without it took
            # ~30 ms each under symbolic sizes), simplified first: the composition
            # stays small and inline_into's simplify calls then hit their caches.
            facts = mask_facts(load, ranges)
            here = gather_ranges(load.indirect, dict(facts.ranges))
            split = split_read(load, sizes_here, ranges) if sizes_here is not None else None
            coordinates = split or [
                facts.simplify(c, here) for c in unflatten(facts.write(load.index.data), sizes)
            ]
            substitution = {index_var(k): c for k, c in enumerate(coordinates)}
            for e in own:
                composed = facts.simplify(sympy.expand(e.xreplace(substitution)), here)
                if expr_nodes(composed) > MAX_INDEX_NODES:
                    return True
    return False


def reads_in_order(
    load: LoadOp, sizes: Sequence[sympy.Expr], ranges: Mapping[sympy.Symbol, sympy.Expr]
) -> bool:
    """Whether ``load`` reads the producer's element ``(d0, d1, ...)`` at the consumer's
    own ``(d0, d1, ...)``: loops of the producer's ``sizes`` (in the consumer's size
    symbols), and the index their row-major position, unmasked and direct (a pointwise
    chain over one shape, the common case under symbolic sizes, where composing indices
    costs most). The composition is then the producer's own indices."""
    if load.indirect or load.mask is not None:
        return False
    variables = [index_var(k) for k in range(len(sizes))]
    if any(ranges.get(v) != size for v, size in zip(variables, sizes, strict=True)):  # pyright: ignore[reportArgumentType]
        return False
    return same_value(load.index.data, flat_index(variables, sizes))


def permuted_read(
    load: LoadOp, sizes: Sequence[sympy.Expr], ranges: Mapping[sympy.Symbol, sympy.Expr]
) -> list[sympy.Expr] | None:
    """The producer coordinates ``load`` reads where they are the consumer's own loop
    variables in another order: its index the producer's row-major position of distinct
    variables, each ranging over its dim's size (``sizes`` in the consumer's symbols;
    size-1 dims at 0). A channels-last mean over ``h, w`` reads its producer's
    ``(n, h, w, c)`` at ``(d0, r0, r1, d1)``: unflattening that index divides by
    symbolic strides only to give the variables back. None: another read."""
    if load.indirect or load.mask is not None:
        return None
    coefficients: dict[sympy.Symbol, sympy.Expr] = {}
    for term in sympy.Add.make_args(sympy.expand(load.index.data)):
        factors = sympy.Mul.make_args(term)
        variables = [f for f in factors if f in ranges]
        if len(variables) != 1:
            return None
        variable = cast(sympy.Symbol, variables[0])
        rest = sympy.Mul(*[f for f in factors if f is not variable])
        if any(not cast(sympy.Symbol, s).is_positive for s in rest.free_symbols):
            return None  # a coefficient that is not a size
        coefficients[variable] = coefficients.get(variable, sympy.Integer(0)) + rest
    coordinates: list[sympy.Expr] = []
    stride: sympy.Expr = sympy.Integer(1)
    for size in reversed(sizes):
        if size == 1:
            coordinates.append(sympy.Integer(0))
            continue
        found = [v for v, c in coefficients.items() if same_value(c, stride)]
        if len(found) != 1 or not same_value(ranges[found[0]], size):
            return None
        coordinates.append(found[0])
        del coefficients[found[0]]
        stride = stride * size
    return None if coefficients else coordinates[::-1]


def split_read(
    load: LoadOp, sizes: Sequence[sympy.Expr], ranges: Mapping[sympy.Symbol, sympy.Expr]
) -> list[sympy.Expr] | None:
    """The producer coordinates ``load`` reads, read off its index's terms: each term a
    multiple of one dim's row-major stride (``sizes`` in the consumer's symbols), and
    every coordinate but the outermost provably within its dim (a loop variable ranging
    over the dim's size, or bounded within a static size), so that unflattening would
    divide and wrap nothing. A channel shuffle's read ``464*d2 + d3 // 2 + 232*(d3 % 2)``
    of an ``(n, h, w, 464)`` buffer is at ``(.., d2, d3 // 2 + 232*(d3 % 2))``; unflattened
    by symbolic strides it took ~30 ms of sympy. None: another read (or a masked one,
    whose mask says more: ``mask_facts``)."""
    if load.indirect or load.mask is not None:
        return None
    n = len(sizes)
    strides: list[sympy.Expr] = [sympy.Integer(1)] * n
    for k in range(n - 2, -1, -1):
        strides[k] = sympy.expand(strides[k + 1] * sizes[k + 1])
    # The index as a polynomial in its loop-variable parts (``d0``, ``d3 // 2``, ...),
    # each with its coefficient in sizes.
    coefficients: dict[sympy.Expr, sympy.Expr] = {}
    for term in sympy.Add.make_args(sympy.expand(load.index.data)):
        variables: list[sympy.Expr] = []
        sizes_only: list[sympy.Expr] = []
        for factor in sympy.Mul.make_args(term):
            (variables if factor.free_symbols & ranges.keys() else sizes_only).append(factor)
        key = sympy.Mul(*variables)
        coefficients[key] = coefficients.get(key, sympy.Integer(0)) + sympy.Mul(*sizes_only)
    parts: list[sympy.Expr] = [sympy.Integer(0)] * n
    for key, coefficient in coefficients.items():
        coefficient = sympy.expand(coefficient)
        for k in range(n):
            # A stride with size symbols divides only a coefficient that has them.
            if strides[k].free_symbols - coefficient.free_symbols:
                continue
            quotient = polynomial_quotient(coefficient, strides[k])
            if quotient is not None:
                parts[k] += quotient * key
                break
    for k in range(1, n):
        if not _within_dim(parts[k], sizes[k], ranges):
            return None
    return parts


def _within_dim(
    coordinate: sympy.Expr, size: sympy.Expr, ranges: Mapping[sympy.Symbol, sympy.Expr]
) -> bool:
    """Whether ``0 <= coordinate < size`` wherever the loop variables range."""
    if coordinate == 0:
        return True
    if isinstance(coordinate, sympy.Symbol) and coordinate in ranges:
        return same_value(ranges[coordinate], size)
    if not size.is_Integer:
        return False
    low, high = integer_bounds(coordinate, ranges)
    return low is not None and high is not None and low >= 0 and high < int(size)


def _consumer_symbols(
    producer: LoopNestOp, consumer: LoopNestOp
) -> dict[sympy.Symbol, sympy.Expr] | None:
    """The producer's size symbols as the consumer's (None: a size the consumer lacks)."""
    syms = list(consumer.syms)
    if any(value not in syms for value in producer.syms):
        return None
    return {size_var(k): size_var(syms.index(value)) for k, value in enumerate(producer.syms)}


def _position_free(producer: PointwiseOp) -> bool:
    """Whether the producer uses its loop variables only in load indices (so they may
    become expressions of a consumer's indirect indices)."""
    if any(arg.uses for arg in producer.body.block.args[: producer.num_loop_vars]):
        return False
    return not any(
        isinstance(op, IndexOp) and any(var_kind(s)[0] == "d" for s in op.expr.data.free_symbols)  # pyright: ignore[reportArgumentType]
        for op in producer.body.walk()
    )


def _position_follows(producer: PointwiseOp, consumer: LoopNestOp, load: LoadOp) -> bool:
    """Whether the producer's position can follow a consumer's indirect read of it: each
    loop variable the producer uses maps to a coordinate of ``load`` free of the
    consumer's indirect indices, or (read as a value) to exactly one of them. The second
    of two gathers along different dims (``torch.roll`` over dims 1 and 2 reads the
    first at ``[d0, d1, i0, d3]``) then inlines the first, which uses only ``d1``."""
    if _position_free(producer):
        return True
    if producer.syms:
        return False
    sizes = [s.data for s in producer.sizes.data]
    ranges = gather_ranges(load.indirect, loop_ranges(consumer))
    coordinates = [simplify_with_ranges(c, ranges) for c in unflatten(load.index.data, sizes)]

    def indirect(e: sympy.Expr) -> bool:
        return any(var_kind(s)[0] == "i" for s in e.free_symbols)  # pyright: ignore[reportArgumentType]

    for k, arg in enumerate(producer.body.block.args[: producer.num_loop_vars]):
        c = coordinates[k]
        if arg.uses and indirect(c) and gathered_position(c) is None:
            return False
    for op in producer.body.walk():
        if isinstance(op, IndexOp) and gathered_index_op(op, coordinates) is None:
            for s in op.expr.data.free_symbols:
                kind, k = var_kind(s)  # pyright: ignore[reportArgumentType]
                if kind == "d" and indirect(coordinates[k]):
                    return False
    return True


def gathered_index_op(op: IndexOp, coordinates: Sequence[sympy.Expr]) -> int | None:
    """``j`` when ``op`` computes exactly a loop variable whose coordinate is the consumer's
    indirect index ``i<j>`` (the position an ``arange`` is gathered at is its value)."""
    expr = op.expr.data
    if not isinstance(expr, sympy.Symbol) or var_kind(expr)[0] != "d":
        return None
    return gathered_position(coordinates[var_kind(expr)[1]])


def gathered_position(coordinate: sympy.Expr) -> int | None:
    """``j`` when ``coordinate`` is exactly the consumer's indirect index ``i<j>``."""
    if isinstance(coordinate, sympy.Symbol) and var_kind(coordinate)[0] == "i":
        return var_kind(coordinate)[1]
    return None


def gather_ranges(
    indirect: Sequence[SSAValue], ranges: dict[sympy.Symbol, sympy.Expr]
) -> dict[sympy.Symbol, sympy.Expr]:
    """``ranges`` with ``0 <= i<j> < size`` for each of a load's ``indirect`` indices that
    a ``loop.check_index`` checks against ``size``: where one fails, the call raises and
    the value read does not matter."""
    extra = {
        indirect_var(j): value.owner.size.data
        for j, value in enumerate(indirect)
        if isinstance(value.owner, CheckIndexOp)
    }
    return {**ranges, **extra} if extra else ranges


def _bytes(value: SSAValue) -> int:
    """Bytes of a buffer (dynamic dimensions count :data:`SIZE_HINT`)."""
    ty = value.type
    assert isinstance(ty, MemRefType)
    n = 1
    for d in ty.get_shape():
        n *= d if d >= 0 else SIZE_HINT
    return n * _element_bytes(value)


def loads_of(consumer: LoopNestOp, buffer: SSAValue) -> list[LoadOp]:
    """The consumer's loads of ``buffer``, found through the uses of its block argument:
    walking the whole body instead made inlining n producers into one consumer (a cat of
    n computed inputs) quadratic, the body growing with every producer inlined. Callers
    do not depend on the order (each inlined copy goes right before its own load)."""
    loads: list[LoadOp] = []
    for outer, arg in zip(consumer.inputs, consumer.input_args(), strict=True):
        if outer is buffer:
            loads.extend(
                use.operation
                for use in arg.uses
                if isinstance(use.operation, LoadOp) and use.operation.buffer is arg
            )
    return loads


__all__ = [
    "gather_ranges",
    "gathered_index_op",
    "gathered_position",
    "index_only",
    "loads_of",
    "permuted_read",
    "reads_in_order",
    "split_read",
    "worth_inlining",
]

"""Index checks that the loop bounds prove: dropped.

An indirect index is checked element by element (``cpp.check_index``, and the flat
bound of a ``checked`` load), and a loop that may raise an error flag is emitted without
``#pragma omp simd`` (:mod:`kiln.backends.cpp.emit` says why). Many indirect indices are
not data at all but arithmetic on loop variables: ``torch.roll`` decomposes to a gather
at ``(x + 3) % 56``, a pad or a flip to ``arange`` arithmetic. Interval arithmetic over
the function's integer values (loop variables from their bounds; constants; ``+ - *``,
``//`` and ``%`` by positive constants, ``min``/``max``, casts; ``cpp.index``
expressions) proves such indices in range, as Inductor's value-range analysis does:
those checks go, the loop vectorizes, and the invariant part of the index moves out of
it (:mod:`kiln.passes.kernel_to_cpp.invariants`). A data-dependent index (read from a
buffer) has no bounds and keeps its checks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import sympy
from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, IntegerType, MemRefType, i1
from xdsl.ir import Operation, SSAValue

from kiln.dialects.cpp.func_ops import FuncOp
from kiln.dialects.cpp.loop_ops import ForOp
from kiln.dialects.cpp.memory_ops import CheckIndexOp, IndexOp, LoadOp
from kiln.dialects.loop.simplify import Bounds, interval

_UNKNOWN: Bounds = (None, None)


def _add(a: Bounds, b: Bounds) -> Bounds:
    return (
        None if a[0] is None or b[0] is None else a[0] + b[0],
        None if a[1] is None or b[1] is None else a[1] + b[1],
    )


def _neg(a: Bounds) -> Bounds:
    return (None if a[1] is None else -a[1], None if a[0] is None else -a[0])


def _mul(a: Bounds, b: Bounds) -> Bounds:
    (a0, a1), (b0, b1) = a, b
    if a0 is None or a1 is None or b0 is None or b1 is None:
        return _UNKNOWN
    products = [a0 * b0, a0 * b1, a1 * b0, a1 * b1]
    return min(products), max(products)


def _positive_constant(bounds: Bounds) -> int | None:
    lo, hi = bounds
    return lo if lo is not None and lo == hi and lo > 0 else None


def _fits(bounds: Bounds, ty: object) -> bool:
    """Whether ``bounds`` lie within a signed integer type (a cast keeps the value)."""
    lo, hi = bounds
    if lo is None or hi is None:
        return False
    if not isinstance(ty, IntegerType):
        return True  # index: 64 bits
    width = ty.width.data
    return -(2 ** (width - 1)) <= lo and hi < 2 ** (width - 1)


def _address_bounds(
    expr: sympy.Expr, indices: Sequence[SSAValue], of: dict[SSAValue, Bounds]
) -> Bounds:
    """Bounds of an index expression over ``i0``, ``i1``, ... (the op's index operands)."""
    by_name = {f"i{k}": of.get(v, _UNKNOWN) for k, v in enumerate(indices)}
    return interval(expr, lambda symbol: by_name.get(symbol.name, _UNKNOWN))


def _result_bounds(op: Operation, of: dict[SSAValue, Bounds]) -> Bounds:
    """The bounds of ``op``'s (single) integer result, from its operands'."""

    def b(k: int) -> Bounds:
        return of.get(op.operands[k], _UNKNOWN)

    if isinstance(op, arith.ConstantOp):
        value = op.value
        if isinstance(value, IntegerAttr) and value.type != i1:
            v = int(value.value.data)  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
            return v, v
        return _UNKNOWN
    if isinstance(op, arith.IndexCastOp | arith.ExtSIOp | arith.TruncIOp):
        return b(0) if _fits(b(0), op.results[0].type) else _UNKNOWN
    if isinstance(op, arith.AddiOp):
        return _add(b(0), b(1))
    if isinstance(op, arith.SubiOp):
        return _add(b(0), _neg(b(1)))
    if isinstance(op, arith.MuliOp):
        return _mul(b(0), b(1))
    if isinstance(op, arith.MinSIOp):
        # Below the smaller upper bound (one known is enough); above both lower bounds.
        (lo0, hi0), (lo1, hi1) = b(0), b(1)
        his = [h for h in (hi0, hi1) if h is not None]
        return (None if lo0 is None or lo1 is None else min(lo0, lo1), min(his, default=None))
    if isinstance(op, arith.MaxSIOp):
        (lo0, hi0), (lo1, hi1) = b(0), b(1)
        los = [lo for lo in (lo0, lo1) if lo is not None]
        return (max(los, default=None), None if hi0 is None or hi1 is None else max(hi0, hi1))
    if isinstance(op, arith.SelectOp):
        (lo0, hi0), (lo1, hi1) = b(1), b(2)
        return (
            None if lo0 is None or lo1 is None else min(lo0, lo1),
            None if hi0 is None or hi1 is None else max(hi0, hi1),
        )
    if isinstance(op, arith.RemSIOp | arith.FloorDivSIOp | arith.DivSIOp):
        d = _positive_constant(b(1))
        lo, hi = b(0)
        if d is None:
            return _UNKNOWN
        if isinstance(op, arith.RemSIOp):
            # C's remainder takes the dividend's sign.
            if lo is not None and lo >= 0 and hi is not None and hi < d:
                return lo, hi
            return (
                0 if lo is not None and lo >= 0 else -(d - 1),
                d - 1 if hi is None or hi > 0 else 0,
            )
        if lo is None or hi is None:
            return _UNKNOWN
        if isinstance(op, arith.FloorDivSIOp):
            return lo // d, hi // d
        return math.trunc(lo / d), math.trunc(hi / d)
    if isinstance(op, IndexOp):
        return _address_bounds(op.expr.data, op.indices, of)
    return _UNKNOWN


def integer_bounds(func: FuncOp) -> dict[SSAValue, Bounds]:
    """Bounds of ``func``'s integer values (definitions precede uses, loops their bodies)."""
    of: dict[SSAValue, Bounds] = {}
    for op in func.walk():
        if isinstance(op, ForOp):
            for iv, lower, upper in zip(op.ivs, op.lower_bounds, op.upper_bounds, strict=True):
                lo = of.get(lower, _UNKNOWN)[0]
                hi = of.get(upper, _UNKNOWN)[1]
                of[iv] = (lo, None if hi is None else hi - 1)
        elif len(op.results) == 1:
            bounds = _result_bounds(op, of)
            if bounds != _UNKNOWN:
                of[op.results[0]] = bounds
    return of


def _within(bounds: Bounds, size: int | None) -> bool:
    lo, hi = bounds
    return size is not None and lo is not None and hi is not None and 0 <= lo and hi < size


def _element_count(load: LoadOp) -> int | None:
    ty = load.buffer.type
    assert isinstance(ty, MemRefType)
    shape = ty.get_shape()
    return None if any(d < 0 for d in shape) else math.prod(shape)


def drop_proven_checks(func: FuncOp) -> int:
    """Erase the ``cpp.check_index`` ops and clear the ``checked`` flags of ``func`` that
    its loop bounds prove cannot fail (see the module docstring); returns how many."""
    of = integer_bounds(func)
    dropped = 0
    for op in list(func.walk()):
        if isinstance(op, CheckIndexOp):
            if _within(of.get(op.index, _UNKNOWN), of.get(op.bound, _UNKNOWN)[0]):
                op.detach()
                op.erase()
                dropped += 1
        elif isinstance(op, LoadOp) and op.checked is not None:
            address = _address_bounds(op.index.data, op.indices, of)
            if _within(address, _element_count(op)):
                del op.properties["checked"]
                dropped += 1
    return dropped


__all__ = ["drop_proven_checks", "integer_bounds"]

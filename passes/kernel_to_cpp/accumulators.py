"""Reduction accumulators: lane arrays updated in SIMD loops, combined at the end.

Each reduction keeps one *state* per SIMD lane in small local arrays (``cpp.alloca``):
a vectorized inner loop updates lane ``l`` with every ``L``-th element, with no
dependence between lanes, so the compiler keeps the arrays in vector registers. After
the loop the lanes are combined into one state, in lane order, and (for split
reductions) the per-chunk states are combined in chunk order, so results do not depend
on the thread count. States per kind:

=========  =====================================  ==========================================
kind       state                                  combine(a, b)
=========  =====================================  ==========================================
sum, prod  value                                  ``a + b`` / ``a * b``
max, min   value                                  NaN-propagating max/min (``maximumf``)
any, all   value (i1)                             ``or`` / ``and``
argmax     value, position                        larger value (NaN first), then lower position
argmin     value, position                        smaller value (NaN first), then lower position
welford    mean, m2, count, shift                 Chan et al.'s parallel update
=========  =====================================  ==========================================

Half and bfloat16 values accumulate in f32 and are rounded once at the end, as torch does.

Welford states hold the mean of ``x - shift``, ``shift`` being the first value the state
took: float32 means of rows whose mean is large against their spread (1e4 and 1) lose
4e-4 of the variance in their updates and merges; shifted, 1e-7 (the parallel update
takes the difference of two states' means as the difference of their shifts, exact for
nearby values, plus that of their shifted means). :func:`finish` shifts the mean back.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    AnyFloat,
    BFloat16Type,
    Float16Type,
    IntegerType,
    MemRefType,
    Signedness,
    f32,
    i1,
    i64,
)
from xdsl.ir import Attribute, Operation, SSAValue

from kiln.dialects.cpp.attributes import LoopKind
from kiln.dialects.loop.attributes import ReductionKind
from kiln.dialects.loop.expr import var
from kiln.passes.kernel_to_cpp.emit import Emitter

K = ReductionKind


def accumulator_type(value_type: Attribute) -> Attribute:
    """Half and bfloat16 accumulate in f32."""
    return f32 if isinstance(value_type, Float16Type | BFloat16Type) else value_type


def _is_float(ty: Attribute) -> bool:
    return isinstance(ty, AnyFloat)


def _is_unsigned(ty: Attribute) -> bool:
    return isinstance(ty, IntegerType) and (
        ty.width.data == 1 or ty.signedness.data == Signedness.UNSIGNED
    )


def _int_bounds(ty: IntegerType) -> tuple[int, int]:
    width = ty.width.data
    if _is_unsigned(ty):
        return 0, (1 << width) - 1
    return -(1 << (width - 1)), (1 << (width - 1)) - 1


def identity(kind: ReductionKind, ty: Attribute) -> list[float | int]:
    """The starting state (one value per state component)."""
    if kind is K.SUM or kind is K.ANY:
        return [0]
    if kind is K.PROD or kind is K.ALL:
        return [1]
    if kind is K.WELFORD:
        return [0, 0, 0, 0]
    lowest = kind in (K.MAX, K.ARGMAX)
    if _is_float(ty):
        value: float | int = -math.inf if lowest else math.inf
    else:
        assert isinstance(ty, IntegerType)
        lo, hi = _int_bounds(ty)
        value = lo if lowest else hi
    return [value, 0] if kind in (K.ARGMAX, K.ARGMIN) else [value]


@dataclass
class Ops:
    """Scalar arith on the accumulator type, appended through an emitter."""

    emit: Emitter
    ty: Attribute

    def __call__(self, op: Operation) -> SSAValue:
        return self.emit.value(op)

    def add(self, a: SSAValue, b: SSAValue) -> SSAValue:
        if _is_float(a.type):
            return self(arith.AddfOp(a, b))
        if a.type == i1:
            return self(arith.XOrIOp(a, b))
        return self(arith.AddiOp(a, b))

    def mul(self, a: SSAValue, b: SSAValue) -> SSAValue:
        if _is_float(a.type):
            return self(arith.MulfOp(a, b))
        if a.type == i1:
            return self(arith.AndIOp(a, b))
        return self(arith.MuliOp(a, b))

    def max(self, a: SSAValue, b: SSAValue) -> SSAValue:
        if _is_float(a.type):
            return self(arith.MaximumfOp(a, b))
        if a.type == i1:
            return self(arith.OrIOp(a, b))
        return self(arith.MaxUIOp(a, b) if _is_unsigned(a.type) else arith.MaxSIOp(a, b))

    def min(self, a: SSAValue, b: SSAValue) -> SSAValue:
        if _is_float(a.type):
            return self(arith.MinimumfOp(a, b))
        if a.type == i1:
            return self(arith.AndIOp(a, b))
        return self(arith.MinUIOp(a, b) if _is_unsigned(a.type) else arith.MinSIOp(a, b))

    def greater(self, a: SSAValue, b: SSAValue, strict_less: bool = False) -> SSAValue:
        """``a > b`` (``a < b`` with ``strict_less``), NaN counting as the extreme."""
        if _is_float(a.type):
            cmp = self(arith.CmpfOp(a, b, "olt" if strict_less else "ogt"))
            a_nan = self(arith.CmpfOp(a, a, "uno"))
            b_nan = self(arith.CmpfOp(b, b, "uno"))
            b_ok = self(arith.XOrIOp(b_nan, self.emit.scalar(1, i1)))
            return self(arith.OrIOp(cmp, self(arith.AndIOp(a_nan, b_ok))))
        pred = (
            ("ult" if strict_less else "ugt")
            if _is_unsigned(a.type)
            else ("slt" if strict_less else "sgt")
        )
        return self(arith.CmpiOp(a, b, pred))

    def same(self, a: SSAValue, b: SSAValue) -> SSAValue:
        """``a == b``, two NaNs counting as equal."""
        if _is_float(a.type):
            eq = self(arith.CmpfOp(a, b, "oeq"))
            both = self(
                arith.AndIOp(self(arith.CmpfOp(a, a, "uno")), self(arith.CmpfOp(b, b, "uno")))
            )
            return self(arith.OrIOp(eq, both))
        return self(arith.CmpiOp(a, b, "eq"))

    def select(self, cond: SSAValue, a: SSAValue, b: SSAValue) -> SSAValue:
        return self(arith.SelectOp(cond, a, b))


def update(
    kind: ReductionKind,
    ops: Ops,
    state: list[SSAValue],
    value: SSAValue,
    position: SSAValue | None,
    seen: SSAValue | None = None,
) -> list[SSAValue]:
    """The state after one more element (positions increase along a lane). For welford,
    ``seen`` (when known) is how many elements the lane holds already, the same for every
    lane: the division by the new count becomes a multiplication by its reciprocal,
    computed once outside the vector loop."""
    if kind is K.SUM:
        return [ops.add(state[0], value)]
    if kind is K.PROD:
        return [ops.mul(state[0], value)]
    if kind is K.MAX or kind is K.ANY:
        return [ops.max(state[0], value)]
    if kind is K.MIN or kind is K.ALL:
        return [ops.min(state[0], value)]
    if kind in (K.ARGMAX, K.ARGMIN):
        assert position is not None
        take = ops.greater(value, state[0], strict_less=kind is K.ARGMIN)
        pos = ops(arith.IndexCastOp(position, i64))
        return [ops.select(take, value, state[0]), ops.select(take, pos, state[1])]
    mean, m2, count, shift = state
    one = ops.emit.scalar(1.0, ops.ty)
    n = ops(arith.AddfOp(count, one))
    first = ops(arith.CmpfOp(count, ops.emit.scalar(0.0, ops.ty), "oeq"))
    shift = ops.select(first, value, shift)
    value = ops(arith.SubfOp(value, shift))
    delta = ops(arith.SubfOp(value, mean))
    if seen is not None:
        held = ops(arith.IndexCastOp(seen, i64))
        assert isinstance(ops.ty, AnyFloat)
        uniform = ops(arith.AddfOp(ops(arith.SIToFPOp(held, ops.ty)), one))
        step = ops(arith.MulfOp(delta, ops(arith.DivfOp(one, uniform))))
    else:
        step = ops(arith.DivfOp(delta, n))
    new_mean = ops(arith.AddfOp(mean, step))
    new_m2 = ops(arith.AddfOp(m2, ops(arith.MulfOp(delta, ops(arith.SubfOp(value, new_mean))))))
    return [new_mean, new_m2, n, shift]


def combine(kind: ReductionKind, ops: Ops, a: list[SSAValue], b: list[SSAValue]) -> list[SSAValue]:
    """The state of two partial reductions, ``a`` covering the earlier positions."""
    if kind in (K.ARGMAX, K.ARGMIN):
        better = ops.greater(b[0], a[0], strict_less=kind is K.ARGMIN)
        tie = ops(arith.AndIOp(ops.same(b[0], a[0]), ops(arith.CmpiOp(b[1], a[1], "slt"))))
        take = ops(arith.OrIOp(better, tie))
        return [ops.select(take, b[0], a[0]), ops.select(take, b[1], a[1])]
    if kind is K.WELFORD:
        mean_a, m2_a, n_a, shift_a = a
        mean_b, m2_b, n_b, shift_b = b
        zero = ops.emit.scalar(0.0, ops.ty)
        n = ops(arith.AddfOp(n_a, n_b))
        empty = ops(arith.CmpfOp(n, zero, "oeq"))
        share = ops.select(
            empty, zero, ops(arith.DivfOp(n_b, ops.select(empty, ops.emit.scalar(1.0, ops.ty), n)))
        )
        # An empty ``a`` takes ``b``'s shift; an empty ``b`` adds nothing (not even an
        # infinite shift's NaN).
        shift = ops.select(ops(arith.CmpfOp(n_a, zero, "oeq")), shift_b, shift_a)
        delta = ops(
            arith.AddfOp(ops(arith.SubfOp(shift_b, shift)), ops(arith.SubfOp(mean_b, mean_a)))
        )
        delta = ops.select(ops(arith.CmpfOp(n_b, zero, "oeq")), zero, delta)
        mean = ops(arith.AddfOp(mean_a, ops(arith.MulfOp(delta, share))))
        spread = ops(arith.MulfOp(ops(arith.MulfOp(delta, delta)), ops(arith.MulfOp(n_a, share))))
        m2 = ops(arith.AddfOp(ops(arith.AddfOp(m2_a, m2_b)), spread))
        return [mean, m2, n, shift]
    return update(kind, ops, a, b[0], None)


def state_types(kind: ReductionKind, acc_type: Attribute) -> list[Attribute]:
    if kind in (K.ARGMAX, K.ARGMIN):
        return [acc_type, i64]
    if kind is K.WELFORD:
        return [acc_type] * 4
    return [acc_type]


@dataclass
class LaneState:
    """One reduction's per-lane state arrays inside the current scope."""

    kind: ReductionKind
    acc_type: Attribute
    lanes: int
    name: str
    arrays: list[SSAValue] = field(default_factory=list[SSAValue])

    def init(self, emit: Emitter) -> None:
        types = state_types(self.kind, self.acc_type)
        suffixes = (
            ["", "_pos"]
            if len(types) == 2
            else (["_mean", "_m2", "_n", "_shift"] if len(types) == 4 else [""])
        )
        self.arrays = [
            emit.alloca(MemRefType(ty, [self.lanes]), f"{self.name}{suffix}")
            for ty, suffix in zip(types, suffixes, strict=True)
        ]
        body, (lane,) = emit.loop(LoopKind.SIMD, [emit.const(0)], [emit.const(self.lanes)], ["l"])
        env = {var("i0"): lane}
        for array, ty, value in zip(
            self.arrays, types, identity(self.kind, self.acc_type), strict=True
        ):
            body.store(body.scalar(value, ty), array, var("i0"), env)

    def load(self, emit: Emitter, lane: SSAValue) -> list[SSAValue]:
        env = {var("i0"): lane}
        return [emit.load(a, var("i0"), env) for a in self.arrays]

    def store(self, emit: Emitter, lane: SSAValue, values: list[SSAValue]) -> None:
        env = {var("i0"): lane}
        for array, value in zip(self.arrays, values, strict=True):
            emit.store(value, array, var("i0"), env)

    def accumulate(
        self,
        emit: Emitter,
        lane: SSAValue,
        value: SSAValue,
        position: SSAValue | None,
        seen: SSAValue | None = None,
    ) -> None:
        if value.type != self.acc_type:
            value = emit.value(arith.ExtFOp(value, self.acc_type))
        ops = Ops(emit, self.acc_type)
        self.store(emit, lane, update(self.kind, ops, self.load(emit, lane), value, position, seen))

    def reduce_lanes(self, emit: Emitter) -> list[SSAValue]:
        """Combine all lanes into one state; returns it as scalars. With a power-of-two
        lane count this is a tree (each step a vector operation); its shape is fixed, so
        results do not depend on the machine."""
        if self.lanes & (self.lanes - 1) == 0:
            step = self.lanes // 2
            while step >= 1:
                body, (lane,) = emit.loop(LoopKind.SIMD, [emit.const(0)], [emit.const(step)], ["l"])
                ops = Ops(body, self.acc_type)
                other = body.index(var("i0") + step, {var("i0"): lane})
                self.store(
                    body,
                    lane,
                    combine(self.kind, ops, self.load(body, lane), self.load(body, other)),
                )
                step //= 2
            return self.load(emit, emit.const(0))
        total = LaneState(self.kind, self.acc_type, 1, f"{self.name}_all")
        types = state_types(self.kind, self.acc_type)
        total.arrays = [
            emit.alloca(MemRefType(ty, [1]), f"{self.name}_all{k}") for k, ty in enumerate(types)
        ]
        zero = emit.const(0)
        total.store(emit, zero, self.load(emit, zero))
        body, (lane,) = emit.loop(LoopKind.SERIAL, [emit.const(1)], [emit.const(self.lanes)], ["l"])
        ops = Ops(body, self.acc_type)
        total.store(
            body, zero, combine(self.kind, ops, total.load(body, zero), self.load(body, lane))
        )
        return total.load(emit, zero)


def finish(
    kind: ReductionKind, emit: Emitter, state: list[SSAValue], result_types: list[Attribute]
) -> list[SSAValue]:
    """The reduction's results from its final state (rounded back to half/bf16)."""
    if kind is K.WELFORD:
        mean, m2, count, shift = state
        values = [emit.value(arith.AddfOp(mean, shift)), m2, count]
    else:
        values = [state[1]] if kind in (K.ARGMAX, K.ARGMIN) else state
    out: list[SSAValue] = []
    for value, ty in zip(values, result_types, strict=True):
        if value.type != ty:
            value = emit.value(arith.TruncFOp(value, ty))
        out.append(value)
    return out


__all__ = [
    "LaneState",
    "Ops",
    "accumulator_type",
    "combine",
    "finish",
    "identity",
    "state_types",
    "update",
]

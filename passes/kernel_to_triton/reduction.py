"""Reductions in Triton: persistent (one block) and looped (accumulators over chunks).

A persistent reduction masks the lanes past ``rnumel`` with the kind's identity and
reduces along axis 1 once:

```python
tmp3 = tl.where(rmask, tmp2, 0.0)
tmp4 = tl.sum(tmp3, 1)[:, None]
```

A looped one keeps a ``[XBLOCK, RBLOCK]`` accumulator, updated where ``rmask`` holds,
and reduces it after the loop (Inductor's scheme). Low-precision floats accumulate in
``f32`` and are rounded once at the end (max/min too: exact, and Triton's interpreter
compares bfloat16 wrongly). Welford: a persistent block computes the mean
and then the squared deviations (two passes over registers); a looped one does a Welford
update per lane, on the values less the lane's first one (float32 means of rows whose mean
is large against their spread lose precision otherwise), and combines lanes with Chan's
formula. ``argmax``/``argmin`` carry the
reduction index (the row-major position in the node's reduction space, ``i64``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from xdsl.dialects.builtin import (
    AnyFloat,
    BFloat16Type,
    Float16Type,
    IntegerType,
    MemRefType,
    f32,
    i1,
    i64,
)
from xdsl.ir import Attribute, SSAValue

from kiln.dialects.loop.attributes import ReductionKind
from kiln.dialects.loop.expr import flat_index, reduction_var
from kiln.dialects.loop.ops import ReductionOp
from kiln.dialects.triton import CombineOp, FullOp, ReduceOp
from kiln.dialects.triton.types import BlockType, element_of
from kiln.passes.kernel_to_triton.builder import TritonBuilder

if TYPE_CHECKING:
    import sympy

    from kiln.dialects.triton.types import Dim
    from kiln.passes.kernel_to_triton.index import IndexEmitter
    from kiln.passes.kernel_to_triton.plan import NodePlan


class KernelHost(Protocol):
    """What reductions need from the kernel being lowered (its KernelLowering)."""

    builder: TritonBuilder
    index: IndexEmitter
    lane_masks: dict[str, SSAValue]
    rnumel: SSAValue

    @property
    def tile_shape(self) -> tuple[Dim, ...]: ...

    def kernel_expr(self, node: NodePlan, expr: sympy.Expr) -> sympy.Expr: ...

    def body_values(self, node: NodePlan) -> list[SSAValue]: ...


_REDUCE_KIND = {
    ReductionKind.SUM: "sum",
    ReductionKind.PROD: "prod",
    ReductionKind.MAX: "max",
    ReductionKind.MIN: "min",
    ReductionKind.ANY: "any",
    ReductionKind.ALL: "all",
    ReductionKind.ARGMAX: "argmax",
    ReductionKind.ARGMIN: "argmin",
    ReductionKind.WELFORD: "welford",
}


def _kind(node: NodePlan) -> str:
    op = node.op
    assert isinstance(op, ReductionOp)
    kind = _REDUCE_KIND[op.kind.data]
    value_type = op.yielded_type()
    if value_type == i1 and kind in ("max", "min"):
        return "any" if kind == "max" else "all"
    return kind


def accumulator_type(kind: str, ty: Attribute) -> Attribute:
    """Half/bfloat16 reductions accumulate in f32: sums, products and Welford for accuracy;
    max/min and arg variants too (exact either way, but Triton's interpreter compares
    bfloat16 as raw bits, so a bf16 max picked the smaller of two signed values)."""
    if isinstance(ty, Float16Type | BFloat16Type) and kind not in ("any", "all"):
        return f32
    return ty


def identity(kind: str, ty: Attribute) -> float | int | bool:
    """The value masked lanes contribute."""
    if kind in ("sum", "welford"):
        return 0
    if kind == "prod":
        return 1
    if kind == "any":
        return False
    if kind == "all":
        return True
    lowest = kind in ("max", "argmax")
    if isinstance(ty, AnyFloat):
        return -math.inf if lowest else math.inf
    assert isinstance(ty, IntegerType)
    if ty.width.data == 1:
        return not lowest
    bits = ty.width.data
    return -(2 ** (bits - 1)) if lowest else 2 ** (bits - 1) - 1


_COMBINE = {"sum": "add", "prod": "mul", "any": "or", "all": "and"}


class ReductionLowering:
    """The reductions of one kernel (see the module docstring)."""

    def __init__(self, kernel: KernelHost) -> None:
        self.kernel = kernel
        self.builder = kernel.builder
        self.running: dict[int, tuple[SSAValue, SSAValue, SSAValue]] = {}
        """Per max node (by id) inside its loop: its input, old and new running max."""
        self.finals: dict[int, tuple[SSAValue, SSAValue]] = {}
        """Per max node after its loop: its lanes' final running max and the row max."""

    # -- shared --------------------------------------------------------------------------

    def _input(self, node: NodePlan) -> tuple[str, SSAValue, Attribute]:
        """The kind, the body's value over the tile (in the accumulator type), its type."""
        kind = _kind(node)
        (value,) = self.kernel.body_values(node)
        ty = element_of(value.type)
        value = self.builder.broadcast(value, self.kernel.tile_shape)
        return kind, self.builder.cast(value, accumulator_type(kind, ty)), ty

    def _positions(self, node: NodePlan) -> SSAValue:
        """The flat reduction position of every lane, as i64."""
        op = node.op
        assert isinstance(op, ReductionOp)
        rsizes = [s.data for s in op.reduction_sizes.data]
        expr = flat_index([reduction_var(k) for k in range(len(rsizes))], rsizes)
        position = self.kernel.index.emit(self.kernel.kernel_expr(node, expr))
        position = self.builder.broadcast(position, self.kernel.tile_shape)
        return self.builder.cast(position, i64)

    def _masked(self, value: SSAValue, fill: float | int | bool) -> SSAValue:
        b = self.builder
        rmask = self.kernel.lane_masks["RBLOCK"]
        return b.where(rmask, value, b.const(fill, element_of(value.type)))

    def _reduce(self, kind: str, values: list[SSAValue]) -> list[SSAValue]:
        op = ReduceOp(kind, values, 1)
        self.builder.insert(op)
        return [self.builder.expand(r, 1) for r in op.results]

    def _publish(self, node: NodePlan, values: list[SSAValue]) -> None:
        """Round the results to the outputs' types and make them the node's values."""
        b = self.builder
        for result, value in zip(node.op.results, values, strict=True):
            ty = result.type
            assert isinstance(ty, MemRefType)
            b.remember(("node", result), b.cast(value, ty.element_type), 0)

    # -- persistent ------------------------------------------------------------------------

    def persistent(self, node: NodePlan) -> None:
        b = self.builder
        kind, value, _ty = self._input(node)
        acc = element_of(value.type)
        if kind in ("argmax", "argmin"):
            masked = self._masked(value, identity(kind, acc))
            self._publish(node, self._reduce(kind, [masked, self._positions(node)])[1:])
            return
        if kind == "welford":
            count = b.cast(self.kernel.rnumel, acc)
            total = self._reduce("sum", [self._masked(value, 0)])[0]
            mean = b.binary("truediv", total, count)
            deviation = self._masked(b.binary("sub", value, mean), 0)
            m2 = self._reduce("sum", [b.binary("mul", deviation, deviation)])[0]
            self._publish(node, [mean, m2, b.broadcast(count, ("XBLOCK", 1))])
            return
        masked = self._masked(value, identity(kind, acc))
        self._publish(node, self._reduce(kind, [masked]))

    # -- looped ------------------------------------------------------------------------------

    def init(self, node: NodePlan) -> list[SSAValue]:
        """The accumulators' initial blocks (before the loop)."""
        op = node.op
        assert isinstance(op, ReductionOp)
        kind = _kind(node)
        ty = accumulator_type(kind, op.yielded_type())
        shape = self.kernel.tile_shape
        b = self.builder
        if kind in ("argmax", "argmin"):
            return [
                b.add(FullOp(identity(kind, ty), BlockType(shape, ty))),
                b.add(FullOp(2**63 - 1, BlockType(shape, i64))),
            ]
        if kind == "welford":
            return [b.add(FullOp(0, BlockType(shape, ty))) for _ in range(4)]
        return [b.add(FullOp(identity(kind, ty), BlockType(shape, ty)))]

    def update(self, node: NodePlan, accumulators: Sequence[SSAValue]) -> list[SSAValue]:
        """The accumulators after one chunk (inside the loop)."""
        if node.online_max is not None:
            return self._update_online(node, accumulators)
        b = self.builder
        kind, value, _ = self._input(node)
        rmask = self.kernel.lane_masks["RBLOCK"]
        if kind in ("argmax", "argmin"):
            combine = CombineOp(kind, [*accumulators, value, self._positions(node)])
            b.insert(combine)
            new = list(combine.results)
        elif kind == "welford":
            combine = CombineOp("welford", [*accumulators, value])
            b.insert(combine)
            new = list(combine.results)
        elif kind in ("max", "min"):
            acc = accumulators[0]
            is_float = isinstance(element_of(value.type), AnyFloat)
            name = (
                ("maximum" if kind == "max" else "minimum")
                if is_float
                else ("maxnum" if kind == "max" else "minnum")
            )
            new = [b.binary(name, acc, value)]
        else:
            new = [b.binary(_COMBINE[kind], accumulators[0], value)]
        masked = [b.where(rmask, n, a) for n, a in zip(new, accumulators, strict=True)]
        if kind == "max":
            self.running[id(node)] = (value, accumulators[0], masked[0])
        return masked

    def _update_online(self, node: NodePlan, accumulators: Sequence[SSAValue]) -> list[SSAValue]:
        """``s = s * exp(m_old - m_new) + exp(x - m_new)`` per lane, with the running max
        ``m`` of the fused max node (lanes whose max is still -inf hold 0)."""
        assert node.online_max is not None
        b = self.builder
        (total,) = accumulators
        ty = element_of(total.type)
        x, m_old, m_new = (b.cast(v, ty) for v in self.running[id(node.online_max)])
        zero = b.const(0.0, ty)
        empty = b.cmp("eq", m_new, b.const(-math.inf, ty))
        rescale = b.where(empty, zero, b.math("exp", b.binary("sub", m_old, m_new)))
        term = b.where(empty, zero, b.math("exp", b.binary("sub", x, m_new)))
        new = b.binary("add", b.binary("mul", total, rescale), term)
        return [b.where(self.kernel.lane_masks["RBLOCK"], new, total)]

    def finish(self, node: NodePlan, accumulators: Sequence[SSAValue]) -> None:
        """Reduce the accumulators across lanes (after the loop)."""
        if node.online_max is not None:
            self._finish_online(node, accumulators)
            return
        kind = _kind(node)
        if kind in ("argmax", "argmin"):
            self._publish(node, self._reduce(kind, list(accumulators))[1:])
        elif kind == "welford":
            mean, m2, weight, shift = self._reduce("welford", list(accumulators))
            self._publish(node, [self.builder.binary("add", mean, shift), m2, weight])
        else:
            results = self._reduce(kind, list(accumulators))
            if kind == "max":
                self.finals[id(node)] = (accumulators[0], results[0])
            self._publish(node, results)

    def _finish_online(self, node: NodePlan, accumulators: Sequence[SSAValue]) -> None:
        """Rescale each lane's sum to the row's max, then add the lanes up."""
        assert node.online_max is not None
        b = self.builder
        (total,) = accumulators
        ty = element_of(total.type)
        lanes_max, row_max = (b.cast(v, ty) for v in self.finals[id(node.online_max)])
        minus_inf = b.const(-math.inf, ty)
        empty = b.cmp("eq", lanes_max, minus_inf)
        scaled = b.binary("mul", total, b.math("exp", b.binary("sub", lanes_max, row_max)))
        (result,) = self._reduce("sum", [b.where(empty, b.const(0.0, ty), scaled)])
        # exp(v - max) over a row that is all -inf is NaN in eager: keep it so.
        all_minus_inf = b.binary(
            "and",
            b.cmp("eq", row_max, minus_inf),
            b.cmp("gt", self.kernel.rnumel, b.const(0, element_of(self.kernel.rnumel.type))),
        )
        self._publish(node, [b.where(all_minus_inf, b.const(math.nan, ty), result)])


__all__ = ["ReductionLowering", "accumulator_type", "identity"]

"""Reductions vectorized across outputs ("outer" reductions, ``x.sum(0)``).

When a reduction's loads are strided along the reduction but contiguous along the
innermost pointwise dim, vectorizing the reduction would gather; instead the innermost
pointwise dim is cut into blocks of ``lanes`` outputs, and every lane of a SIMD loop
computes its own output: the reduction loops run serially around the lane loop, each
lane accumulating into its own slot of the accumulator arrays (no cross-lane combine).

Per block, every value that lives once per ``x`` (X nodes, reduction results) is kept
in a lane array: reduction results *are* their accumulator arrays; X nodes are computed
in a lane loop and stored into one. A lane loop reads them back on first use
(:class:`LaneValues`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sympy
from xdsl.dialects import arith
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Attribute, SSAValue

from kiln.dialects.cpp.attributes import LoopKind
from kiln.dialects.loop.attributes import ReductionKind
from kiln.dialects.loop.expr import var
from kiln.dialects.loop.ops import LoopNestOp, ReductionOp
from kiln.passes.kernel_to_cpp.accumulators import LaneState, Ops, accumulator_type, combine
from kiln.passes.kernel_to_cpp.analysis import Level
from kiln.passes.kernel_to_cpp.emit import Emitter
from kiln.passes.kernel_to_cpp.options import parallel_depth, size_hint
from kiln.passes.kernel_to_cpp.space import floordiv
from kiln.passes.kernel_to_cpp.strides import contiguous, stride

if TYPE_CHECKING:
    from kiln.passes.kernel_to_cpp.kernel import KernelLowering


class LaneValues(dict[SSAValue, SSAValue]):
    """Kernel values at one lane: computed here, or read from their lane array on first use."""

    def __init__(
        self, arrays: dict[SSAValue, tuple[SSAValue, Attribute]], emit: Emitter, lane: SSAValue
    ) -> None:
        super().__init__()
        self.arrays = arrays
        self.emit = emit
        self.lane = lane

    def __missing__(self, key: SSAValue) -> SSAValue:
        array, result_type = self.arrays[key]
        value = self.emit.load(array, var("i0"), {var("i0"): self.lane})
        if value.type != result_type:
            value = self.emit.value(arith.TruncFOp(value, result_type))
        self[key] = value
        return value


def prefers_outer(lowering: KernelLowering) -> bool:
    """Whether vectorizing across outputs beats vectorizing along the reduction: fewer
    of the reduction's loads would be strided."""
    space = lowering.space
    if not space.x_sizes or not space.r_sizes:
        return False
    x_last, r_last = space.x_syms[-1], space.r_syms[-1]
    exprs: list[sympy.Expr] = []
    for node in lowering.analysis.nodes:
        if lowering.analysis.level[node] is not Level.X:
            exprs += lowering.global_load_exprs(node)
    along_r = contiguous(stride(e, r_last) for e in exprs)
    along_x = contiguous(stride(e, x_last) for e in exprs)
    return along_x < along_r


def lower_outer(lowering: KernelLowering, emit: Emitter) -> None:
    """The kernel as blocks of ``lanes`` outputs (see the module docstring)."""
    space = lowering.space
    lanes = lowering.options.outer_lanes
    analysis = lowering.analysis
    body, env, block_start = _block_loops(lowering, emit)
    last = space.x_syms[-1]
    remaining = body.index(
        space.x_sizes[-1] - sympy.Symbol("_xb", integer=True, nonnegative=True),
        {**lowering.sizes, sympy.Symbol("_xb", integer=True, nonnegative=True): block_start},
    )
    count = body.value(arith.MinSIOp(remaining, body.const(lanes)))
    arrays: dict[SSAValue, tuple[SSAValue, Attribute]] = {}

    def lane_loop(
        where: Emitter, outer: dict[sympy.Symbol, SSAValue]
    ) -> tuple[Emitter, dict[sympy.Symbol, SSAValue], LaneValues]:
        inner, (lane,) = where.loop(LoopKind.SIMD, [where.const(0)], [count], ["l"])
        point = dict(outer)
        a = sympy.Symbol("_a", integer=True, nonnegative=True)
        b = sympy.Symbol("_b", integer=True, nonnegative=True)
        point[last] = inner.index(a + b, {a: block_start, b: lane})
        point[last].name_hint = f"x{len(space.x_syms) - 1}"
        return inner, point, LaneValues(arrays, inner, lane)

    def x_nodes(stage: int) -> None:
        nodes = [
            n for n in analysis.nodes if analysis.level[n] is Level.X and analysis.stage[n] == stage
        ]
        if not nodes:
            return
        for node in nodes:
            for result in node.results:
                ty = result.type
                assert isinstance(ty, MemRefType)
                array = body.alloca(
                    MemRefType(ty.element_type, [lanes]), f"{result.name_hint or 'v'}_lanes"
                )
                arrays[result] = (array, ty.element_type)
        inner, point, values = lane_loop(body, env)
        for node in nodes:
            lowering.run_node(node, inner, point, values)
            for result in node.results:
                inner.store(values[result], arrays[result][0], var("i0"), {var("i0"): values.lane})

    x_nodes(0)
    for stage in range(analysis.num_stages):
        lowering.phase = 2 * stage + 1
        reds = [
            n
            for n in analysis.nodes
            if analysis.level[n] is Level.RED and analysis.stage[n] == stage
        ]
        stores = [
            n
            for n in analysis.nodes
            if analysis.level[n] is Level.XR
            and analysis.stage[n] == stage
            and any(r in analysis.yielded for r in n.results)
        ]
        order = lowering.needed_xr([*reds, *stores], stage)
        states: dict[LoopNestOp, LaneState] = {}
        for k, red in enumerate(reds):
            assert isinstance(red, ReductionOp)
            state = LaneState(
                red.kind.data, accumulator_type(red.yielded_type()), lanes, f"acc{stage}_{k}"
            )
            state.init(body)
            states[red] = state
        inner = body
        point_env = dict(env)
        m = len(space.r_sizes)
        for k, size in enumerate(space.r_sizes[:-1]):
            inner, (iv,) = inner.loop(
                LoopKind.SERIAL, [inner.const(0)], [lowering.size(inner, size)], [f"r{k}"]
            )
            point_env[space.r_syms[k]] = iv
        # Cascade: the innermost reduction dim in blocks, each reduced into fresh partial
        # states that are then combined into the totals (a long sequential sum per lane
        # would lose precision).
        cascade = lowering.options.cascade
        extent = lowering.size(inner, space.r_sizes[-1])
        blocks, (r_start,) = inner.loop(
            LoopKind.SERIAL, [inner.const(0)], [extent], [f"r{m - 1}_block"], [cascade]
        )
        partials: dict[LoopNestOp, LaneState] = {}
        for red, state in states.items():
            partial = LaneState(state.kind, state.acc_type, lanes, f"{state.name}_part")
            partial.init(blocks)
            partials[red] = partial
        s = sympy.Symbol("_s", integer=True, nonnegative=True)
        stop = blocks.value(arith.MinSIOp(blocks.index(s + cascade, {s: r_start}), extent))
        inner, (iv,) = blocks.loop(LoopKind.SERIAL, [r_start], [stop], [f"r{m - 1}"])
        point_env[space.r_syms[-1]] = iv
        lane_body, point, values = lane_loop(inner, point_env)
        # Every lane has taken one element per reduction point of the block so far
        # (welford divides by that count).
        t = sympy.Symbol("_t", integer=True, nonnegative=True)
        welford = any(state.kind is ReductionKind.WELFORD for state in states.values())
        seen = lane_body.index(s - t, {s: iv, t: r_start}) if welford else None
        position: SSAValue | None = None
        for node in order:
            if analysis.level[node] is Level.RED:
                assert isinstance(node, ReductionOp)
                (value,) = lowering.node_body(node, lane_body, point, values)
                if position is None:
                    position = lane_body.index(space.flat_r(), point)
                partials[node].accumulate(lane_body, values.lane, value, position, seen)
            elif lowering.stored_before(node, stage):
                lowering.reload(node, stage, lane_body, point, values)
            else:
                lowering.run_node(node, lane_body, point, values, store=node in stores)
                lowering.stash_value(node, stage, lane_body, point, values)
        if partials:
            merge, (lane,) = blocks.loop(
                LoopKind.SIMD, [blocks.const(0)], [blocks.const(lanes)], ["l"]
            )
            for red, state in states.items():
                ops = Ops(merge, state.acc_type)
                merged = combine(
                    state.kind, ops, state.load(merge, lane), partials[red].load(merge, lane)
                )
                state.store(merge, lane, merged)
        # Each lane's accumulators hold its own output's reduction; welford means are
        # relative to the lane's shift until shifted back here.
        welfords = [state for state in states.values() if state.kind is ReductionKind.WELFORD]
        if welfords:
            unshift, (lane,) = body.loop(LoopKind.SIMD, [body.const(0)], [body.const(lanes)], ["l"])
            for state in welfords:
                mean, m2, seen_count, shift = state.load(unshift, lane)
                mean = unshift.value(arith.AddfOp(mean, shift))
                state.store(unshift, lane, [mean, m2, seen_count, shift])
        for red, state in states.items():
            assert isinstance(red, ReductionOp)
            kind = red.kind.data
            results = list(red.outputs)
            sources = (
                [state.arrays[1]]
                if kind in (ReductionKind.ARGMAX, ReductionKind.ARGMIN)
                else state.arrays[:3]
                if kind is ReductionKind.WELFORD
                else state.arrays
            )
            for result, array in zip(results, sources, strict=True):
                ty = result.type
                assert isinstance(ty, MemRefType)
                arrays[result] = (array, ty.element_type)
        lowering.phase = 2 * stage + 2
        yielded = [(red, r) for red in reds for r in red.results if r in analysis.yielded]
        if yielded:
            inner, point, values = lane_loop(body, env)
            for red, result in yielded:
                lowering.store_result(red, result, values[result], inner, point)
        x_nodes(stage + 1)


def _block_loops(
    lowering: KernelLowering, emit: Emitter
) -> tuple[Emitter, dict[sympy.Symbol, SSAValue], SSAValue]:
    """Loops over the outer pointwise dims and the blocks of the innermost one."""
    space = lowering.space
    lanes = lowering.options.outer_lanes
    env: dict[sympy.Symbol, SSAValue] = dict(lowering.sizes)
    blocks = floordiv(space.x_sizes[-1] + lanes - 1, lanes)
    dims = [*space.x_sizes[:-1], blocks]
    inner_work = size_hint(lowering.kernel.rnumel.data) * lanes
    depth = parallel_depth(dims, inner_work, lowering.options)
    names = [f"x{k}" for k in range(len(dims) - 1)] + ["x_block"]
    bounds = [lowering.size(emit, d) for d in dims]
    zero = emit.const(0)
    body = emit
    ivs: list[SSAValue] = []
    if depth:
        condition = lowering.parallel_condition(emit, dims, lowering.kernel.rnumel.data * lanes)
        body, outer = body.loop(
            LoopKind.PARALLEL, [zero] * depth, bounds[:depth], names[:depth], condition=condition
        )
        ivs += outer
    for k in range(depth, len(dims)):
        body, (iv,) = body.loop(LoopKind.SERIAL, [zero], [bounds[k]], [names[k]])
        ivs.append(iv)
    env.update(zip(space.x_syms[:-1], ivs[:-1], strict=True))
    b = sympy.Symbol("_b", integer=True, nonnegative=True)
    block_start = body.index(b * lanes, {b: ivs[-1]})
    block_start.name_hint = "x_start"
    return body, env, block_start


__all__ = ["LaneValues", "lower_outer", "prefers_outer"]

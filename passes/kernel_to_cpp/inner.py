"""Reductions vectorized along the reduction ("inner" reductions, ``x.sum(-1)``).

Each ``x`` runs as scalar code: its stage-0 X nodes, then for each stage an r-loop (see
:mod:`~kiln.passes.kernel_to_cpp.analysis`), then the X nodes the reductions made ready.
An r-loop walks the outer reduction dims serially and the innermost in blocks of
``lanes`` elements: a vectorized lane loop with a constant trip count, then a vectorized
tail. Each reduction accumulates into per-lane arrays
(:mod:`~kiln.passes.kernel_to_cpp.accumulators`) combined after the loop. When the
pointwise space is too small to keep the threads busy and the reduction is large, the
outer reduction dim is split into one chunk per thread, reduced in parallel and the
chunks combined in chunk order (per-thread partials, deterministic).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import sympy
from xdsl.dialects import arith
from xdsl.ir import SSAValue

from kiln.dialects.cpp.attributes import LoopKind
from kiln.dialects.loop.attributes import ReductionKind
from kiln.dialects.loop.ops import LoopNestOp, ReductionOp
from kiln.passes.kernel_to_cpp.accumulators import LaneState, accumulator_type, finish
from kiln.passes.kernel_to_cpp.analysis import Level
from kiln.passes.kernel_to_cpp.emit import Emitter
from kiln.passes.kernel_to_cpp.options import reduction_lanes, size_hint
from kiln.passes.kernel_to_cpp.space import floordiv

if TYPE_CHECKING:
    from kiln.passes.kernel_to_cpp.kernel import KernelLowering

PointFn = Callable[[Emitter, dict[sympy.Symbol, SSAValue], SSAValue, SSAValue | None], None]
"""Emits the work of one reduction element: (loop body, environment, lane index, how
many elements every lane holds already when that is the same for all lanes)."""


def lower_inner(lowering: KernelLowering, emit: Emitter) -> None:
    """The kernel with each ``x`` as scalar code and vectorized r-loops (module docstring)."""
    body, env = lowering.x_loops(emit, vectorize_inner=False)
    values: dict[SSAValue, SSAValue] = {}
    analysis = lowering.analysis
    for node in analysis.nodes:
        if analysis.level[node] is Level.X and analysis.stage[node] == 0:
            lowering.run_node(node, body, env, values)
    for stage in range(analysis.num_stages):
        lowering.phase = 2 * stage + 1
        _r_stage(lowering, body, env, values, stage)
        lowering.phase = 2 * stage + 2
        for node in analysis.nodes:
            if analysis.level[node] is Level.X and analysis.stage[node] == stage + 1:
                lowering.run_node(node, body, env, values)


def _lanes(lowering: KernelLowering) -> int:
    r_sizes = lowering.space.r_sizes
    return (
        reduction_lanes(lowering.options, r_sizes[-1])
        if r_sizes
        else min(16, lowering.options.lanes)
    )


def _split_chunks(lowering: KernelLowering) -> int:
    """Chunks to split each r-loop into (1: no split)."""
    threads = lowering.options.threads
    if threads <= 1 or not lowering.space.r_sizes:
        return 1
    numel = size_hint(lowering.kernel.numel.data)
    rnumel = size_hint(lowering.kernel.rnumel.data)
    if numel >= threads or rnumel < lowering.options.split_threshold:
        return 1
    if size_hint(lowering.space.r_sizes[0]) < threads:
        return 1
    return threads


def _r_stage(
    lowering: KernelLowering,
    emit: Emitter,
    env: dict[sympy.Symbol, SSAValue],
    values: dict[SSAValue, SSAValue],
    stage: int,
) -> None:
    analysis = lowering.analysis
    reds = [
        n for n in analysis.nodes if analysis.level[n] is Level.RED and analysis.stage[n] == stage
    ]
    stores = [
        n
        for n in analysis.nodes
        if analysis.level[n] is Level.XR
        and analysis.stage[n] == stage
        and any(r in analysis.yielded for r in n.results)
    ]
    order = lowering.needed_xr([*reds, *stores], stage)
    lanes = _lanes(lowering)
    chunks = _split_chunks(lowering)
    welford = any(isinstance(r, ReductionOp) and r.kind.data is ReductionKind.WELFORD for r in reds)

    def new_states(count: int, suffix: str) -> dict[LoopNestOp, LaneState]:
        states: dict[LoopNestOp, LaneState] = {}
        for k, red in enumerate(reds):
            assert isinstance(red, ReductionOp)
            ty = accumulator_type(red.yielded_type())
            states[red] = LaneState(red.kind.data, ty, count, f"acc{stage}_{k}{suffix}")
        return states

    def run_point(
        body: Emitter,
        point: dict[sympy.Symbol, SSAValue],
        lane: SSAValue,
        seen: SSAValue | None,
        states: dict[LoopNestOp, LaneState],
    ) -> None:
        local = dict(values)
        position: SSAValue | None = None
        for node in order:
            if analysis.level[node] is Level.RED:
                (value,) = lowering.node_body(node, body, point, local)
                assert isinstance(node, ReductionOp)
                if node.kind.data.value in ("argmax", "argmin") and position is None:
                    position = body.index(lowering.space.flat_r(), point)
                states[node].accumulate(body, lane, value, position, seen)
            elif lowering.stored_before(node, stage):
                lowering.reload(node, stage, body, point, local)
            else:
                lowering.run_node(node, body, point, local, store=node in stores)
                lowering.stash_value(node, stage, body, point, local)

    if chunks == 1:
        states = new_states(lanes, "")
        for state in states.values():
            state.init(emit)
        _r_nest(
            lowering,
            emit,
            env,
            None,
            lambda b, p, lane, seen: run_point(b, p, lane, seen, states),
            welford,
        )
        finals = {red: state.reduce_lanes(emit) for red, state in states.items()}
    else:
        partials = new_states(chunks, "_chunks")
        for state in partials.values():
            state.init(emit)
        chunk_body, (chunk,) = emit.loop(
            LoopKind.PARALLEL, [emit.const(0)], [emit.const(chunks)], ["chunk"]
        )
        states = new_states(lanes, "")
        for state in states.values():
            state.init(chunk_body)
        _r_nest(
            lowering,
            chunk_body,
            env,
            (chunk, chunks),
            lambda b, p, lane, seen: run_point(b, p, lane, seen, states),
            welford,
        )
        for red, state in states.items():
            partials[red].store(chunk_body, chunk, state.reduce_lanes(chunk_body))
        finals = {red: state.reduce_lanes(emit) for red, state in partials.items()}
    for red, state in finals.items():
        assert isinstance(red, ReductionOp)
        result_types = [r.type.element_type for r in red.outputs]  # pyright: ignore[reportAttributeAccessIssue]
        results = finish(red.kind.data, emit, state, result_types)
        for result, value in zip(red.outputs, results, strict=True):
            values[result] = value
            lowering.store_result(red, result, value, emit, env)


def _r_nest(
    lowering: KernelLowering,
    emit: Emitter,
    env: dict[sympy.Symbol, SSAValue],
    chunk: tuple[SSAValue, int] | None,
    run: PointFn,
    welford: bool = False,
) -> None:
    """Loops over the reduction space (or one chunk of its outer dim); ``welford``
    asks for the per-lane element count where it is uniform."""
    space = lowering.space
    sizes = space.r_sizes
    if not sizes:
        run(emit, dict(env), emit.const(0), emit.const(0))
        return
    zero = emit.const(0)
    bounds = [lowering.size(emit, s) for s in sizes]
    lo: SSAValue = zero
    hi: SSAValue = bounds[0]
    if chunk is not None:
        chunk_iv, count = chunk
        # Equal chunks of the outer dim, a multiple of the lanes when it is also the
        # innermost (so only the last chunk has a tail).
        quantum = _lanes(lowering) if len(sizes) == 1 else 1
        per = floordiv(floordiv(sizes[0] + count - 1, count) + quantum - 1, quantum) * quantum
        c = sympy.Symbol("_chunk", integer=True, nonnegative=True)
        start = emit.index(c * per, {**lowering.sizes, c: chunk_iv})
        lo = emit.value(arith.MinSIOp(start, bounds[0]))
        end = emit.index(c * per + per, {**lowering.sizes, c: chunk_iv})
        hi = emit.value(arith.MinSIOp(end, bounds[0]))
    body = emit
    local = dict(env)
    m = len(sizes)
    for k in range(m - 1):
        begin, stop = (lo, hi) if k == 0 else (zero, bounds[k])
        body, (iv,) = body.loop(LoopKind.SERIAL, [begin], [stop], [f"r{k}"])
        local[space.r_syms[k]] = iv
    begin, stop = (lo, hi) if m == 1 else (zero, bounds[-1])
    # With one reduction dim every lane holds the same number of elements at each
    # block (the tail adds one to the first lanes only after all blocks).
    _lane_loops(lowering, body, local, begin, stop, run, uniform=welford and m == 1)


def _lane_loops(
    lowering: KernelLowering,
    emit: Emitter,
    env: dict[sympy.Symbol, SSAValue],
    start: SSAValue,
    stop: SSAValue,
    run: PointFn,
    uniform: bool,
) -> None:
    """Blocks of ``lanes`` elements (a constant-trip vector loop), then the tail;
    loops that statically run zero times are left out."""
    lanes = _lanes(lowering)
    last = lowering.space.r_syms[-1]
    known = emit.constants.known
    a = sympy.Symbol("_a", integer=True, nonnegative=True)
    b = sympy.Symbol("_b", integer=True, nonnegative=True)
    main_end = emit.index(a + floordiv(b - a, lanes) * lanes, {a: start, b: stop})
    name = f"r{len(lowering.space.r_syms) - 1}"
    if not (start in known and main_end in known and known[start] == known[main_end]):
        blocks, (block_start,) = emit.loop(
            LoopKind.SERIAL, [start], [main_end], [f"{name}_block"], [lanes]
        )
        seen = blocks.index(floordiv(b - a, lanes), {a: start, b: block_start}) if uniform else None
        lane_body, (lane,) = blocks.loop(
            LoopKind.SIMD, [blocks.const(0)], [blocks.const(lanes)], ["l"]
        )
        point = dict(env)
        point[last] = lane_body.index(a + b, {a: block_start, b: lane})
        point[last].name_hint = name
        run(lane_body, point, lane, seen)
    tail_count = emit.index(b - a, {a: main_end, b: stop})
    if known.get(tail_count) == 0:
        return
    seen = emit.index(floordiv(b - a, lanes), {a: start, b: main_end}) if uniform else None
    tail_body, (lane,) = emit.loop(LoopKind.SIMD, [emit.const(0)], [tail_count], ["l"])
    point = dict(env)
    point[last] = tail_body.index(a + b, {a: main_end, b: lane})
    point[last].name_hint = name
    run(tail_body, point, lane, seen)


__all__ = ["PointFn", "lower_inner"]

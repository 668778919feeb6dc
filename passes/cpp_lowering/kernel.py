"""Lowering one ``kernel.kernel`` to a ``cpp.func``.

The function walks the kernel's pointwise space with a loop nest over the dims of its
:class:`~kiln.passes.cpp_lowering.space.LoopSpace`: the outer dims OpenMP-parallel
(as many as give every thread enough work, see :func:`parallel_depth`), then serial.

* A pointwise kernel vectorizes its innermost dim (``simd``) and runs every node there.
* A reduction kernel computes each ``x`` as scalar code: its stage-0 X nodes, then for
  each stage an r-loop (see :mod:`~kiln.passes.cpp_lowering.analysis`), then the X nodes
  the reductions made ready. An r-loop walks the outer reduction dims serially and the
  innermost in blocks of ``lanes`` with a vectorized lane loop (a constant trip count)
  and a vectorized tail; each reduction accumulates into per-lane arrays
  (:mod:`~kiln.passes.cpp_lowering.accumulators`). When the pointwise space is too
  small to keep the threads busy and the reduction is large, the outer reduction dim is
  split into one chunk per thread, reduced in parallel and combined in chunk order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import sympy
from xdsl.dialects import arith
from xdsl.dialects.builtin import ArrayAttr, IndexType, IntAttr, StringAttr
from xdsl.ir import SSAValue

from kiln.dialects.cpp.attributes import LoopKind
from kiln.dialects.cpp.func_ops import FuncOp, ReturnOp
from kiln.dialects.kernel.kernel_ops import KernelOp, node_vars
from kiln.dialects.loop.body_ops import IndexOp as LoopIndexOp
from kiln.dialects.loop.body_ops import LoadOp as LoopLoadOp
from kiln.dialects.loop.body_ops import YieldOp as LoopYieldOp
from kiln.dialects.loop.attributes import ReductionKind
from kiln.dialects.loop.expr import index_var, reduction_var, size_var, var
from kiln.dialects.loop.ops import LoopNestOp, ReductionOp
from kiln.passes.cpp_lowering.accumulators import LaneState, accumulator_type, finish
from kiln.passes.cpp_lowering.analysis import KernelAnalysis, Level, analyze, flat_index
from kiln.passes.cpp_lowering.emit import Constants, Emitter, Env
from kiln.passes.cpp_lowering.outer import lower_outer, prefers_outer
from kiln.passes.cpp_lowering.stash import Stash, plan_stashes
from kiln.passes.cpp_lowering.tiling import tiled_loops, transposed_dim
from kiln.passes.cpp_lowering.provenance import kernel_provenance
from kiln.passes.cpp_lowering.space import (
    LoopSpace,
    choose_space,
    floordiv,
    node_sizes_in_kernel,
    simplify,
    substitute,
    to_kernel_symbols,
)

PointFn = Callable[[Emitter, dict[sympy.Symbol, SSAValue], SSAValue, SSAValue | None], None]
"""Emits the work of one reduction element: (loop body, environment, lane index, how
many elements every lane holds already when that is the same for all lanes)."""

READ_AFTER_WRITE = "read_after_write"
"""``cpp.func`` attribute: ``[input, output]`` index pairs such that the function reads the
input after it wrote the output. A caller passing one buffer for both (an in-place
update) must pass a copy of the input instead."""

SIZE_HINT = 8192
"""Assumed value of a symbolic size when choosing how to parallelize (Inductor's)."""


@dataclass(frozen=True)
class CppOptions:
    """Code generation choices (``lower-to-cpp``'s options)."""

    threads: int = 1
    """Threads the code is tuned for (parallel depth, split reductions)."""
    lanes: int = 16
    """Per-lane accumulators of a reduction: the vector width in elements."""
    min_chunk: int = 512
    """Least work (elements) per thread worth a parallel loop (Inductor's)."""
    split_threshold: int = 4096
    """Least reduction size worth splitting across threads when the pointwise space
    alone cannot keep them busy."""
    outer_reductions: bool = True
    """Vectorize reductions across outputs when that makes their loads contiguous."""
    tile: int = 32
    """Side of the 2-D tiles of transposing pointwise kernels (1: no tiling)."""
    stash: bool = True
    """Keep expensive values a later r-loop needs in an output (see :mod:`.stash`)."""
    cascade: int = 64
    """Block of the reduction that such a reduction sums into fresh partials (precision)."""
    outer_lanes: int = 64
    """Outputs per block of such a reduction (several vectors: whole cache lines, and
    enough independent accumulators to hide the adds' latency)."""


def size_hint(expr: sympy.Expr) -> int:
    expr = sympy.sympify(expr)
    if expr.is_Integer:
        return int(expr)
    return int(substitute(expr, {s: sympy.Integer(SIZE_HINT) for s in expr.free_symbols}))  # pyright: ignore[reportArgumentType]


def parallel_depth(sizes: Sequence[sympy.Expr], inner_work: int, options: CppOptions) -> int:
    """How many outer dims to share out among threads (Inductor's rule): stop once
    there are enough parallel iterations, or when a thread would get too little work."""
    threads = options.threads
    hints = [size_hint(s) for s in sizes]
    seq = math.prod(hints) * inner_work
    par, depth = 1, 0
    for hint in hints:
        if par >= 2 * threads or par == threads:
            break
        if seq // threads < options.min_chunk:
            break
        depth += 1
        par *= hint
        seq //= max(hint, 1)
    return depth


@dataclass
class KernelLowering:
    """Builds the ``cpp.func`` of one kernel."""

    kernel: KernelOp
    options: CppOptions
    analysis: KernelAnalysis = field(init=False)
    space: LoopSpace = field(init=False)
    vars: dict[LoopNestOp, list[sympy.Expr]] = field(init=False)
    func: FuncOp = field(init=False)
    buffers: dict[SSAValue, SSAValue] = field(init=False)
    outputs: dict[SSAValue, list[SSAValue]] = field(init=False)
    sizes: dict[sympy.Symbol, SSAValue] = field(init=False)
    phase: int = field(init=False, default=0)
    """Where the code being emitted runs: X stage k is phase 2k, r-loop k phase 2k + 1."""
    last_read: dict[int, int] = field(init=False, default_factory=dict[int, int])
    """Input buffer index -> the last phase that reads it."""
    first_write: dict[int, int] = field(init=False, default_factory=dict[int, int])
    """Output index -> the first phase that writes it."""
    _composed: dict[tuple[LoopNestOp, sympy.Expr], sympy.Expr] = field(init=False)
    stashes: dict[LoopNestOp, Stash] = field(init=False)

    def __post_init__(self) -> None:
        self.analysis = analyze(self.kernel)
        self._composed = {}
        self.space = choose_space(self.analysis, self._all_exprs)
        self.vars = self._node_vars(self.space)
        self._composed = {}
        self.stashes = {}
        if self.options.stash:
            self.stashes = plan_stashes(self)

    # -- index expressions -----------------------------------------------------------

    def _node_vars(self, space: LoopSpace) -> dict[LoopNestOp, list[sympy.Expr]]:
        subst = space.kernel_substitution()
        ranges = space.ranges()
        return {
            node: [simplify(substitute(e, subst), ranges) for e in node_vars(node)]
            for node in self.analysis.nodes
        }

    def _compose_with(
        self, node: LoopNestOp, expr: sympy.Expr, vars_: list[sympy.Expr], space: LoopSpace
    ) -> sympy.Expr:
        n_index = len(node.sizes.data)
        mapping: dict[sympy.Symbol, sympy.Expr] = {index_var(k): v for k, v in enumerate(vars_[:n_index])}
        mapping.update({reduction_var(k): v for k, v in enumerate(vars_[n_index:])})
        mapping.update(to_kernel_symbols(node, self.kernel))
        return simplify(substitute(expr, mapping), space.ranges())

    def compose(self, node: LoopNestOp, expr: sympy.Expr) -> sympy.Expr:
        """A node-level index expression over the loop variables and kernel sizes."""
        key = (node, expr)
        if key not in self._composed:
            self._composed[key] = self._compose_with(node, expr, self.vars[node], self.space)
        return self._composed[key]

    def store_index(self, node: LoopNestOp) -> sympy.Expr:
        sizes, _ = node_sizes_in_kernel(node, self.kernel)
        index_vars = self.vars[node][: len(sizes)]
        return simplify(flat_index(index_vars, sizes), self.space.ranges())

    def _all_exprs(self, space: LoopSpace) -> list[sympy.Expr]:
        vars_ = self._node_vars(space)
        out: list[sympy.Expr] = []
        for node in self.analysis.nodes:
            for op in node.body.block.ops:
                if isinstance(op, LoopLoadOp) and self._global_input(node, op) is not None:
                    out.append(self._compose_with(node, op.index.data, vars_[node], space))
                elif isinstance(op, LoopIndexOp):
                    out.append(self._compose_with(node, op.expr.data, vars_[node], space))
            if any(r in self.analysis.yielded for r in node.results):
                sizes, _ = node_sizes_in_kernel(node, self.kernel)
                out.append(simplify(flat_index(vars_[node][: len(sizes)], sizes), space.ranges()))
        return out

    def global_load_exprs(self, node: LoopNestOp) -> list[sympy.Expr]:
        """The node's loads of kernel arguments, over the loop variables."""
        return [
            self.compose(node, op.index.data)
            for op in node.body.block.ops
            if isinstance(op, LoopLoadOp) and self._global_input(node, op) is not None
        ]

    def _global_input(self, node: LoopNestOp, load: LoopLoadOp) -> SSAValue | None:
        """The kernel argument a load reads, or None for a fused producer's value."""
        value = node.inputs[list(node.input_args()).index(load.buffer)]  # pyright: ignore[reportArgumentType]
        return None if value in self.analysis.producer else value

    # -- the function -------------------------------------------------------------------

    def lower(self) -> FuncOp:
        kernel = self.kernel
        inputs = list(kernel.function_type.inputs.data)
        outputs = list(kernel.function_type.outputs.data)
        func = FuncOp(kernel.sym_name.data, inputs, outputs)
        func.attributes["provenance"] = ArrayAttr(StringAttr(s) for s in kernel_provenance(kernel))
        block = func.body.block
        block.add_op(ReturnOp())
        self.func = func
        self.buffers = {}
        self.sizes = {}
        n_buffers = len(kernel.buffer_args())
        for k, (old, new) in enumerate(zip(kernel.body.block.args, func.input_args(), strict=True)):
            if isinstance(old.type, IndexType):
                new.name_hint = f"s{k - n_buffers}"
                self.sizes[size_var(k - n_buffers)] = new
            else:
                new.name_hint = f"in_ptr{k}"
                self.buffers[old] = new
        self.outputs = {}
        for k, (value, arg) in enumerate(zip(kernel.yield_op().values, func.output_args(), strict=True)):
            arg.name_hint = f"out_ptr{k}"
            self.outputs.setdefault(value, []).append(arg)
        emit = Emitter(block, Constants(block))
        if self.analysis.num_stages == 0:
            self._pointwise(emit)
        else:
            self._reduction(emit)
        hazards = [
            ArrayAttr([IntAttr(i), IntAttr(j)])
            for i, read in sorted(self.last_read.items())
            for j, written in sorted(self.first_write.items())
            if read > written
        ]
        if hazards:
            func.attributes[READ_AFTER_WRITE] = ArrayAttr(hazards)
        return func

    def size(self, emit: Emitter, expr: sympy.Expr) -> SSAValue:
        return emit.index(expr, self.sizes)

    def parallel_condition(
        self, emit: Emitter, sizes: Sequence[sympy.Expr], inner: sympy.Expr
    ) -> SSAValue | None:
        """For symbolic sizes: parallel only when the work turns out large enough."""
        work = sympy.Mul(*sizes) * inner
        if sympy.sympify(work).is_Integer:
            return None
        threshold = self.options.threads * self.options.min_chunk
        value = self.size(emit, work)
        return emit.value(arith.CmpiOp(value, emit.const(threshold), "sge"))

    def _x_loops(
        self, emit: Emitter, vectorize_inner: bool
    ) -> tuple[Emitter, dict[sympy.Symbol, SSAValue]]:
        """The loop nest over the pointwise space; returns its body and environment."""
        space = self.space
        env: dict[sympy.Symbol, SSAValue] = dict(self.sizes)
        sizes = space.x_sizes
        if not sizes:
            return emit, env
        inner_work = size_hint(self.kernel.rnumel.data)
        depth = parallel_depth(sizes, inner_work, self.options)
        n = len(sizes)
        names = [f"x{k}" for k in range(n)]
        bounds = [self.size(emit, s) for s in sizes]
        zero = emit.const(0)
        condition = (
            self.parallel_condition(emit, sizes, self.kernel.rnumel.data) if depth else None
        )
        if vectorize_inner and depth >= n:
            # Parallel over the innermost dim too: chunks of it, each vectorized.
            body = emit
            for k in range(n - 1):
                body, (iv,) = body.loop(LoopKind.SERIAL, [zero], [bounds[k]], [names[k]])
                env[space.x_syms[k]] = iv
            body, (iv,) = body.loop(
                LoopKind.PARALLEL_SIMD, [zero], [bounds[-1]], [names[-1]], condition=condition
            )
            env[space.x_syms[-1]] = iv
            return body, env
        body = emit
        if depth:
            body, ivs = body.loop(
                LoopKind.PARALLEL, [zero] * depth, bounds[:depth], names[:depth], condition=condition
            )
            env.update(zip(space.x_syms[:depth], ivs, strict=True))
        for k in range(depth, n):
            kind = LoopKind.SIMD if vectorize_inner and k == n - 1 else LoopKind.SERIAL
            body, (iv,) = body.loop(kind, [zero], [bounds[k]], [names[k]])
            env[space.x_syms[k]] = iv
        return body, env

    # -- pointwise kernels --------------------------------------------------------------

    def _pointwise(self, emit: Emitter) -> None:
        dim = transposed_dim(self) if self.options.tile > 1 else None
        if dim is not None:
            body, env = tiled_loops(self, emit, dim)
        else:
            body, env = self._x_loops(emit, vectorize_inner=True)
        values: dict[SSAValue, SSAValue] = {}
        for node in self.analysis.nodes:
            self.run_node(node, body, env, values)

    # -- reduction kernels ----------------------------------------------------------------

    def _reduction(self, emit: Emitter) -> None:
        if self.options.outer_reductions and prefers_outer(self):
            lower_outer(self, emit)
            return
        body, env = self._x_loops(emit, vectorize_inner=False)
        values: dict[SSAValue, SSAValue] = {}
        analysis = self.analysis
        for node in analysis.nodes:
            if analysis.level[node] is Level.X and analysis.stage[node] == 0:
                self.run_node(node, body, env, values)
        for stage in range(analysis.num_stages):
            self.phase = 2 * stage + 1
            self._r_stage(body, env, values, stage)
            self.phase = 2 * stage + 2
            for node in analysis.nodes:
                if analysis.level[node] is Level.X and analysis.stage[node] == stage + 1:
                    self.run_node(node, body, env, values)

    def stored_before(self, node: LoopNestOp, stage: int) -> bool:
        """Whether an XR node's value sits in an output buffer, stored by an earlier r-loop."""
        return self._memory_source(node, stage) is not None

    def _memory_source(self, node: LoopNestOp, stage: int) -> LoopNestOp | None:
        """The node whose output buffer holds ``node``'s values during r-loop ``stage``."""
        analysis = self.analysis
        if analysis.stage[node] < stage and any(r in analysis.yielded for r in node.results):
            return node
        stash = self.stashes.get(node)
        if stash is not None and stash.written < stage <= stash.until:
            holder = stash.holder.owner
            assert isinstance(holder, LoopNestOp)
            return holder
        return None

    def stash_value(
        self, node: LoopNestOp, stage: int, emit: Emitter, env: Env, values: dict[SSAValue, SSAValue]
    ) -> None:
        """Keep a value a later r-loop needs in the output that will overwrite it."""
        stash = self.stashes.get(node)
        if stash is None or stash.written != stage:
            return
        holder = stash.holder.owner
        assert isinstance(holder, LoopNestOp)
        self.store_result(holder, stash.holder, values[node.results[0]], emit, env)

    def needed_xr(self, roots: list[LoopNestOp], stage: int) -> list[LoopNestOp]:
        """The XR nodes the roots need in this r-loop (themselves included). A value an
        earlier r-loop stored is read back from its output buffer; others are recomputed
        (they are pure), which is also what keeps an input updated in place correct: the
        output holds the new value, the input may no longer hold the old one."""
        analysis = self.analysis
        needed: set[LoopNestOp] = set()
        work = list(roots)
        while work:
            node = work.pop()
            if node in needed:
                continue
            needed.add(node)
            if self.stored_before(node, stage):
                continue
            for producer in analysis.inputs_in_kernel(node):
                if analysis.level[producer] is Level.XR:
                    work.append(producer)
        return [n for n in analysis.nodes if n in needed]

    def reload(
        self, node: LoopNestOp, stage: int, emit: Emitter, env: Env, values: dict[SSAValue, SSAValue]
    ) -> None:
        source = self._memory_source(node, stage)
        assert source is not None
        index = self.store_index(source)
        for result, held in zip(node.results, source.results, strict=True):
            targets = self.outputs.get(held)
            if targets:
                values[result] = emit.load(targets[0], index, env)

    def _split_chunks(self) -> int:
        """Chunks to split each r-loop into (1: no split)."""
        threads = self.options.threads
        if threads <= 1 or not self.space.r_sizes:
            return 1
        numel = size_hint(self.kernel.numel.data)
        rnumel = size_hint(self.kernel.rnumel.data)
        if numel >= threads or rnumel < self.options.split_threshold:
            return 1
        if size_hint(self.space.r_sizes[0]) < threads:
            return 1
        return threads

    def _r_stage(
        self, emit: Emitter, env: dict[sympy.Symbol, SSAValue], values: dict[SSAValue, SSAValue], stage: int
    ) -> None:
        analysis = self.analysis
        reds = [n for n in analysis.nodes if analysis.level[n] is Level.RED and analysis.stage[n] == stage]
        stores = [
            n
            for n in analysis.nodes
            if analysis.level[n] is Level.XR
            and analysis.stage[n] == stage
            and any(r in analysis.yielded for r in n.results)
        ]
        order = self.needed_xr([*reds, *stores], stage)
        lanes = self.options.lanes
        chunks = self._split_chunks()
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
                    (value,) = self.node_body(node, body, point, local)
                    assert isinstance(node, ReductionOp)
                    if node.kind.data.value in ("argmax", "argmin") and position is None:
                        position = body.index(self.space.flat_r(), point)
                    states[node].accumulate(body, lane, value, position, seen)
                elif self.stored_before(node, stage):
                    self.reload(node, stage, body, point, local)
                else:
                    self.run_node(node, body, point, local, store=node in stores)
                    self.stash_value(node, stage, body, point, local)

        if chunks == 1:
            states = new_states(lanes, "")
            for state in states.values():
                state.init(emit)
            self._r_nest(
                emit, env, None, lambda b, p, lane, seen: run_point(b, p, lane, seen, states), welford
            )
            finals = {red: state.reduce_lanes(emit) for red, state in states.items()}
        else:
            partials = new_states(chunks, "_chunks")
            for state in partials.values():
                state.init(emit)
            chunk_body, (chunk,) = emit.loop(LoopKind.PARALLEL, [emit.const(0)], [emit.const(chunks)], ["chunk"])
            states = new_states(lanes, "")
            for state in states.values():
                state.init(chunk_body)
            self._r_nest(
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
                self.store_result(red, result, value, emit, env)

    def _r_nest(
        self,
        emit: Emitter,
        env: dict[sympy.Symbol, SSAValue],
        chunk: tuple[SSAValue, int] | None,
        run: PointFn,
        welford: bool = False,
    ) -> None:
        """Loops over the reduction space (or one chunk of its outer dim); ``welford``
        asks for the per-lane element count where it is uniform."""
        space = self.space
        sizes = space.r_sizes
        if not sizes:
            run(emit, dict(env), emit.const(0), emit.const(0))
            return
        zero = emit.const(0)
        bounds = [self.size(emit, s) for s in sizes]
        lo: SSAValue = zero
        hi: SSAValue = bounds[0]
        if chunk is not None:
            chunk_iv, count = chunk
            # Equal chunks of the outer dim, a multiple of the lanes when it is also the
            # innermost (so only the last chunk has a tail).
            quantum = self.options.lanes if len(sizes) == 1 else 1
            per = floordiv(floordiv(sizes[0] + count - 1, count) + quantum - 1, quantum) * quantum
            c = sympy.Symbol("_chunk", integer=True, nonnegative=True)
            start = emit.index(c * per, {**self.sizes, c: chunk_iv})
            lo = emit.value(arith.MinSIOp(start, bounds[0]))
            end = emit.index(c * per + per, {**self.sizes, c: chunk_iv})
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
        self._lane_loops(body, local, begin, stop, run, uniform=welford and m == 1)

    def _lane_loops(
        self,
        emit: Emitter,
        env: dict[sympy.Symbol, SSAValue],
        start: SSAValue,
        stop: SSAValue,
        run: PointFn,
        uniform: bool,
    ) -> None:
        """Blocks of ``lanes`` elements (a constant-trip vector loop), then the tail;
        loops that statically run zero times are left out."""
        lanes = self.options.lanes
        last = self.space.r_syms[-1]
        known = emit.constants.known
        a = sympy.Symbol("_a", integer=True, nonnegative=True)
        b = sympy.Symbol("_b", integer=True, nonnegative=True)
        main_end = emit.index(a + floordiv(b - a, lanes) * lanes, {a: start, b: stop})
        name = f"r{len(self.space.r_syms) - 1}"
        if not (start in known and main_end in known and known[start] == known[main_end]):
            blocks, (block_start,) = emit.loop(
                LoopKind.SERIAL, [start], [main_end], [f"{name}_block"], [lanes]
            )
            seen = blocks.index(floordiv(b - a, lanes), {a: start, b: block_start}) if uniform else None
            lane_body, (lane,) = blocks.loop(LoopKind.SIMD, [blocks.const(0)], [blocks.const(lanes)], ["l"])
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

    # -- nodes ------------------------------------------------------------------------------

    def run_node(
        self,
        node: LoopNestOp,
        emit: Emitter,
        env: Env,
        values: dict[SSAValue, SSAValue],
        store: bool = True,
    ) -> None:
        """Compute an X or XR node at the current point; store it if the kernel yields it."""
        results = self.node_body(node, emit, env, values)
        for result, value in zip(node.results, results, strict=True):
            values[result] = value
            if store:
                self.store_result(node, result, value, emit, env)

    def store_result(
        self, node: LoopNestOp, result: SSAValue, value: SSAValue, emit: Emitter, env: Env
    ) -> None:
        targets = self.outputs.get(result, [])
        if not targets:
            return
        index = self.store_index(node)
        for target in targets:
            emit.store(value, target, index, env)
            position = list(self.func.output_args()).index(target)  # pyright: ignore[reportArgumentType]
            self.first_write.setdefault(position, self.phase)

    def node_body(
        self, node: LoopNestOp, emit: Emitter, env: Env, values: dict[SSAValue, SSAValue]
    ) -> list[SSAValue]:
        """Translate the node's body at the current point; returns the yielded values."""
        mapping: dict[SSAValue, SSAValue] = {}
        block = node.body.block
        for k, arg in enumerate(block.args[: node.num_loop_vars]):
            if arg.uses:
                mapping[arg] = emit.index(self.vars[node][k], env)
        for op in block.ops:
            if isinstance(op, LoopYieldOp):
                return [mapping[v] for v in op.values]
            if isinstance(op, LoopLoadOp):
                mapping[op.result] = self.load_global(node, op, emit, env, values, mapping)
            elif isinstance(op, LoopIndexOp):
                mapping[op.result] = emit.index(self.compose(node, op.expr.data), env)
            else:
                emit.add(op.clone(value_mapper=mapping))
        raise AssertionError(f"{node.name} body has no loop.yield")

    def load_global(
        self,
        node: LoopNestOp,
        op: LoopLoadOp,
        emit: Emitter,
        env: Env,
        values: dict[SSAValue, SSAValue],
        mapping: dict[SSAValue, SSAValue],
    ) -> SSAValue:
        source = node.inputs[list(node.input_args()).index(op.buffer)]  # pyright: ignore[reportArgumentType]
        if source in self.analysis.producer:
            # A fused producer's value at this very point (the scheduler guarantees it).
            return values[source]
        expr = self.compose(node, op.index.data)
        local: dict[sympy.Symbol, SSAValue] = dict(env)
        for k, value in enumerate(op.indirect):
            local[var(f"i{k}")] = mapping[value]
        mask = None if op.mask is None else mapping[op.mask]
        position = list(self.kernel.body.block.args).index(source)  # pyright: ignore[reportArgumentType]
        self.last_read[position] = max(self.last_read.get(position, 0), self.phase)
        return emit.load(
            self.buffers[source], expr, local, mask=mask, fill=op.fill, checked=bool(op.indirect)
        )


def lower_kernel(kernel: KernelOp, options: CppOptions) -> FuncOp:
    return KernelLowering(kernel, options).lower()


__all__ = [
    "READ_AFTER_WRITE",
    "CppOptions",
    "KernelLowering",
    "lower_kernel",
    "parallel_depth",
    "size_hint",
]

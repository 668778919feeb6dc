"""Lowering one ``kernel.kernel`` to a ``cpp.func``.

The function walks the kernel's pointwise space with a loop nest over the dims of its
:class:`~kiln.passes.kernel_to_cpp.space.LoopSpace`: the outer dims OpenMP-parallel
(as many as give every thread enough work, see
:func:`~kiln.passes.kernel_to_cpp.options.parallel_depth`), then serial.

* A pointwise kernel vectorizes its innermost dim (``simd``) and runs every node there;
  one that reads across that dim (a transpose) runs in 2-D tiles (:mod:`.tiling`), full
  16 x 16 tiles of 4-byte data transposed in registers (:mod:`.transpose_tiles`).
* A reduction kernel vectorizes either along the reduction (:mod:`.inner`) or across
  outputs (:mod:`.outer`), whichever makes more of its loads contiguous.

The finished function is then tidied for the C compiler: loop-invariant loads leave the
vector loops (:mod:`.invariants`) and divisions by a loop-invariant value become
multiplications by its reciprocal where that is exact to 1.5 ulp (:mod:`.reciprocals`).

:class:`KernelLowering` holds what every strategy shares: index expressions over the
loop variables, translating a node's body at a point (:meth:`KernelLowering.node_body`:
loads become ``cpp.load`` at composed addresses, a fused producer's value is read from
the current point, scalar ops are cloned), storing yielded values, and the values a
later r-loop reads back from memory (outputs stored earlier, and :mod:`.stash`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import sympy
from xdsl.dialects import arith
from xdsl.dialects.builtin import ArrayAttr, IndexType, StringAttr
from xdsl.ir import SSAValue

from kiln.dialects.cpp.attributes import LoopKind
from kiln.dialects.cpp.func_ops import FuncOp, ReturnOp
from kiln.dialects.cpp.memory_ops import AtomicAddOp as CppAtomicAddOp
from kiln.dialects.cpp.memory_ops import CheckIndexOp as CppCheckIndexOp
from kiln.dialects.cpp.tile_ops import TILE_SIDE
from kiln.dialects.kernel.contract_attrs import READ_AFTER_WRITE
from kiln.dialects.kernel.kernel_ops import KernelOp, node_vars
from kiln.dialects.loop.body_ops import CheckIndexOp as LoopCheckIndexOp
from kiln.dialects.loop.body_ops import IndexOp as LoopIndexOp
from kiln.dialects.loop.body_ops import LoadOp as LoopLoadOp
from kiln.dialects.loop.body_ops import YieldOp as LoopYieldOp
from kiln.dialects.loop.expr import FloorDiv, index_var, reduction_var, size_var, var
from kiln.dialects.loop.ops import LoopNestOp, ScatterOp
from kiln.passes.kernel_to_cpp.analysis import KernelAnalysis, Level, analyze, flat_index
from kiln.passes.kernel_to_cpp.bounds import drop_proven_checks
from kiln.passes.kernel_to_cpp.emit import Constants, Emitter, Env, address
from kiln.passes.kernel_to_cpp.inner import lower_inner
from kiln.passes.kernel_to_cpp.invariants import hoist_invariants
from kiln.passes.kernel_to_cpp.options import CppOptions, parallel_depth, size_hint
from kiln.passes.kernel_to_cpp.outer import lower_outer, prefers_outer
from kiln.passes.kernel_to_cpp.provenance import kernel_provenance
from kiln.passes.kernel_to_cpp.reciprocals import use_reciprocals
from kiln.passes.kernel_to_cpp.space import (
    LoopSpace,
    choose_space,
    node_sizes_in_kernel,
    simplify,
    substitute,
    to_kernel_symbols,
)
from kiln.passes.kernel_to_cpp.stash import Stash, plan_stashes
from kiln.passes.kernel_to_cpp.thresholds import threshold
from kiln.passes.kernel_to_cpp.tiling import narrow_inner, tile_side, tiled_loops, transposed_dim
from kiln.passes.kernel_to_cpp.transpose_tiles import stage_transposed_loads
from kiln.passes.kernel_to_cpp.uniform_masks import version_uniform_masks
from kiln.passes.scheduling.build import unflatten


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
    _base: LoopSpace = field(init=False)
    """The space ``space`` was merged from (``space`` itself when not merged)."""
    _base_vars: dict[LoopNestOp, list[sympy.Expr]] = field(init=False)
    stashes: dict[LoopNestOp, Stash] = field(init=False)

    def __post_init__(self) -> None:
        self.analysis = analyze(self.kernel)
        self._composed = {}
        self.space = choose_space(self.analysis, self._all_exprs)
        # Index expressions are composed over the space the merges started from, then
        # carried through the merges (LoopSpace.replay).
        self._base = self.space.base or self.space
        self._base_vars = self._node_vars(self._base)
        self.vars = {
            node: [self.space.replay(v) for v in vars_] for node, vars_ in self._base_vars.items()
        }
        self._composed = {}
        self.stashes = {}
        if self.options.stash:
            self.stashes = plan_stashes(self)  # pyright: ignore[reportArgumentType]

    # -- index expressions -----------------------------------------------------------

    def _node_vars(self, space: LoopSpace) -> dict[LoopNestOp, list[sympy.Expr]]:
        subst = space.kernel_substitution()
        ranges = space.ranges()
        # A node whose loops are the space's own (its variables the row-major coordinates
        # of d0 and r0 over the space's sizes) has the space's variables: no sympy work
        # (which under symbolic sizes was ~60 % of choosing a kernel's space).
        own = [
            *unflatten(index_var(0), space.x_sizes),
            *unflatten(reduction_var(0), space.r_sizes),
        ]
        return {
            node: (
                [*space.x_syms, *space.r_syms]
                if (exprs := node_vars(node)) == own
                else [simplify(substitute(e, subst), ranges) for e in exprs]
            )
            for node in self.analysis.nodes
        }

    def _compose_with(
        self, node: LoopNestOp, expr: sympy.Expr, vars_: list[sympy.Expr], space: LoopSpace
    ) -> sympy.Expr:
        n_index = len(node.sizes.data)
        mapping: dict[sympy.Symbol, sympy.Expr] = {
            index_var(k): v for k, v in enumerate(vars_[:n_index])
        }
        mapping.update({reduction_var(k): v for k, v in enumerate(vars_[n_index:])})
        mapping.update(to_kernel_symbols(node, self.kernel))
        return simplify(substitute(expr, mapping), space.ranges())

    def compose(self, node: LoopNestOp, expr: sympy.Expr) -> sympy.Expr:
        """A node-level index expression over the loop variables and kernel sizes."""
        key = (node, expr)
        if key not in self._composed:
            composed = self._compose_with(node, expr, self._base_vars[node], self._base)
            self._composed[key] = self.space.replay(composed)
        return self._composed[key]

    def store_index(self, node: LoopNestOp) -> sympy.Expr:
        sizes, _ = node_sizes_in_kernel(node, self.kernel)
        index_vars = self._base_vars[node][: len(sizes)]
        return self.space.replay(simplify(flat_index(index_vars, sizes), self._base.ranges()))

    def _all_exprs(self, space: LoopSpace) -> list[sympy.Expr]:
        vars_ = self._node_vars(space)
        out: list[sympy.Expr] = []
        for node in self.analysis.nodes:
            for op in node.body.block.ops:
                if isinstance(op, LoopLoadOp) and self._global_input(node, op) is not None:
                    out.append(self._compose_with(node, op.index.data, vars_[node], space))
                elif isinstance(op, LoopIndexOp):
                    out.append(self._compose_with(node, op.expr.data, vars_[node], space))
                elif isinstance(op, arith.CmpiOp) and (t := threshold(op)) is not None:
                    # As the division it is (``thresholds``): the space splits there.
                    out.append(self._compose_with(node, t.quotient(t.expr), vars_[node], space))
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

    def global_input(self, node: LoopNestOp, load: LoopLoadOp) -> SSAValue | None:
        """The kernel argument a load reads, or None for a fused producer's value."""
        return self._global_input(node, load)

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
        for k, (value, arg) in enumerate(
            zip(kernel.yield_op().values, func.output_args(), strict=True)
        ):
            arg.name_hint = f"out_ptr{k}"
            self.outputs.setdefault(value, []).append(arg)
        emit = Emitter(block, Constants(block))
        if self.analysis.num_stages == 0:
            self._pointwise(emit)
        else:
            self._reduction(emit)
        hazards = [
            (i, j)
            for i, read in sorted(self.last_read.items())
            for j, written in sorted(self.first_write.items())
            if read > written
        ]
        if hazards:
            # The wrapper passes a copy of input i when a launch aliases it with output j.
            READ_AFTER_WRITE.set(func, hazards)
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

    def x_loops(
        self, emit: Emitter, vectorize_inner: bool, vector_dim: int | None = None
    ) -> tuple[Emitter, dict[sympy.Symbol, SSAValue]]:
        """The loop nest over the pointwise space; returns its body and environment.
        ``vector_dim``: the dim to run innermost (vectorized), the others keeping their
        order outside it (default: the innermost dim)."""
        space = self.space
        env: dict[sympy.Symbol, SSAValue] = dict(self.sizes)
        order = list(range(len(space.x_sizes)))
        if vector_dim is not None:
            order = [k for k in order if k != vector_dim] + [vector_dim]
        sizes = [space.x_sizes[k] for k in order]
        syms = [space.x_syms[k] for k in order]
        if not sizes:
            return emit, env
        inner_work = size_hint(self.kernel.rnumel.data)
        depth = parallel_depth(sizes, inner_work, self.options)
        n = len(sizes)
        names = [f"x{k}" for k in order]
        bounds = [self.size(emit, s) for s in sizes]
        zero = emit.const(0)
        condition = self.parallel_condition(emit, sizes, self.kernel.rnumel.data) if depth else None
        if vectorize_inner and depth >= n:
            # Parallel over the innermost dim too: chunks of it, each vectorized.
            body = emit
            for k in range(n - 1):
                body, (iv,) = body.loop(LoopKind.SERIAL, [zero], [bounds[k]], [names[k]])
                env[syms[k]] = iv
            body, (iv,) = body.loop(
                LoopKind.PARALLEL_SIMD, [zero], [bounds[-1]], [names[-1]], condition=condition
            )
            env[syms[-1]] = iv
            return body, env
        body = emit
        if depth:
            body, ivs = body.loop(
                LoopKind.PARALLEL,
                [zero] * depth,
                bounds[:depth],
                names[:depth],
                condition=condition,
            )
            env.update(zip(syms[:depth], ivs, strict=True))
        for k in range(depth, n):
            kind = LoopKind.SIMD if vectorize_inner and k == n - 1 else LoopKind.SERIAL
            body, (iv,) = body.loop(kind, [zero], [bounds[k]], [names[k]])
            env[syms[k]] = iv
        return body, env

    # -- pointwise kernels --------------------------------------------------------------

    def _pointwise(self, emit: Emitter) -> None:
        # A scatter's atomic adds run in scalar loops (no SIMD lanes racing on one
        # element, no transposed tiles: its writes follow its indices, not a layout).
        scatter = any(isinstance(node, ScatterOp) for node in self.analysis.nodes)
        dim = transposed_dim(self) if self.options.tile > 1 and not scatter else None  # pyright: ignore[reportArgumentType]
        tile = None
        if scatter:
            body, env = self.x_loops(emit, vectorize_inner=False)
        elif dim is not None and narrow_inner(self):  # pyright: ignore[reportArgumentType]
            body, env = self.x_loops(emit, vectorize_inner=True, vector_dim=dim)
        elif dim is not None:
            side = tile_side(self, dim)  # pyright: ignore[reportArgumentType]
            body, env, tile = tiled_loops(self, emit, dim, side)  # pyright: ignore[reportArgumentType]
        else:
            body, env = self.x_loops(emit, vectorize_inner=True)
        values: dict[SSAValue, SSAValue] = {}
        for node in self.analysis.nodes:
            self.run_node(node, body, env, values)
        if tile is not None and tile.side == TILE_SIDE:
            stage_transposed_loads(tile, set(self.buffers.values()))

    # -- reduction kernels ----------------------------------------------------------------

    def _reduction(self, emit: Emitter) -> None:
        # (pyright sees this file both as passes.* and, through the kiln/ links, as
        # kiln.passes.*: the strategies' KernelLowering is "another" class to it.)
        if self.options.outer_reductions and prefers_outer(self):  # pyright: ignore[reportArgumentType]
            lower_outer(self, emit)  # pyright: ignore[reportArgumentType]
        else:
            lower_inner(self, emit)  # pyright: ignore[reportArgumentType]

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
        self,
        node: LoopNestOp,
        stage: int,
        emit: Emitter,
        env: Env,
        values: dict[SSAValue, SSAValue],
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
        self,
        node: LoopNestOp,
        stage: int,
        emit: Emitter,
        env: Env,
        values: dict[SSAValue, SSAValue],
    ) -> None:
        source = self._memory_source(node, stage)
        assert source is not None
        index = self.store_index(source)
        for result, held in zip(node.results, source.results, strict=True):
            targets = self.outputs.get(held)
            if targets:
                values[result] = emit.load(targets[0], index, env)

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
        if isinstance(node, ScatterOp):
            self._scatter_add(node, results, emit, env, values)
            return
        for result, value in zip(node.results, results, strict=True):
            values[result] = value
            if store:
                self.store_result(node, result, value, emit, env)

    def _scatter_add(
        self,
        node: ScatterOp,
        results: list[SSAValue],
        emit: Emitter,
        env: Env,
        values: dict[SSAValue, SSAValue],
    ) -> None:
        """Add the scatter's value atomically at its position (its ``i<k>`` are the
        index values yielded after the value)."""
        value, *indices = results
        values[node.result] = value
        local: dict[sympy.Symbol, SSAValue] = dict(env)
        for k, index in enumerate(indices):
            local[var(f"i{k}")] = index
        position = self.compose(node, node.index.data)
        renamed, operands = address(emit.constants.fold(position, local), local)
        for target in self.outputs.get(node.result, []):
            emit.add(CppAtomicAddOp(value, target, renamed, operands))
            output = list(self.func.output_args()).index(target)  # pyright: ignore[reportArgumentType]
            self.first_write.setdefault(output, self.phase)

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
            elif isinstance(op, arith.CmpiOp) and (
                compared := self._threshold(node, op, emit, env)
            ):
                mapping[op.result] = compared
            elif isinstance(op, LoopCheckIndexOp):
                index = mapping[op.index]
                emit.add(CppCheckIndexOp(index, emit.index(self.compose(node, op.size.data), env)))
                mapping[op.result] = index
            else:
                emit.add(op.clone(value_mapper=mapping))
        raise AssertionError(f"{node.name} body has no loop.yield")

    def _threshold(
        self, node: LoopNestOp, op: arith.CmpiOp, emit: Emitter, env: Env
    ) -> SSAValue | None:
        """``op`` (an index compared with a constant ``T``) as ``E // T < 1`` where the
        quotient simplifies to no division over the loops (``thresholds``); None
        otherwise."""
        t = threshold(op)
        if t is None:
            return None
        quotient = self.compose(node, t.quotient(t.expr))
        if quotient.has(FloorDiv, sympy.Mod):
            return None
        predicate = "slt" if t.below else "sge"
        return emit.value(arith.CmpiOp(emit.index(quotient, env), emit.const(1), predicate))

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


def lower_kernel(kernel: KernelOp, options: CppOptions, rewrites: bool = True) -> FuncOp:
    """``kernel`` as a ``cpp.func``; ``rewrites``: then run the cpp-level rewrites (the
    ``cpp-drop-proven-checks``, ``cpp-hoist-invariants``, ``cpp-reciprocals`` and
    ``cpp-uniform-masks`` passes) on it, as ``lower-to-cpp`` does."""
    func = KernelLowering(kernel, options).lower()
    if rewrites:
        drop_proven_checks(func)
        hoist_invariants(func)
        use_reciprocals(func)
        version_uniform_masks(func)
    return func


__all__ = ["KernelLowering", "lower_kernel"]

"""Emitting the schedule: ``kernel.kernel`` ops and the ``kernel.program`` that runs them.

Each fused group becomes a kernel whose arguments are the buffers it reads from outside
(then the size symbols it needs), whose results are the buffers read outside it or
returned, and whose body is the group's loop nodes in program order, each annotated
with ``kernel.vars``. Values only used inside the group stay kernel-local. The program
replaces the function: for each group in dependency order it allocates the kernel's
outputs and launches it; extern calls become ``kernel.extern`` and scalar ops are kept.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

import sympy
from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    AnyFloat,
    ArrayAttr,
    FloatAttr,
    IndexType,
    IntegerAttr,
    MemRefType,
    UnitAttr,
)
from xdsl.dialects.func import FuncOp
from xdsl.ir import Block, Operation, Region, SSAValue

from kiln.dialects.kernel.attributes import KernelKind
from kiln.dialects.kernel.kernel_ops import (
    COLUMN_MAJOR_ATTR,
    VARS_ATTR,
    KernelOp,
    YieldOp,
    vars_attr,
)
from kiln.dialects.kernel.program_ops import AllocOp, ExternOp, LaunchOp, ProgramOp, ReturnOp
from kiln.dialects.loop.attributes import IndexExprAttr
from kiln.dialects.loop.body_ops import YieldOp as LoopYieldOp
from kiln.dialects.loop.expr import (
    FloorDiv,
    index_var,
    reduction_var,
    size_var,
)
from kiln.dialects.loop.ops import ExternOp as LoopExternOp
from kiln.dialects.loop.ops import LoopNestOp, PointwiseOp, ScatterOp, segment_sizes
from kiln.dialects.loop.simplify import simplify_with_ranges
from kiln.passes.scheduling.exprs import floordiv, mod, substitute
from kiln.passes.scheduling.fusion import FusionResult, Group
from kiln.passes.scheduling.graph import Node, NodeKind, ScheduleGraph
from kiln.passes.scheduling.legality import Level, leading_split

X = index_var(0)
"""The kernel's flat pointwise index, ``d0`` in ``kernel.vars``."""
R = reduction_var(0)
"""The kernel's flat reduction index, ``r0`` in ``kernel.vars``."""


def unflatten(flat: sympy.Expr, sizes: Sequence[sympy.Expr]) -> list[sympy.Expr]:
    """The row-major coordinates of position ``flat`` in a space of ``sizes``."""
    return list(_unflatten(flat, tuple(sizes)))


@functools.lru_cache(maxsize=4096)
def _unflatten(flat: sympy.Expr, sizes: tuple[sympy.Expr, ...]) -> tuple[sympy.Expr, ...]:
    # Cached: the same (flat, sizes) pairs come back for every layer of a deep model, and
    # sympy's Mod/FloorDiv evaluation is most of the scheduler's time (sympy expressions
    # are immutable and compare structurally, assumptions included).
    if any(size == 0 for size in sizes):
        # An empty space has no position: any coordinates will do (and the row-major
        # strides after a 0-size dim are 0, which the floor division would divide by).
        return tuple(sympy.Integer(0) for _ in sizes)
    out: list[sympy.Expr] = []
    stride: sympy.Expr = sympy.Integer(1)
    strides: list[sympy.Expr] = []
    for size in reversed(sizes):
        strides.append(stride)
        stride = stride * size
    strides.reverse()
    for k, (size, stride_k) in enumerate(zip(sizes, strides, strict=True)):
        coordinate = floordiv(flat, stride_k)
        if k > 0:
            coordinate = mod(coordinate, size)
        out.append(coordinate)
    return tuple(out)


def node_kernel_vars(
    sizes: Sequence[sympy.Expr],
    reduction_sizes: Sequence[sympy.Expr],
    level: Level,
    numel: sympy.Expr,
    rnumel: sympy.Expr,
) -> list[sympy.Expr]:
    """A node's loop variables over the kernel's ``d0``/``r0`` (all sizes over the
    kernel's size symbols)."""
    ranges = {X: numel, R: rnumel}
    if level is Level.RED:
        exprs = unflatten(X, sizes) + unflatten(R, reduction_sizes)
    elif level is Level.X:
        exprs = unflatten(X, sizes)
    elif level is Level.XRT:
        # Column-major: the leading dimensions are r, the others x (fusion places a node
        # at this level only where they split so: Scheduler._transposed).
        k = leading_split(sizes, rnumel)
        assert k is not None, "a column-major node whose dimensions do not split at rnumel"
        exprs = unflatten(R, sizes[:k]) + unflatten(X, sizes[k:])
    else:
        k = leading_split(sizes, numel)
        if k is None:
            exprs = unflatten(X * rnumel + R, sizes)
        else:
            exprs = unflatten(X, sizes[:k]) + unflatten(R, sizes[k:])
    return [simplify_with_ranges(e, ranges) for e in exprs]


@dataclass
class _SizeBuilder:
    """Emits ``arith`` ops computing size expressions in the program."""

    block: Block
    cache: dict[tuple[sympy.Expr, tuple[SSAValue, ...]], SSAValue] = field(
        default_factory=dict[tuple[sympy.Expr, tuple[SSAValue, ...]], SSAValue]
    )

    def emit(self, op: Operation) -> SSAValue:
        self.block.add_op(op)
        return op.results[0]

    def value(self, expr: sympy.Expr, syms: Sequence[SSAValue]) -> SSAValue:
        key = (expr, tuple(syms))
        if key in self.cache:
            return self.cache[key]
        if expr.is_Integer:
            out = self.emit(arith.ConstantOp(IntegerAttr(int(expr), IndexType())))
        elif isinstance(expr, sympy.Symbol):
            out = syms[int(expr.name[1:])]
        elif isinstance(expr, sympy.Add | sympy.Mul):
            cls = arith.AddiOp if isinstance(expr, sympy.Add) else arith.MuliOp
            args = [self.value(a, syms) for a in expr.args]
            out = args[0]
            for a in args[1:]:
                out = self.emit(cls(out, a))
        elif isinstance(expr, sympy.Pow):
            base = self.value(expr.base, syms)
            out = base
            for _ in range(int(expr.exp) - 1):
                out = self.emit(arith.MuliOp(out, base))
        elif isinstance(expr, FloorDiv | sympy.Mod):
            a, b = (self.value(cast(sympy.Expr, x), syms) for x in expr.args)
            # Sizes are non-negative, so the remainder is the modulus.
            out = self.emit(
                arith.FloorDivSIOp(a, b) if isinstance(expr, FloorDiv) else arith.RemSIOp(a, b)
            )
        else:
            raise ValueError(f"cannot compute size {expr}")
        self.cache[key] = out
        return out


@dataclass
class ProgramBuilder:
    """Builds the kernels and the program of one function from its fusion result."""

    graph: ScheduleGraph
    result: FusionResult
    kernel_names: list[str]
    """Names already taken in the module (kernels are numbered after them)."""
    kernels: list[KernelOp] = field(default_factory=list[KernelOp])
    values: dict[SSAValue, SSAValue] = field(default_factory=dict[SSAValue, SSAValue])

    def _new_name(self) -> str:
        name = f"kernel{len(self.kernel_names)}"
        self.kernel_names.append(name)
        return name

    def build(self) -> ProgramOp:
        func = self.graph.func
        old_block = func.body.block
        block = Block(arg_types=old_block.arg_types)
        for old, new in zip(old_block.args, block.args, strict=True):
            new.name_hint = old.name_hint
            self.values[old] = new
        sizes = _SizeBuilder(block)
        for group in self.result.groups:
            node = self.graph.nodes[group.first]
            if group.fusable:
                self._emit_kernel(block, sizes, group)
            elif node.kind is NodeKind.EXTERN:
                self._emit_extern(block, node)
            else:
                clone = node.op.clone(value_mapper=dict(self.values))
                block.add_op(clone)
                self.values.update(zip(node.op.results, clone.results, strict=True))
        terminator = old_block.last_op
        assert terminator is not None
        block.add_op(ReturnOp(*[self.values[v] for v in terminator.operands]))
        program = ProgramOp(
            func.sym_name.data,
            func.function_type,
            Region(block),
            arg_attrs=func.arg_attrs,
            res_attrs=func.res_attrs,
        )
        program.attributes.update(func.attributes)
        return program

    def _outputs(self, group: Group) -> list[SSAValue]:
        members = set(group.nodes)
        outputs: list[SSAValue] = []
        for i in group.nodes:
            for result in self.graph.nodes[i].op.results:
                readers = self.graph.consumers.get(result, [])
                if result in self.graph.returned or any(r not in members for r in readers):
                    outputs.append(result)
        return outputs

    def _emit_extern(self, block: Block, node: Node) -> None:
        op = node.op
        assert isinstance(op, LoopExternOp)
        body = op.body.clone()
        last = body.block.last_op
        assert isinstance(last, LoopYieldOp)
        body.block.insert_op_before(YieldOp(*last.values), last)
        body.block.erase_op(last)
        extern = ExternOp.create_with_body(
            [self.values[v] for v in op.inputs],
            [self.values[v] for v in op.syms],
            op.result_types,
            body,
        )
        block.add_op(extern)
        for old, new in zip(op.outputs, extern.outputs, strict=True):
            new.name_hint = old.name_hint
            self.values[old] = new

    def _emit_kernel(self, block: Block, sizes: _SizeBuilder, group: Group) -> None:
        outputs = self._outputs(group)
        if not outputs:
            return  # every result is dead
        # Every output empty (a 0-size dim): nothing to compute, so no kernel, whose
        # index algebra would divide by the empty dims' strides; the buffers still exist.
        empty = all(_empty_space(self.graph.nodes[i].loop) for i in group.nodes)
        # The producers' own sizes, read before _kernel moves them into the kernel.
        producer_syms = {v: list(_loop_of(v).syms) for v in outputs}
        kernel, inputs, syms = (None, [], []) if empty else self._kernel(group, outputs)
        if kernel is not None:
            self.kernels.append(kernel)
        outs: list[SSAValue] = []
        for value in outputs:
            ty = value.type
            assert isinstance(ty, MemRefType)
            producer = _loop_of(value)
            dynamic = [
                sizes.value(size.data, [self.values[s] for s in producer_syms[value]])
                for size, dim in zip(producer.result_sizes_list(), ty.get_shape(), strict=True)
                if dim < 0
            ]
            alloc = AllocOp(ty, dynamic)
            alloc.result.name_hint = value.name_hint
            block.add_op(alloc)
            outs.append(alloc.result)
            self.values[value] = alloc.result
            if isinstance(producer, ScatterOp):
                self._zero_fill(block, producer, producer_syms[value], alloc.result)
        if kernel is not None:
            args = [self.values[v] for v in [*inputs, *syms]]
            block.add_op(LaunchOp(kernel.sym_name.data, args, outs))

    def _zero_fill(
        self, block: Block, scatter: ScatterOp, scatter_syms: list[SSAValue], buffer: SSAValue
    ) -> None:
        """Launch a kernel that zeroes ``buffer`` before the scatter adds into it (a
        separate launch: every program of the scatter kernel must see it done).
        ``scatter_syms``: the scatter's size operands (before _kernel moved it)."""
        out_sizes = [s.data for s in scatter.out_sizes.data]
        numel = functools.reduce(lambda a, b: a * b, out_sizes, sympy.Integer(1))
        if numel == 0:
            return
        ty = buffer.type
        assert isinstance(ty, MemRefType)
        syms = list(scatter_syms)
        kernel_block = Block(arg_types=[IndexType() for _ in syms])
        for old, new in zip(syms, kernel_block.args, strict=True):
            new.name_hint = old.name_hint
        rank = len(out_sizes)
        body = Block(arg_types=[IndexType()] * rank)
        for k, arg in enumerate(body.args):
            arg.name_hint = f"d{k}"
        element = ty.element_type
        zero = arith.ConstantOp(
            FloatAttr(0.0, element)  # pyright: ignore[reportArgumentType]
            if isinstance(element, AnyFloat)
            else IntegerAttr(0, element)  # pyright: ignore[reportArgumentType]
        )
        body.add_ops([zero, LoopYieldOp(zero.result)])
        exprs = node_kernel_vars(out_sizes, [], Level.X, numel, sympy.Integer(1))
        fill = PointwiseOp.create(
            operands=list(kernel_block.args),
            result_types=[ty],
            properties={
                "sizes": ArrayAttr([IndexExprAttr(sympy.sympify(e)) for e in out_sizes]),
                "operandSegmentSizes": segment_sizes(0, len(syms)),
            },
            attributes={VARS_ATTR: vars_attr(exprs)},
            regions=[Region(body)],
        )
        fill.result.name_hint = f"{buffer.name_hint}_zeros" if buffer.name_hint else "zeros"
        kernel_block.add_ops([fill, YieldOp(fill.result)])
        kernel = KernelOp(
            self._new_name(),
            KernelKind.POINTWISE,
            numel,
            1,
            kernel_block.arg_types,
            [ty],
            Region(kernel_block),
        )
        self.kernels.append(kernel)
        block.add_op(LaunchOp(kernel.sym_name.data, [self.values[v] for v in syms], [buffer]))

    def _kernel(
        self, group: Group, outputs: Sequence[SSAValue]
    ) -> tuple[KernelOp, list[SSAValue], list[SSAValue]]:
        members = set(group.nodes)
        nodes = [self.graph.nodes[i] for i in group.nodes]
        inputs: list[SSAValue] = []
        syms: list[SSAValue] = []
        for node in nodes:
            loop = node.loop
            for value in loop.inputs:
                if self.graph.producer.get(value) not in members and value not in inputs:
                    inputs.append(value)
            for value in loop.syms:
                if value not in syms:
                    syms.append(value)
        block = Block(arg_types=[*(v.type for v in inputs), *(IndexType() for _ in syms)])
        mapping: dict[SSAValue, SSAValue] = {}
        for old, new in zip([*inputs, *syms], block.args, strict=True):
            new.name_hint = old.name_hint
            mapping[old] = new
        to_kernel_syms = {
            self.graph.symbols[v]: size_var(k)
            for k, v in enumerate(syms)
            if v in self.graph.symbols
        }
        numel = substitute(group.numel, to_kernel_syms)
        rnumel = substitute(group.rnumel, to_kernel_syms)
        for node in nodes:
            loop = node.loop
            local = {size_var(k): size_var(syms.index(v)) for k, v in enumerate(loop.syms)}
            node_sizes = [substitute(s.data, local) for s in loop.sizes.data]
            node_rsizes = [substitute(s.data, local) for s in loop.reduction_sizes_list()]
            exprs = node_kernel_vars(
                node_sizes, node_rsizes, group.levels[node.index], numel, rnumel
            )
            # Moved, not cloned: the function is dropped once the program is built, and
            # cloning every loop nest's body was ~8 % of ``fuse`` at 48 layers (issue 19).
            loop.detach()
            loop.operands = [mapping.get(v, v) for v in loop.operands]
            loop.attributes[VARS_ATTR] = vars_attr(exprs)
            if group.levels[node.index] is Level.XRT:
                loop.attributes[COLUMN_MAJOR_ATTR] = UnitAttr()
            block.add_op(loop)
        block.add_op(YieldOp(*outputs))
        kind = KernelKind.REDUCTION if group.reduces else KernelKind.POINTWISE
        kernel = KernelOp(
            self._new_name(),
            kind,
            numel,
            rnumel,
            block.arg_types,
            [v.type for v in outputs],
            Region(block),
        )
        return kernel, inputs, syms


def _loop_of(value: SSAValue) -> LoopNestOp:
    producer = value.owner
    assert isinstance(producer, LoopNestOp)
    return producer


def _empty_space(loop: LoopNestOp) -> bool:
    """Whether the loop nest writes no element (a static 0 among its output sizes)."""
    return any(size.data == 0 for size in loop.sizes.data)


def remove_dead_nodes(func: FuncOp) -> None:
    """Erase loop nests none of whose results are used (pure: nothing else observes them)."""
    for op in reversed(list(func.body.block.ops)):
        if isinstance(op, LoopNestOp) and all(not r.uses for r in op.results):
            func.body.block.erase_op(op)


__all__ = ["ProgramBuilder", "node_kernel_vars", "remove_dead_nodes", "unflatten"]

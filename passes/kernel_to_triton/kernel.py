"""One ``kernel.kernel`` as one ``triton.kernel``.

The kernel's parameters are its input buffers (``in_ptr<k>``), its outputs
(``out_ptr<k>``) and its size symbols (``ks<k>``), then the constexpr block sizes.
Every program handles ``XBLOCK`` values of the flat index ``x`` (``YBLOCK`` x ``XBLOCK``
for a 2-D tile) and, in a reduction, ``RBLOCK`` reduction lanes at a time:

```python
xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]   # [XBLOCK, 1]
xmask = xindex < xnumel
rindex = tl.arange(0, RBLOCK)[None, :]                                 # [1, RBLOCK]
```

Nodes' bodies are lowered in order (see :mod:`~kiln.passes.kernel_to_triton.body`); a
node reads a fused producer's value from registers; global loads are masked by the lane
masks of the dimensions their address depends on; yielded values are stored to their
output buffers at the row-major position of the producing node's point.
"""

from __future__ import annotations

from collections.abc import Sequence

import sympy
from xdsl.dialects import scf
from xdsl.dialects.builtin import IntegerType, MemRefType, StringAttr
from xdsl.ir import Attribute, Block, SSAValue
from xdsl.utils.exceptions import DiagnosticException

from kiln.dialects.loop.body_ops import CheckIndexOp, IndexOp, LoadOp
from kiln.dialects.loop.expr import flat_index, indirect_var, size_var
from kiln.dialects.loop.ops import LoopNestOp, ScatterOp
from kiln.dialects.loop.simplify import simplify_with_ranges
from kiln.dialects.triton import (
    AddPtrOp,
    ArangeOp,
    AtomicAddOp,
    ConstexprOp,
    DeviceAssertOp,
    KernelOp,
    PointerType,
    ProgramIdOp,
    ReturnOp,
    StoreOp,
)
from kiln.dialects.triton import (
    LoadOp as TritonLoadOp,
)
from kiln.dialects.triton.block_ops import INDEX_ASSERT
from kiln.dialects.triton.literals import literal_value
from kiln.dialects.triton.types import BlockType, Dim, broadcast_shapes, element_of, shape_of
from kiln.passes.kernel_to_triton.body import index_element, lower_body
from kiln.passes.kernel_to_triton.builder import TritonBuilder, constant_value
from kiln.passes.kernel_to_triton.index import IndexEmitter
from kiln.passes.kernel_to_triton.matmul import MatmulLowering
from kiln.passes.kernel_to_triton.plan import KernelPlan, Level, NodePlan, R, X, Y
from kiln.passes.kernel_to_triton.reduction import ReductionLowering


class KernelLoweringError(DiagnosticException):
    """A kernel that cannot be lowered to Triton (the message names it)."""


def _element(ty: Attribute) -> Attribute:
    assert isinstance(ty, MemRefType)
    return ty.element_type


class KernelLowering:
    """Lowers one planned kernel (see the module docstring)."""

    def __init__(self, plan: KernelPlan, name: str) -> None:
        self.plan = plan
        kernel = plan.kernel
        self.index_type: IntegerType = plan.index_type
        params: list[tuple[str, Attribute]] = []
        for k, arg in enumerate(kernel.buffer_args()):
            params.append((f"in_ptr{k}", PointerType(_element(arg.type))))
        outputs = kernel.function_type.outputs.data
        for k, ty in enumerate(outputs):
            params.append((f"out_ptr{k}", PointerType(_element(ty))))
        for k in range(len(kernel.sym_args())):
            params.append((f"ks{k}", self.index_type))
        self.constexprs = (
            ["XBLOCK"]
            if plan.structure == "pointwise" and plan.ynumel is None
            else ["YBLOCK", "XBLOCK"]
            if plan.structure == "pointwise"
            else ["YBLOCK", "XBLOCK", "RBLOCK"]
            if plan.structure == "matmul"
            else ["XBLOCK", "RBLOCK"]
        )
        self.op = KernelOp(
            name,
            plan.kind,
            plan.numel,
            plan.rnumel,
            params,
            self.constexprs,
            ynumel=plan.ynumel,
        )
        args = list(self.op.body.block.args)
        n_in = len(kernel.buffer_args())
        self.in_ptrs = dict(zip(kernel.buffer_args(), args[:n_in], strict=True))
        self.out_ptrs = args[n_in : n_in + len(outputs)]
        self.size_args = args[n_in + len(outputs) :]
        self.builder = TritonBuilder(self.op.body.block)
        self.index = IndexEmitter(self.builder, self.index_type)
        for k, arg in enumerate(self.size_args):
            self.index.bases[size_var(k)] = arg
        self.lane_masks: dict[str, SSAValue] = {}
        self.lane_depth: dict[str, int] = {}
        self.reductions = ReductionLowering(self)
        self.scatter_indices: dict[ScatterOp, list[SSAValue]] = {}
        """Each scatter node's index values (``i<k>`` of its position), once evaluated."""
        self.eviction: str | None = None
        """Eviction policy of the current reduction loop's loads (Inductor's scheme: data a
        later loop reads again stays in cache, the last loop's reads stream through)."""

    # -- sizes and lanes ---------------------------------------------------------------

    def size(self, expr: sympy.Expr) -> SSAValue:
        return self.index.emit(expr)

    def lanes(self, block_name: str, axis: int | None, rank: int) -> SSAValue:
        """``tl.arange(0, BLOCK)`` placed along ``axis`` of a ``rank``-D tile."""
        b = self.builder
        value = b.add(ArangeOp(block_name))
        value = b.cast(value, self.index_type)
        if axis is not None and rank == 2:
            value = b.expand(value, 1 - axis)
        return value

    def _offset_lanes(
        self,
        pid_axis: int,
        block_name: str,
        axis: int | None,
        rank: int,
        numel: SSAValue,
        prefix: str,
    ) -> SSAValue:
        b = self.builder
        pid = b.cast(b.add(ProgramIdOp(pid_axis)), self.index_type)
        block = b.cast(b.add(ConstexprOp(block_name)), self.index_type)
        offset = b.binary("mul", pid, block)
        offset.name_hint = f"{prefix}offset"
        lanes = self.lanes(block_name, axis, rank)
        index = b.binary("add", offset, lanes)
        index.name_hint = f"{prefix}index"
        mask = b.cmp("lt", index, numel)
        mask.name_hint = f"{prefix}mask"
        self.lane_masks[block_name] = mask
        self.lane_depth[block_name] = 0
        return index

    def prologue(self) -> None:
        plan = self.plan
        if plan.structure == "pointwise" and plan.ynumel is None:
            xnumel = self.size(plan.numel)
            self.index.bases[X] = self._offset_lanes(0, "XBLOCK", None, 1, xnumel, "x")
            return
        if plan.structure in ("pointwise", "matmul"):
            assert plan.ynumel is not None
            ynumel, xnumel = self.size(plan.ynumel), self.size(plan.xnumel)
            self.index.bases[Y] = self._offset_lanes(1, "YBLOCK", 0, 2, ynumel, "y")
            self.index.bases[X] = self._offset_lanes(0, "XBLOCK", 1, 2, xnumel, "x")
            if plan.structure == "matmul":
                self.rnumel = self.size(plan.rnumel)
            return
        xnumel = self.size(plan.numel)
        self.index.bases[X] = self._offset_lanes(0, "XBLOCK", 0, 2, xnumel, "x")
        self.rnumel = self.size(plan.rnumel)
        self.rbase = self.lanes("RBLOCK", 1, 2)
        self.rbase.name_hint = "rbase"
        if plan.structure == "persistent":
            self.set_rindex(self.rbase)

    def _loop_nodes(
        self, stage: int, yielded: set[SSAValue]
    ) -> tuple[list[NodePlan], list[NodePlan]]:
        """The reductions and the stored XR nodes of loop ``stage``."""
        nodes = [n for n in self.plan.nodes if n.stage == stage]
        reductions = [n for n in nodes if n.level is Level.RED]
        stores = [
            n for n in nodes if n.level is Level.XR and any(r in yielded for r in n.op.results)
        ]
        return reductions, stores

    def set_rindex(self, rindex: SSAValue) -> None:
        """Make ``rindex`` the reduction lanes of the current scope (and their mask)."""
        rindex.name_hint = "rindex"
        depth = len(self.builder.scopes) - 1
        self.index.bases[R] = rindex
        self.index.depths[R] = depth
        mask = self.builder.cmp("lt", rindex, self.rnumel)
        mask.name_hint = "rmask"
        self.lane_masks["RBLOCK"] = mask
        self.lane_depth["RBLOCK"] = depth

    def mask_for(self, shape: Sequence[Dim]) -> SSAValue | None:
        """The lanes in range for a block of ``shape`` (None: all are)."""
        names = [d for d in shape if isinstance(d, str)]
        if not names:
            return None
        depth = max(self.lane_depth[n] for n in names)
        key = ("mask", tuple(names))
        found = self.builder.lookup(key, depth)
        if found is not None:
            return found
        mask: SSAValue | None = None
        for n in names:
            lane = self.lane_masks[n]
            mask = lane if mask is None else self.builder.binary("and", mask, lane, depth)
        assert mask is not None
        return self.builder.remember(key, mask, depth)

    @property
    def tile_shape(self) -> tuple[Dim, ...]:
        plan = self.plan
        if plan.structure in ("pointwise", "matmul"):
            return ("XBLOCK",) if plan.ynumel is None else ("YBLOCK", "XBLOCK")
        return ("XBLOCK", "RBLOCK")

    # -- expressions -------------------------------------------------------------------

    def kernel_expr(self, node: NodePlan, expr: sympy.Expr) -> sympy.Expr:
        """A node-level index expression over the kernel's lanes, simplified."""
        out = sympy.expand(sympy.sympify(expr).xreplace(node.subst))
        return simplify_with_ranges(out, self.plan.ranges())

    # -- nodes ------------------------------------------------------------------------

    def value_of(self, value: SSAValue) -> SSAValue:
        """The triton value of a fused node's result (computing an ``XR`` node on demand)."""
        found = self.builder.lookup(("node", value))
        if found is not None:
            return found
        producer = self.plan.by_result.get(value)
        if producer is None:
            raise KernelLoweringError(
                f"{self.where}: a node reads a value the kernel does not compute"
            )
        node, _ = producer
        if node.level is not Level.XR:
            raise KernelLoweringError(
                f"{self.where}: the result of {node.op.name} is read before it is computed"
            )
        self.evaluate(node)
        found = self.builder.lookup(("node", value))
        assert found is not None
        return found

    def evaluate(self, node: NodePlan) -> None:
        """Compute a pointwise node's value in the current scope."""
        values = lower_body(_NodeContext(self, node), list(node.op.body.block.ops), {})
        depth = 0 if node.level is Level.X else None
        if isinstance(node.op, ScatterOp):
            # The value, then the index values its position uses (i<k>).
            self.scatter_indices[node.op] = values[1:]
            values = values[:1]
        for result, value in zip(node.op.results, values, strict=True):
            self.builder.remember(("node", result), value, depth)

    def body_values(self, node: NodePlan) -> list[SSAValue]:
        return lower_body(_NodeContext(self, node), list(node.op.body.block.ops), {})

    def store_outputs(self, node: NodePlan) -> None:
        """Store the node's yielded results to their output buffers."""
        yielded = list(self.plan.kernel.yield_op().values)
        for result in node.op.results:
            for k, out in enumerate(yielded):
                if out is not result:
                    continue
                value = self.builder.lookup(("node", result))
                assert value is not None
                self._store(node, self.out_ptrs[k], value)

    def _store(self, node: NodePlan, ptr: SSAValue, value: SSAValue) -> None:
        op = node.op
        if isinstance(op, ScatterOp):
            self._atomic_add(node, op, ptr, value)
            return
        sizes = [s.data for s in op.sizes.data]
        from kiln.dialects.loop.expr import index_var

        position = flat_index([index_var(k) for k in range(len(sizes))], sizes)
        offset = self.index.emit(self.kernel_expr(node, position))
        shape = broadcast_shapes(shape_of(offset.type), shape_of(value.type)) or ()
        if node.level is Level.XR:
            shape = self.tile_shape
        b = self.builder
        if shape_of(offset.type) != shape:
            offset = b.broadcast(offset, shape)
        pointers = b.add(AddPtrOp(ptr, offset))
        b.insert(StoreOp(pointers, value, self.mask_for(shape)))

    def _atomic_add(self, node: NodePlan, op: ScatterOp, ptr: SSAValue, value: SSAValue) -> None:
        """``tl.atomic_add`` of the value at the scatter's position, in the lanes in range."""
        indices = self.scatter_indices[op]
        expr = self.kernel_expr(node, op.index.data)
        extra = {indirect_var(k): v for k, v in enumerate(indices)}
        offset = self.index.emit(expr, extra if indices else None)
        shape = broadcast_shapes(shape_of(offset.type), shape_of(value.type)) or ()
        shape = broadcast_shapes(shape, self.tile_shape) or self.tile_shape
        b = self.builder
        if shape_of(offset.type) != shape:
            offset = b.broadcast(offset, shape)
        if shape_of(value.type) and shape_of(value.type) != shape:
            value = b.broadcast(value, shape)  # (tl.atomic_add broadcasts scalars itself)
        # Only inside the buffer: device asserts (the index checks) may be compiled out,
        # and an add past the end would corrupt another buffer.
        numel = sympy.Integer(1)
        for size in op.out_sizes.data:
            numel = numel * size.data
        zero = b.const(0, element_of(offset.type))
        inside = b.binary(
            "and",
            b.cmp("ge", offset, zero),
            b.cmp("lt", offset, self.index.emit(self.kernel_expr(node, numel))),
        )
        mask = b.logical_and(self.mask_for(shape), inside)
        pointers = b.add(AddPtrOp(ptr, offset))
        b.insert(AtomicAddOp(pointers, value, mask))

    @property
    def where(self) -> str:
        return f"kernel.kernel @{self.plan.kernel.sym_name.data}"

    # -- the kernel --------------------------------------------------------------------

    def lower(self) -> KernelOp:
        self.prologue()
        plan = self.plan
        if plan.structure == "looped":
            self._lower_looped()
        elif plan.structure == "matmul":
            MatmulLowering(self).lower()
        else:
            # Every load before the first store, as Inductor orders a kernel: Triton must
            # assume a store may alias any later load, so a store between two nodes
            # serialises their memory round trips (20 one-element counter updates
            # merged in one kernel took 7 us on an H200, one load-store chain after
            # another). Legal: fused nodes read each other's values in registers, and
            # an in-place output's buffer is read only at the writer's point, no later.
            for node in plan.nodes:
                if node.level is Level.RED:
                    self.reductions.persistent(node)
                else:
                    self.evaluate(node)
            for node in plan.nodes:
                self.store_outputs(node)
        self.builder.insert(ReturnOp())
        return self.op

    def _lower_looped(self) -> None:
        plan = self.plan
        b = self.builder
        yielded = set(plan.kernel.yield_op().values)
        loops = [s for s in range(plan.n_stages) if self._loop_nodes(s, yielded) != ([], [])]
        for stage in range(plan.n_stages):
            for node in plan.nodes:
                if node.stage == stage and node.level is Level.X:
                    self.evaluate(node)
                    self.store_outputs(node)
            reductions, stores = self._loop_nodes(stage, yielded)
            if not reductions and not stores:
                continue
            if len(loops) > 1:
                self.eviction = "evict_last" if stage != loops[-1] else "evict_first"
            accumulators = [self.reductions.init(n) for n in reductions]
            inits = [v for acc in accumulators for v in acc]
            body = Block(arg_types=[self.index_type, *(v.type for v in inits)])
            zero = b.const(0, self.index_type)
            step = b.cast(b.add(ConstexprOp("RBLOCK")), self.index_type)
            loop = scf.ForOp(zero, self.rnumel, step, inits, body)
            b.insert(loop)
            names = [
                _accumulator_name(n, k)
                for n, acc in zip(reductions, accumulators, strict=True)
                for k in range(len(acc))
            ]
            for name, arg, result in zip(names, body.args[1:], loop.results, strict=True):
                arg.name_hint = result.name_hint = name
            body.args[0].name_hint = "roffset"
            with b.nested(body, loop):
                self.set_rindex(b.binary("add", body.args[0], self.rbase))
                carried = iter(body.args[1:])
                updated: list[SSAValue] = []
                for node, acc in zip(reductions, accumulators, strict=True):
                    current = [next(carried) for _ in acc]
                    updated += self.reductions.update(node, current)
                for node in stores:
                    for result in node.op.results:
                        self.value_of(result)
                    self.store_outputs(node)
                b.insert(scf.YieldOp(*updated))
            self.lane_masks.pop("RBLOCK", None)
            self.eviction = None
            results = iter(loop.results)
            for node, acc in zip(reductions, accumulators, strict=True):
                finals = [next(results) for _ in acc]
                self.reductions.finish(node, finals)
                self.store_outputs(node)
        for node in plan.nodes:
            if node.stage == plan.n_stages and node.level is Level.X:  # pragma: no cover
                self.evaluate(node)
                self.store_outputs(node)


def _accumulator_name(node: NodePlan, k: int) -> str:
    """``acc_<node>`` (``acc_mean``, ``acc_m2``, ... for Welford and arg-reductions)."""
    kind = str(node.op.kind.data)  # pyright: ignore[reportAttributeAccessIssue]
    parts = _ACCUMULATOR_PARTS.get(kind)
    if parts is not None:
        return f"acc_{parts[k]}"
    hint = next((r.name_hint for r in node.op.results if r.name_hint), None)
    return f"acc_{hint or kind}"


_ACCUMULATOR_PARTS = {
    "welford": ("mean", "m2", "weight", "shift"),
    "argmax": ("max", "argmax"),
    "argmin": ("min", "argmin"),
}


class _NodeContext:
    """Body lowering's view of one node (see :class:`~kiln.passes.kernel_to_triton.body.KernelContext`)."""

    def __init__(self, kernel: KernelLowering, node: NodePlan) -> None:
        self.kernel = kernel
        self.node = node
        self.builder = kernel.builder
        op: LoopNestOp = node.op
        self.n_loop_vars = op.num_loop_vars
        self.outer = dict(zip(op.input_args(), op.inputs, strict=True))
        self.block_args: list[SSAValue] = list(op.body.block.args)

    def element(self, ty: Attribute) -> Attribute:
        return index_element(ty, self.kernel.index_type)

    def loop_var(self, arg: SSAValue) -> SSAValue:
        k = self.block_args.index(arg)
        if k >= self.n_loop_vars:
            raise KernelLoweringError(f"{self.kernel.where}: a buffer is used as a value")
        from kiln.dialects.loop.expr import index_var, reduction_var

        n_sizes = len(self.node.op.sizes.data)
        symbol = index_var(k) if k < n_sizes else reduction_var(k - n_sizes)
        return self.kernel.index.emit(self.kernel.kernel_expr(self.node, symbol))

    def index_value(self, op: IndexOp) -> SSAValue:
        return self.kernel.index.emit(self.kernel.kernel_expr(self.node, op.expr.data))

    def check_index(self, op: CheckIndexOp, index: SSAValue) -> SSAValue:
        """``tl.device_assert`` that ``index`` lies in its dimension (lanes past the end of
        the kernel's range are exempt: their index was never loaded)."""
        kernel = self.kernel
        b = self.builder
        size = kernel.index.emit(kernel.kernel_expr(self.node, op.size.data))
        zero = b.const(0, element_of(index.type))
        inside = b.binary("and", b.cmp("ge", index, zero), b.cmp("lt", index, size))
        if constant_value(inside) is True:
            return index
        lanes = kernel.mask_for(shape_of(inside.type))
        if lanes is not None:
            inside = b.binary("or", inside, b.not_(lanes))
        b.insert(DeviceAssertOp(inside, f"{INDEX_ASSERT}: 0 <= index < {op.size.text}"))
        return index

    def load(self, load: LoadOp, indirect: Sequence[SSAValue], mask: SSAValue | None) -> SSAValue:
        outer = self.outer[load.buffer]
        ptr = self.kernel.in_ptrs.get(outer)
        if ptr is None:
            return self.kernel.value_of(outer)
        kernel = self.kernel
        b = self.builder
        expr = kernel.kernel_expr(self.node, load.index.data)
        extra = {indirect_var(k): v for k, v in enumerate(indirect)}
        offset = kernel.index.emit(expr, extra if indirect else None)
        shape = shape_of(offset.type)
        if mask is not None:
            shape = broadcast_shapes(shape, shape_of(mask.type)) or shape
        if shape_of(offset.type) != shape:
            offset = b.broadcast(offset, shape)
        lanes = kernel.mask_for(shape)
        full_mask = b.logical_and(lanes, mask)
        if full_mask is not None and shape_of(full_mask.type) != shape:
            full_mask = b.broadcast(full_mask, shape)
        pointers = b.add(AddPtrOp(ptr, offset))
        other = None
        if full_mask is not None:
            other = literal_value(load.fill) if load.fill is not None and mask is not None else 0
        eviction = kernel.eviction if "RBLOCK" in shape else None
        if eviction is not None and "XBLOCK" not in shape:
            eviction = "evict_last"  # the same for every row (weights): keep it cached
        return b.add(TritonLoadOp(pointers, full_mask, other, eviction))


def provenance(kernel_ops: Sequence[LoopNestOp]) -> list[StringAttr]:
    """One line per fused node: its name (the FX node) and what it computes."""
    lines: list[StringAttr] = []
    for op in kernel_ops:
        hints = [f"%{r.name_hint}" for r in op.results if r.name_hint]
        names = ", ".join(hints) if hints else "(unnamed)"
        if op.name == "loop.reduction":
            what = f"{op.kind.data} over [{', '.join(s.text for s in op.sizes.data)}] reduce [{', '.join(s.text for s in op.reduction_sizes_list())}]"  # pyright: ignore[reportAttributeAccessIssue]
        elif isinstance(op, ScatterOp):
            what = f"scatter-add over [{', '.join(s.text for s in op.sizes.data)}] into [{', '.join(s.text for s in op.out_sizes.data)}]"
        else:
            what = f"pointwise over [{', '.join(s.text for s in op.sizes.data)}]"
        lines.append(StringAttr(f"{names} = {what}"))
    return lines


__all__ = ["BlockType", "KernelLowering", "KernelLoweringError", "provenance"]

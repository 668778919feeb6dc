"""What a ``kernel.kernel`` becomes: its structure, configs, nodes' levels and stages.

* **Structure**: ``pointwise`` (1-D, or a 2-D ``YBLOCK`` x ``XBLOCK`` tile when ``tile``
  set ``ynumel``), ``matmul`` (a 2-D tile whose matrix product node runs as a loop of
  ``tl.dot`` over ``RBLOCK`` chunks, the other nodes its epilogue), ``persistent`` (one block holds a whole reduction: ``RBLOCK`` covers
  ``rnumel``) or ``looped`` (a loop over ``RBLOCK`` chunks; ``split`` kernels loop too).
  Kernels that ``tile`` did not annotate get its heuristics here.
* **Levels** (as in :mod:`kiln.passes.scheduling.legality`): a node runs once per ``x``
  (``X``, a ``[XBLOCK, 1]`` block), once per point (``XR``, ``[XBLOCK, RBLOCK]``) or
  reduces (``RED``; its results are ``X``-level).
* **Stages** of a looped kernel: reduction loop ``s`` runs the reductions of stage ``s``;
  a node that needs a reduction's result runs at a later stage. ``XR`` values live only
  inside one loop iteration, so a node that needs one in a later loop recomputes it
  (from its loads), as Inductor does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum, auto

import sympy
from xdsl.dialects import arith, math
from xdsl.dialects.builtin import IntegerType, MemRefType, i32, i64
from xdsl.ir import BlockArgument, Operation, SSAValue

from kiln.dialects.kernel.attributes import ConfigAttr, KernelKind
from kiln.dialects.kernel.kernel_ops import KernelOp, node_vars
from kiln.dialects.loop.attributes import ReductionKind
from kiln.dialects.loop.body_ops import IndexOp, LoadOp
from kiln.dialects.loop.body_ops import YieldOp as LoopYieldOp
from kiln.dialects.loop.dot import is_dot
from kiln.dialects.loop.expr import index_var, reduction_var, size_var
from kiln.dialects.loop.ops import LoopNestOp, ReductionOp
from kiln.dialects.loop.simplify import simplify_with_ranges


class PlanError(ValueError):
    """A kernel whose shape lower-to-triton cannot handle."""


class Level(Enum):
    X = auto()
    XR = auto()
    RED = auto()


X = index_var(0)
R = reduction_var(0)
Y = index_var(1)
"""In a 2-D tile the kernel's ``d0`` is ``xnumel * Y + X``: ``Y`` the outer lane index."""

INT32_LIMIT = 2**31 - 1


@dataclass
class NodePlan:
    op: LoopNestOp
    level: Level
    subst: dict[sympy.Symbol, sympy.Expr]
    """The node's loop variables and size symbols as kernel-level expressions."""
    stage: int = 0
    online_skips: set[SSAValue] = field(default_factory=set[SSAValue])
    """Inputs an online sum does not read (the max, the exp node it sums)."""
    online_max: NodePlan | None = None
    """For a sum of ``exp(v - max(v))`` in a looped kernel: the node computing that max.
    The sum then accumulates online in the max's loop, rescaled whenever the running
    max grows (online softmax), which saves one pass over the input."""


@dataclass
class KernelPlan:
    kernel: KernelOp
    structure: str
    """``pointwise``, ``persistent`` or ``looped``."""
    kind: str
    """The triton kernel kind (``pointwise``, ``persistent``, ``looped``, ``split``)."""
    config: ConfigAttr
    configs: tuple[ConfigAttr, ...]
    index_type: IntegerType
    ynumel: sympy.Expr | None
    nodes: list[NodePlan] = field(default_factory=list[NodePlan])
    by_result: dict[SSAValue, tuple[NodePlan, int]] = field(
        default_factory=dict[SSAValue, tuple[NodePlan, int]]
    )

    @property
    def numel(self) -> sympy.Expr:
        return self.kernel.numel.data

    @property
    def rnumel(self) -> sympy.Expr:
        return self.kernel.rnumel.data

    @property
    def xnumel(self) -> sympy.Expr:
        """The extent of ``X``: ``numel`` (or ``numel / ynumel`` in a 2-D tile)."""
        return self.numel if self.ynumel is None else sympy.simplify(self.numel / self.ynumel)

    def ranges(self) -> dict[sympy.Symbol, sympy.Expr]:
        ranges: dict[sympy.Symbol, sympy.Expr] = {X: self.xnumel, R: self.rnumel}
        if self.ynumel is not None:
            ranges[Y] = self.ynumel
        return ranges

    @property
    def n_stages(self) -> int:
        """Reduction loops of a looped kernel (plus one when outputs need a final loop)."""
        return 1 + max((n.stage for n in self.nodes), default=0)


def _level(node: LoopNestOp) -> Level:
    if isinstance(node, ReductionOp):
        return Level.RED
    return Level.XR if any(e.has(R) for e in node_vars(node)) else Level.X


def _config_of(
    kernel: KernelOp,
) -> tuple[KernelKind, ConfigAttr, tuple[ConfigAttr, ...], sympy.Expr | None]:
    kind = kernel.kernel_kind
    if kernel.tiling is not None:
        configs = tuple(kernel.configs.data) if kernel.configs is not None else (kernel.tiling,)
        ynumel = kernel.ynumel.data if kernel.ynumel is not None else None
        return kind, kernel.tiling, configs or (kernel.tiling,), ynumel
    from kiln.passes.scheduling.tiling import pointwise_tiling, reduction_tiling

    tiling = pointwise_tiling(kernel) if not kind.reduces else reduction_tiling(kernel)
    chosen_kind = tiling.kind if kind in (KernelKind.REDUCTION, KernelKind.POINTWISE) else kind
    return chosen_kind, tiling.chosen, tiling.candidates, tiling.ynumel


def _index_type(kernel: KernelOp) -> IntegerType:
    """i32 when every offset fits (static sizes below 2^31), else i64."""
    sizes = [kernel.numel.data * kernel.rnumel.data]
    for arg in kernel.buffer_args():
        ty = arg.type
        assert isinstance(ty, MemRefType)
        n = 1
        for d in ty.get_shape():
            if d < 0:
                return i64
            n *= d
        sizes.append(sympy.Integer(n))
    for ty in kernel.function_type.outputs.data:
        assert isinstance(ty, MemRefType)
        if any(d < 0 for d in ty.get_shape()):
            return i64
    if any(s.free_symbols or int(s) > INT32_LIMIT for s in map(sympy.sympify, sizes)):
        return i64
    return i32


def plan_kernel(kernel: KernelOp) -> KernelPlan:
    kind, config, configs, ynumel = _config_of(kernel)
    if kind is KernelKind.POINTWISE:
        structure, triton_kind = "pointwise", "pointwise"
    elif kind is KernelKind.MATMUL:
        structure, triton_kind = "matmul", "matmul"
    elif kind is KernelKind.PERSISTENT:
        structure, triton_kind = "persistent", "persistent"
    elif kind in (KernelKind.LOOPED, KernelKind.SPLIT, KernelKind.REDUCTION):
        structure, triton_kind = "looped", "split" if kind is KernelKind.SPLIT else "looped"
    else:  # pragma: no cover - every kind is handled above
        raise PlanError(f"unknown kernel kind {kind}")
    if structure == "persistent":
        rblock = config.as_dict().get("RBLOCK")
        rnumel = kernel.rnumel.data
        if rblock is None or rnumel.free_symbols or int(rnumel) > rblock:
            structure, triton_kind = "looped", "looped"
    if structure not in ("pointwise", "matmul"):
        ynumel = None
    if structure == "matmul" and ynumel is None:
        raise PlanError(f"@{kernel.sym_name.data}: a matmul kernel without ynumel (its rows)")
    plan = KernelPlan(kernel, structure, triton_kind, config, configs, _index_type(kernel), ynumel)
    sym_args = list(kernel.sym_args())
    for node in kernel.nodes():
        exprs = node_vars(node)
        if ynumel is not None:
            xn = plan.xnumel
            exprs = [e.xreplace({X: xn * Y + X}) for e in exprs]
        subst: dict[sympy.Symbol, sympy.Expr] = {}
        n_sizes = len(node.sizes.data)
        for k, e in enumerate(exprs):
            subst[index_var(k) if k < n_sizes else reduction_var(k - n_sizes)] = e
        for k, sym in enumerate(node.syms):
            subst[size_var(k)] = size_var(sym_args.index(sym))
        level = _level(node)
        if structure == "pointwise" and level is not Level.X:
            raise PlanError(
                f"@{kernel.sym_name.data}: a pointwise kernel holds a {level.name} node"
            )
        if structure == "matmul" and level is not Level.X and not is_dot(node):
            raise PlanError(
                f"@{kernel.sym_name.data}: a matmul kernel holds a {level.name} node "
                "besides its product"
            )
        node_plan = NodePlan(node, level, subst)
        plan.nodes.append(node_plan)
        for j, result in enumerate(node.results):
            plan.by_result[result] = (node_plan, j)
    if structure == "looped":
        _find_online_softmax(plan)
        _assign_stages(plan)
    return plan


def _assign_stages(plan: KernelPlan) -> None:
    for node in plan.nodes:
        stage = 0
        for value in node.op.inputs:
            found = plan.by_result.get(value)
            if found is None:
                continue
            producer = found[0]
            if value in node.online_skips:
                # accumulated online from the max's running state instead
                stage = max(stage, node.online_max.stage if node.online_max else 0)
            elif producer.level is Level.RED:
                stage = max(stage, producer.stage + 1)
            else:
                stage = max(stage, producer.stage)
        if node.online_max is not None and stage != node.online_max.stage:
            # Another input needs a later loop than the max's: no online accumulation.
            node.online_max = None
            node.online_skips = set()
            _assign_stages(plan)
            return
        node.stage = stage


def _find_online_softmax(plan: KernelPlan) -> None:
    """Mark ``sum(exp(v - m))`` nodes whose ``m`` is a fused ``max(v)`` over the same ``v``."""
    for node in plan.nodes:
        op = node.op
        if not isinstance(op, ReductionOp) or op.kind.data is not ReductionKind.SUM:
            continue
        yielded = op.body.block.last_op
        if not isinstance(yielded, LoopYieldOp) or len(yielded.values) != 1:
            continue
        source, value = _through_fused_loads(plan, node, yielded.values[0])
        exp = value.owner
        if not isinstance(exp, math.ExpOp) or not isinstance(
            sub := exp.operand.owner, arith.SubfOp
        ):
            continue
        load = sub.rhs.owner
        if not isinstance(load, LoadOp) or load.mask is not None or load.indirect:
            continue
        outer = dict(zip(source.op.input_args(), source.op.inputs, strict=True)).get(load.buffer)
        found = plan.by_result.get(outer) if outer is not None else None
        if found is None or found[1] != 0:
            continue
        producer = found[0]
        max_op = producer.op
        if not isinstance(max_op, ReductionOp) or max_op.kind.data is not ReductionKind.MAX:
            continue
        max_yield = max_op.body.block.last_op
        assert isinstance(max_yield, LoopYieldOp)
        if _same_value(plan, source, sub.lhs, producer, max_yield.values[0]):
            node.online_max = producer
            node.online_skips = {
                r for n in (producer, source) for r in n.op.results if n is not node
            }


def _through_fused_loads(
    plan: KernelPlan, node: NodePlan, value: SSAValue
) -> tuple[NodePlan, SSAValue]:
    """Follow a body value that is a load of a fused pointwise node's result to the value
    that node's body yields (repeatedly)."""
    while isinstance(load := value.owner, LoadOp) and not load.indirect and load.mask is None:
        outer = dict(zip(node.op.input_args(), node.op.inputs, strict=True)).get(load.buffer)
        found = plan.by_result.get(outer) if outer is not None else None
        if found is None or found[0].level is not Level.XR or len(found[0].op.results) != 1:
            break
        node = found[0]
        yielded = node.op.body.block.last_op
        assert isinstance(yielded, LoopYieldOp)
        value = yielded.values[0]
    return node, value


def _same_value(
    plan: KernelPlan, a_node: NodePlan, a: SSAValue, b_node: NodePlan, b: SSAValue
) -> bool:
    """Whether two nodes' body values compute the same thing at every kernel point."""
    if a.type != b.type:
        return False
    ranges = plan.ranges()

    def kernel_expr(node: NodePlan, expr: sympy.Expr) -> sympy.Expr:
        return simplify_with_ranges(sympy.expand(expr.xreplace(node.subst)), ranges)

    if isinstance(a, BlockArgument) or isinstance(b, BlockArgument):
        if not (isinstance(a, BlockArgument) and isinstance(b, BlockArgument)):
            return False
        la, lb = a_node.op, b_node.op
        if a.index >= la.num_loop_vars or b.index >= lb.num_loop_vars:
            return False
        return kernel_expr(a_node, _loop_var(la, a.index)) == kernel_expr(
            b_node, _loop_var(lb, b.index)
        )
    op_a, op_b = a.owner, b.owner
    assert isinstance(op_a, Operation)
    assert isinstance(op_b, Operation)
    if op_a.name != op_b.name or len(op_a.operands) != len(op_b.operands):
        return False
    if isinstance(op_a, LoadOp) and isinstance(op_b, LoadOp):
        outer_a = dict(zip(a_node.op.input_args(), a_node.op.inputs, strict=True))[op_a.buffer]
        outer_b = dict(zip(b_node.op.input_args(), b_node.op.inputs, strict=True))[op_b.buffer]
        if outer_a is not outer_b or op_a.fill != op_b.fill:
            return False
        if kernel_expr(a_node, op_a.index.data) != kernel_expr(b_node, op_b.index.data):
            return False
        operands = list(zip(op_a.operands[1:], op_b.operands[1:], strict=True))
    elif isinstance(op_a, IndexOp) and isinstance(op_b, IndexOp):
        return kernel_expr(a_node, op_a.expr.data) == kernel_expr(b_node, op_b.expr.data)
    else:
        if op_a.properties != op_b.properties or op_a.regions or op_b.regions:
            return False
        operands = list(zip(op_a.operands, op_b.operands, strict=True))
    return all(_same_value(plan, a_node, x, b_node, y) for x, y in operands)


def _loop_var(op: LoopNestOp, k: int) -> sympy.Symbol:
    n_sizes = len(op.sizes.data)
    return index_var(k) if k < n_sizes else reduction_var(k - n_sizes)


__all__ = ["KernelPlan", "Level", "NodePlan", "PlanError", "R", "X", "Y", "plan_kernel"]

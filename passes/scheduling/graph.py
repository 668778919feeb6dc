"""The dependency graph of a loop-level function: one node per op, edges for data flow.

Loop nests (``loop.pointwise``/``loop.reduction``) are fusable nodes; ``loop.extern``
calls and scalar ops (size arithmetic, ``memref.dim``) are nodes that are never fused
but take part in the graph, so that fusion can never close a cycle through them.
Sizes are rewritten over *global* size symbols (one per SSA ``index`` value, ``g0``,
``g1``, ...) so that the iteration spaces of different nodes can be compared.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from enum import Enum, auto
from functools import lru_cache

import networkx as nx
import sympy
from xdsl.dialects.builtin import MemRefType
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Operation, SSAValue

from kiln.dialects.loop.body_ops import LoadOp
from kiln.dialects.loop.expr import size_var
from kiln.dialects.loop.ops import ExternOp, LoopNestOp, ReductionOp
from kiln.passes.scheduling.exprs import substitute

SIZE_HINT = 1024
"""What a dynamic dimension counts for when estimating bytes (scores only)."""


class NodeKind(Enum):
    POINTWISE = auto()
    REDUCTION = auto()
    EXTERN = auto()
    OTHER = auto()
    """Scalar ops between loop nodes (sizes): never fused, kept in order."""

    @property
    def fusable(self) -> bool:
        return self in (NodeKind.POINTWISE, NodeKind.REDUCTION)


def _product(values: Sequence[sympy.Expr]) -> sympy.Expr:
    return _product_cached(tuple(values))


@lru_cache(maxsize=4096)
def _product_cached(values: tuple[sympy.Expr, ...]) -> sympy.Expr:
    """Cached: ``numel`` is asked of every node at every fusion step, and multiplying
    out compound symbolic sizes costs a millisecond each."""
    out: sympy.Expr = sympy.Integer(1)
    for v in values:
        out = out * v
    return sympy.expand(out)


def value_name(value: SSAValue) -> str:
    if value.name_hint:
        return f"%{value.name_hint}"
    owner = value.owner
    return f"<a result of {owner.name}>" if isinstance(owner, Operation) else "<an argument>"


@dataclass
class Node:
    """One op of the function, in program order."""

    index: int
    op: Operation
    kind: NodeKind
    sizes: list[sympy.Expr] = field(default_factory=list[sympy.Expr])
    """Index-variable sizes over global symbols (loop nests only)."""
    reduction_sizes: list[sympy.Expr] = field(default_factory=list[sympy.Expr])
    loads: dict[SSAValue, list[LoadOp]] = field(default_factory=dict[SSAValue, list[LoadOp]])
    """For loop nests: each input buffer (the outer value) and the loads that read it."""

    @property
    def name(self) -> str:
        """How reports name the node: its first named result, else its op and position."""
        for result in self.op.results:
            if result.name_hint:
                return f"%{result.name_hint}"
        return f"<{self.op.name} #{self.index}>"

    @property
    def numel(self) -> sympy.Expr:
        """Points of the node's pointwise space (a reduction's output size)."""
        return _product(self.sizes)

    @property
    def rnumel(self) -> sympy.Expr:
        return _product(self.reduction_sizes)

    @property
    def loop(self) -> LoopNestOp:
        assert isinstance(self.op, LoopNestOp)
        return self.op

    def reads(self) -> Iterator[SSAValue]:
        """Every value the node uses (buffers and sizes), outer values only."""
        return iter(dict.fromkeys(self.op.operands))


@dataclass
class ScheduleGraph:
    """The function's nodes, who produces and who consumes each value, and the DAG."""

    func: FuncOp
    nodes: list[Node]
    producer: dict[SSAValue, int]
    consumers: dict[SSAValue, list[int]]
    returned: set[SSAValue]
    graph: nx.DiGraph  # pyright: ignore[reportMissingTypeArgument]
    symbols: dict[SSAValue, sympy.Symbol]
    """Global size symbol of each ``index`` value used as a size."""

    def node_of(self, value: SSAValue) -> Node | None:
        index = self.producer.get(value)
        return None if index is None else self.nodes[index]

    def bytes_of(self, value: SSAValue) -> int:
        """Size of a buffer in bytes (dynamic dimensions count :data:`SIZE_HINT`)."""
        from kiln.dialects.loop.body_eval import torch_dtype

        ty = value.type
        if not isinstance(ty, MemRefType):
            return 0
        n = 1
        for d in ty.get_shape():
            n *= d if d >= 0 else SIZE_HINT
        return n * torch_dtype(ty.element_type).itemsize


def _global_sizes(
    op: LoopNestOp, sizes: Sequence[sympy.Expr], symbols: dict[SSAValue, sympy.Symbol]
) -> list[sympy.Expr]:
    mapping: dict[sympy.Symbol, sympy.Expr] = {}
    for k, value in enumerate(op.syms):
        symbol = symbols.get(value)
        if symbol is None:
            symbol = symbols[value] = sympy.Symbol(f"g{len(symbols)}", integer=True, positive=True)
        mapping[size_var(k)] = symbol
    return [substitute(s, mapping) for s in sizes]


def _loads_by_buffer(op: LoopNestOp) -> dict[SSAValue, list[LoadOp]]:
    arg_to_outer = dict(zip(op.input_args(), op.inputs, strict=True))
    out: dict[SSAValue, list[LoadOp]] = {v: [] for v in op.inputs}
    for inner in op.body.walk():
        if isinstance(inner, LoadOp):
            outer = arg_to_outer.get(inner.buffer)
            if outer is not None:
                out[outer].append(inner)
    return out


def build_graph(func: FuncOp) -> ScheduleGraph:
    """The schedule graph of a lowered function (loop dialect)."""
    block = func.body.block
    nodes: list[Node] = []
    symbols: dict[SSAValue, sympy.Symbol] = {}
    returned: set[SSAValue] = set()
    for op in block.ops:
        if isinstance(op, ReturnOp):
            returned.update(op.operands)
            continue
        index = len(nodes)
        if isinstance(op, LoopNestOp):
            kind = NodeKind.REDUCTION if isinstance(op, ReductionOp) else NodeKind.POINTWISE
            node = Node(
                index,
                op,
                kind,
                _global_sizes(op, [s.data for s in op.sizes.data], symbols),
                _global_sizes(op, [s.data for s in op.reduction_sizes_list()], symbols),
                _loads_by_buffer(op),
            )
        else:
            kind = NodeKind.EXTERN if isinstance(op, ExternOp) else NodeKind.OTHER
            node = Node(index, op, kind)
        nodes.append(node)
    producer: dict[SSAValue, int] = {}
    consumers: dict[SSAValue, list[int]] = {}
    graph: nx.DiGraph = nx.DiGraph()  # pyright: ignore[reportMissingTypeArgument]
    graph.add_nodes_from(range(len(nodes)))
    for node in nodes:
        for value in node.reads():
            consumers.setdefault(value, []).append(node.index)
            source = producer.get(value)
            if source is not None:
                graph.add_edge(source, node.index)
        for result in node.op.results:
            producer[result] = node.index
    return ScheduleGraph(func, nodes, producer, consumers, returned, graph, symbols)


__all__ = ["SIZE_HINT", "Node", "NodeKind", "ScheduleGraph", "build_graph", "value_name"]

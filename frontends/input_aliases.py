"""Outputs that are views of graph inputs keep eager's view metadata.

AOTAutograd does not trust a compiled graph with the aliasing of its outputs: for an
output that eager makes a view of an input, it rebuilds the view from the input
itself (``gen_alias_from_base``). It replays the recorded view functions when their
arguments are static; otherwise (``torch.chunk(x, 6, 1)[1]`` with a symbolic dim: a
split whose size is a SymInt) it calls ``input.as_strided(out.size(), out.stride(),
out.storage_offset())`` with the *compiled* output's metadata. kiln computes such an
output into a fresh contiguous buffer (offset 0, its own strides), so that rebuilt view
silently read chunk 0's data.

:class:`InputAliases` finds those outputs at compile time (their FakeTensor shares the
storage of a placeholder's) and returns them as ``input.as_strided`` with eager's sizes,
strides and offset, evaluated from the run's actual sizes: exactly eager's view, and no
copy. It is what Inductor's wrapper does (``reinterpret_tensor`` of the argument).

With symbolic sizes, the FakeTensor's strides are formulas that agree with eager's only
where every size is at least 2: eager's ``view`` gives a dimension of size 1 a stride of
its own choosing (``x[2:3, :, 1:2].transpose(0, 2).reshape(1, 3, 1)`` has strides
``(9, 3, 9)`` in eager, ``(1, 3, 9)`` by the formula, at 3 x 3 x 3). For such outputs
the view ops from the input to the output (views and size arithmetic only) are replayed
on the run's input, in eager: its view, whatever the sizes.

Such an output need not be computed at all: :meth:`InputAliases.forwarding_inputs` gives
the graph with each of them returning its input itself, so that the program allocates
nothing for it. That matters in training: AOTAutograd's default partitioner saves
``t(weight)`` for the backward of every linear layer, and a copy of each, held until the
forward returns, cost the size of the weights at the forward's peak.
"""

from __future__ import annotations

import copy
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sympy
import torch
import torch.fx

Getter = Callable[[Sequence[Any]], int]


@dataclass(frozen=True)
class _Alias:
    output: int
    input: int
    size: tuple[sympy.Expr, ...]
    stride: tuple[sympy.Expr, ...]
    offset: sympy.Expr


def _expr(value: int | torch.SymInt) -> sympy.Expr:
    if isinstance(value, torch.SymInt):
        return sympy.sympify(value.node.expr)
    return sympy.Integer(value)


def _storage(value: object) -> int | None:
    if not isinstance(value, torch.Tensor) or value.is_sparse:
        return None
    try:
        return value.untyped_storage()._cdata  # pyright: ignore[reportPrivateUsage]  # the C++ storage, shared by views
    except (RuntimeError, NotImplementedError):
        return None


class InputAliases:
    """The outputs of one FX graph that alias its tensor inputs (see the module doc)."""

    def __init__(self, gm: torch.fx.GraphModule, count: int | None = None) -> None:
        """``count``: only the first ``count`` outputs are returned to the caller (the
        others are written into inputs: :mod:`kiln.backends.host.input_writes`)."""
        self.forwarded = False
        """Whether the compiled graph returns the aliased inputs themselves
        (:meth:`forwarding_inputs`)."""
        placeholders = list(gm.graph.find_nodes(op="placeholder"))
        self._symbols: dict[sympy.Symbol, Getter] = {}
        storages: dict[int, int] = {}
        for k, node in enumerate(placeholders):
            val = node.meta.get("val")
            self._bind_placeholder(k, val)
            storage = _storage(val)
            if storage is not None:
                storages.setdefault(storage, k)
        self.aliases: list[_Alias] = []
        symbolic: dict[int, torch.fx.Node] = {}
        output = next(iter(gm.graph.find_nodes(op="output")), None)
        returned = output.args[0] if output is not None else ()
        if not isinstance(returned, tuple | list):
            return
        if count is not None:
            returned = returned[:count]  # pyright: ignore[reportUnknownVariableType]
        for position, node in enumerate(returned):  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
            if not isinstance(node, torch.fx.Node) or node.op == "placeholder":
                continue  # an input returned as it is: AOTAutograd returns the input
            val = node.meta.get("val")
            storage = _storage(val)
            if storage is None or storage not in storages:
                continue
            assert isinstance(val, torch.Tensor)
            tensor: torch.Tensor = val
            source = placeholders[storages[storage]].meta.get("val")
            if not isinstance(source, torch.Tensor) or source.dtype != tensor.dtype:
                continue  # a view of another dtype (view_as_real): not an as_strided of it
            if tensor.is_conj() != source.is_conj() or tensor.is_neg() != source.is_neg():
                # A conjugate or negative view (``_conj``, ``_neg_view``: RoPE's saved
                # ``freqs_cis.conj()``): as_strided would drop the bit, not the values.
                continue
            alias = _Alias(
                position,
                storages[storage],
                tuple(_expr(tensor.size(d)) for d in range(tensor.dim())),
                tuple(_expr(tensor.stride(d)) for d in range(tensor.dim())),
                _expr(tensor.storage_offset()),
            )
            if all(self._computable(e) for e in (*alias.size, *alias.stride, alias.offset)):
                self.aliases.append(alias)
                if any(e.free_symbols for e in (*alias.size, *alias.stride, alias.offset)):
                    symbolic[position] = node
        self._replay = _ViewReplay.of(gm, symbolic, placeholders) if symbolic else None

    def _bind_placeholder(self, k: int, val: object) -> None:
        """Record how to read each size symbol from the run's arguments."""

        def bind(value: object, getter: Getter) -> None:
            if isinstance(value, torch.SymInt):
                symbol = value.node.expr
                if isinstance(symbol, sympy.Symbol) and symbol not in self._symbols:
                    self._symbols[symbol] = getter

        if isinstance(val, torch.SymInt):
            bind(val, lambda args: int(args[k]))
        elif isinstance(val, torch.Tensor):
            for d, size in enumerate(val.size()):
                bind(size, lambda args, d=d: int(args[k].size(d)))
            for d, stride in enumerate(val.stride()):
                bind(stride, lambda args, d=d: int(args[k].stride(d)))
            bind(val.storage_offset(), lambda args: int(args[k].storage_offset()))

    def forwarding_inputs(self, gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
        """``gm`` where each aliasing output returns its input instead of the view (a
        copy of the graph; ``gm`` itself when there is none): the program need not compute
        what :meth:`apply` replaces. The graph compiled from it must be run through
        :meth:`capture` and :meth:`apply`."""
        if not self.aliases:
            return gm
        graph = torch.fx.Graph()
        graph._codegen = copy.deepcopy(gm.graph._codegen)  # pyright: ignore[reportPrivateUsage]
        env: dict[torch.fx.Node, torch.fx.Node] = {}
        copied = graph.graph_copy(gm.graph, env, return_output_node=True)
        assert isinstance(copied, tuple)
        returned, old_output = copied  # pyright: ignore[reportUnknownVariableType]
        assert isinstance(returned, tuple | list)
        assert isinstance(old_output, torch.fx.Node)
        placeholders = [env[n] for n in gm.graph.find_nodes(op="placeholder")]
        values: list[Any] = list(returned)  # pyright: ignore[reportUnknownArgumentType]
        for alias in self.aliases:
            values[alias.output] = placeholders[alias.input]
        output = graph.output(type(returned)(values))  # pyright: ignore[reportUnknownArgumentType]
        output.meta = dict(old_output.meta)
        self.forwarded = True
        return torch.fx.GraphModule(gm, graph)

    def _computable(self, e: sympy.Expr) -> bool:
        return all(s in self._symbols for s in e.free_symbols)

    def capture(self, args: Sequence[Any]) -> tuple[list[Any], dict[sympy.Symbol, int]] | None:
        """What :meth:`apply` needs from the arguments, taken before the compiled
        program consumes (clears) them."""
        if not self.aliases:
            return None
        inputs = [args[a.input] for a in self.aliases]
        values = {symbol: get(args) for symbol, get in self._symbols.items()}
        if self._replay is not None:
            views = self._replay.run(args)
            inputs = [
                views.get(a.output, source) for a, source in zip(self.aliases, inputs, strict=True)
            ]
        return inputs, values

    def apply(self, outputs: Any, captured: tuple[list[Any], dict[sympy.Symbol, int]]) -> Any:
        """``outputs`` with each aliasing output replaced by eager's view of its input."""
        if not isinstance(outputs, tuple | list):
            return outputs
        inputs, values = captured
        substitution = {s: sympy.Integer(v) for s, v in values.items()}

        def evaluate(e: sympy.Expr) -> int:
            value: Any = e.xreplace(substitution) if e.free_symbols else e
            return int(value)

        patched: list[Any] = list(outputs)  # pyright: ignore[reportUnknownArgumentType]
        replayed = self._replay.outputs if self._replay is not None else frozenset[int]()
        for alias, source in zip(self.aliases, inputs, strict=True):
            current = patched[alias.output] if alias.output < len(patched) else None
            if alias.output in replayed:  # ``source`` is eager's view itself
                if isinstance(current, torch.Tensor):
                    patched[alias.output] = source
                continue
            size = [evaluate(e) for e in alias.size]
            # Forwarded, the program returned the input itself in the view's place.
            expected = list(source.shape) if self.forwarded else size
            if (
                not isinstance(source, torch.Tensor)
                or not isinstance(current, torch.Tensor)
                or list(current.shape) != expected
            ):
                if self.forwarded:  # the input in place of its view would be wrong
                    raise RuntimeError(
                        f"kiln: output {alias.output} of the compiled graph should be input "
                        f"{alias.input} (to be returned as its view of size {size})"
                    )
                continue  # not the tensor we think it is: leave it alone
            patched[alias.output] = source.as_strided(
                size, [evaluate(e) for e in alias.stride], evaluate(alias.offset)
            )
        return type(outputs)(patched)  # pyright: ignore[reportUnknownArgumentType, reportUnknownVariableType]


def _replayable(node: torch.fx.Node) -> bool:
    """A node whose eager replay only makes a view or computes a size."""
    if node.op == "placeholder":
        return True
    if node.op != "call_function":
        return False
    if isinstance(node.target, torch._ops.OpOverload) and node.target.is_view:  # pyright: ignore[reportPrivateUsage]
        return True
    val = node.meta.get("val")
    if isinstance(val, torch.SymInt | torch.SymFloat | torch.SymBool | int | float | bool):
        return True  # size arithmetic (sym_size, operator.floordiv, ...)
    # getitem of a split's list of views
    return node.target is operator.getitem and isinstance(val, torch.Tensor)


@dataclass(frozen=True)
class _ViewReplay:
    """The graph's view ops from its inputs to some of its outputs, run in eager."""

    module: torch.fx.GraphModule
    arguments: tuple[int, ...]
    """The placeholders (by position) that the replay reads."""
    positions: tuple[int, ...]
    """The output positions, in the order the replay returns them."""

    @property
    def outputs(self) -> frozenset[int]:
        return frozenset(self.positions)

    @staticmethod
    def of(
        gm: torch.fx.GraphModule,
        outputs: dict[int, torch.fx.Node],
        placeholders: Sequence[torch.fx.Node],
    ) -> _ViewReplay | None:
        """The replay of ``outputs``' views (nodes by output position), or None where one
        of them is not made of views and size arithmetic alone."""
        needed: set[torch.fx.Node] = set()
        stack = list(outputs.values())
        while stack:
            node = stack.pop()
            if node in needed:
                continue
            if not _replayable(node):
                return None
            needed.add(node)
            stack.extend(node.all_input_nodes)
        graph = torch.fx.Graph()
        env: dict[torch.fx.Node, torch.fx.Node] = {}
        arguments = tuple(k for k, p in enumerate(placeholders) if p in needed)
        for node in gm.graph.nodes:
            if node in needed:
                env[node] = graph.node_copy(node, lambda n: env[n])
        graph.output(tuple(env[n] for n in outputs.values()))
        return _ViewReplay(torch.fx.GraphModule(gm, graph), arguments, tuple(outputs))

    def run(self, args: Sequence[Any]) -> dict[int, torch.Tensor]:
        """Eager's views, by output position, from the run's arguments."""
        views = self.module.forward(*(args[k] for k in self.arguments))
        return dict(zip(self.positions, views, strict=True))

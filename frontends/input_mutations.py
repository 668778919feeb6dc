"""Mutations of graph inputs, written back by the compiled program's caller in one go.

A training step of a batch-norm network updates three buffers per layer in place
(``running_mean``, ``running_var``, ``num_batches_tracked``); an inference graph may
update a cache or a counter. AOTAutograd functionalizes the graph and, by default,
writes each new value back itself after the compiled forward returns: one ``copy_`` per
buffer from Python, each a launch (ResNet-18's training step on the H200: 60 copies,
58 us of device time and as many host round trips, session 21). Asked to
(``keep_inference_input_mutations=True``, what Inductor asks), it leaves the writes in
the graph instead, as ``aten.copy_(input, value)`` nodes at the end, for inference
graphs and for training graphs whose mutations autograd does not see (buffers updated
under ``no_grad``).

:class:`InputMutations` takes those nodes out of the graph kiln compiles (the values
become extra outputs), and the compiled graph writes them back after the program ran
(:mod:`kiln.backends.host.input_writes`), grouped by device and dtype into
``torch._foreach_copy_`` calls: a single launch for each group (multi-tensor apply on
CUDA) in place of a launch per buffer, and none from the host at a CUDA graph's replay,
which writes buffers inside the graph::

    copy_ = aten.copy_.default(primals_4, add)            # removed; ``add`` is returned
    copy__1 = aten.copy_.default(primals_5, getitem_3)    # removed; ``getitem_3`` too

AOTAutograd writes each mutated input once, at the end of its graph, so every write it
keeps is taken out. A ``copy_`` that something after it reads the input of, or whose
target is not a graph input, would stay in the graph, where ``lower-aten`` refuses an
input read after an in-place write (a clear error, not a wrong answer); two writes to
one input write the last (the graph returns one value per input written).
"""

from __future__ import annotations

import copy

import torch
import torch.fx

_COPY = torch.ops.aten.copy_.default


class InputMutations:
    """The ``copy_``-into-input nodes of one FX graph (see the module doc)."""

    def __init__(self, gm: torch.fx.GraphModule) -> None:
        placeholders = {node: k for k, node in enumerate(gm.graph.find_nodes(op="placeholder"))}
        order = {node: k for k, node in enumerate(gm.graph.nodes)}
        self.nodes: list[torch.fx.Node] = []
        self.targets: list[int] = []
        """The input each write goes to, by placeholder position."""
        for node in gm.graph.nodes:
            if node.op != "call_function" or node.target is not _COPY:
                continue
            if any(user.op != "output" for user in node.users):
                continue  # ``copy_`` returns its target: returned, it is the input
            target, value = node.args[0], node.args[1]
            if target not in placeholders or not isinstance(value, torch.fx.Node):
                continue
            assert isinstance(target, torch.fx.Node)
            # Moving the write past the program is right only if nothing after it reads
            # the input (other writes and the output aside: the output returns the
            # input object, which holds the written value either way).
            if any(
                order[user] > order[node] and user.op != "output" and user.target is not _COPY
                for user in target.users
            ):
                continue
            self.nodes.append(node)
            self.targets.append(placeholders[target])
        last = {position: node for position, node in zip(self.targets, self.nodes, strict=True)}
        self.positions: tuple[int, ...] = tuple(last)
        """The inputs written, each once, in the order of the values returned for them."""
        self._values = [node.args[1] for node in last.values()]

    def written_back(self, gm: torch.fx.GraphModule) -> tuple[torch.fx.GraphModule, int]:
        """``gm`` without the writes, the last value written to each input returned after
        the graph's outputs (in the order of :attr:`positions`; a copy of the graph,
        ``gm`` itself when there is none), and the number of outputs the graph had."""
        output = next(iter(gm.graph.find_nodes(op="output")))
        returned = output.args[0]
        outputs = list(returned) if isinstance(returned, tuple | list) else [returned]  # pyright: ignore[reportUnknownArgumentType]
        if not self.nodes:
            return gm, len(outputs)
        graph = torch.fx.Graph()
        graph._codegen = copy.deepcopy(gm.graph._codegen)  # pyright: ignore[reportPrivateUsage]
        env: dict[torch.fx.Node, torch.fx.Node] = {}
        writes = set(self.nodes)
        for node in gm.graph.nodes:
            if node in writes:  # returned, the write's result is its target
                target = node.args[0]
                assert isinstance(target, torch.fx.Node)
                env[node] = env[target]
            elif node.op != "output":
                env[node] = graph.node_copy(node, lambda n: env[n])
        values = [env[value] for value in self._values]  # pyright: ignore[reportArgumentType]
        kept = [torch.fx.map_arg(o, lambda n: env[n]) for o in outputs]  # pyright: ignore[reportUnknownArgumentType]
        new_output = graph.output(tuple([*kept, *values]))
        new_output.meta = dict(output.meta)
        return torch.fx.GraphModule(gm, graph), len(outputs)


__all__ = ["InputMutations"]

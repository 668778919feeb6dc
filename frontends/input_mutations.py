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
become extra outputs) and writes them back after the program ran, grouped by device and
dtype into ``torch._foreach_copy_`` calls: a single launch for each group (multi-tensor
apply on CUDA) in place of a launch per buffer::

    copy_ = aten.copy_.default(primals_4, add)            # removed; ``add`` is returned
    copy__1 = aten.copy_.default(primals_5, getitem_3)    # removed; ``getitem_3`` too

AOTAutograd writes each mutated input once, at the end of its graph, so every write it
keeps is taken out. A ``copy_`` that something after it reads the input of, or whose
target is not a graph input, would stay in the graph, where ``lower-aten`` refuses an
input read after an in-place write (a clear error, not a wrong answer); two writes to
one input write the last.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

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

    def written_back(self, gm: torch.fx.GraphModule) -> tuple[torch.fx.GraphModule, int]:
        """``gm`` without the writes, each value returned after the graph's outputs (a
        copy of the graph; ``gm`` itself when there is none), and the number of outputs
        the graph had."""
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
        values = [env[node.args[1]] for node in self.nodes]  # pyright: ignore[reportArgumentType]
        kept = [torch.fx.map_arg(o, lambda n: env[n]) for o in outputs]  # pyright: ignore[reportUnknownArgumentType]
        new_output = graph.output(tuple([*kept, *values]))
        new_output.meta = dict(output.meta)
        return torch.fx.GraphModule(gm, graph), len(outputs)

    def capture(self, args: Sequence[Any]) -> list[torch.Tensor] | None:
        """The inputs to write to, taken before the program consumes (clears) ``args``."""
        return [args[k] for k in self.targets] if self.targets else None

    def apply(self, outputs: Any, targets: list[torch.Tensor], count: int) -> Any:
        """Write the trailing values of ``outputs`` into ``targets``; return the first
        ``count`` outputs."""
        values = list(outputs)[count:]  # pyright: ignore[reportUnknownArgumentType]
        if len(values) != len(targets):
            raise RuntimeError(
                f"kiln: the compiled graph returned {len(values)} values for "
                f"{len(targets)} input mutations"
            )
        # One write per input, the last (AOTAutograd writes each input once; a repeat
        # in one grouped launch would race).
        last = {position: k for k, position in enumerate(self.targets)}
        write_back([targets[k] for k in last.values()], [values[k] for k in last.values()])
        kept = list(outputs)[:count]  # pyright: ignore[reportUnknownArgumentType]
        return type(outputs)(kept) if isinstance(outputs, tuple) else kept  # pyright: ignore[reportUnknownArgumentType, reportUnknownVariableType]


def write_back(targets: Sequence[torch.Tensor], values: Sequence[Any]) -> None:
    """``target.copy_(value)`` for each pair: pairs of one device and dtype, the same
    shape, contiguous, as one ``torch._foreach_copy_`` per group; any other pair
    (a broadcast, a cast, overlapping memory) by its own ``copy_``, as AOTAutograd would."""
    groups: dict[tuple[torch.device, torch.dtype], tuple[list[torch.Tensor], list[torch.Tensor]]]
    groups = {}
    for target, value in zip(targets, values, strict=True):
        if (
            isinstance(value, torch.Tensor)
            and value.device == target.device
            and value.dtype == target.dtype
            and value.shape == target.shape
            and target.is_contiguous()
            and value.is_contiguous()
            and value.data_ptr() != target.data_ptr()
        ):
            group = groups.setdefault((target.device, target.dtype), ([], []))
            group[0].append(target)
            group[1].append(value)
        else:
            with torch.no_grad():
                target.copy_(value)
    with torch.no_grad():
        for group_targets, group_values in groups.values():
            torch._foreach_copy_(group_targets, group_values)  # pyright: ignore[reportPrivateUsage, reportPrivateImportUsage]


__all__ = ["InputMutations", "write_back"]

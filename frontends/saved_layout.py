"""The layout of a training step's saved activations, between AOTAutograd and kiln.

AOTAutograd's forward graph returns the user's outputs, then the activations the
backward graph takes (``fw_metadata.tensors_saved_for_backwards_slice``). Nothing but the
backward reads those, so their strides are the compiler's to choose, as Inductor's layout
optimization does: a convolution network's activations stay channels-last from the
forward's convolutions to the backward's ``convolution_backward`` (cuDNN's and oneDNN's
fast layout), with no copy back to NCHW at the end of the forward and none again in the
backward.

The protocol, as Inductor's (``torch/_functorch/_aot_autograd/graph_compile.py``):

1. :func:`saved_for_backward` names the forward's outputs whose layout is free; the
   compile gets them (``compile_graph(free_layout_outputs=...)``, the
   ``kiln.free_layout_outputs`` function attribute the ``channels-last`` pass reads);
2. :func:`report_output_strides` hands the strides the program returns each output
   with to ``TracingContext.output_strides``; AOTAutograd re-strides the backward's
   example inputs to them;
3. :func:`restride_placeholders` gives the backward graph's placeholders those strides
   (AOTAutograd changes only the example inputs) and propagates them through the graph,
   so the importer records them (``kiln.arg_strides``: read in place, no copy) and the
   layouts ATen gives results computed from them (``kiln.result_orders``: a
   ``convolution_backward`` on channels-last tensors returns channels-last gradients).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch


def _output_nodes(graph: torch.fx.GraphModule) -> list[Any]:
    output = next(n for n in graph.graph.nodes if n.op == "output")
    (returned,) = output.args
    return list(returned) if isinstance(returned, list | tuple) else [returned]  # pyright: ignore[reportUnknownArgumentType]


def saved_for_backward(forward: torch.fx.GraphModule) -> tuple[int, ...]:
    """Indices of ``forward``'s outputs that only the backward graph reads (AOTAutograd's
    metadata of the graph being compiled; none outside AOTAutograd). None either when a
    placeholder's shape is symbolic: AOTAutograd re-strides the backward's inputs with
    static strides only (as Inductor, which turns its layout optimization off there)."""
    from torch._guards import TracingContext

    for node in forward.graph.nodes:
        value = node.meta.get("val") if node.op == "placeholder" else None
        if isinstance(value, torch.Tensor) and not _static(value):
            return ()

    context = TracingContext.try_get()
    metadata = getattr(context, "fw_metadata", None) if context is not None else None
    if metadata is None:
        return ()
    try:
        saved = metadata.tensors_saved_for_backwards_slice
    except (AssertionError, AttributeError):  # metadata of a graph that saves nothing
        return ()
    return tuple(range(len(_output_nodes(forward)))[saved])


def report_output_strides(
    forward: torch.fx.GraphModule,
    saved: Sequence[int],
    program_strides: Sequence[tuple[int, ...] | None] | None,
    input_views: Sequence[int],
) -> None:
    """Hands the strides of ``forward``'s outputs to AOTAutograd (within its
    ``TracingContext.report_output_strides``): the compiled program's for the ``saved``
    activations it computes (``program_strides``), eager's (the traced ones, which
    ``output-layout`` returns) for the user's outputs, for inputs returned and for the
    views of inputs (``input_views``: rebuilt from the input by
    :class:`~kiln.frontends.input_aliases.InputAliases`)."""
    from torch._guards import TracingContext

    context = TracingContext.try_get()
    if program_strides is None or context is None or context.output_strides is None:
        return
    nodes = _output_nodes(forward)
    if len(nodes) != len(program_strides):
        return
    free = set(saved) - set(input_views)
    strides: list[tuple[int, ...] | None] = []
    for k, node in enumerate(nodes):
        if k in free and isinstance(node, torch.fx.Node) and node.op != "placeholder":
            strides.append(program_strides[k])
            continue
        value = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
        static = isinstance(value, torch.Tensor) and _static(value)
        strides.append(tuple(int(s) for s in value.stride()) if static else None)  # pyright: ignore[reportOptionalMemberAccess]
    context.output_strides.extend(strides)


def restride_placeholders(backward: torch.fx.GraphModule, inputs: Sequence[Any]) -> None:
    """Gives ``backward``'s placeholders the strides of its example ``inputs`` where they
    differ (AOTAutograd re-strided them to the forward's reported strides) and propagates
    them through the graph's metadata. The graph's outputs keep the strides they had
    (eager's: the gradients AOTAutograd hands to autograd)."""
    from torch._guards import detect_fake_mode
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    placeholders = [n for n in backward.graph.nodes if n.op == "placeholder"]
    changed = any(
        isinstance(traced, torch.Tensor)
        and isinstance(value, torch.Tensor)
        and _static(value)
        and _static(traced)
        and tuple(traced.stride()) != tuple(value.stride())
        for node, value in zip(placeholders, inputs, strict=False)
        for traced in [node.meta.get("val")]
    )
    mode = detect_fake_mode(inputs)
    if not changed or mode is None:
        return
    returned = {
        node: node.meta.get("val")
        for node in _output_nodes(backward)
        if isinstance(node, torch.fx.Node) and node.op != "placeholder"
    }
    traced = {node: node.meta.get("val") for node in backward.graph.nodes}
    try:
        FakeTensorProp(backward, mode).propagate_dont_convert_inputs(*inputs)
    except Exception:  # an op fake tensors cannot run: the traced strides (copies, never wrong)
        for node, value in traced.items():
            node.meta["val"] = value
        return
    for node, value in returned.items():
        node.meta["val"] = value


def _static(value: torch.Tensor) -> bool:
    return all(isinstance(s, int) for s in (*value.shape, *value.stride()))


__all__ = ["report_output_strides", "restride_placeholders", "saved_for_backward"]

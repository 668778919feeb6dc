"""Activations of a Dynamo graph put in the form AOTAutograd traces fastest, before it
traces them (:func:`rewrite_activations`, called by :func:`kiln.frontends.dynamo.kiln_backend`).

Under ``dynamic=True`` AOTAutograd's tracing is most of a CNN's first call, and two
activation forms cost most of it (MobileNet-v2 on the 2-core CPU, ``backend="kiln"``,
session 40: 27.7 s first call, of it ~20 s in AOTAutograd):

- **In place** (``nn.ReLU6(inplace=True)``, ``nn.ReLU(inplace=True)``, ``nn.SiLU(inplace=True)``):
  functionalization turns each into its out-of-place form through a Python
  decomposition, traced with symbolic sizes twice (metadata collection, then the graph).
  Where the activation's input is a fresh intermediate that nothing else reads or
  aliases, the in-place call is the out-of-place call: the graph is rewritten so.
- **``hardtanh``** (``relu6``) has no meta kernel: its fake tensor runs ``torch._refs``'
  ``clamp``, whose broadcasting and type promotion are traced as hundreds of symbolic
  size operations per call. Without autograd, ``hardtanh(x, a, b)`` *is* ``clamp(x, a, b)``
  (ATen's ``hardtanh_out`` calls ``clamp_out``), whose meta is a C++ structured kernel;
  with autograd it is not (``hardtanh``'s gradient is zero at the bounds, ``clamp``'s
  is not), and it stays.

The values computed are the same: only the trace's cost changes. First call under
``dynamic=True``, 2-core CPU (docs/benchmarks/dynamic-cpu.md, session 40): MobileNet-v2
27.1 -> 16.8 s, MobileNet-v3 23.2 -> 13.9, ShuffleNet-v2 18.3 -> 16.0, EfficientNet-b0
16.6 -> 15.4.
"""

from __future__ import annotations

import inspect
from collections import Counter
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

INPLACE_ACTIVATIONS: frozenset[Callable[..., Any]] = frozenset(
    {
        F.relu,
        F.relu6,
        F.hardtanh,
        F.silu,
        F.hardswish,
        F.hardsigmoid,
        F.leaky_relu,
        F.elu,
        F.celu,
        F.selu,
        F.mish,
    }
)
"""Deterministic pointwise activations taking ``inplace`` (not ``rrelu``, ``dropout``)."""

_GRAD_MODE_CHANGES = (torch._C._set_grad_enabled, torch.set_grad_enabled)  # pyright: ignore[reportPrivateUsage]


def rewrite_activations(gm: torch.fx.GraphModule, needs_autograd: bool) -> Counter[str]:
    """Rewrite ``gm`` in place (see the module docstring); ``needs_autograd``: whether
    AOTAutograd will trace a backward (grad enabled and an input requiring grad). Returns
    what was rewritten, by kind."""
    done: Counter[str] = Counter()
    graph = gm.graph
    nodes = list(graph.nodes)
    # Every node's example value by identity: an op that returns its input (a no-op
    # ``contiguous``) or an in-place op's result is another name of the same tensor.
    names = Counter(id(v) for n in nodes if (v := _value(n)) is not None)
    grad_mode_changes = any(
        n.op == "call_function" and n.target in _GRAD_MODE_CHANGES for n in nodes
    )
    for node in nodes:
        if node.op != "call_function" or node.target not in INPLACE_ACTIVATIONS:
            continue
        bound = _bind(node)
        if bound is None:
            continue
        if bound.arguments.get("inplace") is True:
            if not _dead_after(node, bound.arguments["input"], names):
                continue
            bound.arguments["inplace"] = False
            node.args, node.kwargs = tuple(bound.args), dict(bound.kwargs)
            done["out of place"] += 1
        source = bound.arguments["input"]
        floating = (v := _value(source)) is not None and v.is_floating_point()
        if (
            node.target in (F.hardtanh, F.relu6)
            and floating
            and not needs_autograd
            and not grad_mode_changes
        ):
            low, high = (0.0, 6.0) if node.target is F.relu6 else _bounds(bound)
            if bound.arguments.get("inplace") is True:
                continue
            node.target = torch.clamp
            node.args, node.kwargs = (source, low, high), {}
            done["hardtanh as clamp"] += 1
    if done:
        graph.lint()
        gm.recompile()
    return done


def _value(node: torch.fx.Node) -> Any:
    value = node.meta.get("example_value")
    return value if isinstance(value, torch.Tensor) else None


def _bind(node: torch.fx.Node) -> inspect.BoundArguments | None:
    try:
        bound = inspect.signature(node.target).bind(*node.args, **node.kwargs)  # pyright: ignore[reportArgumentType]
    except TypeError:
        return None
    bound.apply_defaults()
    return bound


def _bounds(bound: inspect.BoundArguments) -> tuple[Any, Any]:
    return bound.arguments["min_val"], bound.arguments["max_val"]


def _dead_after(node: torch.fx.Node, source: Any, names: Counter[int]) -> bool:
    """Whether writing over ``source`` at ``node`` is seen by nothing else: an
    intermediate (not an input or attribute), not a view, read by ``node`` only, and no
    other node's value is the same tensor."""
    if not isinstance(source, torch.fx.Node) or source.op not in (
        "call_function",
        "call_method",
        "call_module",
    ):
        return False
    value = _value(source)
    if value is None or value._is_view():
        return False
    # The in-place call's own value is its input's tensor: the one other name allowed.
    own = 1 if _value(node) is value else 0
    return names[id(value)] == 1 + own and list(source.users) == [node]


__all__ = ["INPLACE_ACTIVATIONS", "rewrite_activations"]

"""Traced graphs' normalization statistics declared in the dtype eager computes them in.

torch's meta functions declare a mixed-precision batch, layer or group norm's saved mean
and inverse deviation in the input's dtype (bfloat16) where eager's CPU kernels return
float32 (``kiln.dialects.aten.norm_statistics``). :func:`declare_eager_statistics`
corrects the FX metadata kiln imports result types from. For a training step it must run
on AOTAutograd's joint graph, before the partition (:func:`with_eager_statistics`): the
forward's saved outputs and the backward's placeholders are then both float32, as under
eager, instead of a bfloat16 round trip between them.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch


def _value(arg: Any) -> Any:
    return arg.meta.get("val") if isinstance(arg, torch.fx.Node) else arg


def _retyped(value: Any, dtype: torch.dtype) -> Any:
    """``value`` (a FakeTensor) as a tensor of ``dtype``, same sizes and strides."""
    mode = getattr(value, "fake_mode", None)
    if mode is None:
        return value.to(dtype)
    with mode:
        return torch.empty_strided(value.shape, value.stride(), dtype=dtype, device=value.device)


_SAME_DTYPE_VIEWS = frozenset({"aten.detach.default", "aten.alias.default"})
"""What the joint graph passes the saved statistics through on the way to the backward
(autograd saves ``detach``-ed tensors): each takes its input's dtype."""

_READERS = frozenset(
    {
        "aten.native_batch_norm_backward.default",
        "aten.native_group_norm_backward.default",
        "aten.native_layer_norm_backward.default",
    }
)
"""The ops that read saved statistics, in either dtype, without it changing their results'."""


def _statistics_uses(node: torch.fx.Node) -> list[torch.fx.Node] | None:
    """The nodes that carry ``node``'s statistics results (its ``getitem``s and their
    ``detach``/``alias`` chains), or None when one reaches anything but a graph output
    or a normalization backward: a value computed from the statistics would keep the
    dtype traced from the meta's (the op is then left as traced)."""
    from kiln.dialects.aten.norm_statistics import STATISTICS

    carriers: list[torch.fx.Node] = []
    pending = [u for u in node.users if u.target is operator.getitem and u.args[1] in STATISTICS]
    while pending:
        carrier = pending.pop()
        carriers.append(carrier)
        for user in carrier.users:
            if str(user.target) in _SAME_DTYPE_VIEWS:
                pending.append(user)
            elif user.op != "output" and str(user.target) not in _READERS:
                return None
    return carriers


def declare_eager_statistics(graph: torch.fx.Graph) -> int:
    """Give each mixed-precision normalization's saved statistics in ``graph`` eager's
    dtype (the op's ``val`` and those of the nodes carrying them to the backward); the
    number of ops changed."""
    # Every graph kiln compiles passes here, a warm graph-cache hit included, which
    # imports none of kiln's IR: only a normalization's name brings the rule in.
    candidates = [
        n
        for n in graph.nodes
        if "norm" in getattr(n.target, "__name__", "") and n.op == "call_function"
    ]
    if not candidates:
        return 0
    from kiln.dialects.aten.norm_statistics import (
        NORMALIZATIONS,
        STATISTICS,
        bind_arguments,
        eager_statistics_dtype,
    )

    changed = 0
    for node in candidates:
        if str(node.target) not in NORMALIZATIONS:
            continue
        values = node.meta.get("val")
        if not isinstance(values, list | tuple):
            continue
        arguments = bind_arguments(
            node.target._schema,  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]
            [_value(a) for a in node.args],
            {k: _value(v) for k, v in node.kwargs.items()},
        )
        dtype = eager_statistics_dtype(str(node.target), arguments)
        if dtype is None or all(values[k].dtype == dtype for k in STATISTICS):
            continue
        carriers = _statistics_uses(node)
        if carriers is None:
            continue
        node.meta["val"] = type(values)(
            _retyped(v, dtype) if k in STATISTICS else v for k, v in enumerate(values)
        )
        for carrier in carriers:
            carrier.meta["val"] = _retyped(carrier.meta["val"], dtype)
        changed += 1
    return changed


Partition = Callable[..., Any]


def with_eager_statistics(partition: Partition) -> Partition:
    """``partition`` (an AOTAutograd ``partition_fn``) run on the joint graph with its
    normalization statistics in eager's dtype."""

    def partition_fn(joint: torch.fx.GraphModule, *args: Any, **kwargs: Any) -> Any:
        declare_eager_statistics(joint.graph)
        return partition(joint, *args, **kwargs)

    return partition_fn


__all__ = ["declare_eager_statistics", "with_eager_statistics"]

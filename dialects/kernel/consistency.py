"""An exhaustive check that a kernel can run as one launch, as the backends will run it.

The kernel interpreter runs each node over its whole space, so it would give the right
numbers even for an illegal fusion. A backend runs all nodes at each point ``(x, r)`` of
the kernel's ``numel`` x ``rnumel`` space instead. :func:`kernel_problems` evaluates, on
that whole grid (static sizes only), that

* ``kernel.vars`` maps the kernel's points onto each node's space in row-major order:
  every variable stays within its size, and a node's flat position is ``x`` (pointwise
  space only) or ``x * rnumel + r``;
* every read of a kernel-local value is of the element its producer computes at the
  same point (``x`` for values computed once per ``x``, ``(x, r)`` otherwise).

Tests run it over every kernel the scheduler builds.
"""

from __future__ import annotations

import torch

from kiln.dialects.kernel.kernel_ops import KernelOp, node_vars
from kiln.dialects.loop.body_ops import LoadOp
from kiln.dialects.loop.expr import reduction_var
from kiln.dialects.loop.index_eval import compile_expr
from kiln.dialects.loop.ops import LoopNestOp, ReductionOp, ScatterOp

MAX_POINTS = 1 << 22
"""Kernels with more points than this are not checked (the grid would not fit)."""


def _label(node: LoopNestOp) -> str:
    hint = next((r.name_hint for r in node.results if r.name_hint), None)
    return f"%{hint}" if hint else node.name


def _flat(coordinates: list[torch.Tensor], sizes: list[int]) -> torch.Tensor:
    out = torch.zeros((), dtype=torch.int64)
    for c, size in zip(coordinates, sizes, strict=True):
        out = out * size + c
    return out


def kernel_problems(kernel: KernelOp) -> list[str]:
    """What would go wrong running ``kernel`` point by point (empty: nothing)."""
    if kernel.sym_args() or kernel.numel.data.free_symbols or kernel.rnumel.data.free_symbols:
        return []
    numel, rnumel = int(kernel.numel.data), int(kernel.rnumel.data)
    if numel * rnumel > MAX_POINTS:
        return []
    x = torch.arange(numel, dtype=torch.int64).view(-1, 1)
    r = torch.arange(rnumel, dtype=torch.int64).view(1, -1)
    env = {"d0": x, "r0": r}
    problems: list[str] = []
    positions: dict[LoopNestOp, tuple[torch.Tensor, bool]] = {}
    grid = torch.broadcast_shapes((numel, 1), (1, rnumel))
    for node in kernel.nodes():
        exprs = node_vars(node)
        values = [torch.as_tensor(compile_expr(e)(env)) for e in exprs]
        sizes = [int(s.data) for s in node.sizes.data]
        rsizes = [int(s.data) for s in node.reduction_sizes_list()]
        every_point = any(e.has(reduction_var(0)) for e in exprs)
        n_d = len(sizes)
        expected = x * rnumel + r if every_point else x
        flat = _flat(values, [*sizes, *rsizes])
        in_range = all(
            bool(((v >= 0) & (v < size)).all())
            for v, size in zip(values, [*sizes, *rsizes], strict=True)
        )
        if not in_range or not torch.equal(
            torch.broadcast_to(flat, grid), torch.broadcast_to(expected, grid)
        ):
            problems.append(f"{_label(node)}: kernel.vars do not enumerate its space row-major")
            continue
        own = _flat(values[:n_d], sizes)
        out_every_point = every_point and not isinstance(node, ReductionOp)
        positions[node] = (own, out_every_point)
        node_env = {f"d{k}": values[k] for k in range(n_d)}
        node_env.update({f"r{k}": values[n_d + k] for k in range(len(rsizes))})
        for outer, arg in zip(node.inputs, node.input_args(), strict=True):
            producer = outer.owner
            if not isinstance(producer, LoopNestOp) or producer not in positions:
                continue  # a global buffer: any element may be read
            if isinstance(producer, ScatterOp):
                problems.append(
                    f"{_label(node)} reads {_label(producer)}, which a scatter in the same "
                    "kernel adds into"
                )
                continue
            at, producer_every_point = positions[producer]
            for use in arg.uses:
                load = use.operation
                if not isinstance(load, LoadOp):
                    continue
                if load.indirect or load.mask is not None:
                    problems.append(
                        f"{_label(node)} reads a kernel-local value indirectly or masked"
                    )
                    continue
                index = torch.as_tensor(compile_expr(load.index.data)(node_env))
                if producer_every_point and not every_point:
                    problems.append(
                        f"{_label(node)} reads a value computed at every point once per x"
                    )
                elif not torch.equal(torch.broadcast_to(index, grid), torch.broadcast_to(at, grid)):
                    problems.append(
                        f'{_label(node)} reads {_label(producer)}\'s value at "{load.index.text}", not '
                        "where it is computed"
                    )
    return problems


__all__ = ["kernel_problems"]

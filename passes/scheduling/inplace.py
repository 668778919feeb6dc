"""When a kernel may write an output into one of its input buffers.

Writing result ``j`` of a kernel into the buffer of argument ``i`` is safe when every
element of that argument is read only by the point that later overwrites it, before it
does: the writer of result ``j`` is a pointwise node; every node that loads argument
``i`` runs no later than the writer, at the same level (once per ``x``, or once per
``(x, r)``; reductions over the whole space count as the latter), and loads exactly the
element at its own position (no broadcast, no shifted, masked or indirect read); and
the argument and the result have the same flat layout (:func:`same_flat_layout`), so
positions mean the same elements. In a kernel that reduces, the writer's value must not
feed another node: Triton's looped lowering recomputes such values in later passes
from their loads.
"""

from __future__ import annotations

import sympy
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Attribute

from kiln.dialects.kernel.kernel_ops import COLUMN_MAJOR_ATTR, KernelOp, node_vars
from kiln.dialects.loop.body_ops import LoadOp
from kiln.dialects.loop.expr import index_var, reduction_var
from kiln.dialects.loop.ops import LoopNestOp, PointwiseOp, ReductionOp, is_contiguous_buffer
from kiln.passes.scheduling.build import R
from kiln.passes.scheduling.legality import Level, flat_index, loop_ranges, same_index


def _level(node: LoopNestOp) -> Level:
    if isinstance(node, ReductionOp):
        return Level.RED
    return Level.XR if any(e.has(R) for e in node_vars(node)) else Level.X


def _own_position(node: LoopNestOp) -> sympy.Expr:
    """The node's flat position over all its loop variables."""
    sizes = [s.data for s in node.sizes.data]
    rsizes = [s.data for s in node.reduction_sizes_list()]
    variables = [index_var(k) for k in range(len(sizes))] + [
        reduction_var(k) for k in range(len(rsizes))
    ]
    return flat_index(variables, [*sizes, *rsizes])


def same_flat_layout(a: Attribute, b: Attribute) -> bool:
    """Equal types, or contiguous buffers of one element type and static element count
    (a kernel addresses both by the same flat offsets)."""
    if a == b:
        return True
    return (
        isinstance(a, MemRefType)
        and isinstance(b, MemRefType)
        and is_contiguous_buffer(a)
        and is_contiguous_buffer(b)
        and a.element_type == b.element_type
        and a.has_static_shape()
        and b.has_static_shape()
        and a.element_count() == b.element_count()
    )


def can_update_in_place(kernel: KernelOp, arg_index: int, result_index: int) -> bool:
    arg = kernel.body.block.args[arg_index]
    value = kernel.yield_op().values[result_index]
    return same_flat_layout(arg.type, value.type) and reads_in_place(
        kernel, arg_index, result_index
    )


def reads_in_place(kernel: KernelOp, arg_index: int, result_index: int) -> bool:
    """Whether the kernel's access pattern lets result ``result_index`` overwrite
    argument ``arg_index`` (the module docstring's rules but the layout, which the caller
    proves: by the types, or for dynamic shapes by the sizes the program gives both)."""
    arg = kernel.body.block.args[arg_index]
    value = kernel.yield_op().values[result_index]
    writer = value.owner
    if not isinstance(writer, PointwiseOp):
        return False
    nodes = kernel.nodes()
    if any(COLUMN_MAJOR_ATTR in node.attributes for node in nodes):
        # Positions below are compared row-major over (x, r).
        return False
    if kernel.kernel_kind.reduces and any(
        isinstance(use.operation, LoopNestOp) for use in writer.results[0].uses
    ):
        # Triton's looped reductions recompute a pointwise value from its loads in each
        # later pass that needs it, which would read the argument after the writer
        # overwrote it. (The C++ lowering reloads stored values instead; making Triton's
        # do the same would let this case go in place again.)
        return False
    writer_at = nodes.index(writer)
    writer_level = _level(writer)
    same_levels = {Level.XR, Level.RED} if writer_level is Level.XR else {writer_level}
    for position, node in enumerate(nodes):
        inner_args = [
            a for a, outer in zip(node.input_args(), node.inputs, strict=True) if outer is arg
        ]
        if not inner_args:
            continue
        if position > writer_at or _level(node) not in same_levels:
            return False
        target = _own_position(node)
        ranges = loop_ranges(node)
        for inner in inner_args:
            for use in inner.uses:
                load = use.operation
                if not isinstance(load, LoadOp) or load.indirect or load.mask is not None:
                    return False
                if not same_index(load.index.data, target, ranges):
                    return False
    # Also the yielded values must not be the argument itself.
    return all(v is not arg for v in kernel.yield_op().values)


__all__ = ["can_update_in_place", "reads_in_place", "same_flat_layout"]

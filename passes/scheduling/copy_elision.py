"""Folding a reshape of an ATen result into the extern call instead of copying it.

``x @ w`` reshaped to ``[2, 64, 1024]`` and returned lowers to an extern (``aten.mm``)
and a pointwise kernel that copies the product, element by element in order, into a
buffer of the new shape. The copy moves every byte twice for nothing (a measurable part
of GPT-2's run time: docs/benchmarks/design-notes.md). When the extern's result is used only by
that copy, the reshape becomes part of the extern body instead: ATen returns a view of
its own fresh result, which is the buffer the program wanted::

    %mm = kernel.extern (%a, %w) : (...) -> memref<128x1024xf32> { ... aten.mm ... }
    %view = kernel.alloc : memref<2x64x1024xf32>
    kernel.launch @kernel13(%mm) outs(%view) : (memref<128x1024xf32>) -> (memref<2x64x1024xf32>)

becomes::

    %view = kernel.extern (%a, %w) : (...) -> memref<2x64x1024xf32> {
      ... aten.mm ...
      %v = aten.reshape.default(%mm_1, shape = [2, 64, 1024]) : (tensor<128x1024xf32>) -> tensor<2x64x1024xf32>
      kernel.yield %v : tensor<2x64x1024xf32>
    }

Under dynamic shapes (``memref<?x2048xf32>`` copied into ``memref<1x?x2048xf32>``) the
copy is folded where the element counts are provably equal
(:class:`~kiln.passes.scheduling.buffer_sizes.BufferSizes`; an in-order copy could also
take a prefix of a larger result), and the reshape takes the allocation's size operands
(:func:`~kiln.passes.scheduling.reshape_in_place.reshape_extern_result`).
"""

from __future__ import annotations

from xdsl.dialects.builtin import MemRefType
from xdsl.ir import SSAValue
from xdsl.rewriter import Rewriter
from xdsl.traits import SymbolTable

from kiln.dialects.kernel.kernel_ops import KernelOp
from kiln.dialects.kernel.program_ops import AllocOp, ExternOp, LaunchOp, ProgramOp
from kiln.dialects.loop.body_ops import LoadOp
from kiln.dialects.loop.body_ops import YieldOp as LoopYieldOp
from kiln.dialects.loop.expr import flat_index, index_var, same_value
from kiln.dialects.loop.ops import PointwiseOp, is_contiguous_buffer
from kiln.passes.scheduling.buffer_sizes import BufferSizes
from kiln.passes.scheduling.reshape_in_place import defined_before, reshape_extern_result


def _is_in_order_copy(kernel: KernelOp) -> bool:
    """One pointwise node that loads its single input at the flat position it writes
    (sizes may be the kernel's size symbols)."""
    nodes = kernel.nodes()
    if len(nodes) != 1 or not isinstance(nodes[0], PointwiseOp):
        return False
    node = nodes[0]
    ops = list(node.body.block.ops)
    if len(ops) != 2 or not isinstance(ops[0], LoadOp) or not isinstance(ops[1], LoopYieldOp):
        return False
    load = ops[0]
    if load.mask is not None or len(load.operands) != 1 or ops[1].operands[0] is not load.result:
        return False
    sizes = [s.data for s in node.sizes.data]
    identity = flat_index([index_var(k) for k in range(len(sizes))], sizes)
    return same_value(load.index.data, identity)


def _same_count(source: SSAValue, target: SSAValue, sizes: BufferSizes) -> bool:
    a, b = source.type, target.type
    if not isinstance(a, MemRefType) or not isinstance(b, MemRefType):
        return False
    if a.element_type != b.element_type:
        return False
    if a.has_static_shape() and b.has_static_shape():
        return a.element_count() == b.element_count()
    return is_contiguous_buffer(a) and is_contiguous_buffer(b) and sizes.same_count(source, target)


def elide_extern_copies(program: ProgramOp) -> int:
    """Fold in-order copies of extern results into the externs; returns how many."""
    folded = 0
    sizes = BufferSizes()
    for launch in [op for op in program.body.block.ops if isinstance(op, LaunchOp)]:
        buffers = [a for a in launch.args if isinstance(a.type, MemRefType)]
        if len(buffers) != 1 or len(launch.outs) != 1:
            continue
        source, target = buffers[0], launch.outs[0]
        extern, alloc = source.owner, target.owner
        if not isinstance(extern, ExternOp) or not isinstance(alloc, AllocOp):
            continue
        if not source.has_one_use() or not defined_before(list(alloc.dynamic_sizes), extern):
            continue
        kernel = SymbolTable.lookup_symbol(program, launch.kernel)
        if not isinstance(kernel, KernelOp) or not _is_in_order_copy(kernel):
            continue
        if not _same_count(source, target, sizes):
            continue
        _fold(extern, source, alloc, launch)
        folded += 1
    return folded


def _fold(extern: ExternOp, source: SSAValue, alloc: AllocOp, launch: LaunchOp) -> None:
    target_type = alloc.result.type
    assert isinstance(target_type, MemRefType)
    index = next(k for k, r in enumerate(extern.outputs) if r is source)
    replacement = reshape_extern_result(extern, index, target_type, list(alloc.dynamic_sizes))
    replacement.outputs[index].name_hint = alloc.result.name_hint
    Rewriter.erase_op(launch)
    alloc.result.replace_all_uses_with(replacement.outputs[index])
    Rewriter.erase_op(alloc)


__all__ = ["elide_extern_copies"]

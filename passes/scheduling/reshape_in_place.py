"""Letting a kernel write its output over an extern result of another shape.

``buffer-reuse`` updates in place only when the dying input and the output have the same
type. An ATen result is often read through a reshape: attention scores come out of
``aten.bmm`` as ``[128, 1024, 1024]`` and the softmax reads them as ``[8, 16, 1024, 1024]``;
a matmul's ``[8192, 2048]`` feeds its epilogue as ``[8, 1024, 2048]``. Same bytes in the
same order, another type, so the output got a buffer of its own (a large share of the
peak memory of a Llama block: docs/benchmarks/design-notes.md). When the extern result is used only by that
launch, the reshape moves into the extern (ATen returns a view of its fresh result, see
:func:`reshape_extern_result`) and the kernel's argument takes the output's type; the
in-place update then applies::

    %bmm = kernel.extern (...) : (...) -> memref<128x1024x1024xf32> { ... aten.bmm ... }
    %div = kernel.alloc : memref<8x16x1024x1024xf32>
    kernel.launch @softmax(%bmm) outs(%div) : (memref<128x1024x1024xf32>) -> (...)

becomes (before ``update_in_place``)::

    %bmm = kernel.extern (...) : (...) -> memref<8x16x1024x1024xf32> {
      ... aten.bmm ...
      %r = aten.reshape.default(%bmm_1, shape = [8, 16, 1024, 1024]) : ...
      kernel.yield %r : tensor<8x16x1024x1024xf32>
    }
    %div = kernel.alloc : memref<8x16x1024x1024xf32>
    kernel.launch @softmax(%bmm) outs(%div) : (memref<8x16x1024x1024xf32>) -> (...)

A kernel's loads address its buffers by flat offset, so retyping a contiguous argument to
another contiguous shape of the same element count changes no load.
"""

from __future__ import annotations

from collections import Counter

from xdsl.dialects.builtin import FunctionType, MemRefType, ModuleOp, TensorType
from xdsl.ir import Attribute, BlockArgument, SSAValue

from kiln.dialects.aten.dialect import op_class
from kiln.dialects.kernel.kernel_ops import KernelOp, YieldOp
from kiln.dialects.kernel.program_ops import AllocOp, ExternOp, LaunchOp, ProgramOp
from kiln.passes.scheduling.inplace import can_update_in_place, same_flat_layout


def reshape_extern_result(extern: ExternOp, index: int, target_type: MemRefType) -> ExternOp:
    """Replace ``extern`` by one whose result ``index`` has ``target_type`` (same element
    type and count): the body reshapes what ATen returned. Every use of the old results
    is moved to the new ones; the old extern is erased."""
    yielded = extern.body.block.last_op
    assert isinstance(yielded, YieldOp)
    reshape_class = op_class("reshape.default")
    assert reshape_class is not None
    tensor_type = TensorType(target_type.element_type, target_type.get_shape())
    reshape = reshape_class.from_args(
        {"self": yielded.values[index], "shape": list(target_type.get_shape())}, [tensor_type]
    )
    extern.body.block.insert_op_before(reshape, yielded)
    values = list(yielded.values)
    values[index] = reshape.results[0]
    extern.body.block.insert_op_before(YieldOp(*values), yielded)
    extern.body.block.erase_op(yielded)
    result_types: list[Attribute] = [r.type for r in extern.outputs]
    result_types[index] = target_type
    replacement = ExternOp.build(
        operands=[list(extern.inputs), list(extern.syms)],
        result_types=[result_types],
        regions=[extern.detach_region(extern.body)],
        attributes=dict(extern.attributes),
    )
    block = extern.parent_block()
    assert block is not None
    block.insert_op_before(replacement, extern)
    for old, new in zip(extern.outputs, replacement.outputs, strict=True):
        new.name_hint = old.name_hint
        old.replace_all_uses_with(new)
    block.erase_op(extern)
    return replacement


def retype_buffer_arg(kernel: KernelOp, index: int, new_type: MemRefType) -> None:
    """Give the kernel's buffer argument ``index`` another contiguous type of the same
    element type and count, in the kernel's signature and in every node reading it."""
    block = kernel.body.block
    old = block.args[index]
    for node in kernel.nodes():
        for k, value in enumerate(node.inputs):
            if value is old:
                inner = node.input_args()[k]
                assert isinstance(inner, BlockArgument)
                new_inner = node.body.block.insert_arg(new_type, inner.index)
                new_inner.name_hint = inner.name_hint
                inner.replace_all_uses_with(new_inner)
                node.body.block.erase_arg(inner)
    new = block.insert_arg(new_type, index)
    new.name_hint = old.name_hint
    old.replace_all_uses_with(new)
    block.erase_arg(old)
    kernel.function_type = FunctionType.from_lists(
        list(block.arg_types), list(kernel.function_type.outputs.data)
    )


def _launch_counts(program: ProgramOp) -> Counter[str]:
    """Launches per kernel over every program of the module (launches are top-level ops
    of programs, so kernel bodies are not walked)."""
    module = program.parent_op()
    programs = (
        [p for p in module.ops if isinstance(p, ProgramOp)]
        if isinstance(module, ModuleOp)
        else [program]
    )
    return Counter(
        op.kernel.string_value()
        for p in programs
        for op in p.body.block.ops
        if isinstance(op, LaunchOp)
    )


def _candidate(launch: LaunchOp, kernel: KernelOp) -> tuple[int, SSAValue, int] | None:
    """(argument index, extern result, output index) of a reshape that enables an in-place
    update, or None."""
    args = list(launch.args)
    for j, out in enumerate(launch.outs):
        if not isinstance(out.owner, AllocOp) or out.owner.dynamic_sizes:
            continue
        for i, arg in enumerate(args):
            if (
                arg.type == out.type
                or not isinstance(arg.owner, ExternOp)
                or not arg.has_one_use()
                or args.count(arg) > 1
                or not same_flat_layout(arg.type, out.type)
                or not can_update_in_place(kernel, i, j)
            ):
                continue
            return i, arg, j
    return None


def reshape_for_in_place(program: ProgramOp, kernels: dict[str, KernelOp]) -> int:
    """Reshape extern results that a kernel could overwrite in place but for their type;
    returns how many."""
    counts = _launch_counts(program)
    done = 0
    for launch in [op for op in program.body.block.ops if isinstance(op, LaunchOp)]:
        name = launch.kernel.string_value()
        kernel = kernels.get(name)
        if kernel is None or counts[name] != 1:
            continue  # a kernel launched elsewhere too keeps its signature
        found = _candidate(launch, kernel)
        if found is None:
            continue
        i, arg, j = found
        target = launch.outs[j].type
        assert isinstance(target, MemRefType)
        extern = arg.owner
        assert isinstance(extern, ExternOp)
        retype_buffer_arg(kernel, i, target)
        index = next(k for k, r in enumerate(extern.outputs) if r is arg)
        reshape_extern_result(extern, index, target)
        done += 1
    return done


__all__ = ["reshape_extern_result", "reshape_for_in_place", "retype_buffer_arg"]

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

Under dynamic shapes the types do not prove equal element counts (``memref<?x24xf32>``
and ``memref<?x?x?x24xf32>``), nor equal sizes between two ``memref<?x?x?x8xf32>``: an
extern result's sizes are ATen's, which the program does not spell out. The reshape
then takes the output allocation's own size operands (new ``syms`` of the extern), so
the result has those sizes by construction and ``buffer-reuse``'s ``same_sizes`` sees
them. It is done only where the element counts are provably equal
(:class:`~kiln.passes.scheduling.buffer_sizes.BufferSizes`: the kernel could also read a
prefix of a larger result)::

    %mm = kernel.extern (%x, %w) syms(%rows) : (...) -> memref<?x24xf32> { ... }
    %y = kernel.alloc(%n, %h, %w) : memref<?x?x?x24xf32>

becomes::

    %mm = kernel.extern (%x, %w) syms(%rows, %n, %h, %w) : (...) -> memref<?x?x?x24xf32> {
    ^bb0(..., %rows_1: index, %n_1: index, %h_1: index, %w_1: index):
      ...
      %r = aten.reshape.default(%mm_1, shape = [%n_1, %h_1, %w_1, 24]) : ...
      kernel.yield %r : tensor<?x?x?x24xf32>
    }
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from xdsl.dialects.builtin import FunctionType, IndexType, MemRefType, ModuleOp, TensorType
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue

from kiln.dialects.aten.dialect import op_class
from kiln.dialects.kernel.kernel_ops import KernelOp, YieldOp
from kiln.dialects.kernel.program_ops import AllocOp, ExternOp, LaunchOp, ProgramOp
from kiln.dialects.loop.ops import is_contiguous_buffer
from kiln.passes.scheduling.buffer_sizes import BufferSizes
from kiln.passes.scheduling.inplace import can_update_in_place, reads_in_place, same_flat_layout


def reshape_extern_result(
    extern: ExternOp,
    index: int,
    target_type: MemRefType,
    dynamic_sizes: Sequence[SSAValue] = (),
) -> ExternOp:
    """Replace ``extern`` by one whose result ``index`` has ``target_type`` (same element
    type and count): the body reshapes what ATen returned, to ``dynamic_sizes`` (host
    ``index`` values defined before the extern, one per dynamic dim, passed as new
    ``syms``) where the type has no size. Every use of the old results is moved to the
    new ones; the old extern is erased."""
    block = extern.body.block
    yielded = block.last_op
    assert isinstance(yielded, YieldOp)
    reshape_class = op_class("reshape.default")
    assert reshape_class is not None
    tensor_type = TensorType(target_type.element_type, target_type.get_shape())
    syms = list(extern.syms)
    first_sym = len(extern.inputs)
    size_args: list[SSAValue] = []
    for size in dynamic_sizes:
        if size not in syms:  # a size the extern already takes is read from its argument
            syms.append(size)
            block.insert_arg(IndexType(), len(block.args))
        size_args.append(block.args[first_sym + syms.index(size)])
    sizes = iter(size_args)
    shape: list[int | SSAValue] = [d if d >= 0 else next(sizes) for d in target_type.get_shape()]
    reshape = reshape_class.from_args(
        {"self": yielded.values[index], "shape": shape}, [tensor_type]
    )
    block.insert_op_before(reshape, yielded)
    values = list(yielded.values)
    values[index] = reshape.results[0]
    block.insert_op_before(YieldOp(*values), yielded)
    block.erase_op(yielded)
    result_types: list[Attribute] = [r.type for r in extern.outputs]
    result_types[index] = target_type
    replacement = ExternOp.build(
        operands=[list(extern.inputs), syms],
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


def defined_before(values: Sequence[SSAValue], op: Operation) -> bool:
    """Whether every value is available at ``op`` (an argument of its block or the
    result of an op before it there)."""
    block = op.parent_block()
    for value in values:
        if isinstance(value, BlockArgument):
            if value.block is not block:
                return False
            continue
        owner = value.owner
        if not isinstance(owner, Operation) or owner.parent_block() is not block:
            return False
        if not owner.is_before_in_block(op):
            return False
    return True


def _reshapable(arg: SSAValue, args: list[SSAValue]) -> bool:
    """``arg`` is an extern result that only this launch reads, once."""
    return isinstance(arg.owner, ExternOp) and arg.has_one_use() and args.count(arg) == 1


def _static_candidate(
    launch: LaunchOp, kernel: KernelOp, retype: bool
) -> tuple[int, SSAValue, int] | None:
    args = list(launch.args)
    for j, out in enumerate(launch.outs):
        if not isinstance(out.owner, AllocOp) or out.owner.dynamic_sizes:
            continue
        for i, arg in enumerate(args):
            if (
                arg.type == out.type
                or not retype
                or not _reshapable(arg, args)
                or not same_flat_layout(arg.type, out.type)
                or not can_update_in_place(kernel, i, j)
            ):
                continue
            return i, arg, j
    return None


def _dynamic_candidate(
    launch: LaunchOp, kernel: KernelOp, retype: bool, sizes: BufferSizes
) -> tuple[int, SSAValue, int] | None:
    """The same for an output of dynamic sizes: an extern result of the same element
    type and provably the same element count (``sizes``), contiguous, whose sizes are
    not already the output's; another type only when the kernel may be retyped."""
    args = list(launch.args)
    for j, out in enumerate(launch.outs):
        alloc = out.owner
        if not isinstance(alloc, AllocOp) or not alloc.dynamic_sizes:
            continue
        out_type = out.type
        assert isinstance(out_type, MemRefType)
        for i, arg in enumerate(args):
            arg_type = arg.type
            if (
                not isinstance(arg_type, MemRefType)
                or (arg_type != out_type and not retype)
                or not _reshapable(arg, args)
                or arg_type.element_type != out_type.element_type
                or not is_contiguous_buffer(arg_type)
                or not is_contiguous_buffer(out_type)
                or not defined_before(list(alloc.dynamic_sizes), arg.owner)  # pyright: ignore[reportArgumentType]
                or not reads_in_place(kernel, i, j)
                or not sizes.same_count(arg, out)
                or (arg_type == out_type and sizes.same_sizes(arg, out))
            ):
                continue
            return i, arg, j
    return None


def reshape_for_in_place(program: ProgramOp, kernels: dict[str, KernelOp]) -> int:
    """Reshape extern results that a kernel could overwrite in place but for their type
    (or, under dynamic shapes, their unspelled sizes); returns how many."""
    counts = _launch_counts(program)
    sizes = BufferSizes()
    done = 0
    for launch in [op for op in program.body.block.ops if isinstance(op, LaunchOp)]:
        name = launch.kernel.string_value()
        kernel = kernels.get(name)
        if kernel is None:
            continue
        # A kernel launched elsewhere too keeps its signature.
        retype = counts[name] == 1
        found = _static_candidate(launch, kernel, retype) or _dynamic_candidate(
            launch, kernel, retype, sizes
        )
        if found is None:
            continue
        i, arg, j = found
        out = launch.outs[j]
        target = out.type
        assert isinstance(target, MemRefType)
        alloc = out.owner
        assert isinstance(alloc, AllocOp)
        extern = arg.owner
        assert isinstance(extern, ExternOp)
        if arg.type != target:
            retype_buffer_arg(kernel, i, target)
        index = next(k for k, r in enumerate(extern.outputs) if r is arg)
        reshape_extern_result(extern, index, target, list(alloc.dynamic_sizes))
        done += 1
    return done


__all__ = ["reshape_extern_result", "reshape_for_in_place", "retype_buffer_arg"]

"""Accumulating a scatter onto the buffer it is added to, instead of onto zeros.

A tied embedding's weight gradient (GPT-2, OPT, BART, T5) is the LM head's weight
gradient, a matrix product, plus the embedding's gradient, a scatter of the token
gradients. A scatter kernel adds into its output buffer, which the program zero-fills
before the launch, and a pointwise kernel adds the two::

    %g = kernel.alloc : memref<2048x128xf32>
    kernel.launch @fill() outs(%g) : () -> (memref<2048x128xf32>)
    kernel.launch @scatter(%ids, %src) outs(%g) : (...) -> (memref<2048x128xf32>)
    %mm = kernel.extern (%x, %t) : (...) -> memref<2048x128xf32> { ... aten.mm ... }
    %sum = kernel.alloc : memref<2048x128xf32>
    kernel.launch @add(%mm, %g) outs(%sum) : (...) -> (memref<2048x128xf32>)

When the addend is a fresh buffer (a kernel's, or the product an extern returns) that
nothing else reads, the scatter adds onto it, after it is computed, and it is the sum::

    %mm = kernel.extern (%x, %t) : (...) -> memref<2048x128xf32> { ... aten.mm ... }
    kernel.launch @scatter(%ids, %src) outs(%mm) : (...) -> (memref<2048x128xf32>)

Two launches fewer (the fill and the add) and three passes over the buffer (Inductor
folds the scatter into ``addmm``'s bias instead, one fill and the scatter). The sums
differ from eager's only in their order: the atomic adds land on the product rather than
on zeros later added to it, and atomic adds come in no fixed order anyway.
"""

from __future__ import annotations

from collections.abc import Sequence

import sympy
from xdsl.dialects import arith
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.rewriter import Rewriter

from kiln.dialects.aten import AtenOp
from kiln.dialects.kernel.kernel_ops import KernelOp
from kiln.dialects.kernel.program_ops import AllocOp, ExternOp, LaunchOp, ProgramOp
from kiln.dialects.loop.body_ops import LoadOp
from kiln.dialects.loop.body_ops import YieldOp as LoopYieldOp
from kiln.dialects.loop.expr import flat_index, index_var, same_value
from kiln.dialects.loop.ops import PointwiseOp, ScatterOp

FRESH_PRODUCTS = frozenset(
    {"aten::mm.default", "aten::addmm.default", "aten::bmm.default", "aten::baddbmm.default"}
)
"""Extern ops that always return a new tensor (never a view of an argument)."""
RESHAPES = frozenset({"aten::reshape.default", "aten::view.default", "aten::_unsafe_view.default"})
"""Views of such a result that keep it contiguous (an extern's body may end with one)."""


def _identity_load(op: Operation, sizes: Sequence[sympy.Expr]) -> LoadOp | None:
    """``op`` if it loads its buffer at the flat position of the point (unmasked)."""
    if not isinstance(op, LoadOp) or op.mask is not None or len(op.operands) != 1:
        return None
    identity = flat_index([index_var(k) for k in range(len(sizes))], sizes)
    return op if same_value(op.index.data, identity) else None


def _addend_args(kernel: KernelOp) -> tuple[int, int] | None:
    """Positions, among the kernel's arguments, of the two buffers its only node adds at
    the element it writes (the kernel yields that sum alone)."""
    nodes = kernel.nodes()
    if len(nodes) != 1 or not isinstance(nodes[0], PointwiseOp):
        return None
    node = nodes[0]
    if list(kernel.yield_op().values) != [node.result]:
        return None
    sizes = [s.data for s in node.sizes.data]
    ops = list(node.body.block.ops)
    if len(ops) != 4 or not isinstance(ops[3], LoopYieldOp):
        return None
    first, second = _identity_load(ops[0], sizes), _identity_load(ops[1], sizes)
    add = ops[2]
    if first is None or second is None or not isinstance(add, arith.AddfOp | arith.AddiOp):
        return None
    if {add.lhs, add.rhs} != {first.result, second.result} or ops[3].operands[0] is not add.result:
        return None
    outer = dict(zip(node.input_args(), node.inputs, strict=True))
    args = list(kernel.body.block.args)
    a, b = outer.get(first.buffer), outer.get(second.buffer)
    if a not in args or b not in args or a is b:
        return None
    return args.index(a), args.index(b)  # pyright: ignore[reportArgumentType]


def _is_zero_fill(kernel: KernelOp) -> bool:
    nodes = kernel.nodes()
    return (
        len(nodes) == 1
        and isinstance(nodes[0], PointwiseOp)
        and not any(isinstance(op, LoadOp) for op in nodes[0].body.walk())
        and len(kernel.yield_op().values) == 1
    )


def _fresh(value: SSAValue) -> bool:
    """A buffer no argument aliases: a kernel's allocation, or an extern's new product."""
    owner = value.owner
    if isinstance(owner, AllocOp):
        return True
    if not isinstance(owner, ExternOp):
        return False
    yielded = owner.body.block.last_op
    assert yielded is not None
    tensor = yielded.operands[owner.outputs.index(value)]  # pyright: ignore[reportArgumentType]
    while isinstance(tensor.owner, AtenOp) and tensor.owner.overload_name in RESHAPES:
        tensor = tensor.owner.operands[0]
    return isinstance(tensor.owner, AtenOp) and tensor.owner.overload_name in FRESH_PRODUCTS


class _Program:
    def __init__(self, program: ProgramOp, kernels: dict[str, KernelOp]) -> None:
        self.block: Block = program.body.block
        self.kernels = kernels

    def kernel(self, launch: LaunchOp) -> KernelOp | None:
        return self.kernels.get(launch.kernel.root_reference.data)

    def rewrite(self, add: LaunchOp) -> bool:
        kernel = self.kernel(add)
        positions = None if kernel is None else _addend_args(kernel)
        if positions is None or len(add.outs) != 1:
            return False
        total = add.outs[0]
        if not isinstance(total.owner, AllocOp):
            return False
        p, q = positions
        for zeros, addend in ((add.args[p], add.args[q]), (add.args[q], add.args[p])):
            if self._onto(add, zeros, addend):
                return True
        return False

    def _onto(self, add: LaunchOp, zeros: SSAValue, addend: SSAValue) -> bool:
        total = add.outs[0]
        if zeros.type != addend.type or addend.type != total.type:
            return False
        ty = addend.type
        if not isinstance(ty, MemRefType) or not ty.has_static_shape():
            return False
        if isinstance(addend, BlockArgument) or not _fresh(addend) or not addend.has_one_use():
            return False
        alloc = zeros.owner
        if not isinstance(alloc, AllocOp):
            return False
        users = [use.operation for use in zeros.uses]
        launches = [u for u in users if isinstance(u, LaunchOp) and u is not add]
        if len(users) != 3 or len(launches) != 2:
            return False
        fill, scatter = sorted(launches, key=self.block.get_operation_index)
        fill_kernel, scatter_kernel = self.kernel(fill), self.kernel(scatter)
        if fill_kernel is None or scatter_kernel is None:
            return False
        if list(fill.outs) != [zeros] or fill.args or not _is_zero_fill(fill_kernel):
            return False
        if zeros in scatter.args:
            return False
        slot = list(scatter.outs).index(zeros)
        if not isinstance(scatter_kernel.yield_op().values[slot].owner, ScatterOp):
            return False
        # The scatter moves to just before the add, after the addend is computed: nothing
        # between may touch its other results.
        others = {v for v in scatter.outs if v is not zeros}
        op = scatter.next_op
        while op is not None and op is not add:
            if any(v in others for v in op.operands):
                return False
            op = op.next_op
        scatter.operands = tuple(addend if v is zeros else v for v in scatter.operands)
        scatter.detach()
        self.block.insert_op_before(scatter, add)
        Rewriter.erase_op(fill)
        Rewriter.erase_op(add)
        total_alloc = total.owner
        total.replace_all_uses_with(addend)
        assert isinstance(total_alloc, AllocOp)
        Rewriter.erase_op(total_alloc)
        Rewriter.erase_op(alloc)
        return True


def scatter_onto_addend(module_block: Block, program: ProgramOp) -> int:
    """Scatters of ``program`` added to a fresh buffer accumulate onto it (module
    docstring); kernels no longer launched leave ``module_block``. Returns how many."""
    kernels = {k.sym_name.data: k for k in module_block.ops if isinstance(k, KernelOp)}
    rewriter = _Program(program, kernels)
    launches = [op for op in program.body.block.ops if isinstance(op, LaunchOp)]
    # A rewrite erases the add launch and a zero fill earlier in the list.
    count = sum(1 for launch in launches if launch.parent is not None and rewriter.rewrite(launch))
    if count:
        still = {op.kernel.root_reference.data for op in program.walk() if isinstance(op, LaunchOp)}
        for name in {launch.kernel.root_reference.data for launch in launches} - still:
            module_block.erase_op(kernels[name])
    return count


__all__ = ["scatter_onto_addend"]

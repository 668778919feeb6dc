"""A ``matmul`` kernel: its matrix product as a loop of ``tl.dot``, then its epilogue.

Each program computes one ``YBLOCK`` x ``XBLOCK`` tile of the product's rows (``y``) and
columns (``x``), accumulating ``RBLOCK`` chunks of the inner dimension, as Inductor's
``mm`` template does; the kernel's other (pointwise) nodes then run on the tile in
registers and every output is stored once::

    acc = tl.full([YBLOCK, XBLOCK], 0.0, tl.float32)
    for roffset in range(0, rnumel, RBLOCK):
        a = tl.load(in_ptr0 + (48 * yindex + (roffset + rlanes[None, :])), amask, other=0.0)
        b = tl.load(in_ptr1 + (xindex + 24 * (roffset + rlanes[:, None])), bmask, other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    ...epilogue on acc...
    tl.store(out_ptr0 + (24 * yindex + xindex), value, ymask & xmask)

The two operands index the inner dimension along different axes (``[1, RBLOCK]`` for
the left one, ``[RBLOCK, 1]`` for the right one), so each load's index expression gets
its own symbol for it. Lanes past the end of the inner dimension load zeros, which add
nothing; the check is left out when every candidate ``RBLOCK`` divides it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, cast

import sympy
from xdsl.dialects import scf
from xdsl.dialects.builtin import Float32Type, IntegerType, f32
from xdsl.ir import Block, BlockArgument, SSAValue
from xdsl.utils.exceptions import DiagnosticException

from kiln.dialects.loop.body_ops import LoadOp
from kiln.dialects.loop.dot import dot_operands
from kiln.dialects.triton import AddPtrOp, ConstexprOp, DotOp, FullOp
from kiln.dialects.triton import LoadOp as TritonLoadOp
from kiln.dialects.triton.types import BlockType, Dim, shape_of
from kiln.passes.kernel_to_triton.plan import KernelPlan, Level, NodePlan, R

if TYPE_CHECKING:
    from kiln.passes.kernel_to_triton.builder import TritonBuilder
    from kiln.passes.kernel_to_triton.index import IndexEmitter


class MatmulHost(Protocol):
    """What a matmul kernel's lowering needs from the kernel being lowered (its
    KernelLowering)."""

    plan: KernelPlan
    builder: TritonBuilder
    index: IndexEmitter
    index_type: IntegerType
    lane_masks: dict[str, SSAValue]
    in_ptrs: dict[SSAValue, BlockArgument]
    rnumel: SSAValue

    @property
    def where(self) -> str: ...

    def lanes(self, block_name: str, axis: int | None, rank: int) -> SSAValue: ...

    def kernel_expr(self, node: NodePlan, expr: sympy.Expr) -> sympy.Expr: ...

    def evaluate(self, node: NodePlan) -> None: ...

    def store_outputs(self, node: NodePlan) -> None: ...


class KernelLoweringError(DiagnosticException):
    """A matmul kernel lower-to-triton cannot lower (the message names it)."""


LHS_R = sympy.Symbol("rlhs", integer=True, nonnegative=True)
"""The inner index of the left operand's loads (lanes ``[1, RBLOCK]``)."""
RHS_R = sympy.Symbol("rrhs", integer=True, nonnegative=True)
"""The inner index of the right operand's loads (lanes ``[RBLOCK, 1]``)."""

TILE: tuple[Dim, ...] = ("YBLOCK", "XBLOCK")


class MatmulLowering:
    """Lowers a planned ``matmul`` kernel (see the module docstring)."""

    def __init__(self, kernel: MatmulHost) -> None:
        self.kernel = kernel
        self.builder = kernel.builder

    def lower(self) -> None:
        kernel, b = self.kernel, self.builder
        plan = kernel.plan
        product = next(n for n in plan.nodes if n.level is Level.RED)
        operands = dot_operands(product.op)
        assert operands is not None, "plan_kernel admits only a matrix product"
        rblocks = {c.as_dict()["RBLOCK"] for c in plan.configs}
        rnumel = plan.rnumel
        whole_chunks = not rnumel.free_symbols and all(int(rnumel) % r == 0 for r in rblocks)

        lhs_lanes = kernel.lanes("RBLOCK", 1, 2)
        rhs_lanes = kernel.lanes("RBLOCK", 0, 2)
        acc_type = BlockType(TILE, f32)
        init = b.add(FullOp(0.0, acc_type))
        body = Block(arg_types=[kernel.index_type, acc_type])
        zero = b.const(0, kernel.index_type)
        step = b.cast(b.add(ConstexprOp("RBLOCK")), kernel.index_type)
        loop = scf.ForOp(zero, kernel.rnumel, step, [init], body)
        b.insert(loop)
        body.args[0].name_hint = "roffset"
        body.args[1].name_hint = loop.results[0].name_hint = "acc"
        with b.nested(body, loop):
            roffset = body.args[0]
            lhs_r = b.binary("add", roffset, lhs_lanes)
            rhs_r = b.binary("add", roffset, rhs_lanes)
            lhs = self._load(
                product, operands.lhs, LHS_R, lhs_r, ("YBLOCK", "RBLOCK"), whole_chunks
            )
            rhs = self._load(
                product, operands.rhs, RHS_R, rhs_r, ("RBLOCK", "XBLOCK"), whole_chunks
            )
            precision = "ieee" if isinstance(operands.lhs.result.type, Float32Type) else None
            acc = b.add(DotOp(lhs, rhs, body.args[1], precision))
            b.insert(scf.YieldOp(acc))
        b.remember(("node", product.op.results[0]), loop.results[0], 0)
        for node in plan.nodes:
            if node.level is Level.X:
                kernel.evaluate(node)
        for node in plan.nodes:
            kernel.store_outputs(node)

    def _load(
        self,
        node: NodePlan,
        load: LoadOp,
        symbol: sympy.Symbol,
        lanes: SSAValue,
        shape: tuple[Dim, ...],
        whole_chunks: bool,
    ) -> SSAValue:
        """One operand's block: ``load``'s index over the tile's rows or columns and the
        chunk's inner lanes (``symbol``, bound to ``lanes``), masked to the sizes."""
        kernel, b = self.kernel, self.builder
        depth = len(b.scopes) - 1
        kernel.index.bases[symbol] = lanes
        kernel.index.depths[symbol] = depth
        expr = cast(sympy.Expr, kernel.kernel_expr(node, load.index.data).xreplace({R: symbol}))
        offset = kernel.index.emit(expr)
        if shape_of(offset.type) != shape:
            offset = b.broadcast(offset, shape)
        outer = "YBLOCK" if shape[0] == "YBLOCK" else "XBLOCK"
        mask: SSAValue | None = kernel.lane_masks[outer]
        if not whole_chunks:
            inside = b.cmp("lt", lanes, kernel.rnumel)
            mask = b.logical_and(mask, inside)
        if mask is not None and shape_of(mask.type) != shape:
            mask = b.broadcast(mask, shape)
        ptr = kernel.in_ptrs.get(_outer_buffer(node, load))
        if ptr is None:
            raise KernelLoweringError(
                f"{kernel.where}: the matrix product reads a value computed in the kernel"
            )
        pointers = b.add(AddPtrOp(ptr, offset))
        return b.add(TritonLoadOp(pointers, mask, 0 if mask is not None else None))


def _outer_buffer(node: NodePlan, load: LoadOp) -> SSAValue:
    return dict(zip(node.op.input_args(), node.op.inputs, strict=True))[load.buffer]


__all__ = ["LHS_R", "RHS_R", "MatmulHost", "MatmulLowering"]

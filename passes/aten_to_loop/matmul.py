"""Matrix products that ``dot-kernels`` chose for a Triton dot kernel: one
``loop.reduction`` each, marked ``kiln.dot`` (:mod:`kiln.dialects.loop.dot`), the
operands read through their views and widened to the accumulator (f32 for half types);
``addmm``'s bias is added to the float32 sum and the result rounded once, as cuBLAS's
bias epilogue does. Any other product stays an ATen call (cuBLAS on the GPU,
oneDNN/MKL on the CPU).
"""

from __future__ import annotations

from collections.abc import Sequence

import sympy
from xdsl.ir import Attribute, SSAValue

from kiln.dialects.aten.dot_kernels import is_dot_kernel
from kiln.dialects.loop.attributes import ReductionKind
from kiln.dialects.loop.dot import mark_dot
from kiln.dialects.loop.ops import ReductionOp
from kiln.passes.aten_to_loop.body import BodyBuilder
from kiln.passes.aten_to_loop.context import Lowered, Lowering, LoweringContext, OpArgs
from kiln.passes.aten_to_loop.reductions import finish_in
from kiln.passes.aten_to_loop.tensors import TensorRef
from kiln.passes.aten_to_loop.types import NoLowering, compute_type, is_float


def _product(
    ctx: LoweringContext, args: OpArgs, a: TensorRef, b: TensorRef
) -> tuple[TensorRef, Attribute]:
    """``a @ b`` summed in the accumulator type (and that type)."""
    if not is_dot_kernel(args.op):
        raise NoLowering("a matrix product runs as an ATen call unless dot-kernels chose it")
    out = args.result_dtype()
    if not is_float(out) or a.dtype != out or b.dtype != out:
        raise NoLowering("a dot kernel multiplies floats of the result's type")
    acc = compute_type(out)
    m, k = a.sizes
    n = b.sizes[1]

    def body(
        bb: BodyBuilder, idx: Sequence[sympy.Symbol], ridx: Sequence[sympy.Symbol]
    ) -> SSAValue:
        lhs = bb.load_as(a, [idx[0], ridx[0]], acc)
        rhs = bb.load_as(b, [ridx[0], idx[1]], acc)
        return bb.mul(lhs, rhs)

    (total,) = ctx.reduction(ReductionKind.SUM, [m, n], [k], acc, body)
    product = total.buffer.owner
    assert isinstance(product, ReductionOp)
    mark_dot(product)
    return total, acc


def _mm(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    total, _ = _product(ctx, args, args.tensor("self"), args.tensor("mat2"))
    return [finish_in(ctx, total, args.result_dtype())]


def _addmm(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    if args.value("alpha") != 1 or args.value("beta") != 1:
        raise NoLowering("addmm with alpha or beta other than 1")
    total, acc = _product(ctx, args, args.tensor("mat1"), args.tensor("mat2"))
    bias = args.tensor("self")
    if bias.dtype != args.result_dtype():
        raise NoLowering("addmm with a bias of another type")
    bias = bias.expand(total.sizes)

    def body(bb: BodyBuilder, idx: Sequence[sympy.Symbol]) -> SSAValue:
        return bb.cast(
            bb.add_(bb.load(total, idx), bb.load_as(bias, idx, acc)), args.result_dtype()
        )

    return [ctx.pointwise(total.sizes, args.result_dtype(), body)]


LOWERINGS: dict[str, Lowering] = {"mm": _mm, "addmm": _addmm}

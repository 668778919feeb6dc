"""Matrix products that ``dot-kernels`` chose for a Triton dot kernel: one
``loop.reduction`` each (:mod:`kiln.dialects.loop.dot`), the operands read through
their views, widened to the accumulator (f32 for half types) and rounded once at the
end. Any other product stays an ATen call (cuBLAS on the GPU, oneDNN/MKL on the CPU).
"""

from __future__ import annotations

from collections.abc import Sequence

import sympy
from xdsl.ir import SSAValue

from kiln.dialects.aten.dot_kernels import is_dot_kernel
from kiln.dialects.loop.attributes import ReductionKind
from kiln.dialects.loop.dot import mark_dot
from kiln.dialects.loop.ops import ReductionOp
from kiln.passes.aten_to_loop.body import BodyBuilder
from kiln.passes.aten_to_loop.context import Lowered, Lowering, LoweringContext, OpArgs
from kiln.passes.aten_to_loop.reductions import finish_in
from kiln.passes.aten_to_loop.types import NoLowering, compute_type, is_float


def _mm(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
    if not is_dot_kernel(args.op):
        raise NoLowering("a matrix product runs as an ATen call unless dot-kernels chose it")
    a, b = args.tensor("self"), args.tensor("mat2")
    out = args.result_dtype()
    if not is_float(out) or a.dtype != out or b.dtype != out:
        raise NoLowering("a dot kernel multiplies floats of the result's type")
    acc = compute_type(out)
    m, k = a.sizes
    n = b.sizes[1]

    def body(bb: BodyBuilder, idx: Sequence[sympy.Symbol], ridx: Sequence[sympy.Symbol]) -> SSAValue:
        lhs = bb.load_as(a, [idx[0], ridx[0]], acc)
        rhs = bb.load_as(b, [ridx[0], idx[1]], acc)
        return bb.mul(lhs, rhs)

    (total,) = ctx.reduction(ReductionKind.SUM, [m, n], [k], acc, body)
    product = total.buffer.owner
    assert isinstance(product, ReductionOp)
    mark_dot(product)
    return [finish_in(ctx, total, out)]


LOWERINGS: dict[str, Lowering] = {"mm": _mm}

"""``dot-kernels``: matrix products that run as Triton ``tl.dot`` kernels with their
pointwise consumers fused in as the epilogue, instead of cuBLAS plus a kernel per
epilogue (what Inductor's ``max_autotune`` templates do).

A small product is launch bound on a GPU: cuBLAS takes a few microseconds for it, and
the bias add / activation / residual add / cast that reads its result is a second
launch and a second pass over the output. A dot kernel computes the product tile by
tile and applies the epilogue in registers. This pass only chooses: it marks the
products (``kiln.dot_kernel``, :mod:`kiln.dialects.aten.dot_kernels`), ``lower-aten``
lowers a marked one to a ``loop.reduction`` (:mod:`kiln.dialects.loop.dot`), ``fuse``
gives it its pointwise consumers and ``lower-to-triton`` writes the ``tl.dot`` loop::

    %mm = aten.mm.default(%x, %w) : (tensor<32x128xf32>, tensor<128x64xf32>) -> tensor<32x64xf32>
    %r = aten.relu.default(%mm) : (tensor<32x64xf32>) -> tensor<32x64xf32>

becomes (``mode=epilogue``)::

    %mm = aten.mm.default(%x, %w) {kiln.dot_kernel} : (tensor<32x128xf32>, tensor<128x64xf32>) -> tensor<32x64xf32>
    %r = aten.relu.default(%mm) : (tensor<32x64xf32>) -> tensor<32x64xf32>

``mode``: ``half`` (the default: bfloat16 and float16 products), ``none`` (every
product stays cuBLAS), ``epilogue`` (products whose result feeds only pointwise ops, through
views), ``all``. Only on a GPU (``kiln.device``; ``cpu=true`` also for the CPU: the
tests' Triton interpreter), for ``mm`` and ``addmm`` (``alpha = beta = 1``: its bias
joins the epilogue) of float32/bfloat16/float16 at static sizes, each at least 16, with
at most ``max-macs`` multiply-adds (large products are cuBLAS's). Float32 products use
IEEE float32 dots (``input_precision="ieee"``), as cuBLAS does while
``torch.backends.cuda.matmul.allow_tf32`` is off; on an H100 they ran 2-6x slower than
cuBLAS's (docs/benchmarks/dot-kernels.md), hence ``half``: on the dashboard's 21 models
(H100, bfloat16 inference, session 50) it took kiln's summed kernel time from 0.59 to
0.56 of Inductor's (geomean) and the worst model from 1.06 to 0.95.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import BFloat16Type, Float16Type, Float32Type, ModuleOp, TensorType
from xdsl.passes import ModulePass

from kiln.dialects.aten.dot_kernels import mark_dot_kernel
from kiln.dialects.aten.function_attrs import runs_on_cpu
from kiln.dialects.aten.ops import AtenOp
from kiln.dialects.aten.shapes import static_shape
from kiln.passes.unfuse_addmm import feeds_only_pointwise, is_one

MODES = ("none", "half", "epilogue", "all")

MIN_SIZE = 16
"""Each of ``m``, ``n``, ``k`` at least this: ``tl.dot``'s smallest block; a thinner
product (a matrix-vector one) would compute mostly padding."""
MAX_ROWS = 65535 * MIN_SIZE
"""Row blocks go on the grid's y axis (at most 65535 of them)."""


class DotKernelsError(ValueError):
    """A bad option (the message names it)."""


@dataclass(frozen=True)
class DotKernelsPass(ModulePass):
    """Mark the products that run as dot kernels (see the module docstring)."""

    name: ClassVar[str] = "dot-kernels"  # pyright: ignore[reportIncompatibleVariableOverride]

    mode: str = "half"
    max_macs: int = 1 << 24
    """The largest product (``m * n * k``) made a dot kernel."""
    cpu: bool = False
    """Also on a program for the CPU: its kernels compute the products as plain sums
    (C++), or in Triton's interpreter (how the tests run dot kernels without a GPU)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.mode not in MODES:
            raise DotKernelsError(f"dot-kernels: mode={self.mode!r}, expected one of {MODES}")
        if self.mode == "none" or (runs_on_cpu(op) and not self.cpu):
            return
        for product in [o for o in op.walk() if isinstance(o, AtenOp)]:
            if self.chosen(product):
                mark_dot_kernel(product)

    def chosen(self, op: AtenOp) -> bool:
        if op.sym_operands():
            return False
        if op.overload_name == "aten::mm.default":
            a, b = (static_shape(v) for v in op.operands[:2])
        elif (
            op.overload_name == "aten::addmm.default" and is_one(op, "alpha") and is_one(op, "beta")
        ):
            a, b = (static_shape(v) for v in op.operands[1:3])
        else:
            return False
        out = op.results[0].type
        if a is None or b is None or not isinstance(out, TensorType):
            return False
        if not isinstance(out.element_type, Float32Type | BFloat16Type | Float16Type):
            return False
        (m, k), n = a, b[1]
        if min(m, n, k) < MIN_SIZE or m * n * k > self.max_macs or m > MAX_ROWS:
            return False
        if self.mode == "half":
            return not isinstance(out.element_type, Float32Type)
        return self.mode == "all" or feeds_only_pointwise(op.results[0])


__all__ = ["MODES", "DotKernelsError", "DotKernelsPass"]

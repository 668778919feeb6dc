"""``kiln.dot_kernel``: a matrix product chosen to run as a Triton ``tl.dot`` kernel.

``dot-kernels`` marks an ``aten.mm`` with this unit attribute; ``lower-aten`` lowers a
marked product to a ``loop.reduction`` (:mod:`kiln.dialects.loop.dot`), whose pointwise
consumers then fuse into it as its epilogue, instead of an ATen call (cuBLAS)::

    %mm = aten.mm.default(%x, %w) {kiln.dot_kernel} : (tensor<32x128xf32>, tensor<128x64xf32>) -> tensor<32x64xf32>

An unmarked product stays an ATen call.
"""

from __future__ import annotations

from xdsl.dialects.builtin import UnitAttr
from xdsl.ir import Operation

DOT_KERNEL_ATTR = "kiln.dot_kernel"


def mark_dot_kernel(op: Operation) -> None:
    op.attributes[DOT_KERNEL_ATTR] = UnitAttr()


def is_dot_kernel(op: Operation) -> bool:
    return DOT_KERNEL_ATTR in op.attributes


__all__ = ["DOT_KERNEL_ATTR", "is_dot_kernel", "mark_dot_kernel"]

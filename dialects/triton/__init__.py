"""The triton dialect: the Triton language as IR.

Each op is one Triton construct (``tl.program_id``, ``tl.arange``, masked
``tl.load``/``tl.store``, broadcasts, elementwise arithmetic and math, ``tl.where``,
reductions); values are blocks (``!triton.block<[XBLOCK, RBLOCK], f32>``, Triton tensors
with named constexpr dimensions) or scalars; loops are ``scf.for``. ``lower-to-triton``
(:mod:`kiln.passes.lower_to_triton`) produces it from ``kernel.kernel``;
:mod:`kiln.backends.triton.emit` prints it as ``@triton.jit`` Python, one line per op.
"""

from kiln.dialects.triton.block_ops import (
    AddPtrOp,
    ArangeOp,
    AtomicAddOp,
    BroadcastToOp,
    ConstantOp,
    DeviceAssertOp,
    ExpandDimsOp,
    FullOp,
    LoadOp,
    StoreOp,
)
from kiln.dialects.triton.dialect import Triton
from kiln.dialects.triton.dot_ops import DotOp
from kiln.dialects.triton.elementwise import (
    BINARY_CLASSES,
    BINARY_OPS,
    MATH_FUNCTIONS,
    PREDICATES,
    BinaryOp,
    CastOp,
    CmpOp,
    MathOp,
    WhereOp,
)
from kiln.dialects.triton.kernel_ops import (
    KERNEL_KINDS,
    ConstexprOp,
    KernelOp,
    ProgramIdOp,
    ReturnOp,
    TritonKernelKind,
    TritonKernelKindAttr,
)
from kiln.dialects.triton.reduce_ops import COMBINE_ARITY, REDUCE_ARITY, CombineOp, ReduceOp
from kiln.dialects.triton.types import BlockType, PointerType

__all__ = [
    "BINARY_CLASSES",
    "BINARY_OPS",
    "COMBINE_ARITY",
    "KERNEL_KINDS",
    "MATH_FUNCTIONS",
    "PREDICATES",
    "REDUCE_ARITY",
    "AddPtrOp",
    "ArangeOp",
    "AtomicAddOp",
    "BinaryOp",
    "BlockType",
    "BroadcastToOp",
    "CastOp",
    "CmpOp",
    "CombineOp",
    "ConstantOp",
    "ConstexprOp",
    "DeviceAssertOp",
    "DotOp",
    "ExpandDimsOp",
    "FullOp",
    "KernelOp",
    "LoadOp",
    "MathOp",
    "PointerType",
    "ProgramIdOp",
    "ReduceOp",
    "ReturnOp",
    "StoreOp",
    "Triton",
    "TritonKernelKind",
    "TritonKernelKindAttr",
    "WhereOp",
]

"""The ``triton`` Dialect object."""

from __future__ import annotations

from xdsl.ir import Dialect

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
from kiln.dialects.triton.dot_ops import DotOp
from kiln.dialects.triton.elementwise import BINARY_CLASSES, CastOp, CmpOp, MathOp, WhereOp
from kiln.dialects.triton.kernel_ops import (
    ConstexprOp,
    KernelOp,
    ProgramIdOp,
    ReturnOp,
    TritonKernelKindAttr,
)
from kiln.dialects.triton.reduce_ops import CombineOp, ReduceOp
from kiln.dialects.triton.types import BlockType, PointerType

Triton = Dialect(
    "triton",
    [
        KernelOp,
        ReturnOp,
        ProgramIdOp,
        ConstexprOp,
        ArangeOp,
        ExpandDimsOp,
        BroadcastToOp,
        ConstantOp,
        FullOp,
        AddPtrOp,
        LoadOp,
        StoreOp,
        AtomicAddOp,
        DeviceAssertOp,
        *BINARY_CLASSES.values(),
        CmpOp,
        MathOp,
        WhereOp,
        CastOp,
        ReduceOp,
        CombineOp,
        DotOp,
    ],
    [BlockType, PointerType, TritonKernelKindAttr],
)

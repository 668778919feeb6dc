"""The ``kernel`` Dialect object."""

from __future__ import annotations

from xdsl.ir import Dialect

from kiln.dialects.kernel.attributes import ConfigAttr, KernelKindAttr
from kiln.dialects.kernel.kernel_ops import KernelOp, YieldOp
from kiln.dialects.kernel.program_ops import (
    AllocOp,
    ExternOp,
    FreeOp,
    LaunchOp,
    ProgramOp,
    ReturnOp,
    ReuseOp,
)

Kernel = Dialect(
    "kernel",
    [KernelOp, YieldOp, ProgramOp, AllocOp, FreeOp, ReuseOp, LaunchOp, ExternOp, ReturnOp],
    [KernelKindAttr, ConfigAttr],
)

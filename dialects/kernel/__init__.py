"""The kernel dialect: the result of scheduling.

``kernel.kernel`` groups the loop nodes that run in one launch (its iteration space
``numel`` x ``rnumel``, and after ``tile`` its block sizes and candidate configs);
``kernel.program`` replaces the lowered function and runs allocations, kernel launches,
ATen calls, frees and buffer reuse in order. See :mod:`kiln.dialects.kernel.kernel_ops`
and :mod:`kiln.dialects.kernel.program_ops` for the syntax, and
:mod:`kiln.dialects.kernel.interpreter` to run a program.
"""

from kiln.dialects.kernel.attributes import ConfigAttr, KernelKind, KernelKindAttr
from kiln.dialects.kernel.dialect import Kernel
from kiln.dialects.kernel.kernel_ops import VARS_ATTR, KernelOp, YieldOp, node_vars
from kiln.dialects.kernel.program_ops import (
    AllocOp,
    ExternOp,
    FreeOp,
    LaunchOp,
    ProgramOp,
    ReturnOp,
    ReuseOp,
)

__all__ = [
    "VARS_ATTR",
    "AllocOp",
    "ConfigAttr",
    "ExternOp",
    "FreeOp",
    "Kernel",
    "KernelKind",
    "KernelKindAttr",
    "KernelOp",
    "LaunchOp",
    "ProgramOp",
    "ReturnOp",
    "ReuseOp",
    "YieldOp",
    "node_vars",
]

"""Which level of IR a kernel-level pass was given: such a pass refuses IR that has not been
fused yet instead of silently doing nothing (``kiln-opt in.mlir --tile`` on aten IR)."""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp

from kiln.diagnostics import OpError


def require_kernel_level(module: ModuleOp, pass_name: str) -> None:
    """Raise at the first function that still holds aten or loop ops."""
    for func in module.ops:
        if not isinstance(func, FuncOp) or not func.body.blocks:
            continue
        for inner in func.body.block.ops:
            level = inner.dialect_name()
            if level in ("aten", "loop"):
                step = "lower-aten and fuse" if level == "aten" else "fuse"
                raise OpError(
                    inner,
                    f"{pass_name}: @{func.sym_name.data} holds {level} IR; run {step} first",
                )

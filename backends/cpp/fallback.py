"""Kernels the C++ backend could not translate, run by kiln's kernel interpreter.

``lower-to-cpp{fallback=true}`` leaves such a kernel as ``kernel.kernel`` (with the reason
in ``kiln.cpp_fallback``); the wrapper then calls an :class:`InterpretedLaunch` for its
launches: the reference interpreter computes the kernel's outputs into the same buffers.
Slow, but the graph runs and computes PyTorch's numbers.
"""

from __future__ import annotations

import warnings
from typing import Any

from xdsl.dialects.builtin import ModuleOp

from kiln.dialects.kernel.contract_attrs import CPP_FALLBACK
from kiln.dialects.kernel.kernel_ops import KernelOp
from kiln.dialects.kernel.program_ops import LaunchOp


class InterpretedLaunch:
    """One ``kernel.launch`` of an untranslated kernel: ``call(*args, *outs)``."""

    def __init__(self, launch: LaunchOp, kernel: KernelOp, module: ModuleOp) -> None:
        # Imported here: the interpreters pull in xDSL's whole interpreter package (about
        # a second), which a graph without such a kernel never needs.
        from kiln.dialects.kernel.interpreter import make_kernel_interpreter

        self.launch = launch
        self.interpreter, _ = make_kernel_interpreter(module)
        why = CPP_FALLBACK.get(kernel) or "not translated"
        warnings.warn(
            f"kiln: kernel @{kernel.sym_name.data} runs in the reference interpreter ({why})",
            RuntimeWarning,
            stacklevel=2,
        )

    def __call__(self, *values: Any) -> int:
        self.interpreter.run_op(self.launch, values)
        return 0


__all__ = ["InterpretedLaunch"]

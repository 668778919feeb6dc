"""``lower-to-cpp``: every ``kernel.kernel`` becomes a ``cpp.func`` (C++/OpenMP as IR).

The ``kernel.program`` stays as it is: its ``kernel.launch`` ops now call the
``cpp.func`` of the same name, whose signature is the kernel's. See
:mod:`kiln.passes.kernel_to_cpp.kernel` for the code each kernel becomes.

Options: ``threads`` (0: this machine's CPU count) is the thread count the loops are
tuned for; ``lanes`` the most accumulators per reduction (0: four vectors of f32 on this
machine, see :func:`~kiln.passes.kernel_to_cpp.options.default_lanes`); ``fallback`` keeps a
kernel the backend cannot translate as ``kernel.kernel`` (marked ``kiln.cpp_fallback``
with the reason, :data:`~kiln.dialects.kernel.contract_attrs.CPP_FALLBACK`) instead of
failing: the C++ wrapper then runs it with kiln's kernel interpreter, slowly but
correctly, so that a graph always runs. A kernel that already carries the mark is left
as it is (the driver marks the kernels whose C++ the emitter rejects, see
:func:`kiln.targets.lower_for_cpp`).

```console
$ kiln-opt m.mlir -p 'lower-aten,fuse,lower-to-cpp{threads=8}'
```
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import DiagnosticException

from kiln.cores import usable_cores
from kiln.dialects.kernel.contract_attrs import CPP_FALLBACK
from kiln.dialects.kernel.kernel_ops import KernelOp
from kiln.passes.kernel_to_cpp.analysis import UnsupportedKernel
from kiln.passes.kernel_to_cpp.kernel import lower_kernel
from kiln.passes.kernel_to_cpp.options import CppOptions, default_lanes


class LowerToCppError(DiagnosticException):
    """A kernel the C++ backend cannot lower."""


def default_threads() -> int:
    return usable_cores()


@dataclass(frozen=True)
class LowerToCppPass(ModulePass):
    """Lower every kernel.kernel to a cpp.func."""

    name: ClassVar[str] = "lower-to-cpp"  # pyright: ignore[reportIncompatibleVariableOverride]

    threads: int = 0
    """Threads to tune for (0: the CPUs this process may use)."""
    lanes: int = 0
    """Most per-lane accumulators of a reduction (0: this machine's default)."""
    fallback: bool = False
    """Keep untranslatable kernels (for the interpreter) instead of failing."""

    def options(self) -> CppOptions:
        if self.lanes < 0:
            raise LowerToCppError(f"lower-to-cpp: lanes must be positive, got {self.lanes}")
        return CppOptions(
            threads=self.threads or default_threads(), lanes=self.lanes or default_lanes()
        )

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        options = self.options()
        block = op.body.block
        for kernel in [k for k in block.ops if isinstance(k, KernelOp)]:
            if CPP_FALLBACK.get(kernel) is not None:
                continue  # already left for the interpreter
            try:
                func = lower_kernel(kernel, options)
            except (UnsupportedKernel, ValueError) as e:
                if not self.fallback:
                    raise LowerToCppError(f"lower-to-cpp: @{kernel.sym_name.data}: {e}") from e
                CPP_FALLBACK.set(kernel, str(e))
                continue
            block.insert_op_before(func, kernel)
            block.erase_op(kernel)

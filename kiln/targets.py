"""The driver's side of the backends: lower to a backend's level, then build or print.

Layers (see docs/architecture.md, "Host layer"): passes lower IR, backends compile,
load and launch IR of their own level, and only the driver (this module,
:mod:`kiln.compiler`, ``kiln-opt``) runs passes before handing a module to a backend.

* :func:`lower_for_cpp` / :func:`build_cpp_program`: ``lower-to-cpp{fallback=true}`` on a
  copy, then :func:`kiln.backends.cpp.wrapper.build_program`. A kernel the lowering
  cannot translate, or whose C++ the emitter rejects, stays a ``kernel.kernel`` marked
  ``kiln.cpp_fallback`` and runs in the reference interpreter: a graph always runs.
* :func:`lower_for_triton` / :func:`build_triton_program`: ``lower-to-triton`` where a
  ``kernel.kernel`` has no ``triton.kernel`` yet (in place, as ``kiln-opt`` would), then
  :func:`kiln.backends.triton.runtime.compile_program`.
* :class:`CppTarget` / :class:`TritonTarget`: the ``kiln-opt -t cpp`` / ``-t triton``
  output targets (``--emit-cpp`` / ``--emit-triton``): kernel-level IR is lowered first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.target import Target

from kiln.dialects.kernel.contract_attrs import CPP_FALLBACK, IMPLEMENTS
from kiln.dialects.kernel.kernel_ops import KernelOp

if TYPE_CHECKING:
    from kiln.backends.cpp.wrapper import CppProgram
    from kiln.backends.triton.cudagraphs import CudaGraphRunner
    from kiln.backends.triton.runtime import TritonOptions, TritonProgram
    from kiln.dialects.cpp.func_ops import FuncOp


def _kernels(module: ModuleOp) -> list[KernelOp]:
    return [op for op in module.body.block.ops if isinstance(op, KernelOp)]


def lower_for_cpp(
    module: ModuleOp,
    threads: int = 0,
    lanes: int = 0,
    ctx: Context | None = None,
    fallback: bool = True,
    reject: Mapping[str, str] | None = None,
) -> ModuleOp:
    """The module at the cpp level: kernel-level IR is lowered on a copy with
    ``lower-to-cpp{fallback=true}`` (``threads``/``lanes`` override its defaults; without
    ``fallback`` an untranslatable kernel is an error); a module without ``kernel.kernel``
    ops left to lower is returned as it is. With ``fallback``, a kernel whose C++ has more lines
    than :func:`~kiln.backends.cpp.compiler.max_kernel_lines`, or named in
    ``reject`` (name -> why), stays for the interpreter too."""
    return _lower_for_cpp(module, threads, lanes, ctx, fallback, reject)[0]


def _lower_for_cpp(
    module: ModuleOp,
    threads: int = 0,
    lanes: int = 0,
    ctx: Context | None = None,
    fallback: bool = True,
    reject: Mapping[str, str] | None = None,
) -> tuple[ModuleOp, dict[FuncOp, str]]:
    """:func:`lower_for_cpp`, and the C++ of the functions it emitted to check them (so
    that the build does not emit them again)."""
    from kiln.backends.cpp.compiler import max_kernel_lines
    from kiln.backends.cpp.emit import emit_function
    from kiln.dialects.cpp.func_ops import FuncOp
    from kiln.passes.lower_to_cpp import LowerToCppPass

    if not any(CPP_FALLBACK.get(k) is None for k in _kernels(module)):
        return module, {}
    ctx = ctx or Context()
    lowering = LowerToCppPass(
        threads=threads, fallback=fallback, **({"lanes": lanes} if lanes else {})
    )
    lowered = module.clone()
    lowering.apply(ctx, lowered)
    if not fallback:
        return lowered, {}
    # A function the emitter cannot print (or prints too long) is found now, not at build
    # time: its kernel is marked for the interpreter and the module lowered again (rare: a
    # second pass only then).
    rejected: dict[str, str] = dict(reject or {})
    emitted: dict[FuncOp, str] = {}
    limit = max_kernel_lines()
    for func in lowered.body.block.ops:
        if isinstance(func, FuncOp) and func.sym_name.data not in rejected:
            try:
                text = emit_function(func)
            except ValueError as e:
                rejected[func.sym_name.data] = str(e)
                continue
            lines = len(text.splitlines())
            if lines > limit:
                rejected[func.sym_name.data] = (
                    f"{lines} lines of C++, more than KILN_MAX_KERNEL_LINES={limit}"
                )
                continue
            emitted[func] = text
    if not rejected:
        return lowered, emitted
    lowered = module.clone()
    for kernel in _kernels(lowered):
        if kernel.sym_name.data in rejected:
            CPP_FALLBACK.set(kernel, rejected[kernel.sym_name.data])
    lowering.apply(ctx, lowered)
    return lowered, {}


def build_cpp_program(
    module: ModuleOp,
    name: str | None = None,
    threads: int = 0,
    lanes: int = 0,
    profile: bool = False,
) -> CppProgram:
    """Lower (on a copy) and build ``module``'s ``kernel.program`` with the C++ backend
    (see :func:`kiln.backends.cpp.wrapper.build_program`)."""
    import time

    from kiln.backends.cpp.compiler import CompileTimeout
    from kiln.backends.cpp.wrapper import build_program

    start = time.perf_counter()
    lowered, emitted = _lower_for_cpp(module, threads=threads, lanes=lanes)
    lowered_at = time.perf_counter()
    reject: dict[str, str] = {}
    while True:
        try:
            program = build_program(lowered, name, profile=profile, emitted=emitted)
            break
        except CompileTimeout as e:
            # The timed-out unit's kernels run in the interpreter (with a warning each):
            # slow, but the program runs instead of waiting on the compiler. Each round
            # takes at least one kernel out, so this ends.
            if not e.functions or set(e.functions) <= set(reject):
                raise
            reject.update(dict.fromkeys(e.functions, str(e)))
            lowered, emitted = _lower_for_cpp(module, threads=threads, lanes=lanes, reject=reject)
    program.compile_seconds = time.perf_counter() - start  # lowering included, as before
    program.stage_seconds = {"lower-to-cpp": lowered_at - start, **program.stage_seconds}
    return program


def lower_for_triton(module: ModuleOp, ctx: Context | None = None) -> ModuleOp:
    """Run ``lower-to-triton`` (in place) where a ``kernel.kernel`` has no
    ``triton.kernel`` yet; returns the module."""
    from kiln.passes.lower_to_triton import LowerToTritonPass

    done = IMPLEMENTS.implementations(module)
    if any(k.sym_name.data not in done for k in _kernels(module)):
        LowerToTritonPass().apply(ctx or Context(), module)
    return module


def build_triton_program(
    module: ModuleOp, name: str = "forward", options: TritonOptions | None = None
) -> TritonProgram | CudaGraphRunner:
    """Lower (in place) and build ``module``'s ``kernel.program @name`` with Triton
    (see :func:`kiln.backends.triton.runtime.compile_program`)."""
    from kiln.backends.triton.runtime import compile_program

    return compile_program(lower_for_triton(module), name, options)


@dataclass(frozen=True)
class CppTarget(Target):
    """``-t cpp``: print the module's kernels as a C++ translation unit."""

    name: ClassVar[str] = "cpp"  # pyright: ignore[reportIncompatibleVariableOverride]

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        from kiln.backends.cpp.emit import EmitError, cpp_functions, emit_functions

        lowered = lower_for_cpp(module, ctx=ctx, fallback=False)
        functions = cpp_functions(lowered)
        if not functions:
            raise EmitError(
                "emit-cpp: the module has no kernels (cpp.func or kernel.kernel); "
                "run lower-aten and fuse first"
            )
        output.write(emit_functions(functions))


@dataclass(frozen=True)
class TritonTarget(Target):
    """``-t triton`` / ``--emit-triton``: the module as Python (kernels, then the wrapper).

    Runs ``lower-to-triton`` on a copy first when the module still has ``kernel.kernel``
    ops without a ``triton.kernel``; with a ``kernel.program`` (option ``wrapper``) the
    output is the whole generated module, ``call`` included.
    """

    name: ClassVar[str] = "triton"  # pyright: ignore[reportIncompatibleVariableOverride]

    wrapper: bool = True
    """Also print ``call``, the launch sequence of the kernel.program."""
    program: str = "forward"

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        from kiln.backends.triton.emit import EmitError, emit_kernels
        from kiln.backends.triton.runtime import generate_source
        from kiln.dialects.kernel.program_ops import ProgramOp
        from kiln.dialects.triton import KernelOp as TritonKernelOp

        module = lower_for_triton(module.clone(), ctx)
        has_program = any(
            isinstance(op, ProgramOp) and op.sym_name.data == self.program for op in module.ops
        )
        if self.wrapper and has_program:
            output.write(generate_source(module, self.program).text)
            return
        kernels = [op for op in module.ops if isinstance(op, TritonKernelOp)]
        if not kernels:
            raise EmitError(
                "emit-triton: the module has no kernels (triton.kernel or kernel.kernel); "
                "run lower-aten and fuse first"
            )
        output.write(emit_kernels(kernels))


__all__ = [
    "CppTarget",
    "TritonTarget",
    "build_cpp_program",
    "build_triton_program",
    "lower_for_cpp",
    "lower_for_triton",
]

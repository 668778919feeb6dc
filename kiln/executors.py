"""The runners a compiled graph calls: the C++ and Triton programs the backends build,
and kiln's reference interpreters (:func:`build_runner`)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from xdsl.dialects.builtin import ModuleOp

from kiln.compile_options import CompileError, CompileOptions
from kiln.debug_dump import dump
from kiln.devices import gpu_device


def check_triton_devices(name: str, inputs: Sequence[Any], devices: set[torch.device]) -> None:
    """Real Triton kernels read GPU memory only; say so at compile time, not at a launch.
    A CPU input of a CUDA graph (a 0-d tensor, CPU indices) is moved by the wrapper."""
    from kiln.backends.triton.runtime import interpreting

    if interpreting() or gpu_device(devices) is not None:
        return
    for k, t in enumerate(inputs):
        if isinstance(t, torch.Tensor) and not t.is_cuda:
            raise CompileError(
                f"{name}: executor 'triton' needs GPU tensors, but input {k} is on {t.device}"
                " (set TRITON_INTERPRET=1 to run the kernels in Triton's interpreter on the CPU)"
            )


def available_executors() -> set[str]:
    import importlib.util

    found = {"interpret"}
    for executor, module in (
        ("cpp", "kiln.backends.cpp.wrapper"),
        ("triton", "kiln.backends.triton.runtime"),
    ):
        try:
            if importlib.util.find_spec(module) is not None:
                found.add(executor)
        except ModuleNotFoundError:
            pass
    return found


Runner = Callable[[list[Any]], Sequence[Any]]


def build_runner(
    executor: str,
    module: ModuleOp,
    options: CompileOptions,
    debug: Path | None,
    device: torch.device | None = None,
    stages: dict[str, float] | None = None,
    guarded: bool = False,
    output_structure: str | None = None,
    input_writes: tuple[int, ...] = (),
) -> tuple[Runner, str, Any]:
    """The runner for ``module``, and the executor that actually runs it. The driver
    lowers to the backend's level (:mod:`kiln.targets`); backends run no passes.
    ``stages`` receives the build's time by stage (:attr:`GraphStats.stage_seconds`).
    The third value is the backend's program object for the C++ executor (the graph
    cache saves it), else None. ``output_structure``: a flat structure the Triton
    program builds its outputs into (see ``TritonOptions.output_structure``); the
    caller then builds none. ``input_writes``: the inputs the Triton program writes its
    trailing outputs into (``TritonOptions.input_writes``); other executors ignore it."""
    stages = stages if stages is not None else {}
    if executor == "interpret":
        return _interpreter(module), "interpret", None
    if executor in ("cpp", "triton") and not any(op.name == "kernel.program" for op in module.ops):
        if options.executor == "auto":
            return _interpreter(module), "interpret", None  # the pipeline stopped before fuse
        raise CompileError(
            f"executor {executor!r} runs kernel-level IR: the pipeline must include fuse"
        )
    if executor == "cpp":
        from kiln.backends.cpp.compiler import CompilerNotFound
        from kiln.targets import build_cpp_program

        try:
            program = build_cpp_program(module)
        except CompilerNotFound as e:
            if options.executor != "auto":
                raise CompileError(str(e)) from e
            print(f"kiln: {e}; running the reference interpreter instead", file=sys.stderr)
            return _interpreter(module), "interpret", None
        stages.update(program.stage_seconds)
        dump(debug, "kernels.cpp", program.cpp_source)
        dump(debug, "wrapper.py", program.python_source)
        return program.run, "cpp", program
    if executor == "triton":
        from kiln.backends.triton.runtime import TritonOptions, interpreting
        from kiln.targets import build_triton_program

        triton_options = TritonOptions(
            autotune=options.autotune,
            cuda_graphs=options.cuda_graphs,
            device=None if interpreting() or device is None else str(device),
            guarded=guarded,
            output_structure=output_structure,
            input_writes=input_writes,
        )
        # Lowered in place: the compiled graph's module shows the Triton kernels.
        triton_start = time.perf_counter()
        triton_program = build_triton_program(module, options=triton_options)
        stages["lower-to-triton+build"] = time.perf_counter() - triton_start
        dump(debug, "triton_module.py", triton_program.source)
        return triton_program.boxed_call, "triton", None
    raise CompileError(f"executor {executor!r} is not available in this build")


def _interpreter(module: ModuleOp) -> Callable[[list[Any]], Sequence[Any]]:
    """Run at the deepest level the pipeline reached, with kiln's reference interpreters,
    after the size checks the wrappers make (sizes traced as one symbol equal)."""
    run = _interpreter_at_level(module)
    check = _entry_size_checker(module)
    if check is None:
        return run

    def checked(args: list[Any]) -> Sequence[Any]:
        check(args)
        return run(args)

    return checked


def _interpreter_at_level(module: ModuleOp) -> Callable[[list[Any]], Sequence[Any]]:
    names = {op.name.split(".")[0] for op in module.walk()}
    if "kernel" in names:
        from kiln.dialects.kernel.interpreter import run_program

        return lambda args: run_program(module, args)[0]
    if "loop" in names:
        from kiln.dialects.loop.interpreter import run_function as run_loop

        return lambda args: run_loop(module, args)
    from kiln.dialects.aten.interpreter import run_function

    return lambda args: run_function(module, args)


def _entry_size_checker(module: ModuleOp) -> Callable[[Sequence[Any]], None] | None:
    """The size checks of ``@forward`` (a ``kernel.program`` or ``func.func``)."""
    from xdsl.dialects.func import FuncOp

    from kiln.backends.host.size_checks import size_checker
    from kiln.dialects.kernel.program_ops import ProgramOp

    for op in module.ops:
        if isinstance(op, ProgramOp | FuncOp) and op.sym_name.data == "forward":
            if not op.body.blocks:
                return None
            return size_checker(op.body.block.args, op.arg_attrs)
    return None


def with_constants(run: Runner, constants: list[torch.Tensor]) -> Runner:
    def run_with_constants(args: list[Any]) -> Sequence[Any]:
        args.extend(constants)
        return run(args)

    return run_with_constants


def owned(args: Sequence[Any]) -> list[Any]:
    """A list the runner may empty: a list is handed over as it is (AOTAutograd's boxed
    convention, so arguments can be freed at their last use), anything else copied."""
    return args if type(args) is list else list(args)


__all__ = [
    "Runner",
    "available_executors",
    "build_runner",
    "check_triton_devices",
    "owned",
    "with_constants",
]

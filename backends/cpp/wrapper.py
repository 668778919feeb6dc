"""The CPU wrapper: a Python callable that runs a ``kernel.program`` with C++ kernels.

:func:`build_program` lowers the module's kernels to C++ (``lower-to-cpp``, on a copy),
compiles them into one shared library (through the disk cache), loads it, and writes
the program as straight-line Python (the *wrapper*, like Inductor's): argument checks,
allocations, one ``ctypes`` call per kernel launch (argument types set once), the ATen
calls of ``kernel.extern`` bodies written inline (:mod:`kiln.backends.cpp.externs`),
``del`` where the program frees a buffer, views where it reuses one, and the results::

    def forward(args):
        (x, w, norm_weight,) = args
        args.clear()
        if not isinstance(x, _Tensor) or x.dtype is not _float32 or ...: _bad_argument(0, ...)
        ...
        # kernel.extern: aten::as_strided.default, aten::mm.default
        tmp = _reinterpret_tensor(w, (16, 16), (1, 16), 0)
        mm = _mm(x, tmp)
        del tmp
        del w
        add1 = _empty_strided((2, 5, 16), (80, 16, 1), _float32)
        p_mm = mm.data_ptr()
        ...
        _rc = _kernel0(p_mm, p_norm_weight, p_add1)
        if _rc: _kernel_failed('kernel0', _rc)
        del mm, p_mm
        return (add1,)

Per-call cost is what small models pay, so the wrapper uses what Inductor's does:
allocations through ``_empty_strided_cpu`` and views through ``_reinterpret_tensor``
(no argument parsing or dispatch), extern bodies as lines rather than calls. Memory is
what ``buffer-reuse`` planned: no name outlives its buffer's ``kernel.free`` (extern
temporaries, a reused buffer's old name and read-after-write copies are deleted), and
the argument list is taken over (AOTAutograd's boxed convention: ``args.clear()``) so
that each argument is released after its last use.

A kernel that hits an out-of-range indirect index or an integer division by zero
returns its error flags and the wrapper raises ``IndexOutOfBounds`` (an ``IndexError``
and a ``RuntimeError``) / ``ZeroDivisionError``,
as eager PyTorch would.
"""

from __future__ import annotations

import keyword
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import ArrayAttr, IndexType, MemRefType, ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.traits import SymbolTable

from kiln.backends.cpp.emit import cpp_functions
from kiln.backends.cpp.externs import REINTERPRET, ExternCall, inline_extern
from kiln.backends.cpp.fallback import InterpretedLaunch
from kiln.backends.cpp.loader import load_kernels
from kiln.backends.host_scalars import HELPERS as HOST_HELPERS
from kiln.backends.host_scalars import constant_python, scalar_python
from kiln.backends.size_checks import size_check_lines
from kiln.dialects.aten import AtenOp
from kiln.dialects.cpp.func_ops import FuncOp
from kiln.dialects.kernel.kernel_ops import KernelOp
from kiln.dialects.kernel.program_ops import (
    AllocOp,
    ExternOp,
    FreeOp,
    LaunchOp,
    ProgramOp,
    ReturnOp,
    ReuseOp,
)
from kiln.dialects.loop.body_eval import torch_dtype
from kiln.dialects.loop.body_ops import IndexOutOfBounds
from kiln.passes.cpp_lowering.kernel import READ_AFTER_WRITE
from kiln.passes.lower_to_cpp import LowerToCppPass
from kiln.passes.scheduling.liveness import argument_releases

ERROR_INDEX = 1
ERROR_DIV_ZERO = 2


class WrapperError(ValueError):
    """A program the C++ wrapper cannot run (the message names the op)."""


def _kernel_failed(kernel: str, code: int) -> None:
    if code & ERROR_INDEX:
        # IndexError and RuntimeError both: eager raises either, depending on the op.
        raise IndexOutOfBounds(
            f"kiln: {kernel}: index out of bounds (an indirect index is outside the "
            "dimension it indexes)"
        )
    if code & ERROR_DIV_ZERO:
        raise ZeroDivisionError(f"kiln: {kernel}: integer division by zero")
    raise RuntimeError(f"kiln: {kernel} failed with error flags {code}")


def _bad_argument(position: int, expected: str, value: Any) -> None:
    got = (
        f"a {value.dtype} tensor of shape {list(value.shape)} on {value.device}"
        if isinstance(value, torch.Tensor)
        else f"{type(value).__name__} {value!r}"
    )
    raise TypeError(f"kiln: argument #{position} must be {expected}, got {got}")


def _empty_strided_fallback(
    size: tuple[int, ...], stride: tuple[int, ...], dtype: torch.dtype
) -> torch.Tensor:
    return torch.empty_strided(size, stride, dtype=dtype)


EMPTY_STRIDED_CPU: Callable[[tuple[int, ...], tuple[int, ...], torch.dtype], torch.Tensor] = (
    getattr(
        torch._C._dynamo.guards,  # pyright: ignore[reportPrivateUsage, reportAttributeAccessIssue]
        "_empty_strided_cpu",
        _empty_strided_fallback,
    )
)
"""A CPU allocation without ``torch.empty``'s argument parsing (what Inductor's CPU
wrappers call; a third of the cost)."""


def _contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    strides: list[int] = []
    stride = 1
    for size in reversed(shape):
        strides.append(stride)
        stride *= size
    return tuple(reversed(strides))


_IDENTIFIER = re.compile(r"[^A-Za-z0-9_]")


@dataclass
class _Writer:
    """Writes the Python source of a program's wrapper."""

    program: ProgramOp
    kernels: dict[str, Callable[..., int]]
    module: ModuleOp
    lines: list[str] = field(default_factory=list[str])
    names: dict[SSAValue, str] = field(default_factory=dict[SSAValue, str])
    used: set[str] = field(default_factory=set[str])
    namespace: dict[str, Any] = field(default_factory=dict[str, Any])
    pointers: dict[SSAValue, str] = field(default_factory=dict[SSAValue, str])
    dtypes: dict[torch.dtype, str] = field(default_factory=dict[torch.dtype, str])
    hazards: dict[str, list[tuple[int, int]]] = field(
        default_factory=dict[str, list[tuple[int, int]]]
    )
    profile: dict[str, list[float]] | None = None
    """When set, the wrapper adds each launch's and extern call's count and seconds here."""
    """Per kernel, its ``read_after_write`` pairs (see :mod:`kiln.passes.cpp_lowering.kernel`)."""

    def fresh(self, hint: str | None, default: str) -> str:
        base = _IDENTIFIER.sub("_", hint) if hint else default
        if not base or base[0].isdigit() or keyword.iskeyword(base) or base.startswith("_"):
            base = f"v_{base}"
        name, k = base, 1
        while name in self.used:
            name, k = f"{base}_{k}", k + 1
        self.used.add(name)
        return name

    def name(self, value: SSAValue) -> str:
        if value not in self.names:
            self.names[value] = self.fresh(value.name_hint, "t")
        return self.names[value]

    def constant(self, value: object, hint: str) -> str:
        """A module-level name for an object the wrapper uses."""
        name = "_" + self.fresh(hint, "c")
        while name in self.namespace:  # taken by an inlined extern's binding (``_mm``)
            name = "_" + self.fresh(hint, "c")
        self.namespace[name] = value
        return name

    def dtype(self, ty: MemRefType) -> str:
        dtype = torch_dtype(ty.element_type)
        if dtype not in self.dtypes:
            self.dtypes[dtype] = self.constant(dtype, str(dtype).removeprefix("torch."))
        return self.dtypes[dtype]

    def pointer(self, value: SSAValue) -> str:
        """The buffer's address, read once per buffer."""
        if value not in self.pointers:
            pointer = self.fresh(f"p_{self.name(value)}", "p")
            self.line(f"{pointer} = {self.name(value)}.data_ptr()")
            self.pointers[value] = pointer
        return self.pointers[value]

    def line(self, text: str) -> None:
        self.lines.append("    " + text)

    def operand(self, value: SSAValue) -> str:
        owner = value.owner
        if isinstance(owner, arith.ConstantOp) and (literal := constant_python(owner)):
            return literal
        return self.name(value)

    # -- the program -----------------------------------------------------------------------

    def write(self) -> str:
        block = self.program.body.block
        args = [self.name(a) for a in block.args]
        self.namespace.update(
            {
                "_empty": torch.empty,
                "_empty_strided": EMPTY_STRIDED_CPU,
                "_reinterpret": REINTERPRET,
                "_kernel_failed": _kernel_failed,
                "_bad_argument": _bad_argument,
                **HOST_HELPERS,
            }
        )
        header = f"def {self.program.sym_name.data}(args):"
        self.lines = [header]
        if args:
            self.line(f"({', '.join(args)},) = args")
            # Boxed calling convention (as AOTAutograd's and Inductor's): the caller
            # hands over the list, so an argument is freed once its last use is done.
            self.line("args.clear()")
        for position, arg in enumerate(block.args):
            self.check_argument(position, arg)
        for check in size_check_lines(block.args, self.program.arg_attrs, args):
            self.line(check)  # sizes traced as one symbol (kiln.backends.size_checks)
        released = argument_releases(self.program)
        self.release(released.get(None, []))
        for op in block.ops:
            self.op(op)
            self.release(released.get(op, []))
        return "\n".join(self.lines) + "\n"

    def release(self, arguments: list[SSAValue]) -> None:
        names: list[str] = []
        for arg in arguments:
            names.append(self.name(arg))
            pointer = self.pointers.pop(arg, None)
            if pointer is not None:
                names.append(pointer)
        if names:
            self.line(f"del {', '.join(names)}")

    def check_argument(self, position: int, arg: SSAValue) -> None:
        ty = arg.type
        name = self.name(arg)
        if not isinstance(ty, MemRefType):
            return
        dtype = self.dtype(ty)
        shape = ty.get_shape()
        dims = ", ".join(str(d) if d >= 0 else "?" for d in shape)
        expected = f"a {torch_dtype(ty.element_type)} CPU tensor of shape [{dims}]"
        if all(d >= 0 for d in shape):
            shape_check = f"{name}.shape != {tuple(shape)!r}"
        else:
            static = " or ".join(f"{name}.shape[{k}] != {d}" for k, d in enumerate(shape) if d >= 0)
            shape_check = f"{name}.dim() != {len(shape)}" + (f" or {static}" if static else "")
        self.line(
            f"if not isinstance({name}, _Tensor) or {name}.dtype is not {dtype} or {shape_check} "
            f"or not {name}.is_cpu: _bad_argument({position}, {expected!r}, {name})"
        )
        self.namespace["_Tensor"] = torch.Tensor
        self.line(f"if not {name}.is_contiguous(): {name} = {name}.contiguous()")

    def op(self, op: Operation) -> None:
        if isinstance(op, AllocOp):
            ty = op.result.type
            assert isinstance(ty, MemRefType)
            dynamic = iter(self.operand(v) for v in op.dynamic_sizes)
            dims = [str(d) if d >= 0 else next(dynamic) for d in ty.get_shape()]
            shape = f"({', '.join(dims)}{',' if len(dims) == 1 else ''})"
            if ty.has_static_shape():
                strides = _contiguous_strides(ty.get_shape())
                self.line(
                    f"{self.name(op.result)} = _empty_strided({shape}, {strides}, {self.dtype(ty)})"
                )
            else:
                self.line(f"{self.name(op.result)} = _empty({shape}, dtype={self.dtype(ty)})")
        elif isinstance(op, LaunchOp):
            self.launch(op)
        elif isinstance(op, ExternOp):
            self.extern(op)
        elif isinstance(op, FreeOp):
            name = self.name(op.buffer)
            pointer = self.pointers.pop(op.buffer, None)
            self.line(f"del {name}" + (f", {pointer}" if pointer else ""))
        elif isinstance(op, ReuseOp):
            ty = op.result.type
            assert isinstance(ty, MemRefType)
            source = self.name(op.source)
            dims = [
                str(d) if d >= 0 else f"{source}.shape[{k}]" for k, d in enumerate(ty.get_shape())
            ]
            shape = f"({', '.join(dims)}{',' if len(dims) == 1 else ''})"
            if ty.has_static_shape():
                strides = _contiguous_strides(ty.get_shape())
                self.line(f"{self.name(op.result)} = _reinterpret({source}, {shape}, {strides}, 0)")
            else:
                self.line(f"{self.name(op.result)} = {source}.view({shape})")
            # The old name would keep the memory alive past the new buffer's free.
            self.line(f"del {source}")
            if op.source in self.pointers:
                self.pointers[op.result] = self.pointers.pop(op.source)
        elif isinstance(op, ReturnOp):
            values = [self.name(v) for v in op.values]
            self.line(f"return ({', '.join(values)}{',' if len(values) == 1 else ''})")
        else:
            self.scalar(op)

    def launch(self, op: LaunchOp) -> None:
        name = op.kernel.string_value()
        function = self.kernels.get(name)
        if function is None:
            kernel = SymbolTable.lookup_symbol(self.program, op.kernel)
            if not isinstance(kernel, KernelOp):
                raise WrapperError(f"kernel.launch @{name}: no compiled kernel of that name")
            handle = self.constant(InterpretedLaunch(op, kernel, self.module), name)
            values = [self.operand(v) for v in (*op.args, *op.outs)]
            self.timed(name, [f"_rc = {handle}({', '.join(values)})"])
            return
        handle = self.constant(function, name)
        copies: dict[int, str] = {}
        for i, j in self.hazards.get(name, ()):
            if op.args[i] is op.outs[j] and i not in copies:
                # The kernel reads this input after writing the output it shares a buffer
                # with: give it the old contents.
                copy = self.fresh(f"{self.name(op.args[i])}_old", "old")
                self.line(f"{copy} = {self.name(op.args[i])}.clone()")
                copies[i] = copy
        args = [
            f"{copies[k]}.data_ptr()"
            if k in copies
            else self.operand(v)
            if isinstance(v.type, IndexType)
            else self.pointer(v)
            for k, v in enumerate((*op.args, *op.outs))
        ]
        self.timed(name, [f"_rc = {handle}({', '.join(args)})"])
        if copies:
            self.line(f"del {', '.join(copies.values())}")  # the copies die with the launch
        self.line(f"if _rc: _kernel_failed({name!r}, _rc)")

    def timed(self, label: str, lines: list[str]) -> None:
        """Emit ``lines``; with profiling on, add their wall time to ``label``'s entry."""
        if self.profile is None:
            for text in lines:
                self.line(text)
            return
        self.namespace["_clock"] = time.perf_counter
        self.namespace["_profile"] = self.profile
        self.line("_start = _clock()")
        for text in lines:
            self.line(text)
        self.line(f"_entry = _profile.setdefault({label!r}, [0, 0.0])")
        self.line("_entry[0] += 1; _entry[1] += _clock() - _start")

    def extern(self, op: ExternOp) -> None:
        results = [self.name(r) for r in op.outputs]
        inputs = [self.operand(v) for v in (*op.inputs, *op.syms)]
        lines = inline_extern(op, inputs, results, self.namespace, lambda: self.fresh(None, "tmp"))
        if lines is not None:
            label = ", ".join(o.overload_name for o in op.body.block.ops if isinstance(o, AtenOp))
            self.line(f"# kernel.extern: {label or 'no ATen call'}")
            self.timed(f"extern {label or 'extern'}", lines)
            return
        call = ExternCall(op, self.module)
        handle = self.constant(call, "extern")
        results = [self.name(r) for r in op.outputs]
        inputs = [self.name(v) for v in (*op.inputs, *op.syms)]
        target = ", ".join(results) + ("," if len(results) == 1 else "")
        self.timed(
            f"extern {call.name}", [f"{target} = {handle}({', '.join(inputs)})  # {call.name}"]
        )

    def scalar(self, op: Operation) -> None:
        if isinstance(op, arith.ConstantOp):
            return  # inlined where used
        if len(op.results) != 1:
            raise WrapperError(f"the C++ wrapper cannot run {op.name} in a kernel.program")
        args = [self.operand(v) for v in op.operands]
        text = _scalar_python(op, args)
        if text is None:
            raise WrapperError(f"the C++ wrapper cannot run {op.name} in a kernel.program")
        self.line(f"{self.name(op.results[0])} = {text}")


CMPI_PYTHON = ("==", "!=", "<", "<=", ">", ">=", "<", "<=", ">", ">=")
"""Python operators by ``arith.cmpi`` predicate (eq, ne, slt, sle, sgt, sge, ult, ...);
sizes are non-negative, so the unsigned predicates compare the same."""


def _scalar_python(op: Operation, a: list[str]) -> str | None:
    """Python for the size arithmetic a program may hold."""
    if isinstance(op, memref.DimOp):
        return f"{a[0]}.shape[{a[1]}]"
    return scalar_python(op, a)


def read_after_write(functions: Sequence[FuncOp]) -> dict[str, list[tuple[int, int]]]:
    out: dict[str, list[tuple[int, int]]] = {}
    for func in functions:
        attr = func.attributes.get(READ_AFTER_WRITE)
        if isinstance(attr, ArrayAttr):
            pairs = [tuple(int(x.data) for x in pair.data) for pair in attr.data]  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType, reportAttributeAccessIssue, reportUnknownArgumentType]
            out[func.sym_name.data] = [(p[0], p[1]) for p in pairs]  # pyright: ignore[reportUnknownArgumentType]
    return out


@dataclass
class CppProgram:
    """A ``kernel.program`` compiled for the CPU: ``program(args)`` runs it."""

    run: Callable[[list[Any]], tuple[Any, ...]]
    """The generated wrapper: takes a list of the arguments, which it empties."""
    cpp_source: str
    """The translation units' sources, one after the other."""
    python_source: str
    library_paths: list[Path]
    cache_hit: bool
    """Whether every library came from the cache."""
    compile_seconds: float
    profile: dict[str, list[float]] | None = None
    """With ``build_program(..., profile=True)``: name -> [calls, total seconds]."""

    def __call__(self, args: Sequence[Any]) -> tuple[Any, ...]:
        return self.run(list(args))

    def boxed_call(self, args: list[Any]) -> tuple[Any, ...]:
        """Run taking ownership of ``args``: the list is emptied, and each argument
        tensor is released after its last use (AOTAutograd's boxed convention)."""
        return self.run(args)


def find_program(module: ModuleOp, name: str | None = None) -> ProgramOp:
    programs = [op for op in module.body.block.ops if isinstance(op, ProgramOp)]
    for program in programs:
        if name is None or program.sym_name.data == name:
            return program
    raise WrapperError(
        f"the module has no kernel.program{f' @{name}' if name else ''}; run lower-aten and fuse first"
    )


def build_program(
    module: ModuleOp,
    name: str | None = None,
    threads: int = 0,
    lanes: int = 0,
    profile: bool = False,
) -> CppProgram:
    """Compile the module's kernels to C++ and wrap its ``kernel.program`` (the module is
    not modified). Kernel-level IR is lowered with ``lower-to-cpp{fallback=true}`` first
    (``threads``/``lanes`` override its defaults): a kernel it cannot translate runs in
    the reference interpreter. ``profile`` makes the wrapper time every launch and extern
    call (``program.profile``: name -> [calls, seconds])."""
    from kiln.registry import make_context

    start = time.perf_counter()
    program = find_program(module, name)
    lowered = module
    if any(isinstance(op, KernelOp) for op in module.body.block.ops):
        lowered = module.clone()
        options = LowerToCppPass(
            threads=threads, fallback=True, **({"lanes": lanes} if lanes else {})
        )
        options.apply(make_context(), lowered)
    program = find_program(lowered, program.sym_name.data)
    functions = cpp_functions(lowered)
    loaded = load_kernels(functions)
    timings: dict[str, list[float]] | None = {} if profile else None
    writer = _Writer(
        program, loaded.functions, lowered, hazards=read_after_write(functions), profile=timings
    )
    python = writer.write()
    namespace = dict(writer.namespace)
    exec(compile(python, f"<kiln wrapper {program.sym_name.data}>", "exec"), namespace)
    run = namespace[program.sym_name.data]
    return CppProgram(
        run,
        "\n".join(loaded.sources),
        python,
        loaded.paths,
        loaded.cache_hits == len(loaded.sources),
        time.perf_counter() - start,
        timings,
    )


__all__ = ["CppProgram", "WrapperError", "build_program", "find_program"]

"""The CPU wrapper: a Python callable that runs a ``kernel.program`` with C++ kernels.

:func:`build_program` takes a module at the cpp level (the driver ran ``lower-to-cpp``,
see :mod:`kiln.targets`), compiles its ``cpp.func`` kernels into one shared library
(through the disk cache), loads it, and writes the program as straight-line Python (the
*wrapper*, like Inductor's, with the walk both backends share,
:mod:`kiln.backends.host.walker`): argument checks (none when the caller guards the
arguments, ``kiln.guarded_arguments``: Dynamo does), allocations, one call per kernel
launch (a built-in function, :mod:`kiln.backends.cpp.python_entry`), the ATen calls of ``kernel.extern`` bodies
written inline (:mod:`kiln.backends.host.externs`),
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

While ``torch.profiler`` records, each launch is a ``kiln::<kernel>`` range (the wrapper
asks once per call, ``_profiling = _profiler_on()``), so that a profile names kiln's
kernels beside the ATen ops; otherwise the launch is the bare call shown above.

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

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from xdsl.dialects.builtin import IndexType, MemRefType, ModuleOp
from xdsl.ir import SSAValue
from xdsl.traits import SymbolTable

from kiln.backends.cpp.emit import cpp_functions
from kiln.backends.cpp.fallback import InterpretedLaunch
from kiln.backends.cpp.loader import KernelText, load_kernels
from kiln.backends.cpp.prepack import prepacked_site

# Without IR imports, in a module of their own: a graph from the graph cache runs with them.
from kiln.backends.cpp.runtime import EMPTY_STRIDED_CPU as EMPTY_STRIDED_CPU
from kiln.backends.cpp.runtime import ERROR_DIV_ZERO as ERROR_DIV_ZERO
from kiln.backends.cpp.runtime import ERROR_INDEX as ERROR_INDEX
from kiln.backends.cpp.runtime import PROFILER_ON as PROFILER_ON
from kiln.backends.cpp.runtime import bad_argument as _bad_argument
from kiln.backends.cpp.runtime import kernel_failed as _kernel_failed
from kiln.backends.cpp.runtime import record_kernel as record_kernel
from kiln.backends.host.externs import REINTERPRET
from kiln.backends.host.walker import (
    ProgramWalker,
    WrapperError,
    contiguous_stride_texts,
    contiguous_strides,
    py_tuple,
)
from kiln.dialects.aten.arg_layout import in_layout
from kiln.dialects.aten.function_attrs import GUARDED_ARGUMENTS_ATTR
from kiln.dialects.aten.ops import AtenOp
from kiln.dialects.cpp.func_ops import FuncOp
from kiln.dialects.kernel.contract_attrs import CPP_FALLBACK, READ_AFTER_WRITE
from kiln.dialects.kernel.kernel_ops import KernelOp
from kiln.dialects.kernel.program_ops import LaunchOp, ProgramNotFound, find_program
from kiln.dialects.loop.body_eval import torch_dtype

if TYPE_CHECKING:
    from kiln.backends.cpp.saved import SavedProgram


@dataclass
class _Writer(ProgramWalker):
    """The C++ backend's hooks of the shared program walk (:mod:`kiln.backends.host.walker`):
    argument checks, CPU allocations, ``ctypes`` launches with pointers read once per
    buffer (into a local only for a buffer several launches take), interpreted launches
    for kernels left as ``kernel.kernel``."""

    kernels: dict[str, Callable[..., int]] = field(default_factory=dict[str, Callable[..., int]])
    hazards: dict[str, list[tuple[int, int]]] = field(
        default_factory=dict[str, list[tuple[int, int]]]
    )
    """Per kernel, its ``read_after_write`` pairs
    (:data:`~kiln.dialects.kernel.contract_attrs.READ_AFTER_WRITE`)."""
    labels: dict[str, str] = field(default_factory=dict[str, str])
    """Per kernel, its profiler range's name (:func:`profiler_label`)."""
    pointers: dict[SSAValue, str] = field(default_factory=dict[SSAValue, str])
    launch_uses: dict[SSAValue, int] = field(default_factory=dict[SSAValue, int])
    """Per buffer, how many launches take it (:meth:`pointer`)."""
    dtypes: dict[torch.dtype, str] = field(default_factory=dict[torch.dtype, str])

    backend: ClassVar[str] = "the C++"

    def dtype(self, ty: MemRefType) -> str:
        dtype = torch_dtype(ty.element_type)
        if dtype not in self.dtypes:
            self.dtypes[dtype] = self.constant(dtype, str(dtype).removeprefix("torch."))
        return self.dtypes[dtype]

    def pointer(self, value: SSAValue) -> str:
        """The buffer's address: read where it is passed when one launch takes the
        buffer, else read once into a local. Locals are the wrapper's frame, which
        CPython pushes on its per-thread stack of 16 KB chunks: a frame that does not
        fit in the current chunk gets a fresh one, mmapped and unmapped at every call
        (with two threads, each unmap interrupts the other core to flush its TLB;
        ShuffleNet-v2's dynamic wrapper, 906 locals, ran 1.1-1.4x slower than its
        static twin at some call depths and not at others)."""
        if value in self.pointers:
            return self.pointers[value]
        if self.launch_uses.get(value, 0) <= 1:
            return f"{self.name(value)}.data_ptr()"
        pointer = self.fresh(f"p_{self.name(value)}", "p")
        self.line(f"{pointer} = {self.name(value)}.data_ptr()")
        self.pointers[value] = pointer
        return pointer

    # -- hooks of the shared walk -------------------------------------------------------

    def prologue(self) -> None:
        for op in self.program.body.block.ops:
            if isinstance(op, LaunchOp):
                for value in {*op.args, *op.outs}:  # in place: an input is an output
                    self.launch_uses[value] = self.launch_uses.get(value, 0) + 1
        self.namespace.update(
            {
                "_empty_strided": EMPTY_STRIDED_CPU,
                "_reinterpret": REINTERPRET,
                "_kernel_failed": _kernel_failed,
                "_bad_argument": _bad_argument,
                "_Tensor": torch.Tensor,
            }
        )
        if GUARDED_ARGUMENTS_ATTR not in self.program.attributes:
            # Under Dynamo (``kiln.guarded_arguments``) its guards checked them already.
            for position, arg in enumerate(self.program.body.block.args):
                self.check_argument(position, arg)
        if self.profile is None and any(
            isinstance(op, LaunchOp) for op in self.program.body.block.ops
        ):
            # Asked once per call: under torch.profiler each launch is a named range.
            self.namespace["_profiler_on"] = PROFILER_ON
            self.namespace["_record_kernel"] = record_kernel
            self.line("_profiling = _profiler_on()")

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

    def prepare_argument(self, arg: SSAValue) -> None:
        name = self.name(arg)
        strides = self.recorded_strides(arg)
        if strides is not None:
            # Read through its strides in place (a copy only if laid out otherwise).
            self.namespace["_in_layout"] = in_layout
            self.line(f"{name} = _in_layout({name}, {strides!r})")
            return
        self.line(f"if not {name}.is_contiguous(): {name} = {name}.contiguous()")

    def allocate(self, ty: MemRefType, shape: list[str]) -> str:
        return f"_empty_strided({py_tuple(shape)}, {self._strides(ty, shape)}, {self.dtype(ty)})"

    def view(self, source: str, ty: MemRefType, shape: list[str]) -> str:
        return f"_reinterpret({source}, {py_tuple(shape)}, {self._strides(ty, shape)}, 0)"

    @staticmethod
    def _strides(ty: MemRefType, shape: list[str]) -> str:
        """Row-major strides: numbers, or under symbolic sizes products of the size
        variables, so that symbolic buffers take the fast allocation and view too
        (``torch.empty`` and ``Tensor.view`` took twice as long a call: 13 allocations
        and 8 views were 20 us of a 0.8 ms LLaMA call under ``dynamic=True``)."""
        if ty.has_static_shape():
            return str(contiguous_strides(ty.get_shape()))
        return py_tuple(contiguous_stride_texts(shape))

    def prepacked_site(self, op: AtenOp) -> Callable[..., Any] | None:
        # Built once per program: the site keeps its packed weight across calls.
        return prepacked_site(op)

    def dropped(self, value: SSAValue) -> list[str]:
        pointer = self.pointers.pop(value, None)
        return [] if pointer is None else [pointer]

    def moved(self, source: SSAValue, result: SSAValue) -> None:
        if source in self.pointers:
            self.pointers[result] = self.pointers.pop(source)

    def launched(self, name: str, call: str) -> None:
        """Kernel ``name``'s launch ``call``: in a ``kiln::<name>`` profiler range while
        ``torch.profiler`` records (``_profiling``), else as it is; or timed by the
        wrapper's own profile (``build_program(..., profile=True)``)."""
        if self.profile is not None:
            self.timed(name, [call])
            return
        self.line("if _profiling:")
        self.line(f"    with _record_kernel({self.labels.get(name, name)!r}):")
        self.line(f"        {call}")
        self.line("else:")
        self.line(f"    {call}")

    def launch(self, op: LaunchOp) -> None:
        name = op.kernel.string_value()
        function = self.kernels.get(name)
        if function is None:
            kernel = SymbolTable.lookup_symbol(self.program, op.kernel)
            if not isinstance(kernel, KernelOp) or CPP_FALLBACK.get(kernel) is None:
                raise WrapperError(
                    f"kernel.launch @{name}: no compiled kernel of that name "
                    "(lower the module with lower-to-cpp first: kiln.targets.lower_for_cpp)"
                )
            module = self.program.parent_op()
            assert isinstance(module, ModuleOp)
            handle = self.constant(InterpretedLaunch(op, kernel, module), name)
            values = [self.name(v) for v in (*op.args, *op.outs)]
            self.launched(name, f"_rc = {handle}({', '.join(values)})")
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
            else self.name(v)
            if isinstance(v.type, IndexType)
            else self.pointer(v)
            for k, v in enumerate((*op.args, *op.outs))
        ]
        self.launched(name, f"_rc = {handle}({', '.join(args)})")
        if copies:
            self.line(f"del {', '.join(copies.values())}")  # the copies die with the launch
        self.line(f"if _rc: _kernel_failed({name!r}, _rc)")


PROFILER_LABEL_NODES = 4
"""FX nodes a kernel's profiler range names (then ``...``)."""


def profiler_label(func: FuncOp) -> str:
    """``kernel3 (convolution, add, relu)``: the kernel's symbol (as in the C++ source and
    the IR) and the FX nodes its provenance names, in order, so that a profile says what
    a kernel computes."""
    nodes: list[str] = []
    for line in func.provenance.data if func.provenance is not None else ():
        _, found, rest = line.data.partition("fx node '")
        node = rest.partition("'")[0]
        if found and node and node not in nodes:
            nodes.append(node)
    if not nodes:
        return func.sym_name.data
    more = ", ..." if len(nodes) > PROFILER_LABEL_NODES else ""
    return f"{func.sym_name.data} ({', '.join(nodes[:PROFILER_LABEL_NODES])}{more})"


def read_after_write(functions: Sequence[FuncOp]) -> dict[str, list[tuple[int, int]]]:
    return {
        func.sym_name.data: pairs for func in functions if (pairs := READ_AFTER_WRITE.get(func))
    }


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
    stage_seconds: dict[str, float] = field(default_factory=dict[str, float])
    """Where the build's time went: ``emit`` (C++ text), ``build`` (compiler or cache,
    loading), ``wrapper`` (the Python wrapper); ``lower-to-cpp`` when the driver lowered."""
    function: str = ""
    """The wrapper's function name."""
    namespace: dict[str, Any] = field(default_factory=dict[str, Any])
    """The objects the wrapper's source names (before it was executed)."""
    kernel_texts: list[KernelText] = field(default_factory=list[KernelText])
    """The kernels' C++, symbols and argument kinds."""
    kernels: dict[str, Callable[..., int]] = field(default_factory=dict[str, Callable[..., int]])
    """The loaded kernels by symbol."""

    def saved(self) -> SavedProgram:
        """The program as data (:mod:`kiln.backends.cpp.saved`); raises
        :class:`~kiln.backends.cpp.saved.NotSaveable` when it cannot be rebuilt faithfully."""
        from kiln.backends.cpp.saved import save_program

        return save_program(
            self.function, self.python_source, self.namespace, self.kernel_texts, self.kernels
        )

    def __call__(self, args: Sequence[Any]) -> tuple[Any, ...]:
        return self.run(list(args))

    def boxed_call(self, args: list[Any]) -> tuple[Any, ...]:
        """Run taking ownership of ``args``: the list is emptied, and each argument
        tensor is released after its last use (AOTAutograd's boxed convention)."""
        return self.run(args)


def build_program(
    module: ModuleOp,
    name: str | None = None,
    profile: bool = False,
    emitted: Mapping[FuncOp, str] | None = None,
) -> CppProgram:
    """Compile the module's ``cpp.func`` kernels and wrap its ``kernel.program`` (the
    module is not modified). The module must be at the cpp level: lowering is the
    driver's (:func:`kiln.targets.build_cpp_program` lowers and calls this); a
    ``kernel.kernel`` left by ``lower-to-cpp{fallback=true}`` (marked
    ``kiln.cpp_fallback``) runs in the reference interpreter. ``profile`` makes the
    wrapper time every launch and extern call (``program.profile``: name -> [calls,
    seconds]). ``emitted``: the C++ of functions the caller already emitted."""
    start = time.perf_counter()
    try:
        program = find_program(module, name)
    except ProgramNotFound as e:
        raise WrapperError(str(e)) from None
    unlowered = [
        op.sym_name.data
        for op in module.body.block.ops
        if isinstance(op, KernelOp) and CPP_FALLBACK.get(op) is None
    ]
    if unlowered:
        raise WrapperError(
            f"the C++ backend runs cpp-level IR, but @{unlowered[0]} is still a kernel.kernel: "
            "run lower-to-cpp first (kiln.targets.build_cpp_program does)"
        )
    functions = cpp_functions(module)
    loaded = load_kernels(functions, emitted)
    timings: dict[str, list[float]] | None = {} if profile else None
    writer = _Writer(
        program,
        profile=timings,
        kernels=loaded.functions,
        hazards=read_after_write(functions),
        labels={func.sym_name.data: profiler_label(func) for func in functions},
    )
    wrapper_start = time.perf_counter()
    python = writer.write()
    namespace = dict(writer.namespace)
    exec(compile(python, f"<kiln wrapper {program.sym_name.data}>", "exec"), namespace)
    run = namespace[program.sym_name.data]
    end = time.perf_counter()
    return CppProgram(
        run,
        "\n".join(loaded.sources),
        python,
        loaded.paths,
        loaded.cache_hits == len(loaded.sources),
        end - start,
        timings,
        {
            "emit": loaded.emit_seconds,
            "build": loaded.build_seconds,
            "wrapper": end - wrapper_start,
        },
        program.sym_name.data,
        dict(writer.namespace),
        loaded.kernels,
        loaded.functions,
    )


__all__ = ["CppProgram", "WrapperError", "build_program"]

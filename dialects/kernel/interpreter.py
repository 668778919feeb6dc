"""The kernel reference interpreter: runs ``kernel.program`` on torch tensors.

Built on xDSL's interpreter framework, on top of the loop interpreter: a
``kernel.launch`` runs the kernel's nodes in order with
:class:`~kiln.dialects.loop.interpreter.LoopFunctions`, keeping kernel-local values as
tensors, and copies each yielded value into its ``outs`` buffer as soon as its node has
run (so a later node of the same kernel that reads a buffer updated in place sees the
new contents, as it would on a device); a ``loop.scatter`` node adds its values into
its buffer instead (atomic adds on a device). ``kernel.extern`` bodies run through the aten
interpreter.

To catch scheduling bugs, memory is poisoned: new and reused buffers start as NaN (or
an odd integer pattern), and a freed buffer is overwritten with it, so reading a buffer
before it is written or after it is freed gives visibly wrong results.
:class:`MemoryTrace` counts the bytes of live program-owned buffers (arguments excluded)
and their peak.

```python
module = Parser(make_context(), text).parse_module()
results, trace = run_program(module, [torch.randn(4, 8)])
```
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from xdsl.dialects.builtin import MemRefType, ModuleOp, SymbolRefAttr
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    PythonValues,
    ReturnedValues,
    TerminatorValue,
    impl,
    impl_callable,
    impl_terminator,
    register_impls,
)
from xdsl.ir import SSAValue
from xdsl.traits import SymbolTable
from xdsl.utils.exceptions import InterpretationError

from kiln.dialects.aten.arg_layout import program_arg_strides
from kiln.dialects.aten.interpreter import ArgumentError
from kiln.dialects.aten.traits import Collective, has_aten_trait
from kiln.dialects.kernel.kernel_ops import KernelOp, YieldOp
from kiln.dialects.kernel.program_ops import (
    AllocOp,
    ExternOp,
    FreeOp,
    LaunchOp,
    ProgramNotFound,
    ProgramOp,
    ReturnOp,
    ReuseOp,
    find_program,
)
from kiln.dialects.loop.body_eval import torch_dtype
from kiln.dialects.loop.interpreter import (
    check_buffer_argument,
    make_loop_interpreter,
)
from kiln.dialects.loop.ops import ScatterOp


@dataclass
class MemoryTrace:
    """Bytes of live program-owned buffers over one run."""

    live: int = 0
    peak: int = 0
    allocations: int = 0
    """Buffers obtained from the allocator (``kernel.alloc`` and extern results)."""
    reuses: int = 0

    def allocate(self, tensor: torch.Tensor) -> None:
        self.live += tensor.numel() * tensor.element_size()
        self.peak = max(self.peak, self.live)
        self.allocations += 1

    def release(self, tensor: torch.Tensor) -> None:
        self.live -= tensor.numel() * tensor.element_size()


def poison(tensor: torch.Tensor) -> None:
    """Overwrite with values no correct program computes from random inputs."""
    if tensor.dtype.is_floating_point or tensor.dtype.is_complex:
        tensor.fill_(float("nan"))
    elif tensor.dtype == torch.bool:
        tensor.fill_(True)
    elif tensor.dtype == torch.uint8:
        tensor.fill_(0xA5)
    else:
        # Wrapped to the dtype first: fill_ of a 0-d int8/int16 tensor rejects a value
        # out of its range (larger tensors wrap it silently).
        tensor.fill_(torch.tensor(-0x5A5A5A5).to(tensor.dtype).item())


@dataclass
class KernelFunctions(InterpreterFunctions):
    """Runs ``kernel.program`` and the ops in it."""

    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    trace: MemoryTrace = field(default_factory=MemoryTrace)
    _kernels: dict[str, KernelOp] = field(default_factory=dict[str, KernelOp])

    @impl_callable(ProgramOp)
    def call_program(
        self, interpreter: Interpreter, op: ProgramOp, args: PythonValues
    ) -> PythonValues:
        return interpreter.run_ssacfg_region(op.body, args, op.sym_name.data)

    @impl_terminator(ReturnOp)
    def run_return(
        self, interpreter: Interpreter, op: ReturnOp, args: PythonValues
    ) -> tuple[TerminatorValue, PythonValues]:
        return ReturnedValues(args), ()

    @impl_terminator(YieldOp)
    def run_yield(
        self, interpreter: Interpreter, op: YieldOp, args: PythonValues
    ) -> tuple[TerminatorValue, PythonValues]:
        return ReturnedValues(args), ()

    @impl(AllocOp)
    def run_alloc(self, interpreter: Interpreter, op: AllocOp, args: PythonValues) -> PythonValues:
        ty = op.result.type
        assert isinstance(ty, MemRefType)
        dynamic = iter(int(a) for a in args)
        shape = [d if d >= 0 else next(dynamic) for d in ty.get_shape()]
        tensor = torch.empty(shape, dtype=torch_dtype(ty.element_type), device=self.device)
        poison(tensor)
        self.trace.allocate(tensor)
        return (tensor,)

    @impl(FreeOp)
    def run_free(self, interpreter: Interpreter, op: FreeOp, args: PythonValues) -> PythonValues:
        (tensor,) = args
        poison(tensor)
        self.trace.release(tensor)
        return ()

    @impl(ReuseOp)
    def run_reuse(self, interpreter: Interpreter, op: ReuseOp, args: PythonValues) -> PythonValues:
        (source,) = args
        ty = op.result.type
        assert isinstance(ty, MemRefType)
        shape = [d if d >= 0 else source.shape[i] for i, d in enumerate(ty.get_shape())]
        tensor = source.view(-1).view(shape)
        poison(tensor)
        self.trace.reuses += 1
        return (tensor,)

    @impl(ExternOp)
    def run_extern(
        self, interpreter: Interpreter, op: ExternOp, args: PythonValues
    ) -> PythonValues:
        results = interpreter.run_ssacfg_region(op.body, args, op.name)
        out: list[object] = []
        collective = _starts_collective(op)
        for value, result in zip(results, op.outputs, strict=True):
            if isinstance(result.type, MemRefType):
                if not isinstance(value, torch.Tensor):
                    raise InterpretationError(f"{op.name} yielded {value!r} for a buffer")
                if not (collective and value.is_contiguous() and value.storage_offset() == 0):
                    # A fresh buffer, never an alias of an input (ATen may return views).
                    # Not a collective's result: the communication is still writing it,
                    # and its wait_tensor finds it by its storage.
                    value = value.clone(memory_format=torch.contiguous_format)
                self.trace.allocate(value)
            out.append(value)
        return tuple(out)

    def _kernel(self, interpreter: Interpreter, symbol: SymbolRefAttr) -> KernelOp:
        name = symbol.string_value()
        kernel = self._kernels.get(name)
        if kernel is None:
            found = SymbolTable.lookup_symbol(interpreter.module, symbol)
            if not isinstance(found, KernelOp):
                raise InterpretationError(f"no kernel.kernel @{name}")
            kernel = self._kernels[name] = found
        return kernel

    @impl(LaunchOp)
    def run_launch(
        self, interpreter: Interpreter, op: LaunchOp, args: PythonValues
    ) -> PythonValues:
        kernel = self._kernel(interpreter, op.kernel)
        n_args = len(op.args)
        kernel_args, outs = args[:n_args], args[n_args:]
        block = kernel.body.block
        destinations: dict[SSAValue, list[torch.Tensor]] = {}
        for value, out in zip(kernel.yield_op().values, outs, strict=True):
            destinations.setdefault(value, []).append(out)
        interpreter.push_scope(kernel.sym_name.data)
        try:
            interpreter.set_values(zip(block.args, kernel_args, strict=False))
            for node in kernel.nodes():
                results = interpreter.run_op(node, interpreter.get_values(node.operands))
                interpreter.set_values(zip(node.results, results, strict=False))
                # A scatter adds into its buffer (zero-filled by an earlier launch).
                accumulate = isinstance(node, ScatterOp)
                for result, value in zip(node.results, results, strict=True):
                    for out in destinations.get(result, ()):
                        if accumulate:
                            out.view(-1).add_(value.reshape(-1))
                        else:
                            out.view(-1).copy_(value.reshape(-1))
        finally:
            interpreter.pop_scope()
        return ()


def _starts_collective(op: ExternOp) -> bool:
    return any(has_aten_trait(inner, Collective) for inner in op.body.block.ops)


register_impls(KernelFunctions)


def make_kernel_interpreter(
    module: ModuleOp, device: torch.device | None = None
) -> tuple[Interpreter, KernelFunctions]:
    """An interpreter for kernel IR (with the loop and aten interpreters it builds on)."""
    device = device or torch.device("cpu")
    interpreter = make_loop_interpreter(module, device)
    functions = KernelFunctions(device=device)
    interpreter.register_implementations(functions)
    return interpreter, functions


def run_program(
    module: ModuleOp, args: Sequence[object], name: str = "forward"
) -> tuple[tuple[object, ...], MemoryTrace]:
    """Run ``kernel.program @name`` on torch tensors / Python ints; also the memory trace."""
    try:
        program = find_program(module, name)
    except ProgramNotFound as e:
        raise ArgumentError(str(e)) from None
    inputs = program.function_type.inputs.data
    if len(args) != len(inputs):
        raise ArgumentError(f"@{name} takes {len(inputs)} arguments, got {len(args)}")
    layouts = program_arg_strides(program.arg_attrs, len(inputs))
    checked = [
        check_buffer_argument(i, ty, v, layouts[i])
        for i, (ty, v) in enumerate(zip(inputs, args, strict=True))
    ]
    device = next((v.device for v in checked if isinstance(v, torch.Tensor)), torch.device("cpu"))
    interpreter, functions = make_kernel_interpreter(module, device)
    results = tuple(interpreter.call_op(program, tuple(checked)))
    return results, functions.trace


__all__ = [
    "KernelFunctions",
    "MemoryTrace",
    "find_program",
    "make_kernel_interpreter",
    "poison",
    "run_program",
]

"""``kernel.program`` as a Python function ``call(args)``: the launch sequence.

Printed straight from the program, op by op:

* ``kernel.alloc`` -> ``buf0 = empty_strided((2, 5, 16), (80, 16, 1), dtype=..., device=device)``;
* ``kernel.launch @kernel0`` -> ``run_kiln_per_fused_sum_0(stream, x, buf0)``: a runner
  the runtime provides (it picks the grid and launches the compiled kernel);
* ``kernel.extern`` -> its body inline, as the C++ wrapper writes it
  (:func:`~kiln.backends.cpp.externs.inline_extern`: ATen's Python bindings such as
  ``_mm``, ``as_strided`` as ``_reinterpret_tensor`` views, temporaries deleted after);
  a body that needs the aten interpreter -> one ``aten.<op>.<overload>(...)`` call per
  op. A result that is not a fresh contiguous tensor is copied, since buffers are
  contiguous and the program may overwrite them;
* ``kernel.free`` -> ``del buf0``; ``kernel.reuse`` -> ``buf3 = reinterpret(buf0, shape)``
  then ``del buf0`` (no name may keep memory alive past its planned free);
* the arguments: ``args.clear()`` after unpacking (AOTAutograd's boxed convention, see
  ``TritonProgram.boxed_call``) and ``del`` after each one's last use;
* size computations (``arith`` on ``index``, ``memref.dim``) -> Python integer arithmetic;
* ``kernel.return`` -> the tuple of results (contiguous buffers of the program's types).

Program arguments must be contiguous; ``as_buffer`` copies those that are not.
Constants too big to print (``aten.constant`` tensors) become ``constants[k]``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    MemRefType,
    StringAttr,
)
from xdsl.ir import Operation, SSAValue

from kiln.backends.cpp.externs import inline_extern
from kiln.backends.host_scalars import HELPERS as HOST_HELPERS
from kiln.backends.host_scalars import constant_python, scalar_python
from kiln.dialects.aten import AtenOp
from kiln.dialects.aten.dialect import ConstantOp as AtenConstantOp
from kiln.dialects.aten.encoding import decode_value
from kiln.dialects.aten.layout_constraints import adapted_overload
from kiln.dialects.aten.schema import ArgKind
from kiln.dialects.kernel.kernel_ops import YieldOp
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
from kiln.passes.scheduling.liveness import argument_releases

INDENT = "    "


class WrapperError(ValueError):
    """A program op the wrapper cannot print."""


class _Source:
    """A value whose repr is Python source (a variable name or expression)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def py_value(value: Any) -> str:
    """Python source for an argument value torch expects."""
    if isinstance(value, _Source):
        return value.text
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, float):
        if math.isnan(value):
            return 'float("nan")'
        if math.isinf(value):
            return 'float("inf")' if value > 0 else 'float("-inf")'
        return repr(value)
    if isinstance(value, int | str):
        return repr(value)
    if isinstance(value, list | tuple):
        items = ", ".join(py_value(v) for v in value)  # pyright: ignore[reportUnknownVariableType]
        return (
            f"[{items}]"
            if isinstance(value, list)
            else f"({items}{',' if len(value) == 1 else ''})"
        )  # pyright: ignore[reportUnknownArgumentType]
    if isinstance(value, torch.dtype | torch.layout | torch.memory_format):
        return str(value)
    if isinstance(value, torch.device):
        return f"torch.device({str(value)!r})"
    raise WrapperError(f"cannot write {value!r} as Python source")


def _product(a: str, b: str) -> str:
    if a.isdigit() and b.isdigit():
        return str(int(a) * int(b))
    if a == "1":
        return b
    if b == "1":
        return a
    return f"{a} * {b}"


def contiguous_strides(shape: Sequence[str]) -> list[str]:
    """Row-major strides of a shape given as source text (ints or size variables)."""
    strides: list[str] = []
    stride = "1"
    for size in reversed(shape):
        strides.append(stride)
        stride = _product(stride, size)
    return list(reversed(strides))


@dataclass
class WrapperPrinter:
    """Prints one program as ``def call(args)`` (see the module docstring)."""

    program: ProgramOp
    runners: dict[str, str]
    """``kernel.kernel`` name -> the name of the runner that launches its Triton kernel."""
    lines: list[str] = field(default_factory=list[str])
    names: dict[SSAValue, str] = field(default_factory=dict[SSAValue, str])
    taken: set[str] = field(default_factory=set[str])
    constants: list[DenseIntOrFPElementsAttr] = field(
        default_factory=list[DenseIntOrFPElementsAttr]
    )
    namespace: dict[str, Any] = field(default_factory=dict[str, Any])
    """Objects the inlined extern bodies use (``_c0``, ...): ATen bindings, decoded
    constant arguments; the runtime defines them in the loaded module."""
    counter: int = 0

    def fresh(self, hint: str | None, prefix: str = "buf") -> str:
        base = hint if hint and hint.isidentifier() and not hint.startswith("_") else None
        if base is None or base in self.taken or base in _RESERVED_NAMES:
            while f"{prefix}{self.counter}" in self.taken:
                self.counter += 1
            base = f"{prefix}{self.counter}"
            self.counter += 1
        self.taken.add(base)
        return base

    def name(self, value: SSAValue) -> str:
        found = self.names.get(value)
        if found is None:
            raise WrapperError(f"value used before it is defined in @{self.program.sym_name.data}")
        return found

    def emit(self, line: str, indent: int = 1) -> None:
        self.lines.append(f"{INDENT * indent}{line}")

    # -- sizes -----------------------------------------------------------------------

    def shape(self, ty: MemRefType, dynamic: Sequence[SSAValue]) -> list[str]:
        sizes = iter(self.name(v) for v in dynamic)
        return [str(d) if d >= 0 else next(sizes) for d in ty.get_shape()]

    # -- ops ------------------------------------------------------------------------------

    def print(self) -> str:
        block = self.program.body.block
        params: list[str] = []
        arg_attrs = self.program.arg_attrs
        for k, arg in enumerate(block.args):
            hint = arg.name_hint
            if arg_attrs is not None and isinstance(
                name := arg_attrs.data[k].data.get("kiln.name"), StringAttr
            ):
                hint = hint or name.data
            params.append(self.fresh(_identifier(hint), "arg"))
            self.names[arg] = params[-1]
        self.emit("def call(args):", 0)
        if params:
            self.emit(f"{', '.join(params)}{',' if len(params) == 1 else ''} = args")
            # Boxed calling convention (as AOTAutograd's and Inductor's): the caller
            # hands over the list, so an argument is freed once its last use is done.
            self.emit("args.clear()")
        tensors = [
            p for p, a in zip(params, block.args, strict=True) if isinstance(a.type, MemRefType)
        ]
        # The graph's device, fixed at compile time (kiln.devices): a graph whose tensors
        # are all made inside it still allocates on the GPU, and a CPU 0-d argument of a
        # CUDA graph is moved there.
        self.emit("device = default_device")
        for p in tensors:
            self.emit(f"{p} = as_buffer({p}, device)")
        self.emit("stream = get_stream(device)")
        released = argument_releases(self.program)
        self.release(released.get(None, []))
        for op in block.ops:
            self.op(op)
            self.release(released.get(op, []))
        return "\n".join(self.lines)

    def release(self, arguments: list[SSAValue]) -> None:
        if arguments:
            self.emit(f"del {', '.join(self.name(a) for a in arguments)}")

    def op(self, op: Operation) -> None:
        if isinstance(op, AllocOp):
            ty = op.result.type
            assert isinstance(ty, MemRefType)
            shape = self.shape(ty, op.dynamic_sizes)
            name = self.fresh(_identifier(op.result.name_hint))
            self.names[op.result] = name
            dtype = torch_dtype(ty.element_type)
            self.emit(
                f"{name} = empty_strided({_tuple(shape)}, {_tuple(contiguous_strides(shape))}, "
                f"dtype={dtype}, device=device)"
            )
        elif isinstance(op, LaunchOp):
            kernel = op.kernel.string_value()
            runner = self.runners.get(kernel)
            if runner is None:
                raise WrapperError(f"no Triton kernel implements @{kernel} (run lower-to-triton)")
            # the kernel's parameters: input buffers, output buffers, then sizes
            buffers = [v for v in op.args if isinstance(v.type, MemRefType)]
            sizes = [v for v in op.args if not isinstance(v.type, MemRefType)]
            args = [self.name(v) for v in (*buffers, *op.outs, *sizes)]
            self.emit(f"{runner}(stream, {', '.join(args)})")
        elif isinstance(op, ExternOp):
            self.extern(op)
        elif isinstance(op, FreeOp):
            self.emit(f"del {self.name(op.buffer)}")
        elif isinstance(op, ReuseOp):
            ty = op.result.type
            assert isinstance(ty, MemRefType)
            source = self.name(op.source)
            name = self.fresh(_identifier(op.result.name_hint))
            self.names[op.result] = name
            shape = [
                str(d) if d >= 0 else f"{source}.shape[{k}]" for k, d in enumerate(ty.get_shape())
            ]
            self.emit(
                f"{name} = reinterpret({source}, {_tuple(shape)})  # reuses {source}'s memory"
            )
            # The old name would keep the memory alive past the new buffer's free.
            self.emit(f"del {source}")
        elif isinstance(op, ReturnOp):
            values = [self.name(v) for v in op.values]
            self.emit(f"return ({', '.join(values)}{',' if len(values) == 1 else ''})")
        else:
            self.scalar(op)

    def scalar(self, op: Operation) -> None:
        """Host arithmetic on sizes and scalars (see :mod:`kiln.backends.host_scalars`)."""
        if isinstance(op, arith.ConstantOp) and (literal := constant_python(op)) is not None:
            self.names[op.result] = literal
            return
        if isinstance(op, memref.DimOp):
            source = self.name(op.source)
            index = self.name(op.index)
            expr = f"{source}.shape[{index}]"
        elif len(op.results) == 1 and (
            text := scalar_python(op, [self.name(v) for v in op.operands])
        ):
            expr = text
            self.namespace.update(HOST_HELPERS)
        else:
            raise WrapperError(f"cannot run {op.name} in a kernel.program wrapper")
        name = self.fresh(_identifier(op.results[0].name_hint), "s")
        self.names[op.results[0]] = name
        self.emit(f"{name} = {expr}")

    def extern(self, op: ExternOp) -> None:
        inputs = [self.name(v) for v in (*op.inputs, *op.syms)]
        outputs = [self.fresh(_identifier(r.name_hint)) for r in op.outputs]
        lines = inline_extern(op, inputs, outputs, self.namespace, lambda: self.fresh(None, "tmp"))
        if lines is not None:
            # Python bindings and reinterpret views, as the C++ wrapper runs externs
            # (the aten.<op> OpOverloads below go through the boxed dispatcher).
            overloads = [o.overload_name for o in op.body.block.ops if isinstance(o, AtenOp)]
            self.emit(f"# kernel.extern: {', '.join(overloads) or 'no ATen call'}")
            for result, name in zip(op.outputs, outputs, strict=True):
                self.names[result] = name
            for line in lines:
                self.emit(line)
            self.kernel_inputs_on_device(op)
            return
        for name in outputs:
            self.taken.discard(name)
        self.extern_overloads(op)
        self.kernel_inputs_on_device(op)

    def kernel_inputs_on_device(self, op: ExternOp) -> None:
        """An extern's result that a kernel reads is moved to the program's device: ATen
        may make it on the CPU (a wrapped scalar, ``scalar_tensor`` without a device, a
        tensor constant such as the indices of ``x[torch.tensor([0, 2])]``), which eager
        mixes into GPU ops but a Triton kernel cannot read. The move keeps the strides."""
        for result in op.outputs:
            if isinstance(result.type, MemRefType) and any(
                isinstance(use.operation, LaunchOp) for use in result.uses
            ):
                name = self.name(result)
                self.emit(f"{name} = on_device({name}, device)")

    def extern_overloads(self, op: ExternOp) -> None:
        """An extern body as ``aten.<op>.<overload>(...)`` calls (for bodies that
        :func:`~kiln.backends.cpp.externs.inline_extern` leaves to the interpreter)."""
        body = op.body.block
        values: dict[SSAValue, str] = {}
        for arg, value in zip(body.args, [*op.inputs, *op.syms], strict=True):
            values[arg] = self.name(value)
        overloads = [o.overload_name for o in body.ops if isinstance(o, AtenOp)]
        self.emit(f"# kernel.extern: {', '.join(overloads) or 'no ATen call'}")
        inputs = [self.name(v) for v in op.inputs]
        temporaries: list[str] = []
        for inner in body.ops:
            if isinstance(inner, YieldOp):
                for result, value in zip(op.outputs, inner.values, strict=True):
                    name = self.fresh(_identifier(result.name_hint))
                    self.names[result] = name
                    if isinstance(result.type, MemRefType):
                        self.emit(
                            f"{name} = fresh_buffer({values[value]}, ({', '.join(inputs)}{',' if len(inputs) == 1 else ''}))"
                        )
                    else:
                        self.emit(f"{name} = {values[value]}")
                if temporaries:
                    # A temporary naming an extern's result would keep that buffer alive
                    # after the program frees it.
                    self.emit(f"del {', '.join(temporaries)}")
                return
            if isinstance(inner, AtenConstantOp):
                self.constants.append(inner.value)
                name = self.fresh(None, "tmp")
                values[inner.result] = name
                temporaries.append(name)
                self.emit(f"{name} = constants.get({len(self.constants) - 1}, device)")
                continue
            if not isinstance(inner, AtenOp):
                raise WrapperError(f"cannot run {inner.name} in a kernel.extern")
            call = self.aten_call(inner, values)
            names = [self.fresh(None, "tmp") for _ in inner.results]
            for result, name in zip(inner.results, names, strict=True):
                values[result] = name
            temporaries += names
            if not names:
                self.emit(call)
            elif _returns_list(inner) or len(names) > 1:
                self.emit(f"{', '.join(names)}{',' if len(names) == 1 else ''} = {call}")
            else:
                self.emit(f"{names[0]} = {call}")

    def aten_call(self, op: AtenOp, values: dict[SSAValue, str]) -> str:
        schema = op.op_schema()
        tensors = op.tensor_operands()
        syms = [_Source(values[v]) for v in op.sym_operands()]
        positional: list[str] = []
        keywords: list[str] = []
        by_keyword = False
        for spec in schema.arguments:
            if spec.kind.is_tensor:
                operands = tensors[spec.name]
                if spec.kind in (ArgKind.TENSOR, ArgKind.OPT_TENSOR):
                    text = None if not operands else values[operands[0]]  # pyright: ignore[reportArgumentType]
                    if text is not None and spec.mutable:
                        text = f"{text}.clone()"
                else:
                    items = [
                        "None" if v is None else values[v] + (".clone()" if spec.mutable else "")
                        for v in operands
                    ]
                    text = f"[{', '.join(items)}]"
            else:
                attr = op.arg_attr(spec.name)
                text = None if attr is None else py_value(decode_value(spec, attr, syms))
            if text is None:
                if spec.has_default:
                    by_keyword = True
                    continue
                text = "None"
            if spec.kwarg_only or by_keyword:
                keywords.append(f"{spec.name}={text}")
            else:
                positional.append(text)
        namespace = schema.namespace
        target = (
            f"torch.ops.{namespace}.{schema.qualified_name}"
            if namespace != "aten"
            else f"aten.{schema.qualified_name}"
        )
        if "." not in schema.qualified_name:
            target += ".default"
        adapter = adapted_overload(f"{namespace}::{schema.qualified_name}")
        if adapter is not None:
            target = adapter.__name__.lstrip("_")
            self.namespace[target] = adapter
        return f"{target}({', '.join([*positional, *keywords])})"


def _returns_list(op: AtenOp) -> bool:
    return any(r.kind is ArgKind.TENSOR_LIST for r in op.op_schema().returns)


_RESERVED_NAMES = frozenset(
    {
        "args",
        "device",
        "stream",
        "call",
        "torch",
        "aten",
        "math",
        "constants",
        "empty_strided",
        "as_buffer",
        "on_device",
        "fresh_buffer",
        "reinterpret",
        "get_stream",
        "default_device",
        "triton",
        "tl",
        "libdevice",
    }
)


def _identifier(hint: str | None) -> str | None:
    if not hint:
        return None
    text = "".join(c if c.isalnum() or c == "_" else "_" for c in hint)
    if not text or text[0].isdigit():
        text = f"v_{text}"
    return text


def _tuple(items: Sequence[str]) -> str:
    return f"({', '.join(items)}{',' if len(items) == 1 else ''})"


WRAPPER_HEADER = """aten = torch.ops.aten
empty_strided = torch.empty_strided
# When kiln.backends.triton.runtime loads this module it defines what call() uses
# besides torch: the launchers run_<kernel>, get_stream, as_buffer, fresh_buffer,
# reinterpret, constants and default_device, and the ATen bindings and constant
# arguments (_c0, _c1, ...) that the inlined extern bodies call."""


def print_wrapper(
    program: ProgramOp, runners: dict[str, str]
) -> tuple[str, list[DenseIntOrFPElementsAttr], dict[str, Any]]:
    """The ``call`` function's source, the constants it reads (``constants[k]``) and
    the objects its inlined externs use (module-level names ``_c0``, ...)."""
    printer = WrapperPrinter(program, runners)
    source = printer.print()
    return source, printer.constants, printer.namespace


__all__ = ["WRAPPER_HEADER", "WrapperError", "WrapperPrinter", "print_wrapper", "py_value"]

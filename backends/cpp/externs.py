"""Running ``kernel.extern`` bodies (ATen calls: mm, convolution, fallbacks) at run time.

Each body becomes a small generated Python function calling ATen directly, with the
constant arguments decoded once at build time::

    def extern(a, w):
        t0 = a.as_strided((128, 128), (128, 1))
        t1 = w.as_strided((128, 128), (1, 128))
        t2 = _mm(t0, t1)                # torch.mm
        return (t2,)

The ops that externs are mostly made of (``mm``, ``bmm``, ``addmm``, ``convolution``,
``as_strided``) are called through their Python bindings, which skip the boxed
dispatcher (about 3 microseconds per op here); any other op through its ``OpOverload``;
an op with symbolic arguments through the aten interpreter's call plan; a body with
non-aten ops through the interpreter. Tensor results are made buffers the C++ kernels
can index: contiguous from offset 0 and never an alias of an input (ATen may return
views).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    PythonValues,
    ReturnedValues,
    TerminatorValue,
    impl_terminator,
    register_impls,
)
from xdsl.ir import Operation, SSAValue

from kiln.dialects.aten.dialect import ConstantOp
from kiln.dialects.aten.encoding import collect_sym_refs, decode_value
from kiln.dialects.aten.interpreter import (
    build_plan,
    dense_to_tensor,
    make_interpreter,
    torch_overload,
)
from kiln.dialects.aten.ops import AtenOp
from kiln.dialects.aten.schema import ArgKind
from kiln.dialects.kernel.kernel_ops import YieldOp
from kiln.dialects.kernel.program_ops import ExternOp

FAST_CALLS: dict[str, Callable[..., Any]] = {
    "aten::mm.default": torch.mm,
    "aten::bmm.default": torch.bmm,
    "aten::addmm.default": torch.addmm,
    "aten::baddbmm.default": torch.baddbmm,
    "aten::convolution.default": torch.convolution,
}
"""Overloads whose Python binding takes exactly the schema's arguments."""


FRESH_RESULTS = frozenset(FAST_CALLS)
"""Overloads whose result is a newly allocated tensor, never a view of an input."""


def as_buffer(value: torch.Tensor, inputs: Sequence[Any], fresh: bool = False) -> torch.Tensor:
    """``value`` as a buffer a kernel may read and later overwrite (``fresh``: it cannot
    alias an input, so only its layout is checked)."""
    if value.is_contiguous() and value.storage_offset() == 0:
        if fresh:
            return value
        storage = value.untyped_storage().data_ptr()
        if not any(
            isinstance(x, torch.Tensor) and x.untyped_storage().data_ptr() == storage
            for x in inputs
        ):
            return value
    return value.clone(memory_format=torch.contiguous_format)


class _Body:
    """Writes one extern body as Python source."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.names: dict[SSAValue, str] = {}
        self.namespace: dict[str, Any] = {}

    def name(self, value: SSAValue) -> str:
        if value not in self.names:
            self.names[value] = f"t{len(self.names)}"
        return self.names[value]

    def constant(self, value: Any) -> str:
        if value is None or isinstance(value, bool | int):
            return repr(value)
        if isinstance(value, float) and math.isfinite(value):
            return repr(value)
        if isinstance(value, list | tuple) and all(
            isinstance(v, int) and not isinstance(v, bool)
            for v in value  # pyright: ignore[reportUnknownVariableType]
        ):
            return repr(tuple(value))  # pyright: ignore[reportUnknownArgumentType]
        name = f"_c{len(self.namespace)}"
        self.namespace[name] = value
        return name

    def op(self, op: Operation) -> bool:
        """Write ``op``; False if only the interpreter can run it."""
        if isinstance(op, ConstantOp):
            tensor = dense_to_tensor(op.value, torch.device("cpu"))
            self.lines.append(f"{self.name(op.result)} = {self.constant(tensor)}")
            return True
        if not isinstance(op, AtenOp):
            return False
        call = self._direct_call(op)
        if call is None:
            plan = self.constant(build_plan(op))
            operands = ", ".join(self.name(v) for v in op.operands)
            call = f"{plan}.run(({operands}{',' if len(op.operands) == 1 else ''}))"
            targets = ", ".join(self.name(r) for r in op.results)
            self.lines.append(f"({targets}{',' if len(op.results) == 1 else ''}) = {call}")
        else:
            self.lines.append(f"{self.name(op.results[0])} = {call}")
        return True

    def _direct_call(self, op: AtenOp) -> str | None:
        """A direct call for an op with one tensor result and constant arguments."""
        schema = op.op_schema()
        if (
            len(op.results) != 1
            or len(schema.returns) != 1
            or schema.returns[0].kind is not ArgKind.TENSOR
        ):
            return None
        tensors = op.tensor_operands()
        positional: list[str] = []
        keywords: list[str] = []
        by_keyword = False
        for spec in schema.arguments:
            if spec.mutable:
                return None
            if spec.kind.is_tensor:
                if spec.kind in (ArgKind.TENSOR_LIST, ArgKind.OPT_TENSOR_LIST):
                    items = tensors[spec.name]
                    text = (
                        "[" + ", ".join("None" if v is None else self.name(v) for v in items) + "]"
                    )
                elif tensors[spec.name]:
                    value = tensors[spec.name][0]
                    assert value is not None
                    text = self.name(value)
                elif spec.has_default:
                    by_keyword = True
                    continue
                else:
                    text = "None"
            else:
                attr = op.arg_attr(spec.name)
                if attr is None:
                    if spec.has_default:
                        by_keyword = True
                        continue
                    text = "None"
                elif collect_sym_refs(attr):
                    return None
                else:
                    text = self.constant(decode_value(spec, attr, ()))
            if spec.kwarg_only or by_keyword:
                keywords.append(f"{spec.name}={text}")
            else:
                positional.append(text)
        overload = f"{schema.namespace}::{schema.qualified_name}"
        if overload == "aten::as_strided.default":
            return f"{positional[0]}.as_strided({', '.join(positional[1:] + keywords)})"
        function = FAST_CALLS.get(overload) if not keywords else None
        callee = self.constant(function if function is not None else torch_overload(overload))
        return f"{callee}({', '.join(positional + keywords)})"


def compile_body(op: ExternOp) -> Callable[..., tuple[Any, ...]] | None:
    """The body as a Python function of the inputs, or None if it needs the interpreter."""
    writer = _Body()
    block = op.body.block
    args = [writer.name(a) for a in block.args]
    for inner in block.ops:
        if isinstance(inner, YieldOp):
            values = ", ".join(writer.name(v) for v in inner.values)
            writer.lines.append(f"return ({values}{',' if len(inner.values) == 1 else ''})")
            break
        if not writer.op(inner):
            return None
    source = f"def extern({', '.join(args)}):\n" + "".join(f"    {line}\n" for line in writer.lines)
    namespace = dict(writer.namespace)
    exec(compile(source, "<kiln extern>", "exec"), namespace)
    function = namespace["extern"]
    function.source = source
    return function


class ExternCall:
    """A compiled ``kernel.extern``: ``call(*inputs)`` returns its results as a tuple."""

    def __init__(self, op: ExternOp, module: ModuleOp) -> None:
        self.name = (
            ", ".join(
                inner.overload_name for inner in op.body.block.ops if isinstance(inner, AtenOp)
            )
            or "extern"
        )
        self.buffer_results = tuple(isinstance(r.type, MemRefType) for r in op.outputs)
        self.fresh_results = _fresh_results(op)
        self._body = compile_body(op)
        self._op = op
        self._module = module

    def __call__(self, *inputs: Any) -> tuple[Any, ...]:
        values = self._body(*inputs) if self._body is not None else self._interpret(inputs)
        return tuple(
            as_buffer(v, inputs, fresh) if is_buffer and isinstance(v, torch.Tensor) else v
            for v, is_buffer, fresh in zip(
                values, self.buffer_results, self.fresh_results, strict=True
            )
        )

    def _interpret(self, inputs: Sequence[Any]) -> tuple[Any, ...]:
        interpreter = make_interpreter(self._module)
        interpreter.register_implementations(_KernelYield())
        return tuple(interpreter.run_ssacfg_region(self._op.body, tuple(inputs), "extern"))


def _fresh_results(op: ExternOp) -> tuple[bool, ...]:
    """Per output: whether it is yielded straight from an op in :data:`FRESH_RESULTS`."""
    yielded = op.body.block.last_op
    if not isinstance(yielded, YieldOp):
        return tuple(False for _ in op.outputs)
    return tuple(
        isinstance(v.owner, AtenOp) and v.owner.overload_name in FRESH_RESULTS
        for v in yielded.values
    )


@register_impls
class _KernelYield(InterpreterFunctions):
    """``kernel.yield`` ends an extern body (for the interpreter fallback)."""

    @impl_terminator(YieldOp)
    def run_yield(
        self, interpreter: Interpreter, op: YieldOp, args: PythonValues
    ) -> tuple[TerminatorValue, PythonValues]:
        return ReturnedValues(args), ()


__all__ = ["FAST_CALLS", "ExternCall", "as_buffer", "compile_body"]

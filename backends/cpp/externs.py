"""Running ``kernel.extern`` bodies (ATen calls: mm, convolution, fallbacks) at run time.

An :class:`ExternCall` precomputes, for each aten op of the body, the torch call
(:func:`kiln.dialects.aten.interpreter.build_plan`: the overload, decoded arguments)
so that a call is a few Python steps per op. Bodies with other ops (``arith`` on sizes)
run through the aten interpreter instead. Tensor results are made buffers the C++
kernels can index: contiguous from offset 0 and never an alias of an input (ATen may
return views).
"""

from __future__ import annotations

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
from xdsl.ir import SSAValue

from kiln.dialects.aten.dialect import ConstantOp
from kiln.dialects.aten.interpreter import build_plan, dense_to_tensor, make_interpreter
from kiln.dialects.aten.ops import AtenOp
from kiln.dialects.kernel.kernel_ops import YieldOp
from kiln.dialects.kernel.program_ops import ExternOp

Step = tuple[Callable[[tuple[Any, ...]], tuple[Any, ...]], tuple[int, ...], tuple[int, ...]]


def as_buffer(value: torch.Tensor, inputs: Sequence[Any]) -> torch.Tensor:
    """``value`` as a buffer a kernel may read and later overwrite."""
    if value.is_contiguous() and value.storage_offset() == 0:
        storage = value.untyped_storage().data_ptr()
        if not any(
            isinstance(x, torch.Tensor) and x.untyped_storage().data_ptr() == storage for x in inputs
        ):
            return value
    return value.clone(memory_format=torch.contiguous_format)


class ExternCall:
    """A compiled ``kernel.extern``: ``call(*inputs)`` returns its results as a tuple."""

    def __init__(self, op: ExternOp, module: ModuleOp) -> None:
        self.name = ", ".join(
            inner.overload_name for inner in op.body.block.ops if isinstance(inner, AtenOp)
        ) or "extern"
        self.buffer_results = tuple(isinstance(r.type, MemRefType) for r in op.outputs)
        self._outputs: tuple[int, ...] = ()
        self._slot_count = 0
        self._steps: list[Step] | None = self._compile(op)
        self._op = op
        self._module = module

    def _compile(self, op: ExternOp) -> list[Step] | None:
        block = op.body.block
        slots: dict[SSAValue, int] = {arg: i for i, arg in enumerate(block.args)}
        steps: list[Step] = []
        for inner in block.ops:
            if isinstance(inner, YieldOp):
                self._outputs = tuple(slots[v] for v in inner.values)
                self._slot_count = len(slots)
                return steps
            if isinstance(inner, AtenOp):
                plan = build_plan(inner)
                run = plan.run
            elif isinstance(inner, ConstantOp):
                tensor = dense_to_tensor(inner.value, torch.device("cpu"))
                run = (lambda t: lambda _values: (t,))(tensor)
            else:
                return None  # something only the interpreter knows how to run
            operands = tuple(slots[v] for v in inner.operands)
            results: list[int] = []
            for result in inner.results:
                slots[result] = len(slots)
                results.append(slots[result])
            steps.append((run, operands, tuple(results)))
        return None

    def __call__(self, *inputs: Any) -> tuple[Any, ...]:
        if self._steps is None:
            values = self._interpret(inputs)
        else:
            slots: list[Any] = [*inputs, *([None] * (self._slot_count - len(inputs)))]
            for run, operands, results in self._steps:
                outputs = run(tuple(slots[i] for i in operands))
                for index, value in zip(results, outputs, strict=True):
                    slots[index] = value
            values = tuple(slots[i] for i in self._outputs)
        return tuple(
            as_buffer(v, inputs) if is_buffer and isinstance(v, torch.Tensor) else v
            for v, is_buffer in zip(values, self.buffer_results, strict=True)
        )

    def _interpret(self, inputs: Sequence[Any]) -> tuple[Any, ...]:
        interpreter = make_interpreter(self._module)
        interpreter.register_implementations(_KernelYield())
        return tuple(interpreter.run_ssacfg_region(self._op.body, tuple(inputs), "extern"))


@register_impls
class _KernelYield(InterpreterFunctions):
    """``kernel.yield`` ends an extern body (for the interpreter fallback)."""

    @impl_terminator(YieldOp)
    def run_yield(
        self, interpreter: Interpreter, op: YieldOp, args: PythonValues
    ) -> tuple[TerminatorValue, PythonValues]:
        return ReturnedValues(args), ()


__all__ = ["ExternCall", "as_buffer"]

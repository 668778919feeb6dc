"""The aten reference interpreter: every aten op runs as the torch overload it names.

Built on xDSL's interpreter framework. :class:`AtenFunctions` implements every
generated aten op, ``aten.generic`` and ``aten.constant``; together with xDSL's
``func`` functions and :class:`~kiln.dialects.aten.arith_interpreter.SymArithFunctions`
it runs whole imported graphs:

```python
module = Parser(make_context(), text).parse_module()
(out,) = run_function(module, [torch.randn(4, 8), 3])
```

For an op such as

```mlir
%1 = aten.view.default(%0, size = [%s, 8]) : (tensor<4x8xf32>, index) -> tensor<?x8xf32>
```

the interpreter calls ``torch.ops.aten.view.default(x, [s, 8])``: tensor operands become
the runtime tensors (``None`` for absent ``Tensor?[]`` entries), properties are decoded
with :func:`kiln.dialects.aten.encoding.decode_value` (``#aten.sym<k>`` references read
the runtime value of the k-th ``sym`` operand), arguments go positionally up to the
first omitted defaulted one and by keyword after it (and always for keyword-only ones).

The IR has value semantics, so an overload that writes one of its arguments
(``aten.generic "aten::add_.Tensor"``) gets a copy of it: the input SSA value keeps
its value. Each op's result is checked against its declared type (dtype and static
sizes), so a wrong type in imported IR is reported at the op that has it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from xdsl.dialects.builtin import (
    AnyFloat,
    IndexType,
    IntegerType,
    ModuleOp,
    TensorType,
)
from xdsl.dialects.func import FuncOp
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    PythonValues,
    impl,
    register_impls,
)
from xdsl.interpreters.func import FuncFunctions
from xdsl.ir import Attribute, Operation
from xdsl.utils.exceptions import InterpretationError

from kiln.dialects.aten.arith_interpreter import SymArithFunctions, SymMathFunctions
from kiln.dialects.aten.call_plan import (
    CallPlan,
    build_plan,
    check_results,
    dense_to_tensor,
    shape_fits,
    torch_overload,
)
from kiln.dialects.aten.dialect import ConstantOp, generated_op_classes
from kiln.dialects.aten.dtypes import UnsupportedDtype, type_to_dtype
from kiln.dialects.aten.meta_check import lifted_scalar_operands
from kiln.dialects.aten.ops import AtenOp, GenericOp


class ArgumentError(TypeError):
    """The runtime arguments do not fit the function's signature."""


# --- constants -------------------------------------------------------------------


# --- the interpreter functions ----------------------------------------------------


@dataclass
class AtenFunctions(InterpreterFunctions):
    """Runs aten ops through torch. Every generated op class gets the same implementation,
    registered programmatically below, because the framework dispatches on exact op type."""

    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    """Where ``aten.constant`` tensors are created (the device of the inputs)."""
    check_types: bool = True
    """Check every result against its declared type (cheap; catches wrong IR early)."""
    _plans: dict[Operation, CallPlan] = field(default_factory=dict[Operation, CallPlan])

    def run_aten_op(self, interpreter: Interpreter, op: AtenOp, args: PythonValues) -> PythonValues:
        plan = self._plans.get(op)
        if plan is None:
            plan = self._plans[op] = build_plan(op)
        try:
            results = plan.run(args)
        except Exception as e:
            # torch's message alone does not say which op failed; xDSL adds the
            # module with the op marked as a note on this error.
            raise InterpretationError(f"{op.name}: torch raised {type(e).__name__}: {e}") from e
        if self.check_types:
            try:
                check_results(op, plan.checks, results)
            except InterpretationError as mismatch:
                wrapped = _constants_as_numbers(op, args)
                if wrapped is None:
                    raise
                try:
                    results = plan.run(wrapped)
                except Exception:
                    raise mismatch from None
                check_results(op, plan.checks, results)
        return results

    @impl(ConstantOp)
    def run_constant(
        self, interpreter: Interpreter, op: ConstantOp, args: PythonValues
    ) -> PythonValues:
        return (dense_to_tensor(op.value, self.device),)


def _constants_as_numbers(op: AtenOp, args: PythonValues) -> PythonValues | None:
    """``args`` with each 0-dim ``aten.constant`` operand as a Python number (None: there
    is none). Such a constant is often a Python scalar the tracer lifted (``rsub(x, 0.5)``
    traced as ``sub(0.5, x)``): a *wrapped number* to type promotion, which a float64
    constant beside a float32 0-dim tensor is not (float64 result, not float32)."""
    scalars = lifted_scalar_operands(op)
    if not scalars:
        return None
    return tuple(v.item() if k in scalars else v for k, v in enumerate(args))


def _register_aten_ops(functions: type[AtenFunctions]) -> None:
    def run(
        self: AtenFunctions, interpreter: Interpreter, op: AtenOp, args: PythonValues
    ) -> PythonValues:
        return self.run_aten_op(interpreter, op, args)

    for op_cls in [*generated_op_classes(), GenericOp]:
        setattr(functions, f"run_{op_cls.__name__}", impl(op_cls)(run))


_register_aten_ops(AtenFunctions)
register_impls(AtenFunctions)


# --- running a function -------------------------------------------------------------


def _describe(value: object) -> str:
    if isinstance(value, torch.Tensor):
        return f"a {value.dtype} tensor of shape {list(value.shape)}"
    return f"{type(value).__name__} {value!r}"


def _check_argument(position: int, ty: Attribute, value: object) -> None:
    def fail() -> ArgumentError:
        return ArgumentError(f"argument #{position} must be {ty}, got {_describe(value)}")

    if isinstance(ty, TensorType):
        if not isinstance(value, torch.Tensor):
            raise fail()
        declared = tuple(ty.get_shape())
        shape = tuple(value.shape)
        try:
            dtype = type_to_dtype(ty.element_type)
        except UnsupportedDtype:
            dtype = value.dtype
        if value.dtype != dtype or not shape_fits(declared, shape):
            raise fail()
    elif isinstance(ty, IndexType | IntegerType):
        if isinstance(value, torch.Tensor) or not isinstance(value, int):
            raise fail()
    elif isinstance(ty, AnyFloat) and not isinstance(value, int | float):
        raise fail()


def _find_function(module: ModuleOp, name: str) -> FuncOp:
    functions = [op for op in module.ops if isinstance(op, FuncOp)]
    for func in functions:
        if func.sym_name.data == name:
            return func
    names = ", ".join(f"@{f.sym_name.data}" for f in functions) or "none"
    raise ArgumentError(f"the module has no function @{name} (functions: {names})")


def _device_of(args: Sequence[object]) -> torch.device:
    for value in args:
        if isinstance(value, torch.Tensor):
            return value.device
    return torch.device("cpu")


def make_interpreter(module: ModuleOp, device: torch.device | None = None) -> Interpreter:
    """An xDSL interpreter for aten IR (aten, func, SymInt arith/math), 64-bit index."""
    interpreter = Interpreter(module, index_bitwidth=64)
    interpreter.register_implementations(FuncFunctions())
    interpreter.register_implementations(SymArithFunctions())
    interpreter.register_implementations(SymMathFunctions())
    interpreter.register_implementations(AtenFunctions(device=device or torch.device("cpu")))
    return interpreter


def run_function(
    module: ModuleOp, args: Sequence[object], name: str = "forward"
) -> tuple[object, ...]:
    """Run ``func.func @name`` of ``module`` on torch tensors / Python ints.

    Arguments are checked against the function's signature first, so a wrong input is
    reported as such rather than as a failure deep inside some op.
    """
    func = _find_function(module, name)
    inputs = func.function_type.inputs.data
    if len(args) != len(inputs):
        raise ArgumentError(f"@{name} takes {len(inputs)} arguments, got {len(args)}")
    for position, (ty, value) in enumerate(zip(inputs, args, strict=True)):
        _check_argument(position, ty, value)
    interpreter = make_interpreter(module, _device_of(args))
    return tuple(interpreter.call_op(func, tuple(args)))


__all__ = [
    "ArgumentError",
    "AtenFunctions",
    "CallPlan",
    "build_plan",
    "dense_to_tensor",
    "make_interpreter",
    "run_function",
    "torch_overload",
]

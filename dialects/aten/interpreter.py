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

import operator
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import torch
from xdsl.dialects.builtin import (
    AnyFloat,
    DenseIntOrFPElementsAttr,
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
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.utils.exceptions import InterpretationError

from kiln.dialects.aten.arith_interpreter import SymArithFunctions, SymMathFunctions
from kiln.dialects.aten.dialect import ConstantOp, op_classes
from kiln.dialects.aten.dtypes import UnsupportedDtype, type_to_dtype
from kiln.dialects.aten.encoding import collect_sym_refs, decode_value
from kiln.dialects.aten.layout_constraints import adapted_overload
from kiln.dialects.aten.ops import AtenOp, GenericOp
from kiln.dialects.aten.schema import ArgKind, ArgSpec, OpSchema


class ArgumentError(TypeError):
    """The runtime arguments do not fit the function's signature."""


# --- torch overload lookup -------------------------------------------------------


@cache
def torch_overload(overload: str) -> Callable[..., Any]:
    """``torch.ops.aten.add.Tensor`` for ``aten::add.Tensor`` (a pure lookup, cached)."""
    namespace, _, rest = overload.partition("::")
    name, _, overload_name = rest.partition(".")
    try:
        return getattr(getattr(getattr(torch.ops, namespace), name), overload_name or "default")
    except (AttributeError, RuntimeError):
        raise InterpretationError(f"torch has no operator {overload}") from None


# --- per-op call plans -----------------------------------------------------------

Getter = Callable[[PythonValues], object]
"""Reads one Python argument for torch from the op's operand values."""


def _constant(value: object) -> Getter:
    return lambda _values: value


def _cloned(index: int) -> Getter:
    return lambda values: values[index].clone()


def _tensor_list(indices: Sequence[int | None], clone: bool) -> Getter:
    frozen = tuple(indices)
    if clone:
        return lambda values: [None if i is None else values[i].clone() for i in frozen]
    return lambda values: [None if i is None else values[i] for i in frozen]


def _symbolic(spec: ArgSpec, attr: Attribute, sym_indices: tuple[int, ...]) -> Getter:
    def get(values: PythonValues) -> object:
        return decode_value(spec, attr, [values[i] for i in sym_indices])

    return get


@dataclass(frozen=True, slots=True)
class _TensorCheck:
    """What the declared type of one result promises about its runtime tensor."""

    index: int
    dtype: torch.dtype
    shape: tuple[int, ...]
    """Declared sizes; negative (xDSL's DYNAMIC_INDEX) where dynamic."""


@dataclass(frozen=True, slots=True)
class CallPlan:
    """How to call torch for one op: argument getters and result unpacking."""

    target: Callable[..., Any]
    positional: tuple[Getter, ...]
    keywords: tuple[tuple[str, Getter], ...]
    unpack: Callable[[Any], PythonValues]
    checks: tuple[_TensorCheck, ...]

    def run(self, values: PythonValues) -> PythonValues:
        args = [get(values) for get in self.positional]
        kwargs = {name: get(values) for name, get in self.keywords}
        return self.unpack(self.target(*args, **kwargs))


def _unpacker(schema: OpSchema) -> Callable[[Any], PythonValues]:
    returns = schema.returns
    if len(returns) == 1 and returns[0].kind is ArgKind.TENSOR_LIST:
        return tuple  # split, unbind: the list spreads over the variadic results
    if len(returns) == 1:
        return lambda out: (out,)
    if not returns:
        return lambda _out: ()
    if any(r.kind is ArgKind.TENSOR_LIST for r in returns):
        # (Tensor, Tensor[]): aten.generic's variadic results hold the lists flattened.
        return lambda out: tuple(
            v for item in out for v in (item if isinstance(item, list) else [item])
        )
    return tuple


def _tensor_getter(
    spec: ArgSpec, values: list[SSAValue | None], index_of: dict[SSAValue, int]
) -> Getter | None:
    """The getter for a tensor argument, or None when it is absent."""
    indices = [None if v is None else index_of[v] for v in values]
    if spec.kind in (ArgKind.TENSOR, ArgKind.OPT_TENSOR):
        if not indices:
            return None
        index = indices[0]
        assert index is not None
        return _cloned(index) if spec.mutable else operator.itemgetter(index)
    return _tensor_list(indices, clone=spec.mutable)


def _property_getter(
    spec: ArgSpec, attr: Attribute | None, sym_indices: tuple[int, ...]
) -> Getter | None:
    """The getter for a non-tensor argument, or None when it is absent."""
    if attr is None:
        return None
    if collect_sym_refs(attr):
        return _symbolic(spec, attr, sym_indices)
    return _constant(decode_value(spec, attr, ()))


def _result_checks(op: Operation) -> tuple[_TensorCheck, ...]:
    checks: list[_TensorCheck] = []
    for i, ty in enumerate(op.result_types):
        if not isinstance(ty, TensorType):
            continue
        try:
            dtype = type_to_dtype(ty.element_type)
        except UnsupportedDtype:
            continue
        checks.append(_TensorCheck(i, dtype, tuple(ty.get_shape())))
    return tuple(checks)


def build_plan(op: AtenOp) -> CallPlan:
    """Precompute everything about calling torch for ``op`` that does not depend on values."""
    schema = op.op_schema()
    index_of: dict[SSAValue, int] = {}
    for i, operand in enumerate(op.operands):
        index_of.setdefault(operand, i)
    sym_indices = tuple(index_of[v] for v in op.sym_operands())
    tensors = op.tensor_operands()
    positional: list[Getter] = []
    keywords: list[tuple[str, Getter]] = []
    by_keyword = False
    for spec in schema.arguments:
        if spec.kind.is_tensor:
            getter = _tensor_getter(spec, tensors[spec.name], index_of)
        else:
            getter = _property_getter(spec, op.arg_attr(spec.name), sym_indices)
        if getter is None:
            if spec.has_default:
                # Let torch apply its own default; later arguments can no longer be positional.
                by_keyword = True
                continue
            getter = _constant(None)
        if spec.kwarg_only or by_keyword:
            keywords.append((spec.name, getter))
        else:
            positional.append(getter)
    overload = f"{schema.namespace}::{schema.qualified_name}"
    return CallPlan(
        target=adapted_overload(overload) or torch_overload(overload),
        positional=tuple(positional),
        keywords=tuple(keywords),
        unpack=_unpacker(schema),
        checks=_result_checks(op),
    )


def _shape_fits(declared: tuple[int, ...], actual: tuple[int, ...]) -> bool:
    """Same rank, and equal sizes where the declared size is static."""
    return len(declared) == len(actual) and all(
        want < 0 or want == got for want, got in zip(declared, actual, strict=True)
    )


def _check_results(op: Operation, checks: tuple[_TensorCheck, ...], results: PythonValues) -> None:
    for check in checks:
        value = results[check.index]
        if not isinstance(value, torch.Tensor):
            raise InterpretationError(
                f"{op.name}: result #{check.index} should be a tensor, torch returned {type(value).__name__}"
            )
        shape = tuple(value.shape)
        if value.dtype != check.dtype or not _shape_fits(check.shape, shape):
            raise InterpretationError(
                f"{op.name}: result #{check.index} is declared {op.result_types[check.index]}, "
                f"but torch computed {value.dtype} with shape {list(shape)}"
            )


# --- constants -------------------------------------------------------------------


def dense_to_tensor(attr: DenseIntOrFPElementsAttr, device: torch.device) -> torch.Tensor:
    """The tensor a dense elements attribute holds (xDSL stores it little-endian)."""
    ty = attr.type
    assert isinstance(ty, TensorType)
    dtype = type_to_dtype(ty.element_type)
    shape = tuple(ty.get_shape())
    raw = bytearray(attr.data.data)
    if not raw:
        return torch.empty(shape, dtype=dtype, device=device)
    # xDSL packs i1 as one byte per element, 0xff for true.
    storage_dtype = torch.uint8 if dtype == torch.bool else dtype
    flat = torch.frombuffer(raw, dtype=storage_dtype)
    if sys.byteorder == "big" and flat.element_size() > 1:
        flat = (
            flat.view(torch.uint8)
            .view(-1, flat.element_size())
            .flip(-1)
            .reshape(-1)
            .view(storage_dtype)
        )
    if dtype == torch.bool:
        flat = flat != 0
    count = 1
    for size in shape:
        count *= size
    tensor = flat.expand(count) if flat.numel() == 1 and count != 1 else flat
    return tensor.reshape(shape).clone().to(device)


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
            _check_results(op, plan.checks, results)
        return results

    @impl(ConstantOp)
    def run_constant(
        self, interpreter: Interpreter, op: ConstantOp, args: PythonValues
    ) -> PythonValues:
        return (dense_to_tensor(op.value, self.device),)


def _register_aten_ops(functions: type[AtenFunctions]) -> None:
    def run(
        self: AtenFunctions, interpreter: Interpreter, op: AtenOp, args: PythonValues
    ) -> PythonValues:
        return self.run_aten_op(interpreter, op, args)

    for op_cls in [*op_classes().values(), GenericOp]:
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
        if value.dtype != dtype or not _shape_fits(declared, shape):
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

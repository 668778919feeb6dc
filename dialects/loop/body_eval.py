"""Vectorized interpretation of loop bodies: every scalar op runs on whole tensors.

A loop body is interpreted once per loop op, not once per element: index variables are
int64 tensors spanning the iteration space (broadcastable, see
:mod:`~kiln.dialects.loop.index_eval`), input buffers are their flat storage, and each
``arith``/``math`` op is the torch op with the same semantics, applied elementwise.
Semantics follow MLIR where it differs from torch's defaults: ``i1`` is a 1-bit
integer (``sitofp``/``extsi`` of true give -1; ``addi`` on ``i1`` wraps), ``remsi``
and ``remf`` take the dividend's sign, ``divsi`` truncates, ``math.round`` rounds half
away from zero.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from xdsl.dialects import arith
from xdsl.dialects import math as xmath
from xdsl.dialects.builtin import FloatAttr, IndexType, IntegerAttr, IntegerType
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    PythonValues,
    ReturnedValues,
    TerminatorValue,
    impl,
    impl_terminator,
    register_impls,
)
from xdsl.ir import Attribute, Operation
from xdsl.utils.exceptions import InterpretationError

from kiln.dialects.loop.body_ops import CheckIndexOp, IndexOp, IndexOutOfBounds, LoadOp, YieldOp
from kiln.dialects.loop.casts import CAST_OPS
from kiln.dialects.loop.index_eval import compile_expr


def torch_dtype(ty: Attribute) -> torch.dtype:
    """The torch dtype holding values of a scalar type (``index`` is int64)."""
    if isinstance(ty, IndexType):
        return torch.int64
    from kiln.dialects.aten.dtypes import type_to_dtype

    return type_to_dtype(ty)


def _is_bool(ty: Attribute) -> bool:
    return isinstance(ty, IntegerType) and ty.width.data == 1


def _trunc_div(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.div(a, b, rounding_mode="trunc")


def _floor_div(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.div(a, b, rounding_mode="floor")


def _ceil_div(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return -torch.div(-a, b, rounding_mode="floor")


def _round_half_away(a: torch.Tensor) -> torch.Tensor:
    return torch.where(a >= 0, torch.floor(a + 0.5), torch.ceil(a - 0.5))


Binary = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
Unary = Callable[[torch.Tensor], torch.Tensor]

_BINARY: dict[type[Operation], Binary] = {
    arith.AddfOp: torch.add,
    arith.SubfOp: torch.sub,
    arith.MulfOp: torch.mul,
    arith.DivfOp: torch.div,
    arith.MaximumfOp: torch.maximum,
    arith.MinimumfOp: torch.minimum,
    arith.MaxnumfOp: torch.fmax,
    arith.MinnumfOp: torch.fmin,
    arith.DivSIOp: _trunc_div,
    arith.DivUIOp: _trunc_div,
    arith.FloorDivSIOp: _floor_div,
    arith.CeilDivSIOp: _ceil_div,
    arith.CeilDivUIOp: _ceil_div,
    arith.RemSIOp: torch.fmod,
    arith.RemUIOp: torch.remainder,
    arith.MaxSIOp: torch.maximum,
    arith.MinSIOp: torch.minimum,
    arith.MaxUIOp: torch.maximum,
    arith.MinUIOp: torch.minimum,
    arith.AndIOp: torch.bitwise_and,
    arith.OrIOp: torch.bitwise_or,
    arith.XOrIOp: torch.bitwise_xor,
    arith.ShLIOp: torch.bitwise_left_shift,
    arith.ShRSIOp: torch.bitwise_right_shift,
    xmath.Atan2Op: torch.atan2,
    xmath.PowFOp: torch.pow,
    xmath.IPowIOp: torch.pow,
    xmath.FPowIOp: torch.pow,
    xmath.CopySignOp: torch.copysign,
}

_BOOL_BINARY: dict[type[Operation], Binary] = {
    # i1 arithmetic wraps modulo 2.
    arith.AddiOp: torch.bitwise_xor,
    arith.SubiOp: torch.bitwise_xor,
    arith.MuliOp: torch.bitwise_and,
}

_INT_BINARY: dict[type[Operation], Binary] = {
    arith.AddiOp: torch.add,
    arith.SubiOp: torch.sub,
    arith.MuliOp: torch.mul,
}

_UNARY: dict[type[Operation], Unary] = {
    arith.NegfOp: torch.neg,
    xmath.AbsFOp: torch.abs,
    xmath.AbsIOp: torch.abs,
    xmath.AcosOp: torch.acos,
    xmath.AcoshOp: torch.acosh,
    xmath.AsinOp: torch.asin,
    xmath.AsinhOp: torch.asinh,
    xmath.AtanOp: torch.atan,
    xmath.AtanhOp: torch.atanh,
    xmath.CbrtOp: lambda a: torch.sign(a) * torch.abs(a).pow(1.0 / 3.0),
    xmath.CeilOp: torch.ceil,
    xmath.CosOp: torch.cos,
    xmath.CoshOp: torch.cosh,
    xmath.ErfOp: torch.erf,
    xmath.Exp2Op: torch.exp2,
    xmath.ExpM1Op: torch.expm1,
    xmath.ExpOp: torch.exp,
    xmath.FloorOp: torch.floor,
    xmath.Log10Op: torch.log10,
    xmath.Log1pOp: torch.log1p,
    xmath.Log2Op: torch.log2,
    xmath.LogOp: torch.log,
    xmath.RoundEvenOp: torch.round,
    xmath.RoundOp: _round_half_away,
    xmath.RsqrtOp: torch.rsqrt,
    xmath.SinOp: torch.sin,
    xmath.SinhOp: torch.sinh,
    xmath.SqrtOp: torch.sqrt,
    xmath.TanOp: torch.tan,
    xmath.TanhOp: torch.tanh,
    xmath.TruncOp: torch.trunc,
}

_CMPI: dict[str, Binary] = {
    "eq": torch.eq,
    "ne": torch.ne,
    "slt": torch.lt,
    "sle": torch.le,
    "sgt": torch.gt,
    "sge": torch.ge,
    "ult": torch.lt,
    "ule": torch.le,
    "ugt": torch.gt,
    "uge": torch.ge,
}


def _ordered(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return ~(torch.isnan(a) | torch.isnan(b))


_CMPF: dict[str, Binary] = {
    "false": lambda a, b: torch.zeros_like(a + b, dtype=torch.bool),
    "true": lambda a, b: torch.ones_like(a + b, dtype=torch.bool),
    "oeq": torch.eq,
    "ogt": torch.gt,
    "oge": torch.ge,
    "olt": torch.lt,
    "ole": torch.le,
    "one": lambda a, b: torch.ne(a, b) & _ordered(a, b),
    "ord": _ordered,
    "ueq": lambda a, b: torch.eq(a, b) | ~_ordered(a, b),
    "ugt": lambda a, b: torch.gt(a, b) | ~_ordered(a, b),
    "uge": lambda a, b: torch.ge(a, b) | ~_ordered(a, b),
    "ult": lambda a, b: torch.lt(a, b) | ~_ordered(a, b),
    "ule": lambda a, b: torch.le(a, b) | ~_ordered(a, b),
    "une": torch.ne,
    "uno": lambda a, b: ~_ordered(a, b),
}


def _cast(op: Operation, value: torch.Tensor) -> torch.Tensor:
    source = op.operands[0].type
    target = op.results[0].type
    dtype = torch_dtype(target)
    if _is_bool(source) and isinstance(op, arith.SIToFPOp | arith.ExtSIOp | arith.IndexCastOp):
        # A signed 1-bit integer: true is -1.
        return -(value.to(dtype))
    if _is_bool(target) and isinstance(op, arith.TruncIOp | arith.IndexCastOp):
        return (value & 1).to(torch.bool)
    return value.to(dtype)


@dataclass
class BodyFrame:
    """The variables of the loop op being interpreted: index tensors and sizes."""

    env: dict[str, Any] = field(default_factory=dict[str, Any])


def _as_tensor(value: Any, ty: Attribute) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value
    return torch.tensor(value, dtype=torch_dtype(ty))


@dataclass
class LoopBodyFunctions(InterpreterFunctions):
    """``arith``, ``math`` and loop body ops on tensors spanning an iteration space."""

    frame: BodyFrame = field(default_factory=BodyFrame)

    # -- loop ops --------------------------------------------------------------

    @impl(LoadOp)
    def run_load(self, interpreter: Interpreter, op: LoadOp, args: PythonValues) -> PythonValues:
        storage: torch.Tensor = args[0]
        n_indirect = len(op.indirect)
        env = self.frame.env
        if n_indirect:
            env = dict(env)
            for k, value in enumerate(args[1 : 1 + n_indirect]):
                env[f"i{k}"] = value
        index = compile_expr(op.index.data)(env)
        if op.mask is None:
            return (storage[index],)
        mask: torch.Tensor = args[-1]
        assert op.fill is not None
        fill = op.fill.value.data  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]
        fill_value = torch.tensor(fill, dtype=storage.dtype)
        if storage.numel() == 0:
            return (torch.where(mask, fill_value, fill_value),)
        safe = torch.where(mask, index, 0)
        return (torch.where(mask, storage[safe], fill_value),)

    @impl(IndexOp)
    def run_index(self, interpreter: Interpreter, op: IndexOp, args: PythonValues) -> PythonValues:
        value = compile_expr(op.expr.data)(self.frame.env)
        return (_as_tensor(value, IndexType()),)

    @impl(CheckIndexOp)
    def run_check_index(
        self, interpreter: Interpreter, op: CheckIndexOp, args: PythonValues
    ) -> PythonValues:
        index = _as_tensor(args[0], IndexType())
        size = int(compile_expr(op.size.data)(self.frame.env))
        bad = (index < 0) | (index >= size)
        if bool(bad.any()):
            value = int(index[bad].flatten()[0]) if index.dim() else int(index)
            raise IndexOutOfBounds(f"index {value} is out of bounds for a dimension of size {size}")
        return (args[0],)

    @impl_terminator(YieldOp)
    def run_yield(
        self, interpreter: Interpreter, op: YieldOp, args: PythonValues
    ) -> tuple[TerminatorValue, PythonValues]:
        return ReturnedValues(args), ()

    # -- arith -----------------------------------------------------------------

    @impl(arith.ConstantOp)
    def run_constant(
        self, interpreter: Interpreter, op: arith.ConstantOp, args: PythonValues
    ) -> PythonValues:
        value = op.value
        if not isinstance(value, IntegerAttr | FloatAttr):
            raise InterpretationError(f"arith.constant {value} is not a scalar")
        data = value.value.data  # pyright: ignore[reportUnknownMemberType]
        if _is_bool(op.result.type):
            data = bool(data)
        return (torch.tensor(data, dtype=torch_dtype(op.result.type)),)

    @impl(arith.CmpiOp)
    def run_cmpi(
        self, interpreter: Interpreter, op: arith.CmpiOp, args: PythonValues
    ) -> PythonValues:
        predicate = arith.CMPI_COMPARISON_OPERATIONS[op.predicate.value.data]
        return (_CMPI[predicate](args[0], args[1]),)

    @impl(arith.CmpfOp)
    def run_cmpf(
        self, interpreter: Interpreter, op: arith.CmpfOp, args: PythonValues
    ) -> PythonValues:
        predicate = arith.CMPF_COMPARISON_OPERATIONS[op.predicate.value.data]
        return (_CMPF[predicate](args[0], args[1]),)

    @impl(arith.SelectOp)
    def run_select(
        self, interpreter: Interpreter, op: arith.SelectOp, args: PythonValues
    ) -> PythonValues:
        return (torch.where(args[0], args[1], args[2]),)

    @impl(xmath.FmaOp)
    def run_fma(
        self, interpreter: Interpreter, op: xmath.FmaOp, args: PythonValues
    ) -> PythonValues:
        return (args[0] * args[1] + args[2],)


def _register_tables(functions: type[LoopBodyFunctions]) -> None:
    def binary(fn: Binary) -> Callable[..., PythonValues]:
        return lambda self, interpreter, op, args: (fn(args[0], args[1]),)  # pyright: ignore[reportUnknownLambdaType]

    def unary(fn: Unary) -> Callable[..., PythonValues]:
        return lambda self, interpreter, op, args: (fn(args[0]),)  # pyright: ignore[reportUnknownLambdaType]

    def int_binary(op_cls: type[Operation]) -> Callable[..., PythonValues]:
        on_bool, on_int = _BOOL_BINARY[op_cls], _INT_BINARY[op_cls]

        def run(
            self: Any, interpreter: Interpreter, op: Operation, args: PythonValues
        ) -> PythonValues:
            fn = on_bool if _is_bool(op.results[0].type) else on_int
            return (fn(args[0], args[1]),)

        return run

    def cast(
        self: Any, interpreter: Interpreter, op: Operation, args: PythonValues
    ) -> PythonValues:
        return (_cast(op, args[0]),)

    entries: list[tuple[type[Operation], Callable[..., PythonValues]]] = []
    entries += [(cls, binary(fn)) for cls, fn in _BINARY.items()]
    entries += [(cls, unary(fn)) for cls, fn in _UNARY.items()]
    entries += [(cls, int_binary(cls)) for cls in _INT_BINARY]
    entries += [(cls, cast) for cls in CAST_OPS]
    for op_cls, run in entries:
        setattr(functions, f"run_{op_cls.__name__}", impl(op_cls)(run))  # pyright: ignore[reportArgumentType]


_register_tables(LoopBodyFunctions)
register_impls(LoopBodyFunctions)


def supported_body_ops() -> frozenset[type[Operation]]:
    """The scalar ops a loop body may use (what the interpreter implements)."""
    return frozenset(op_cls for op_cls, _ in LoopBodyFunctions._impls())  # pyright: ignore[reportPrivateUsage]

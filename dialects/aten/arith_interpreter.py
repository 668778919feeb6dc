"""Interpretation of the ``arith`` ops that carry SymInt / SymFloat arithmetic.

Symbolic sizes live in aten IR as ``index`` values computed with ``arith``:

```mlir
%n = arith.muli %s0, %s1 : index
%h = arith.ceildivsi %n, %c2 : index
%m = arith.maxsi %h, %c1 : index
```

xDSL's :class:`~xdsl.interpreters.arith.ArithFunctions` covers about half of arith;
this subclass adds the integer and scalar-float ops that sympy-style size expressions
lower to (min/max, ceil division, unsigned division, extensions and truncations,
int <-> float conversions, division and negation of floats), and returns ``i1``
values (constants, and/or/xor results) as Python bools (xDSL returns ``-1`` for
``true``) so that they can be passed to torch as ``bool`` arguments.
:class:`SymMathFunctions` adds the ``math`` rounding ops of ``math.floor``/``math.ceil``
on SymFloats.
"""

from __future__ import annotations

import math

from xdsl.dialects import arith
from xdsl.dialects import math as xmath
from xdsl.dialects.builtin import FloatAttr, IndexType, IntegerAttr, IntegerType
from xdsl.interpreter import Interpreter, PythonValues, impl, register_impls
from xdsl.interpreters.arith import ArithFunctions
from xdsl.interpreters.math import MathFunctions
from xdsl.ir import Attribute
from xdsl.utils.comparisons import to_signed, to_unsigned
from xdsl.utils.exceptions import InterpretationError


def _bitwidth(interpreter: Interpreter, ty: Attribute) -> int:
    if isinstance(ty, IntegerType):
        return ty.width.data
    if isinstance(ty, IndexType):
        return interpreter.index_bitwidth
    raise InterpretationError(f"expected an integer or index type, got {ty}")


def _signed_operands(
    interpreter: Interpreter, op: arith.SignlessIntegerBinaryOperation, args: PythonValues
) -> tuple[int, int, int]:
    width = _bitwidth(interpreter, op.result.type)
    return to_signed(int(args[0]), width), to_signed(int(args[1]), width), width


def _unsigned_operands(
    interpreter: Interpreter, op: arith.SignlessIntegerBinaryOperation, args: PythonValues
) -> tuple[int, int, int]:
    width = _bitwidth(interpreter, op.result.type)
    return to_unsigned(int(args[0]), width), to_unsigned(int(args[1]), width), width


def _from_bits(value: int, width: int) -> int | bool:
    """A signed result of ``width`` bits; ``i1`` values are Python bools."""
    return bool(value & 1) if width == 1 else to_signed(value, width)


def _nonzero(divisor: int, op: arith.SignlessIntegerBinaryOperation) -> int:
    # arith division by zero is undefined behaviour; for sizes it always means a bug upstream.
    if divisor == 0:
        raise InterpretationError(f"{op.name}: division by zero")
    return divisor


@register_impls
class SymArithFunctions(ArithFunctions):
    """``arith`` on ``index`` / integers / scalar floats, as SymInt arithmetic needs it."""

    @impl(arith.ConstantOp)
    def run_constant(
        self, interpreter: Interpreter, op: arith.ConstantOp, args: PythonValues
    ) -> PythonValues:
        value = op.value
        if isinstance(value, IntegerAttr):
            data = int(value.value.data)
            if value.type == IntegerType(1):
                return (bool(data),)
            return (to_signed(data, _bitwidth(interpreter, value.type)),)
        if isinstance(value, FloatAttr):
            return (float(value.value.data),)
        raise InterpretationError(f"arith.constant of {value} is not a scalar")

    @impl(arith.AndIOp)
    def run_andi(
        self, interpreter: Interpreter, op: arith.AndIOp, args: PythonValues
    ) -> PythonValues:
        lhs, rhs, width = _signed_operands(interpreter, op, args)
        return (_from_bits(lhs & rhs, width),)

    @impl(arith.OrIOp)
    def run_ori(
        self, interpreter: Interpreter, op: arith.OrIOp, args: PythonValues
    ) -> PythonValues:
        lhs, rhs, width = _signed_operands(interpreter, op, args)
        return (_from_bits(lhs | rhs, width),)

    @impl(arith.XOrIOp)
    def run_xori(
        self, interpreter: Interpreter, op: arith.XOrIOp, args: PythonValues
    ) -> PythonValues:
        lhs, rhs, width = _signed_operands(interpreter, op, args)
        return (_from_bits(lhs ^ rhs, width),)

    @impl(arith.MaxSIOp)
    def run_maxsi(
        self, interpreter: Interpreter, op: arith.MaxSIOp, args: PythonValues
    ) -> PythonValues:
        lhs, rhs, _ = _signed_operands(interpreter, op, args)
        return (max(lhs, rhs),)

    @impl(arith.MinSIOp)
    def run_minsi(
        self, interpreter: Interpreter, op: arith.MinSIOp, args: PythonValues
    ) -> PythonValues:
        lhs, rhs, _ = _signed_operands(interpreter, op, args)
        return (min(lhs, rhs),)

    @impl(arith.MaxUIOp)
    def run_maxui(
        self, interpreter: Interpreter, op: arith.MaxUIOp, args: PythonValues
    ) -> PythonValues:
        lhs, rhs, width = _unsigned_operands(interpreter, op, args)
        return (to_signed(max(lhs, rhs), width),)

    @impl(arith.MinUIOp)
    def run_minui(
        self, interpreter: Interpreter, op: arith.MinUIOp, args: PythonValues
    ) -> PythonValues:
        lhs, rhs, width = _unsigned_operands(interpreter, op, args)
        return (to_signed(min(lhs, rhs), width),)

    @impl(arith.CeilDivSIOp)
    def run_ceildivsi(
        self, interpreter: Interpreter, op: arith.CeilDivSIOp, args: PythonValues
    ) -> PythonValues:
        lhs, rhs, width = _signed_operands(interpreter, op, args)
        return (to_signed(-(-lhs // _nonzero(rhs, op)), width),)

    @impl(arith.CeilDivUIOp)
    def run_ceildivui(
        self, interpreter: Interpreter, op: arith.CeilDivUIOp, args: PythonValues
    ) -> PythonValues:
        lhs, rhs, width = _unsigned_operands(interpreter, op, args)
        return (to_signed(-(-lhs // _nonzero(rhs, op)), width),)

    @impl(arith.DivUIOp)
    def run_divui(
        self, interpreter: Interpreter, op: arith.DivUIOp, args: PythonValues
    ) -> PythonValues:
        lhs, rhs, width = _unsigned_operands(interpreter, op, args)
        return (to_signed(lhs // _nonzero(rhs, op), width),)

    @impl(arith.RemUIOp)
    def run_remui(
        self, interpreter: Interpreter, op: arith.RemUIOp, args: PythonValues
    ) -> PythonValues:
        lhs, rhs, width = _unsigned_operands(interpreter, op, args)
        return (to_signed(lhs % _nonzero(rhs, op), width),)

    @impl(arith.ExtSIOp)
    def run_extsi(
        self, interpreter: Interpreter, op: arith.ExtSIOp, args: PythonValues
    ) -> PythonValues:
        return (to_signed(int(args[0]), _bitwidth(interpreter, op.input.type)),)

    @impl(arith.ExtUIOp)
    def run_extui(
        self, interpreter: Interpreter, op: arith.ExtUIOp, args: PythonValues
    ) -> PythonValues:
        return (to_unsigned(int(args[0]), _bitwidth(interpreter, op.input.type)),)

    @impl(arith.TruncIOp)
    def run_trunci(
        self, interpreter: Interpreter, op: arith.TruncIOp, args: PythonValues
    ) -> PythonValues:
        width = _bitwidth(interpreter, op.result.type)
        value = to_signed(int(args[0]) & ((1 << width) - 1), width)
        return (bool(value) if width == 1 else value,)

    @impl(arith.SIToFPOp)
    def run_sitofp(
        self, interpreter: Interpreter, op: arith.SIToFPOp, args: PythonValues
    ) -> PythonValues:
        return (float(to_signed(int(args[0]), _bitwidth(interpreter, op.input.type))),)

    @impl(arith.UIToFPOp)
    def run_uitofp(
        self, interpreter: Interpreter, op: arith.UIToFPOp, args: PythonValues
    ) -> PythonValues:
        return (float(to_unsigned(int(args[0]), _bitwidth(interpreter, op.input.type))),)

    @impl(arith.FPToSIOp)
    def run_fptosi(
        self, interpreter: Interpreter, op: arith.FPToSIOp, args: PythonValues
    ) -> PythonValues:
        # fptosi rounds toward zero, like C and like torch's sym_int.
        return (to_signed(math.trunc(args[0]), _bitwidth(interpreter, op.result.type)),)

    @impl(arith.DivfOp)
    def run_divf(
        self, interpreter: Interpreter, op: arith.DivfOp, args: PythonValues
    ) -> PythonValues:
        lhs, rhs = float(args[0]), float(args[1])
        if rhs == 0.0:
            # IEEE semantics, which Python's float division does not follow.
            return (
                math.nan
                if lhs == 0.0 or math.isnan(lhs)
                else math.copysign(math.inf, lhs) * math.copysign(1.0, rhs),
            )
        return (lhs / rhs,)

    @impl(arith.NegfOp)
    def run_negf(
        self, interpreter: Interpreter, op: arith.NegfOp, args: PythonValues
    ) -> PythonValues:
        return (-args[0],)


@register_impls
class SymMathFunctions(MathFunctions):
    """``math`` on scalar floats: xDSL's ops plus the rounding that SymFloats use."""

    @impl(xmath.FloorOp)
    def run_floor(
        self, interpreter: Interpreter, op: xmath.FloorOp, args: PythonValues
    ) -> PythonValues:
        return (float(math.floor(args[0])) if math.isfinite(args[0]) else args[0],)

    @impl(xmath.CeilOp)
    def run_ceil(
        self, interpreter: Interpreter, op: xmath.CeilOp, args: PythonValues
    ) -> PythonValues:
        return (float(math.ceil(args[0])) if math.isfinite(args[0]) else args[0],)

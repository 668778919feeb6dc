"""Python arithmetic on SymInt/SymFloat/SymBool values, as ``arith`` ops.

FX graphs traced with dynamic shapes compute sizes with plain Python operators on
symbolic ints (``mul = sym_size_int * 8``). Those values are ``index`` in IR (floats are
``f64``, bools ``i1``), and each operator becomes the ``arith`` ops that compute
Python's result, including Python's rounding of ``//`` and the sign of ``%``:

```mlir
%sym_size_int = aten.sym_size.int(%x, dim = 0) : (tensor<?x8xf32>) -> index
%c8 = arith.constant 8 : index
%mul = arith.muli %sym_size_int, %c8 : index
%floordiv = arith.floordivsi %mul, %c3 : index
```
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sympy
import torch
from xdsl.dialects import arith
from xdsl.dialects import math as xmath
from xdsl.dialects.builtin import (
    AnyFloat,
    ArrayAttr,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    StringAttr,
    TensorType,
    f64,
    i1,
    i64,
)
from xdsl.ir import Attribute, Operation, SSAValue

from kiln.dialects.aten.fx.types import INDEX
from kiln.dialects.aten.size_symbols import (
    SIZE_SYMBOL_ATTR,
    SIZE_SYMBOLS_ATTR,
    TRACED_SIZES_ATTR,
)
from kiln.dialects.loop.expr import floordiv, format_expr, mod, var

Operand = SSAValue | int | float | bool
"""An argument of a symbolic operator: an SSA scalar or a Python constant."""


class UnsupportedSymbolicOp(ValueError):
    """The operator or its operand types have no arith lowering."""


@dataclass(frozen=True)
class _Binary:
    int_op: type[arith.SignlessIntegerBinaryOperation] | None
    float_op: type[arith.FloatingPointLikeBinaryOperation] | None


_BINARY: dict[Callable[..., object], _Binary] = {
    operator.add: _Binary(arith.AddiOp, arith.AddfOp),
    operator.sub: _Binary(arith.SubiOp, arith.SubfOp),
    operator.mul: _Binary(arith.MuliOp, arith.MulfOp),
    operator.floordiv: _Binary(arith.FloorDivSIOp, None),
    torch.sym_max: _Binary(arith.MaxSIOp, arith.MaximumfOp),
    torch.sym_min: _Binary(arith.MinSIOp, arith.MinimumfOp),
    operator.and_: _Binary(arith.AndIOp, None),
    operator.or_: _Binary(arith.OrIOp, None),
}

_COMPARE: dict[Callable[..., object], tuple[str, str]] = {
    operator.eq: ("eq", "oeq"),
    operator.ne: ("ne", "une"),
    operator.lt: ("slt", "olt"),
    operator.le: ("sle", "ole"),
    operator.gt: ("sgt", "ogt"),
    operator.ge: ("sge", "oge"),
}

_SQRT: frozenset[Callable[..., object]] = frozenset(
    f for f in (getattr(torch, "_sym_sqrt", None), getattr(torch, "sym_sqrt", None)) if f
)
"""``math.sqrt`` of a SymInt traces as ``torch._sym_sqrt`` (``sym_sqrt`` in some releases)."""

_UNARY: frozenset[Callable[..., object]] = frozenset(
    {
        operator.neg,
        operator.pos,
        operator.abs,
        torch.sym_not,
        torch.sym_float,
        torch.sym_int,
        math.floor,
        math.ceil,
        math.trunc,
        *_SQRT,
    }
)

_SUM: frozenset[Callable[..., object]] = frozenset(
    f for f in (getattr(torch, "sym_sum", None),) if f
)
"""``torch.sym_sum([a, b, c])``: dynamo's n-ary size addition."""

SYMBOLIC_TARGETS: frozenset[Callable[..., object]] = frozenset(
    {*_BINARY, *_COMPARE, *_UNARY, *_SUM, operator.mod, operator.truediv, operator.pow, pow}
)
"""Python functions :class:`SymbolicLowering` handles."""


def _is_float(ty: Attribute) -> bool:
    return isinstance(ty, AnyFloat)


class SymbolicLowering:
    """Emits arith ops for symbolic scalar arithmetic into one block, in order."""

    def __init__(self, emit: Callable[[Operation], None]) -> None:
        self._emit = emit
        self._constants: dict[tuple[object, Attribute], SSAValue] = {}

    # -- operands ------------------------------------------------------------------

    def constant(self, value: int | float | bool, ty: Attribute) -> SSAValue:
        """An ``arith.constant`` of ``ty``; one per (value, type) in the function."""
        key = (value, ty)
        cached = self._constants.get(key)
        if cached is not None:
            return cached
        if isinstance(ty, IndexType | IntegerType):
            attr: Attribute = IntegerAttr(int(value), ty)
        else:
            attr = FloatAttr(float(value), f64)
        op = arith.ConstantOp(attr)
        self._emit(op)
        self._constants[key] = op.result
        return op.result

    def _as_value(self, operand: Operand, ty: Attribute) -> SSAValue:
        if isinstance(operand, SSAValue):
            return operand
        return self.constant(operand, ty)

    def _to_float(self, value: SSAValue) -> SSAValue:
        if _is_float(value.type):
            return value
        if isinstance(value.type, IndexType):
            cast = arith.IndexCastOp(value, i64)
            self._emit(cast)
            value = cast.result
        convert = arith.SIToFPOp(value, f64)
        self._emit(convert)
        return convert.result

    def _to_index(self, value: SSAValue) -> SSAValue:
        if isinstance(value.type, IndexType):
            return value
        if _is_float(value.type):
            convert = arith.FPToSIOp(value, i64)
            self._emit(convert)
            value = convert.result
        elif value.type == i1:
            extend = arith.ExtUIOp(value, i64)
            self._emit(extend)
            value = extend.result
        cast = arith.IndexCastOp(value, INDEX)
        self._emit(cast)
        return cast.result

    def _operands(self, args: Sequence[Operand], as_float: bool) -> list[SSAValue]:
        """Operands with a common type: f64 if any is a float (Python promotion)."""
        if not as_float:
            as_float = any(
                isinstance(a, float) or (isinstance(a, SSAValue) and _is_float(a.type))
                for a in args
            )
        if as_float:
            return [self._to_float(self._as_value(a, f64)) for a in args]
        types = [a.type for a in args if isinstance(a, SSAValue)]
        ty = i1 if types and all(t == i1 for t in types) else INDEX
        values = [self._as_value(a, ty) for a in args]
        if ty == INDEX:
            values = [self._to_index(v) for v in values]
        return values

    def _op(self, op: Operation) -> SSAValue:
        self._emit(op)
        return op.results[0]

    # -- operators -----------------------------------------------------------------

    def lower(self, target: Callable[..., object], args: Sequence[Operand]) -> SSAValue:
        """The SSA value of ``target(*args)``."""
        if any(isinstance(a, SSAValue) and isinstance(a.type, TensorType) for a in args):
            raise UnsupportedSymbolicOp(f"{_name(target)} of a tensor is not a size operation")
        if target in _BINARY:
            return self._binary(target, args)
        if target in _COMPARE:
            lhs, rhs = self._operands(args, as_float=False)
            int_pred, float_pred = _COMPARE[target]
            if _is_float(lhs.type):
                return self._op(arith.CmpfOp(lhs, rhs, float_pred))
            return self._op(arith.CmpiOp(lhs, rhs, int_pred))
        if target is operator.truediv:
            lhs, rhs = self._operands(args, as_float=True)
            return self._op(arith.DivfOp(lhs, rhs))
        if target is operator.mod:
            return self._mod(args)
        if target in (operator.pow, pow):
            return self._pow(args)
        if target in _SUM:
            if len(args) != 1 or not isinstance(args[0], list | tuple):
                raise UnsupportedSymbolicOp("sym_sum takes one list")
            terms: list[Operand] = list(args[0])  # pyright: ignore[reportUnknownArgumentType]
            if not terms:
                return self.constant(0, INDEX)
            total = self._operands(terms[:1], as_float=False)[0]
            for term in terms[1:]:
                total = self._binary(operator.add, [total, term])
            return total
        return self._unary(target, args)

    def _pow(self, args: Sequence[Operand]) -> SSAValue:
        """Python's ``**``: an int to a non-negative int constant stays an int; anything
        else (a float, a negative or symbolic exponent) is a float power."""
        if len(args) != 2:
            raise UnsupportedSymbolicOp(f"pow with {len(args)} arguments")
        base, exponent = args
        if isinstance(exponent, int) and not isinstance(exponent, bool) and 0 <= exponent <= 16:
            (value,) = self._operands([base], as_float=False)
            if not _is_float(value.type):
                # Small constant exponents (what size arithmetic uses): multiplies.
                result = self.constant(1, value.type)
                for k in range(exponent):
                    result = value if k == 0 else self._op(arith.MuliOp(result, value))
                return result
        lhs, rhs = self._operands(args, as_float=True)
        return self._op(xmath.PowFOp(lhs, rhs))

    def _binary(self, target: Callable[..., object], args: Sequence[Operand]) -> SSAValue:
        lowering = _BINARY[target]
        lhs, rhs = self._operands(args, as_float=False)
        if _is_float(lhs.type):
            if lowering.float_op is None:
                raise UnsupportedSymbolicOp(f"{_name(target)} on floats is not supported")
            return self._op(lowering.float_op(lhs, rhs))
        assert lowering.int_op is not None
        return self._op(lowering.int_op(lhs, rhs))

    def _mod(self, args: Sequence[Operand]) -> SSAValue:
        lhs, rhs = self._operands(args, as_float=False)
        if _is_float(lhs.type):
            raise UnsupportedSymbolicOp("% on floats is not supported")
        # Python's a % b takes the sign of b: a - (a // b) * b with flooring division.
        quotient = self._op(arith.FloorDivSIOp(lhs, rhs))
        product = self._op(arith.MuliOp(quotient, rhs))
        return self._op(arith.SubiOp(lhs, product))

    def _unary(self, target: Callable[..., object], args: Sequence[Operand]) -> SSAValue:
        if len(args) != 1:
            raise UnsupportedSymbolicOp(f"{_name(target)} with {len(args)} arguments")
        if target is torch.sym_float:
            return self._to_float(self._as_value(args[0], INDEX))
        (value,) = self._operands(args, as_float=False)
        if target is operator.neg:
            if _is_float(value.type):
                return self._op(arith.NegfOp(value))
            return self._op(arith.SubiOp(self.constant(0, value.type), value))
        if target is torch.sym_not:
            if value.type != i1:
                raise UnsupportedSymbolicOp("sym_not needs a bool")
            return self._op(arith.XOrIOp(value, self.constant(True, i1)))
        if target is torch.sym_int:
            return self._to_index(value)
        if target is operator.pos:
            return value
        if target is operator.abs:
            if _is_float(value.type):
                return self._op(xmath.AbsFOp(value))
            return self._op(
                arith.MaxSIOp(value, self._op(arith.SubiOp(self.constant(0, value.type), value)))
            )
        if target is math.trunc:
            # Python's trunc rounds toward zero to an int, as fptosi does.
            return self._to_index(value) if _is_float(value.type) else value
        if target in _SQRT:
            return self._op(xmath.SqrtOp(self._to_float(value)))
        if target in (math.floor, math.ceil):
            if not _is_float(value.type):
                return value
            rounding = xmath.FloorOp if target is math.floor else xmath.CeilOp
            return self._to_index(self._op(rounding(value)))
        raise UnsupportedSymbolicOp(f"{_name(target)} is not a supported symbolic operator")


def size_symbol_attrs(val: object) -> dict[str, Attribute]:
    """The size-symbol attributes of a placeholder's FakeTensor or SymInt (see
    :mod:`kiln.dialects.aten.size_symbols`)."""

    def name(size: object) -> str:
        if isinstance(size, torch.SymInt):
            expr = size.node.expr
            if getattr(expr, "is_Symbol", False):
                return str(expr)
        return ""

    if isinstance(val, torch.SymInt):
        symbol = name(val)
        return {SIZE_SYMBOL_ATTR: StringAttr(symbol)} if symbol else {}
    if isinstance(val, torch.Tensor):
        names = [name(s) for s in val.size()]
        if any(names):
            return {SIZE_SYMBOLS_ATTR: ArrayAttr([StringAttr(n) for n in names])}
    return {}


def size_symbol_hints(val: object) -> dict[str, int]:
    """The traced size of each plain symbol among a placeholder's sizes (a SymInt's own,
    or a FakeTensor's dims): the shape environment's hint, where it has one."""
    sizes = [val] if isinstance(val, torch.SymInt) else []
    if isinstance(val, torch.Tensor):
        sizes = list(val.size())
    hints: dict[str, int] = {}
    for size in sizes:
        if isinstance(size, torch.SymInt) and getattr(size.node.expr, "is_Symbol", False):
            hint = size.node.hint
            if isinstance(hint, int):
                hints[str(size.node.expr)] = hint
    return hints


def traced_size_attrs(val: object) -> dict[str, Attribute]:
    """The traced-sizes attribute of an op whose result(s) ``val`` (FakeTensors) have
    symbolic dims (see :data:`~kiln.dialects.aten.size_symbols.TRACED_SIZES_ATTR`);
    empty where no dim is symbolic."""
    values = list(val) if isinstance(val, list | tuple) else [val]  # pyright: ignore[reportUnknownArgumentType]
    per_result: list[list[str]] = []
    for v in values:
        if isinstance(v, torch.Tensor):
            per_result.append([_size_text(s) for s in v.size()])
        else:
            per_result.append([])
    if not any(any(dims) for dims in per_result):
        return {}
    return {
        TRACED_SIZES_ATTR: ArrayAttr(
            [ArrayAttr([StringAttr(t) for t in dims]) for dims in per_result]
        )
    }


class _Unrepresentable(Exception):
    pass


def _size_text(size: object) -> str:
    """A SymInt's expression in the index-expression syntax, or ``""`` (a static size,
    or an expression over other symbols or functions)."""
    if not isinstance(size, torch.SymInt):
        return ""
    try:
        return format_expr(_size_expr(size.node.expr))
    except (_Unrepresentable, ValueError, TypeError):
        return ""


def _size_expr(e: Any) -> sympy.Expr:
    """The shape environment's sympy expression as an index expression."""
    from torch.utils._sympy import functions as tfn

    if e.is_Integer:
        return sympy.Integer(int(e))
    if isinstance(e, sympy.Symbol):
        if not _SHAPE_SYMBOL.fullmatch(e.name):
            raise _Unrepresentable(e.name)  # unbacked (u0) or otherwise not a size
        return var(e.name)
    args = [_size_expr(a) for a in e.args]
    if isinstance(e, sympy.Add):
        return sympy.Add(*args)
    if isinstance(e, sympy.Mul):
        return sympy.Mul(*args)
    if isinstance(e, sympy.Pow) and e.exp.is_Integer and int(e.exp) > 0:
        return args[0] ** int(e.exp)
    if isinstance(e, tfn.FloorDiv | tfn.CleanDiv):
        return floordiv(args[0], args[1])
    if isinstance(e, tfn.PythonMod | tfn.Mod | sympy.Mod):
        return mod(args[0], args[1])
    if isinstance(e, tfn.ModularIndexing):
        return mod(floordiv(args[0], args[1]), args[2])
    raise _Unrepresentable(type(e).__name__)


_SHAPE_SYMBOL = re.compile(r"s(0|[1-9][0-9]*)")


def _name(target: Callable[..., object]) -> str:
    return getattr(target, "__name__", repr(target))

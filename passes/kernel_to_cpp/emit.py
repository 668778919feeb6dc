"""Building cpp IR: an insertion point with helpers for constants, loops and addresses."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import sympy
from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    AnyFloat,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.traits import IsTerminator

from kiln.dialects.cpp.attributes import LoopKind
from kiln.dialects.cpp.loop_ops import ForOp
from kiln.dialects.cpp.memory_ops import AllocaOp, IndexOp, LoadOp, StoreOp
from kiln.dialects.loop.expr import var
from kiln.passes.kernel_to_cpp.space import substitute

Env = Mapping[sympy.Symbol, SSAValue]
"""What each symbol of an index expression stands for at the current point."""


@dataclass
class Constants:
    """Index constants of a function, all defined once at its entry."""

    entry: Block
    values: dict[int, SSAValue] = field(default_factory=dict[int, SSAValue])
    known: dict[SSAValue, int] = field(default_factory=dict[SSAValue, int])
    """The integer each of these constants holds (folded into index expressions)."""

    def index(self, value: int) -> SSAValue:
        if value not in self.values:
            op = arith.ConstantOp(IntegerAttr(value, IndexType()))
            op.result.name_hint = f"c{value}" if value >= 0 else f"cm{-value}"
            first = self.entry.first_op
            if first is None:
                self.entry.add_op(op)
            else:
                self.entry.insert_op_before(op, first)
            self.values[value] = op.result
            self.known[op.result] = value
        return self.values[value]

    def fold(self, expr: sympy.Expr, env: Env) -> sympy.Expr:
        """``expr`` with the symbols bound to constants replaced by their values."""
        subs: dict[sympy.Symbol, sympy.Expr] = {}
        for symbol in expr.free_symbols:
            value = env.get(symbol)  # pyright: ignore[reportArgumentType, reportCallIssue]
            if value is not None and value in self.known:
                subs[symbol] = sympy.Integer(self.known[value])  # pyright: ignore[reportArgumentType]
        return substitute(expr, subs) if subs else expr


def address(expr: sympy.Expr, env: Env) -> tuple[sympy.Expr, list[SSAValue]]:
    """``expr`` over ``i0..`` and the operands those stand for (sorted by symbol name)."""
    symbols = sorted(expr.free_symbols, key=str)
    operands = [env[s] for s in symbols]  # pyright: ignore[reportArgumentType]
    renamed = substitute(expr, {s: var(f"i{k}") for k, s in enumerate(symbols)})  # pyright: ignore[reportArgumentType]
    return renamed, operands


@dataclass
class Emitter:
    """Appends ops to a block (before its terminator, if it has one)."""

    block: Block
    constants: Constants

    def add(self, op: Operation) -> Operation:
        last = self.block.last_op
        if last is not None and last.has_trait(IsTerminator):
            self.block.insert_op_before(op, last)
        else:
            self.block.add_op(op)
        return op

    def value(self, op: Operation) -> SSAValue:
        self.add(op)
        return op.results[0]

    def const(self, value: int) -> SSAValue:
        return self.constants.index(value)

    def scalar(self, value: float | int | bool, ty: Attribute) -> SSAValue:
        if isinstance(ty, IntegerType | IndexType):
            return self.value(arith.ConstantOp(IntegerAttr(int(value), ty)))
        assert isinstance(ty, AnyFloat)
        return self.value(arith.ConstantOp(FloatAttr(float(value), ty)))

    def index(self, expr: sympy.Expr, env: Env) -> SSAValue:
        expr = self.constants.fold(sympy.sympify(expr), env)
        if expr.is_Integer:
            return self.const(int(expr))
        if isinstance(expr, sympy.Symbol) and expr in env:
            return env[expr]
        renamed, operands = address(expr, env)
        return self.value(IndexOp(renamed, operands))

    def load(self, buffer: SSAValue, expr: sympy.Expr, env: Env, **kwargs: object) -> SSAValue:
        renamed, operands = address(self.constants.fold(sympy.sympify(expr), env), env)
        return self.value(LoadOp(buffer, renamed, operands, **kwargs))  # pyright: ignore[reportArgumentType]

    def store(self, value: SSAValue, buffer: SSAValue, expr: sympy.Expr, env: Env) -> None:
        renamed, operands = address(self.constants.fold(sympy.sympify(expr), env), env)
        self.add(StoreOp(value, buffer, renamed, operands))

    def alloca(self, ty: MemRefType, name: str) -> SSAValue:
        result = self.value(AllocaOp(ty))
        result.name_hint = name
        return result

    def loop(
        self,
        kind: LoopKind,
        lower: Sequence[SSAValue],
        upper: Sequence[SSAValue],
        names: Sequence[str],
        steps: Sequence[int] | None = None,
        condition: SSAValue | None = None,
    ) -> tuple[Emitter, list[SSAValue]]:
        """A ``cpp.for``; returns an emitter for its body and its induction variables."""
        op = ForOp(kind, lower, upper, steps, condition)
        self.add(op)
        for iv, name in zip(op.ivs, names, strict=True):
            iv.name_hint = name
        return Emitter(op.body.block, self.constants), list(op.ivs)


__all__ = ["Constants", "Emitter", "Env", "address"]

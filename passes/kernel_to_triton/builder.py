"""Building triton ops: typed helpers, hoisted constants, and nested scopes.

:class:`TritonBuilder` appends ops at an insertion point and remembers, per scope, the
values it has built for a key (an index expression, a constant), so that one kernel
computes ``xindex // 5`` once. Scopes nest like the kernel's blocks: the kernel body,
then each ``scf.for`` body; a value built in an outer scope is visible in inner ones.
Constants always go to the top of the kernel, where every scope sees them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from xdsl.dialects.builtin import IntegerType, i1
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from kiln.dialects.triton import (
    BINARY_CLASSES,
    BroadcastToOp,
    CastOp,
    CmpOp,
    ConstantOp,
    ExpandDimsOp,
    MathOp,
    WhereOp,
)
from kiln.dialects.triton.literals import literal_value
from kiln.dialects.triton.types import Dim, element_of, shape_of


@dataclass
class Scope:
    """Where ops go, and the values built there by key."""

    at: Callable[[], InsertPoint]
    memo: dict[Hashable, SSAValue] = field(default_factory=dict[Hashable, SSAValue])
    depth: int = 0


@dataclass
class TritonBuilder:
    """Appends triton ops to a kernel body (see the module docstring)."""

    entry: Block
    """The kernel's body block (constants go at its start)."""
    scopes: list[Scope] = field(default_factory=list[Scope])
    _constants: dict[tuple[object, Attribute], SSAValue] = field(
        default_factory=dict[tuple[object, Attribute], SSAValue]
    )
    _last_constant: Operation | None = None

    def __post_init__(self) -> None:
        if not self.scopes:
            self.scopes.append(Scope(lambda: InsertPoint.at_end(self.entry)))

    # -- scopes ------------------------------------------------------------------

    @property
    def scope(self) -> Scope:
        return self.scopes[-1]

    @contextmanager
    def nested(self, block: Block, loop: Operation) -> Iterator[Scope]:
        """Build into ``block``, the body of ``loop`` (an ``scf.for`` just inserted in the
        current scope), until the context ends; meanwhile the outer scope inserts before
        ``loop`` (loop-invariant values are hoisted there)."""
        outer = self.scope
        outer_at = outer.at
        outer.at = lambda: InsertPoint.before(loop)
        scope = Scope(lambda: InsertPoint.at_end(block), depth=len(self.scopes))
        self.scopes.append(scope)
        try:
            yield scope
        finally:
            self.scopes.pop()
            outer.at = outer_at

    def lookup(self, key: Hashable, depth: int | None = None) -> SSAValue | None:
        for scope in reversed(self.scopes[: None if depth is None else depth + 1]):
            if key in scope.memo:
                return scope.memo[key]
        return None

    def remember(self, key: Hashable, value: SSAValue, depth: int | None = None) -> SSAValue:
        self.scopes[-1 if depth is None else depth].memo[key] = value
        return value

    # -- inserting -------------------------------------------------------------------

    def insert(self, op: Operation, depth: int | None = None) -> Operation:
        """Insert ``op`` in the current scope (or the scope at ``depth``, which must end
        before the current one's ops: outer scopes insert before the nested loop)."""
        scope = self.scope if depth is None else self.scopes[depth]
        Rewriter.insert_op(op, scope.at())
        return op

    def add(self, op: Operation, depth: int | None = None) -> SSAValue:
        self.insert(op, depth)
        return op.results[0]

    def const(self, value: float | int | bool, ty: Attribute) -> SSAValue:
        """A scalar constant, built once per kernel at the top of its body."""
        key = (_const_key(value), ty)
        found = self._constants.get(key)
        if found is not None:
            return found
        op = ConstantOp(value, ty)
        if self._last_constant is None:
            first = self.entry.first_op
            if first is None:
                self.entry.add_op(op)
            else:
                self.entry.insert_op_before(op, first)
        else:
            self.entry.insert_op_after(op, self._last_constant)
        self._last_constant = op
        self._constants[key] = op.result
        return op.result

    # -- typed helpers ------------------------------------------------------------------

    def binary(self, name: str, lhs: SSAValue, rhs: SSAValue, depth: int | None = None) -> SSAValue:
        a, b = constant_value(lhs), constant_value(rhs)
        if a is not None and b is not None and (folded := fold_binary(name, a, b)) is not None:
            return self.const(folded, lhs.type)
        # x & true, x | false: x (when x already has the result's shape)
        for constant, other in ((a, rhs), (b, lhs)):
            neutral = (name == "and" and constant is True) or (name == "or" and constant is False)
            if neutral and shape_of(other.type) == shape_of(
                BINARY_CLASSES[name](lhs, rhs).result.type
            ):
                return other
        return self.add(BINARY_CLASSES[name](lhs, rhs), depth)

    def cmp(
        self, predicate: str, lhs: SSAValue, rhs: SSAValue, depth: int | None = None
    ) -> SSAValue:
        a, b = constant_value(lhs), constant_value(rhs)
        if a is not None and b is not None:
            return self.const(_COMPARE[predicate](a, b), i1)
        return self.add(CmpOp(predicate, lhs, rhs), depth)

    def math(self, fn: str, *args: SSAValue) -> SSAValue:
        return self.add(MathOp(fn, *args))

    def where(self, cond: SSAValue, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.add(WhereOp(cond, a, b))

    def cast(self, value: SSAValue, element: Attribute, depth: int | None = None) -> SSAValue:
        if element_of(value.type) == element:
            return value
        if (c := constant_value(value)) is not None:
            return self.const(convert(c, element), element)
        return self.add(CastOp(value, element), depth)

    def bitcast(self, value: SSAValue, element: Attribute) -> SSAValue:
        if element_of(value.type) == element:
            return value
        return self.add(CastOp(value, element, bitcast=True))

    def expand(self, value: SSAValue, axis: int, depth: int | None = None) -> SSAValue:
        return self.add(ExpandDimsOp(value, axis), depth)

    def broadcast(self, value: SSAValue, shape: tuple[Dim, ...]) -> SSAValue:
        if shape_of(value.type) == shape:
            return value
        return self.add(BroadcastToOp(value, shape))

    def logical_and(self, a: SSAValue | None, b: SSAValue | None) -> SSAValue | None:
        """``a & b`` of masks, where None means "all lanes"."""
        if a is None:
            return b
        if b is None or a is b:
            return a
        return self.binary("and", a, b)

    def not_(self, value: SSAValue) -> SSAValue:
        return self.math("not", value)

    def true(self) -> SSAValue:
        return self.const(True, i1)

    def is_int(self, value: SSAValue) -> bool:
        return isinstance(element_of(value.type), IntegerType)


Scalar = float | int | bool


def constant_value(value: SSAValue) -> Scalar | None:
    """The value of a ``triton.constant`` result (None for anything else)."""
    if isinstance(value.owner, ConstantOp):
        return literal_value(value.owner.value)
    return None


def convert(value: Scalar, element: Attribute) -> Scalar:
    """Triton's cast of a scalar: float to int truncates, anything to i1 is ``!= 0``."""
    if isinstance(element, IntegerType):
        if element.width.data == 1:
            return value != 0
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"cannot convert {value} to {element}")
        return int(value)
    return float(value)


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _fold_maximum(a: Scalar, b: Scalar, propagate: bool, larger: bool) -> Scalar:
    if isinstance(a, float) and math.isnan(a):
        return a if propagate else b
    if isinstance(b, float) and math.isnan(b):
        return b if propagate else a
    return max(a, b) if larger else min(a, b)


def fold_binary(name: str, a: Scalar, b: Scalar) -> Scalar | None:
    """``a <name> b`` with Triton's semantics, or None where folding is not exact."""
    is_int = not isinstance(a, float)
    try:
        if name == "add":
            return a + b
        if name == "sub":
            return a - b
        if name == "mul":
            return a * b
        if name == "truediv":
            return a / b
        if name == "floordiv" and is_int:
            return _trunc_div(int(a), int(b))
        if name == "mod":
            return int(a) - int(b) * _trunc_div(int(a), int(b)) if is_int else math.fmod(a, b)
        if name in ("maximum", "minimum", "maxnum", "minnum"):
            return _fold_maximum(
                a, b, name in ("maximum", "minimum"), name in ("maximum", "maxnum")
            )
        if name in ("and", "or", "xor") and is_int:
            ops = {"and": int.__and__, "or": int.__or__, "xor": int.__xor__}
            out = ops[name](int(a), int(b))
            return bool(out) if isinstance(a, bool) else out
    except (ZeroDivisionError, OverflowError, ValueError):
        return None
    return None


_COMPARE = {
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
}


def _const_key(value: float | int | bool) -> object:
    # 0.0 and -0.0, and NaN, are distinct constants.
    if isinstance(value, float):
        return ("f", repr(value))
    return (type(value).__name__, value)


__all__ = ["Scope", "TritonBuilder", "constant_value", "convert", "fold_binary"]

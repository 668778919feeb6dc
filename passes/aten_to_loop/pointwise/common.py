"""What every elementwise lowering shares: broadcasting, scalar operands, the one
``loop.pointwise`` per op, and the ``unary``/``binary`` lowering builders.

Types follow torch: the aten result type already holds the promoted dtype, so
arithmetic computes in it (half and bfloat16 in f32, rounded once at the end, as
Inductor does); comparisons compute in the promoted type of their inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sympy
from xdsl.ir import Attribute, SSAValue

from kiln.passes.aten_to_loop.body import BodyBuilder
from kiln.passes.aten_to_loop.context import Lowered, LoweringContext, OpArgs, SymFloat
from kiln.passes.aten_to_loop.tensors import ONE, TensorRef
from kiln.passes.aten_to_loop.types import NoLowering, compute_type, is_bool, is_float, promote

Expr = sympy.Expr
Value = SSAValue
Operand = TensorRef | int | float | bool | Expr | SymFloat
"""A tensor, or a Python (or symbolic int, or size-valued float) scalar argument."""
Formula = Callable[[BodyBuilder, list[Value]], Value]
Binary = Callable[[BodyBuilder, Value, Value], Value]


def broadcast_sizes(shapes: Sequence[Sequence[Expr]]) -> list[Expr]:
    """torch's broadcast of sizes (a symbolic size is never 1: torch specializes 0 and 1)."""
    rank = max((len(s) for s in shapes), default=0)
    out: list[Expr] = []
    for k in range(rank):
        candidates = [s[len(s) - rank + k] for s in shapes if len(s) - rank + k >= 0]
        pick: Expr = sympy.Integer(1)
        for size in candidates:
            if size != ONE and (pick == ONE or (not pick.is_Integer and size.is_Integer)):
                pick = size
        out.append(pick)
    return out


def scalar(bb: BodyBuilder, value: Any, ty: Attribute) -> Value:
    """A Python or symbolic scalar argument as a value of ``ty``."""
    if isinstance(value, SymFloat):
        value = value.expr  # an integer size: converted exactly as float(size) is
    if isinstance(value, sympy.Expr) and not value.is_Number:
        return bb.index_as(value, ty)
    if isinstance(value, sympy.Expr):
        value = int(value) if value.is_Integer else float(value)
    if isinstance(value, complex):
        raise NoLowering("complex scalar")
    return bb.const(value, ty)


def elementwise(
    ctx: LoweringContext,
    args: OpArgs,
    operands: Sequence[Operand],
    formula: Formula,
    compute: Attribute,
    result_index: int = 0,
) -> TensorRef:
    """A pointwise op: tensors broadcast and converted to ``compute``, scalars constants."""
    tensors = [o for o in operands if isinstance(o, TensorRef)]
    sizes = args.result_sizes(result_index, broadcast_sizes([t.sizes for t in tensors]))
    expanded = [o.expand(sizes) if isinstance(o, TensorRef) else o for o in operands]

    def body(bb: BodyBuilder, idx: Sequence[Expr]) -> Value:
        values = [
            bb.load_as(o, idx, compute) if isinstance(o, TensorRef) else scalar(bb, o, compute)
            for o in expanded
        ]
        return formula(bb, values)

    return ctx.pointwise(sizes, args.result_dtype(result_index), body)


def promoted(operands: Sequence[Operand]) -> Attribute:
    tensors = tuple((o.dtype, o.rank) for o in operands if isinstance(o, TensorRef))
    scalars = tuple(
        float if isinstance(o, SymFloat) else int if isinstance(o, sympy.Expr) else type(o)
        for o in operands
        if not isinstance(o, TensorRef)
    )
    return promote(tensors, scalars)


def add(bb: BodyBuilder, a: Value, b: Value) -> Value:
    return bb.or_(a, b) if is_bool(a.type) else bb.add_(a, b)


def mul(bb: BodyBuilder, a: Value, b: Value) -> Value:
    return bb.and_(a, b) if is_bool(a.type) else bb.mul(a, b)


def scaled(bb: BodyBuilder, b: Value, alpha: Any) -> Value:
    if alpha == 1:
        return b
    return mul(bb, b, scalar(bb, alpha, b.type))


def float_only(fn: Formula) -> Formula:
    def formula(bb: BodyBuilder, xs: list[Value]) -> Value:
        if not is_float(xs[0].type):
            raise NoLowering("integer inputs")
        return fn(bb, xs)

    return formula


def sigmoid(bb: BodyBuilder, x: Value) -> Value:
    one = bb.const(1.0, x.type)
    return bb.div(one, bb.add_(one, bb.exp(bb.neg(x))))


def operand(args: OpArgs, name: str) -> Operand | None:
    """A tensor argument's ref, or a scalar argument's value (None when absent)."""
    values = args.op.tensor_operands().get(name)
    if values is not None:
        return args.ctx.ref(values[0]) if values and values[0] is not None else None
    return args.value(name, symbolic_float=True)


def required(args: OpArgs, name: str) -> Operand:
    value = operand(args, name)
    if value is None:
        raise NoLowering(f"argument '{name}' is None")
    return value


def unary(
    formula: Formula, compute: str = "result"
) -> Callable[[LoweringContext, OpArgs], list[Lowered]]:
    """A one-input op; ``compute`` is ``result`` (the result dtype) or ``input``."""

    def lower(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
        x = args.tensor("self")
        ty = compute_type(args.result_dtype() if compute == "result" else x.dtype)
        return [elementwise(ctx, args, [x], formula, ty)]

    return lower


def binary(
    formula: Binary, names: tuple[str, str] = ("self", "other"), compute: str = "result"
) -> Callable[[LoweringContext, OpArgs], list[Lowered]]:
    """A two-operand op on tensors or scalars, computing in the result dtype
    (``compute="promoted"``: in the inputs' promoted dtype, for comparisons)."""

    def lower(ctx: LoweringContext, args: OpArgs) -> list[Lowered]:
        a, b = required(args, names[0]), required(args, names[1])
        ty = compute_type(args.result_dtype() if compute == "result" else promoted([a, b]))
        return [elementwise(ctx, args, [a, b], lambda bb, xs: formula(bb, xs[0], xs[1]), ty)]

    return lower


def no_lowering(message: str) -> Value:
    raise NoLowering(message)


__all__ = [
    "Binary",
    "Expr",
    "Formula",
    "Operand",
    "Value",
    "add",
    "binary",
    "broadcast_sizes",
    "elementwise",
    "float_only",
    "mul",
    "no_lowering",
    "operand",
    "promoted",
    "required",
    "scalar",
    "scaled",
    "sigmoid",
    "unary",
]

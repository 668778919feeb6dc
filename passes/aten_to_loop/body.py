"""Building loop bodies: loads through tensor refs, constants, casts and scalar math.

A :class:`BodyBuilder` owns the block of one loop op under construction. Index
variables are block arguments from the start; an input buffer becomes a block argument
the first time something loads from it, and a size symbol becomes a ``syms`` operand
the first time an index expression mentions it. Scalar helpers pick the ``arith`` or
``math`` op for the value's type (float, signed int, ``i1``), so lowerings read like
the formula they implement.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from typing import cast

import sympy
from xdsl.dialects import arith
from xdsl.dialects import math as xmath
from xdsl.dialects.builtin import (
    AnyFloat,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    f32,
    i1,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue

from kiln.dialects.loop.attributes import IndexExprAttr
from kiln.dialects.loop.body_ops import CheckIndexOp, IndexOp, LoadOp, YieldOp, fill_attr
from kiln.dialects.loop.expr import index_var, reduction_var, size_var
from kiln.dialects.loop.ops import segment_sizes
from kiln.dialects.loop.simplify import simplify_with_ranges
from kiln.passes.aten_to_loop.tensors import TensorRef
from kiln.passes.aten_to_loop.types import (
    NoLowering,
    bitwidth,
    check_body_type,
    is_bool,
    is_float,
)

Expr = sympy.Expr
Value = SSAValue


@cache
def expr_attr(e: Expr) -> IndexExprAttr:
    """Shared attribute per expression (attributes are immutable; building one verifies)."""
    return IndexExprAttr(e)


_INDEX = IndexType()

_CMPF = {"eq": "oeq", "ne": "une", "lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge"}
_CMPI_SIGNED = {"eq": "eq", "ne": "ne", "lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge"}
_CMPI_UNSIGNED = {"eq": "eq", "ne": "ne", "lt": "ult", "le": "ule", "gt": "ugt", "ge": "uge"}


class BodyBuilder:
    """Builds the body block of one loop op."""

    def __init__(
        self,
        sizes: Sequence[Expr],
        reduction_sizes: Sequence[Expr],
        global_syms: Mapping[sympy.Symbol, SSAValue],
        intern: Callable[[Expr], Expr],
    ) -> None:
        self.sizes = tuple(sizes)
        self.reduction_sizes = tuple(reduction_sizes)
        n, r = len(sizes), len(reduction_sizes)
        self.block = Block(arg_types=[_INDEX] * (n + r))
        for k, arg in enumerate(self.block.args):
            arg.name_hint = f"d{k}" if k < n else f"r{k - n}"
        self.index = [index_var(k) for k in range(n)]
        """``d0..``: the output index variables."""
        self.reduction = [reduction_var(k) for k in range(r)]
        """``r0..``: the reduction variables."""
        self.inputs: list[SSAValue] = []
        """Function-level buffers loaded from, in block-argument order."""
        self._input_args: dict[SSAValue, SSAValue] = {}
        self._global_syms = global_syms
        self._intern = intern
        self._local_syms: dict[sympy.Symbol, sympy.Symbol] = {}
        self.sym_values: list[SSAValue] = []
        """Function-level index values bound to ``s0..`` of this op."""
        self._constants: dict[tuple[object, Attribute], SSAValue] = {}
        ranges: dict[sympy.Symbol, Expr] = {}
        for var, size in zip(self.index + self.reduction, [*sizes, *reduction_sizes], strict=True):
            ranges[var] = size
        self._ranges = ranges

    # -- structure -------------------------------------------------------------------

    def add(self, op: Operation) -> Operation:
        self.block.add_op(op)
        return op

    def emit(self, op: Operation) -> SSAValue:
        self.block.add_op(op)
        return op.results[0]

    def localize(self, e: Expr) -> Expr:
        """Rename function-level size symbols to this op's ``s<k>`` (adding operands)."""
        if not self._global_syms:
            return e
        e = self._intern(e)  # divisions of sizes over symbols of their own
        free = [s for s in e.free_symbols if isinstance(s, sympy.Symbol) and s in self._global_syms]
        if not free:
            return e
        mapping: dict[sympy.Basic, sympy.Basic] = {}
        for symbol in sorted(free, key=str):
            local = self._local_syms.get(symbol)
            if local is None:
                local = size_var(len(self.sym_values))
                self._local_syms[symbol] = local
                self.sym_values.append(self._global_syms[symbol])
            mapping[symbol] = local
        return cast(Expr, e.xreplace(mapping))

    def input_arg(self, buffer: SSAValue) -> SSAValue:
        arg = self._input_args.get(buffer)
        if arg is None:
            arg = self.block.insert_arg(buffer.type, len(self.block.args))
            arg.name_hint = f"in{len(self.inputs)}"
            self._input_args[buffer] = arg
            self.inputs.append(buffer)
        return arg

    def finish(self, value: SSAValue) -> Block:
        self.block.add_op(YieldOp(value))
        return self.block

    # -- loads -----------------------------------------------------------------------

    def load(
        self,
        ref: TensorRef,
        idx: Sequence[Expr],
        mask: SSAValue | None = None,
        fill: float | int | bool | None = None,
        indirect: Sequence[SSAValue] = (),
    ) -> SSAValue:
        """Element ``idx`` of ``ref`` (``idx`` may use ``i<k>`` for ``indirect``)."""
        check_body_type(ref.dtype)
        e = ref.storage_index(idx)
        e = simplify_with_ranges(e, self._ranges)
        attr = expr_attr(self.localize(e))
        ty = ref.buffer.type
        assert isinstance(ty, MemRefType)
        properties: dict[str, Attribute] = {"index": attr}
        if mask is not None:
            assert fill is not None
            properties["fill"] = fill_attr(_fit(fill, ty.element_type), ty.element_type)
        properties["operandSegmentSizes"] = segment_sizes(1, len(indirect), 1 if mask else 0)
        op = LoadOp.create(
            operands=[self.input_arg(ref.buffer), *indirect, *([mask] if mask else [])],
            result_types=[ty.element_type],
            properties=properties,
        )
        return self.emit(op)

    def load_as(self, ref: TensorRef, idx: Sequence[Expr], ty: Attribute) -> SSAValue:
        return self.cast(self.load(ref, idx), ty)

    def index_value(self, e: Expr) -> SSAValue:
        """An index expression as an ``index`` value."""
        attr = expr_attr(self.localize(sympy.sympify(e)))
        return self.emit(IndexOp.create(properties={"expr": attr}, result_types=[_INDEX]))

    def check_index(self, index: SSAValue, size: Expr) -> SSAValue:
        """``index``, checked to lie in ``[0, size)`` (``loop.check_index``)."""
        attr = expr_attr(self.localize(sympy.sympify(size)))
        return self.emit(CheckIndexOp(index, attr))

    def index_as(self, e: Expr, ty: Attribute) -> SSAValue:
        """An index expression converted to ``ty`` (i64, f32, ...)."""
        v = self.emit(arith.IndexCastOp(self.index_value(e), i64))
        return self.cast(v, ty)

    # -- constants and casts ---------------------------------------------------------

    def const(self, value: float | int | bool, ty: Attribute) -> SSAValue:
        value = _fit(value, ty)
        key = (repr(value), ty)
        cached = self._constants.get(key)
        if cached is not None:
            return cached
        if isinstance(ty, AnyFloat):
            attr: Attribute = FloatAttr(float(value), ty)
        else:
            assert isinstance(ty, IntegerType | IndexType)
            attr = IntegerAttr(int(value), ty)
        result = self.emit(arith.ConstantOp(attr, ty))  # pyright: ignore[reportArgumentType]
        self._constants[key] = result
        return result

    def cast(self, v: SSAValue, ty: Attribute) -> SSAValue:
        """torch's conversion of ``v`` to ``ty`` (floats to int truncate, to bool test != 0)."""
        src = v.type
        if src == ty:
            return v
        if isinstance(src, IndexType):
            v = self.emit(arith.IndexCastOp(v, i64))
            return self.cast(v, ty)
        if is_bool(ty):
            zero = self.const(0, src)
            return self.cmp("ne", v, zero)
        if isinstance(src, AnyFloat) and isinstance(ty, AnyFloat):
            if src.bitwidth == ty.bitwidth:  # f16 <-> bf16 go through f32
                return self.cast(self.cast(v, f32), ty)
            op = arith.ExtFOp(v, ty) if src.bitwidth < ty.bitwidth else arith.TruncFOp(v, ty)
            return self.emit(op)
        if isinstance(ty, AnyFloat):
            op = arith.UIToFPOp(v, ty) if is_bool(src) else arith.SIToFPOp(v, ty)
            return self.emit(op)
        if isinstance(ty, IndexType):
            return self.emit(arith.IndexCastOp(self.cast(v, i64), ty))
        if not isinstance(ty, IntegerType):
            raise NoLowering(f"cannot convert {src} to {ty}")
        if is_float(src):
            return self.emit(arith.FPToSIOp(v, ty))
        if bitwidth(src) < bitwidth(ty):
            op = arith.ExtUIOp(v, ty) if is_bool(src) else arith.ExtSIOp(v, ty)
            return self.emit(op)
        return self.emit(arith.TruncIOp(v, ty))

    # -- arithmetic ------------------------------------------------------------------

    def _pick(
        self, v: SSAValue, on_float: type[Operation], on_int: type[Operation], *args: SSAValue
    ) -> SSAValue:
        op_cls = on_float if is_float(v.type) else on_int
        return self.emit(op_cls(v, *args))  # pyright: ignore[reportCallIssue]

    def add_(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self._pick(a, arith.AddfOp, arith.AddiOp, b)

    def sub(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self._pick(a, arith.SubfOp, arith.SubiOp, b)

    def mul(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self._pick(a, arith.MulfOp, arith.MuliOp, b)

    def div(self, a: SSAValue, b: SSAValue) -> SSAValue:
        """True division (floats)."""
        return self.emit(arith.DivfOp(a, b))

    def neg(self, a: SSAValue) -> SSAValue:
        if is_float(a.type):
            return self.emit(arith.NegfOp(a))
        return self.sub(self.const(0, a.type), a)

    def maximum(self, a: SSAValue, b: SSAValue) -> SSAValue:
        """NaN-propagating maximum (torch.maximum)."""
        if is_bool(a.type):
            return self.emit(arith.OrIOp(a, b))
        return self._pick(a, arith.MaximumfOp, arith.MaxSIOp, b)

    def minimum(self, a: SSAValue, b: SSAValue) -> SSAValue:
        if is_bool(a.type):
            return self.emit(arith.AndIOp(a, b))
        return self._pick(a, arith.MinimumfOp, arith.MinSIOp, b)

    def cmp(self, predicate: str, a: SSAValue, b: SSAValue) -> SSAValue:
        """``eq ne lt le gt ge`` with torch's semantics (``ne`` is true for NaN)."""
        if is_float(a.type):
            return self.emit(arith.CmpfOp(a, b, _CMPF[predicate]))
        table = _CMPI_UNSIGNED if is_bool(a.type) else _CMPI_SIGNED
        return self.emit(arith.CmpiOp(a, b, table[predicate]))

    def select(self, cond: SSAValue, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.emit(arith.SelectOp(cond, a, b))

    def and_(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.emit(arith.AndIOp(a, b))

    def or_(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.emit(arith.OrIOp(a, b))

    def xor(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.emit(arith.XOrIOp(a, b))

    def not_(self, a: SSAValue) -> SSAValue:
        return self.xor(a, self.const(True, i1))

    def math(self, op_cls: type[Operation], *args: SSAValue) -> SSAValue:
        return self.emit(op_cls(*args))  # pyright: ignore[reportCallIssue]

    def exp(self, a: SSAValue) -> SSAValue:
        return self.math(xmath.ExpOp, a)

    def isnan(self, a: SSAValue) -> SSAValue:
        return self.emit(arith.CmpfOp(a, a, "uno"))


def _fit(value: float | int | bool, ty: Attribute) -> float | int | bool:
    """``value`` as torch converts a Python scalar to ``ty`` (ints wrap)."""
    if is_bool(ty):
        return bool(value)
    if isinstance(ty, IntegerType | IndexType):
        if isinstance(value, float):
            if not math.isfinite(value):
                raise NoLowering(f"{value} cannot convert to {ty}")
            value = int(value)
        width = bitwidth(ty)
        value = int(value) & ((1 << width) - 1)
        return value - (1 << width) if value >= 1 << (width - 1) else value
    return float(value)

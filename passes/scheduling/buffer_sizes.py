"""The sizes of a ``kernel.program``'s buffers as expressions, where the program spells them.

Under dynamic shapes two buffers of one type (``memref<?x?x?x8xf32>``) may have other
sizes at run time, so ``buffer-reuse`` updates in place only where it can prove the sizes
equal. An allocation spells its sizes (its ``index`` operands); an extern result's are
ATen's, which the program spells through the extern's body: the ``as_strided`` views of
its inputs take host ``index`` values as sizes, and a few ops' results follow from their
operands' (matrix products, convolutions, permutes, reshapes). Host values become sympy
expressions over their arithmetic (``arith.muli %n, %h`` is ``n*h``; a value of any other
kind, an argument or ``memref.dim``, is a symbol of its own), so sizes computed twice, or
once as a product and once dim by dim, compare equal::

    %mm = kernel.extern (%x, %w) syms(%rows) : (...) -> memref<?x24xf32> {
    ^bb0(%a: tensor<?x?x?x8xf32>, %b: tensor<24x8x1x1xf32>, %r: index):
      %v = aten.as_strided.default(%a, size = [%r, 8], stride = [8, 1]) : ...
      ...
      %p = aten.mm.default(%v, %t) : (tensor<?x8xf32>, tensor<8x24xf32>) -> tensor<?x24xf32>

has sizes ``[n*h*w, 24]`` when ``%rows`` is ``(%n * %h) * %w``.
"""

from __future__ import annotations

from collections.abc import Sequence

import sympy
from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, IntegerAttr, MemRefType, TensorType
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue

from kiln.dialects.aten.attributes import SymRefAttr
from kiln.dialects.aten.ops import AtenOp
from kiln.dialects.kernel.kernel_ops import YieldOp
from kiln.dialects.kernel.program_ops import AllocOp, ExternOp, ReuseOp
from kiln.dialects.loop.expr import floordiv, same_value
from kiln.dialects.loop.host_expr import arith_expr

Expr = sympy.Expr

_RESHAPES = ("aten::reshape.default", "aten::view.default")
_MATRIX_PRODUCTS = ("aten::mm.default", "aten::addmm.default", "aten::bmm.default")


class BufferSizes:
    """Size expressions of one program's buffers (host values map to the same symbol
    within one instance)."""

    def __init__(self) -> None:
        self._symbols: dict[object, sympy.Symbol] = {}
        self._exprs: dict[SSAValue, Expr] = {}

    def host(self, value: SSAValue) -> Expr:
        """A host ``index`` value as an expression over the values it is computed from."""
        cached = self._exprs.get(value)
        if cached is not None:
            return cached
        e = arith_expr(value.owner, self.host)
        if e is None:
            e = self._symbol(self._key(value))
        self._exprs[value] = e
        return e

    def _symbol(self, key: object) -> sympy.Symbol:
        symbol = self._symbols.get(key)
        if symbol is None:
            symbol = sympy.Symbol(f"h{len(self._symbols)}", integer=True, positive=True)
            self._symbols[key] = symbol
        return symbol

    def _key(self, value: SSAValue) -> object:
        """What identifies an opaque host value: the value, or for a region-free op of
        one result its name, attributes and operands (two ``memref.dim`` of one buffer
        and dim are one size)."""
        owner = value.owner
        if isinstance(owner, BlockArgument) or not isinstance(owner, Operation):
            return value
        if owner.regions or len(owner.results) != 1:
            return value
        return (
            owner.name,
            str(owner.attributes),
            str(owner.properties),
            tuple(self.host(v) for v in owner.operands),
        )

    def of_buffer(self, value: SSAValue) -> list[Expr] | None:
        """The sizes of a program buffer: an allocation's, or an extern result's as its
        body computes them; None where the program does not spell them."""
        ty = value.type
        if not isinstance(ty, MemRefType):
            return None
        shape = ty.get_shape()
        owner = value.owner
        if isinstance(owner, AllocOp):
            operands = iter(owner.dynamic_sizes)
            return [sympy.Integer(d) if d >= 0 else self.host(next(operands)) for d in shape]
        if isinstance(owner, ReuseOp) and owner.source.type == ty:
            return self.of_buffer(owner.source)  # the wrapper keeps the source's shape
        if isinstance(owner, ExternOp):
            yielded = owner.body.block.last_op
            assert isinstance(yielded, YieldOp)
            index = next(k for k, r in enumerate(owner.outputs) if r is value)
            return self._of_tensor(yielded.values[index], owner)
        if ty.has_static_shape():
            return [sympy.Integer(d) for d in shape]
        return None

    def same(self, a: Sequence[Expr], b: Sequence[Expr]) -> bool:
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b, strict=True))

    def same_sizes(self, a: SSAValue, b: SSAValue) -> bool:
        x, y = self.of_buffer(a), self.of_buffer(b)
        return x is not None and y is not None and self.same(x, y)

    def same_count(self, a: SSAValue, b: SSAValue) -> bool:
        """Whether the buffers provably hold the same number of elements."""
        x, y = self.of_buffer(a), self.of_buffer(b)
        return x is not None and y is not None and same_value(sympy.Mul(*x), sympy.Mul(*y))

    # -- inside an extern body --------------------------------------------------------

    def _of_tensor(self, value: SSAValue, extern: ExternOp) -> list[Expr] | None:
        ty = value.type
        if not isinstance(ty, TensorType):
            return None
        shape: list[int] = list(ty.get_shape())  # pyright: ignore[reportUnknownArgumentType, reportUnknownMemberType]
        if all(d >= 0 for d in shape):
            return [sympy.Integer(d) for d in shape]
        sizes = self._rule(value, extern)
        if sizes is None or len(sizes) != len(shape):
            return None
        # A static dim of the type is exact; the rule fills in the others.
        return [sympy.Integer(d) if d >= 0 else s for d, s in zip(shape, sizes, strict=True)]

    def _rule(self, value: SSAValue, extern: ExternOp) -> list[Expr] | None:
        if isinstance(value, BlockArgument):
            if value.index < len(extern.inputs):
                return self.of_buffer(extern.inputs[value.index])
            return None
        op = value.owner
        if not isinstance(op, AtenOp) or len(op.results) != 1:
            return None
        name = op.overload_name
        if name == "aten::as_strided.default":
            return self._int_list(op, "size", extern)
        if name in _RESHAPES:
            sizes = self._int_list(
                op, "shape" if name == "aten::reshape.default" else "size", extern
            )
            return None if sizes is None or any(s == -1 for s in sizes) else sizes
        if name == "aten::permute.default":
            dims = self._int_list(op, "dims", extern)
            source = self._of_tensor(op.operands[0], extern)
            if source is None or dims is None:
                return None
            return [source[int(d) % len(source)] for d in dims]
        if name in _MATRIX_PRODUCTS:
            return self._matrix_product(op, extern)
        if name == "aten::convolution.default":
            return self._convolution(op, extern)
        return None

    def _matrix_product(self, op: AtenOp, extern: ExternOp) -> list[Expr] | None:
        tensors = op.tensor_operands()
        first, second = ("mat1", "mat2") if "mat1" in tensors else ("self", "mat2")
        a, b = tensors[first][0], tensors[second][0]
        if a is None or b is None:
            return None
        x, y = self._of_tensor(a, extern), self._of_tensor(b, extern)
        if x is None or y is None:
            return None
        return [*x[:-1], y[-1]]

    def _convolution(self, op: AtenOp, extern: ExternOp) -> list[Expr] | None:
        tensors = op.tensor_operands()
        x, w = tensors["input"][0], tensors["weight"][0]
        if x is None or w is None:
            return None
        xs, ws = self._of_tensor(x, extern), self._of_tensor(w, extern)
        stride = self._int_list(op, "stride", extern)
        padding = self._int_list(op, "padding", extern)
        dilation = self._int_list(op, "dilation", extern)
        transposed = op.arg_attr("transposed")
        if (
            xs is None
            or ws is None
            or stride is None
            or padding is None
            or dilation is None
            or not (isinstance(transposed, IntegerAttr) and int(transposed.value.data) == 0)
        ):
            return None
        spatial = len(xs) - 2
        if not len(stride) == len(padding) == len(dilation) == spatial:
            return None
        out = [xs[0], ws[0]]
        for k in range(spatial):
            span = xs[2 + k] + 2 * padding[k] - dilation[k] * (ws[2 + k] - 1) - 1
            if not stride[k].is_Integer or int(stride[k]) <= 0:
                return None
            out.append(floordiv(span, stride[k]) + 1)
        return out

    def _int_list(self, op: AtenOp, name: str, extern: ExternOp) -> list[Expr] | None:
        """An ``int[]`` argument: constants, and sym operands that are the extern's
        ``syms`` (as their host expressions)."""
        attr: Attribute | None = op.arg_attr(name)
        if isinstance(attr, DenseArrayBase):  # constants only
            return [sympy.Integer(int(v)) for v in attr.get_values()]  # pyright: ignore[reportUnknownVariableType, reportUnknownMemberType, reportUnknownArgumentType]
        if not isinstance(attr, ArrayAttr):
            return None
        syms = op.sym_operands()
        first_sym = len(extern.inputs)
        out: list[Expr] = []
        for item in attr.data:
            if isinstance(item, IntegerAttr):
                out.append(sympy.Integer(int(item.value.data)))  # pyright: ignore[reportUnknownArgumentType, reportUnknownMemberType]
                continue
            if not isinstance(item, SymRefAttr):
                return None
            arg = syms[item.data]
            if (
                not isinstance(arg, BlockArgument)
                or arg.block is not extern.body.block
                or arg.index < first_sym
            ):
                return None
            out.append(self.host(extern.syms[arg.index - first_sym]))
        return out


__all__ = ["BufferSizes"]

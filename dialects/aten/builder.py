"""Building aten ops in a rewrite: :class:`AtenBuilder` inserts them before one point."""

from __future__ import annotations

from typing import Any

from xdsl.dialects import arith
from xdsl.dialects.builtin import DYNAMIC_INDEX, Float32Type, IndexType, TensorType
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from kiln.dialects.aten.dialect import op_class

Size = int | SSAValue
"""A size argument: static, or an ``index`` value."""


def _static(size: Size) -> int:
    return size if isinstance(size, int) else DYNAMIC_INDEX


class AtenBuilder:
    """Inserts new aten ops of one element type (float32 unless told) and the index
    arithmetic of their sizes before one point, with one location."""

    def __init__(self, point: InsertPoint, location: Any, element: Attribute | None = None) -> None:
        self.point = point
        self.location = location
        self.element: Attribute = element if element is not None else Float32Type()

    def insert(self, op: Operation, name: str) -> SSAValue:
        op.location = self.location
        Rewriter.insert_op(op, self.point)
        op.results[0].name_hint = name
        return op.results[0]

    def __call__(
        self, overload: str, args: dict[str, Any], shape: list[Size], name: str
    ) -> SSAValue:
        cls = op_class(overload)
        assert cls is not None
        return self.insert(
            cls.from_args(args, [TensorType(self.element, [_static(d) for d in shape])]), name
        )

    def size(self, tensor: SSAValue, dim: int, static: int, name: str) -> Size:
        """Dim ``dim`` of ``tensor``: ``static`` when it is, else its ``sym_size.int``."""
        if static != DYNAMIC_INDEX:
            return static
        cls = op_class("sym_size.int")
        assert cls is not None
        return self.insert(cls.from_args({"self": tensor, "dim": dim}, [IndexType()]), name)

    def product(self, factors: list[Size], name: str) -> Size:
        """The product of ``factors``: an int when all are static, else ``arith.muli``s
        (static factors folded into one constant, so that the expression is the sizes')."""
        constant = 1
        values: list[SSAValue] = []
        for factor in factors:
            if isinstance(factor, int):
                constant *= factor
            else:
                values.append(factor)
        if not values:
            return constant
        if constant != 1:
            values.append(
                self.insert(arith.ConstantOp.from_int_and_width(constant, IndexType()), "c")
            )
        result = values[0]
        for k, value in enumerate(values[1:], 2):
            hint = name if k == len(values) else f"{name}_partial"
            result = self.insert(arith.MuliOp(result, value), hint)
        return result


__all__ = ["AtenBuilder", "Size"]

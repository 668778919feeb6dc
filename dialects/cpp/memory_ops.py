"""Buffer access in the cpp dialect: loads, stores, index arithmetic and local arrays.

Addresses are index expressions (:mod:`kiln.dialects.loop.expr`) over the op's index
operands, written ``i0``, ``i1``, ... in operand order: loop induction variables,
sizes, or indices computed in the body. A buffer is a ``memref`` read through its flat,
contiguous storage.

```mlir
%v = cpp.load %in_ptr0["16*i0 + i1"](%x0, %x1) : memref<4x16xf32>
%w = cpp.load %in_ptr1["i0 - 1"](%x0) if %inside else 0.0 : memref<16xf32>
%e = cpp.load %in_ptr2["8*i0 + i1"](%row, %x1) checked : memref<20x8xf32>
cpp.store %v, %out_ptr0["16*i0 + i1"](%x0, %x1) : memref<4x16xf32>
cpp.atomic_add %v, %out_ptr1["8*i0 + i1"](%row, %x1) : memref<20x8xf32>
%i = cpp.index "i0 + 16*i1"(%l, %rb)
%acc = cpp.alloca : memref<16xf32>
cpp.check_index %row, %n
```

A ``checked`` load (an indirect, data-dependent address) first tests that the address
lies inside the buffer: if not, it reads nothing (its value is zero, or the fill) and the
function reports an index error to its caller (C's out-of-bounds read would be
undefined behaviour). ``cpp.check_index`` tests an indirect index against the size of
the dimension it indexes (which the flat bound of a checked load cannot see: index 6 of
a 4x6 buffer's last dim is inside the buffer) and raises the same error.
"""

from __future__ import annotations

from collections.abc import Sequence

import sympy
from xdsl.dialects.builtin import (
    IndexType,
    MemRefType,
    UnitAttr,
    i1,
)
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import (
    AnyAttr,
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import MemoryWriteEffect, Pure
from xdsl.utils.exceptions import VerifyException

from kiln.dialects.loop.attributes import IndexExprAttr
from kiln.dialects.loop.syntax import Address, ElementOf, Fill, FilledBuffer, Subscript, fill_attr


def check_operand_symbols(op: IRDLOperation, expr: IndexExprAttr, n_operands: int) -> None:
    """An address may only use ``i0..i<n-1>``: the op's index operands."""
    if (symbol := expr.foreign_symbol("i", n_operands)) is not None:
        raise VerifyException(
            f"{op.name}: index '{expr.text}' uses {symbol}; only i0..i{n_operands - 1} "
            f"(its {n_operands} index operand(s)) exist here"
            if n_operands
            else f"{op.name}: index '{expr.text}' uses {symbol} but the op has no index operands"
        )


@irdl_op_definition
class LoadOp(IRDLOperation):
    """Reads one element of a buffer (see the module docstring).

    With a mask, lanes where it is false read nothing and give the fill value.
    """

    name = "cpp.load"

    buffer = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    mask = opt_operand_def(i1)
    index = prop_def(IndexExprAttr)
    fill = opt_prop_def(AnyAttr())
    checked = opt_prop_def(UnitAttr)
    result = result_def()

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    def __init__(
        self,
        buffer: SSAValue,
        index: sympy.Expr,
        indices: Sequence[SSAValue],
        mask: SSAValue | None = None,
        fill: Attribute | None = None,
        checked: bool = False,
    ) -> None:
        ty = buffer.type
        assert isinstance(ty, MemRefType)
        properties: dict[str, Attribute] = {"index": IndexExprAttr(index)}
        if fill is not None:
            properties["fill"] = fill
        if checked:
            properties["checked"] = UnitAttr()
        super().__init__(
            operands=[buffer, list(indices), [] if mask is None else [mask]],
            result_types=[ty.element_type],
            properties=properties,
        )

    def verify_(self) -> None:
        ty = self.buffer.type
        assert isinstance(ty, MemRefType)
        if self.result.type != ty.element_type:
            raise VerifyException(
                f"{self.name}: result {self.result.type} is not the element type of {ty}"
            )
        if (self.mask is None) != (self.fill is None):
            raise VerifyException(f"{self.name}: a mask needs a fill value and vice versa")
        if self.fill is not None and getattr(self.fill, "type", None) != ty.element_type:
            raise VerifyException(
                f"{self.name}: fill {self.fill} must be a {ty.element_type} constant"
            )
        check_operand_symbols(self, self.index, len(self.indices))

    assembly_format = (
        "$buffer custom<Subscript>($index, $indices) (`if` $mask^ `else` custom<Fill>($fill))? "
        "(`checked` $checked^)? attr-dict `:` "
        "custom<FilledBuffer>(type($buffer), type($result), ref($fill))"
    )
    custom_directives = (Subscript, Fill, FilledBuffer)


@irdl_op_definition
class StoreOp(IRDLOperation):
    """Writes one element of a buffer.

    ```mlir
    cpp.store %v, %out_ptr0["i0"](%x0) : memref<16xf32>
    ```
    """

    name = "cpp.store"

    value = operand_def()
    buffer = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    index = prop_def(IndexExprAttr)

    def __init__(
        self, value: SSAValue, buffer: SSAValue, index: sympy.Expr, indices: Sequence[SSAValue]
    ) -> None:
        super().__init__(
            operands=[value, buffer, list(indices)], properties={"index": IndexExprAttr(index)}
        )

    def verify_(self) -> None:
        ty = self.buffer.type
        assert isinstance(ty, MemRefType)
        if self.value.type != ty.element_type:
            raise VerifyException(f"{self.name}: cannot store a {self.value.type} into {ty}")
        check_operand_symbols(self, self.index, len(self.indices))

    assembly_format = (
        "$value `,` $buffer custom<Subscript>($index, $indices) attr-dict "
        "`:` custom<ElementOf>(type($buffer), type($value))"
    )
    custom_directives = (Subscript, ElementOf)


@irdl_op_definition
class AtomicAddOp(IRDLOperation):
    """Adds a value to one element of a buffer atomically (``#pragma omp atomic``): the
    accumulating store of a ``loop.scatter``, whose positions other threads may share.

    ```mlir
    cpp.atomic_add %v, %out_ptr0["8*i0 + i1"](%row, %x1) : memref<100x8xf32>
    ```
    """

    name = "cpp.atomic_add"

    value = operand_def()
    buffer = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    index = prop_def(IndexExprAttr)

    traits = traits_def(MemoryWriteEffect())

    def __init__(
        self, value: SSAValue, buffer: SSAValue, index: sympy.Expr, indices: Sequence[SSAValue]
    ) -> None:
        super().__init__(
            operands=[value, buffer, list(indices)], properties={"index": IndexExprAttr(index)}
        )

    def verify_(self) -> None:
        ty = self.buffer.type
        assert isinstance(ty, MemRefType)
        if self.value.type != ty.element_type:
            raise VerifyException(f"{self.name}: cannot add a {self.value.type} into {ty}")
        check_operand_symbols(self, self.index, len(self.indices))

    assembly_format = (
        "$value `,` $buffer custom<Subscript>($index, $indices) attr-dict "
        "`:` custom<ElementOf>(type($buffer), type($value))"
    )
    custom_directives = (Subscript, ElementOf)


@irdl_op_definition
class IndexOp(IRDLOperation):
    """An index expression over index operands, as an ``index`` value.

    ```mlir
    %i = cpp.index "16*i0 + i1"(%rb, %l)
    ```
    """

    name = "cpp.index"

    indices = var_operand_def(IndexType)
    expr = prop_def(IndexExprAttr)
    result = result_def(IndexType)

    traits = traits_def(Pure())

    def __init__(self, expr: sympy.Expr, indices: Sequence[SSAValue]) -> None:
        super().__init__(
            operands=[list(indices)],
            result_types=[IndexType()],
            properties={"expr": IndexExprAttr(expr)},
        )

    def verify_(self) -> None:
        check_operand_symbols(self, self.expr, len(self.indices))

    assembly_format = "custom<Address>($expr, $indices) attr-dict"
    custom_directives = (Address,)


@irdl_op_definition
class CheckIndexOp(IRDLOperation):
    """Raises the function's index error flag unless ``0 <= index < bound``.

    ```mlir
    cpp.check_index %row, %n
    ```
    """

    name = "cpp.check_index"

    index = operand_def(IndexType)
    bound = operand_def(IndexType)

    assembly_format = "$index `,` $bound attr-dict"

    def __init__(self, index: SSAValue, bound: SSAValue) -> None:
        super().__init__(operands=[index, bound])


@irdl_op_definition
class AllocaOp(IRDLOperation):
    """A local array of static size (a C array on the stack): accumulators, partials.

    ```mlir
    %acc = cpp.alloca : memref<16xf32>
    ```
    """

    name = "cpp.alloca"

    result = result_def(MemRefType)

    assembly_format = "attr-dict `:` type($result)"

    def __init__(self, ty: MemRefType) -> None:
        super().__init__(result_types=[ty])

    def verify_(self) -> None:
        ty = self.result.type
        assert isinstance(ty, MemRefType)
        if any(d < 0 for d in ty.get_shape()):
            raise VerifyException(f"{self.name}: a local array has a static size, not {ty}")


__all__ = [
    "AllocaOp",
    "AtomicAddOp",
    "CheckIndexOp",
    "IndexOp",
    "LoadOp",
    "StoreOp",
    "check_operand_symbols",
    "fill_attr",
]

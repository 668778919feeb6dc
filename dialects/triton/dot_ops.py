"""``tl.dot``: a block matrix product accumulated into a float32 block.

```mlir
%acc1 = triton.dot %a, %b, %acc0 precision "ieee" : !triton.block<[YBLOCK, RBLOCK], f32>, !triton.block<[RBLOCK, XBLOCK], f32>, !triton.block<[YBLOCK, XBLOCK], f32> -> !triton.block<[YBLOCK, XBLOCK], f32>
```

prints ``acc1 = tl.dot(a, b, acc0, input_precision="ieee")``. ``precision`` is Triton's
``input_precision`` for float32 operands (``ieee``: exact float32 products, what
cuBLAS computes while TF32 is off; ``tf32``); half operands take none.
"""

from __future__ import annotations

from xdsl.dialects.builtin import Float32Type, StringAttr
from xdsl.ir import SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from kiln.dialects.triton.types import element_of, shape_of

PRECISIONS = ("ieee", "tf32")


@irdl_op_definition
class DotOp(IRDLOperation):
    """``tl.dot(lhs, rhs, acc)`` (see the module docstring)."""

    name = "triton.dot"

    lhs = operand_def()
    rhs = operand_def()
    acc = operand_def()
    result = result_def()
    precision = opt_prop_def(StringAttr)

    traits = traits_def(Pure())

    assembly_format = (
        "$lhs `,` $rhs `,` $acc (`precision` $precision^)? attr-dict `:` type($lhs) `,` "
        "type($rhs) `,` type($acc) `->` type($result)"
    )

    def __init__(
        self, lhs: SSAValue, rhs: SSAValue, acc: SSAValue, precision: str | None = None
    ) -> None:
        super().__init__(
            operands=[lhs, rhs, acc],
            result_types=[acc.type],
            properties={"precision": StringAttr(precision)} if precision is not None else {},
        )

    def verify_(self) -> None:
        lhs, rhs, acc = (shape_of(v.type) for v in (self.lhs, self.rhs, self.acc))
        if len(lhs) != 2 or len(rhs) != 2 or len(acc) != 2:
            raise VerifyException(f"{self.name}: operands must be 2-D blocks")
        if lhs[1] != rhs[0] or (lhs[0], rhs[1]) != acc:
            raise VerifyException(
                f"{self.name}: cannot multiply {list(lhs)} by {list(rhs)} into {list(acc)}"
            )
        if element_of(self.lhs.type) != element_of(self.rhs.type):
            raise VerifyException(f"{self.name}: the operands have different element types")
        if not isinstance(element_of(self.acc.type), Float32Type):
            raise VerifyException(f"{self.name}: the accumulator must be f32")
        if self.result.type != self.acc.type:
            raise VerifyException(f"{self.name}: the result must have the accumulator's type")
        if self.precision is not None:
            if self.precision.data not in PRECISIONS:
                raise VerifyException(
                    f"{self.name}: precision {self.precision.data!r} is not one of {PRECISIONS}"
                )
            if not isinstance(element_of(self.lhs.type), Float32Type):
                raise VerifyException(f"{self.name}: a precision applies to f32 operands only")


__all__ = ["PRECISIONS", "DotOp"]

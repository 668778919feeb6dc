"""Reductions along a block axis, and the elementwise combines of looped accumulators.

``triton.reduce`` removes ``axis`` from its operands' shape:

* ``sum``, ``prod``, ``max``, ``min``, ``any``, ``all``: one operand, one result
  (``max``/``min`` of floats propagate NaN, as ``torch.amax`` does);
* ``argmax``, ``argmin``: values and their indices in, the winning value and index out
  (the first index among equal values; NaN wins, as in torch);
* ``welford``: per-lane mean, m2 (sum of squared deviations), weight and shift in (the
  mean is that of the values less the shift, the lane's first value), their combination
  out.

``triton.combine`` merges an accumulator with a new block elementwise, inside the loop
of a looped reduction: ``argmax``/``argmin`` take (value, index) twice, ``welford`` takes
(mean, m2, weight, shift) and a new value (one Welford update).

```mlir
%s = triton.reduce sum %x axis 1 : (!triton.block<[XBLOCK, RBLOCK], f32>) -> !triton.block<[XBLOCK], f32>
%v, %i = triton.reduce argmax %x, %idx axis 1 : (!triton.block<[XBLOCK, RBLOCK], f32>, !triton.block<[XBLOCK, RBLOCK], i64>) -> (!triton.block<[XBLOCK], f32>, !triton.block<[XBLOCK], i64>)
%m, %m2, %w, %s = triton.combine welford %mean, %acc2, %weight, %shift, %x : (...) -> (...)
```
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import AnyFloat, IntAttr, IntegerType, StringAttr, i1
from xdsl.ir import SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    prop_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from kiln.dialects.loop.syntax import Ident, Int
from kiln.dialects.triton.elementwise import broadcast_result
from kiln.dialects.triton.types import element_of, shape_of, with_shape

REDUCE_ARITY = {
    "sum": 1,
    "prod": 1,
    "max": 1,
    "min": 1,
    "any": 1,
    "all": 1,
    "argmax": 2,
    "argmin": 2,
    "welford": 4,
}
"""``triton.reduce`` kinds and how many operands (and results) each has."""

COMBINE_ARITY = {"argmax": (4, 2), "argmin": (4, 2), "welford": (5, 4)}
"""``triton.combine`` kinds: (operands, results)."""


@irdl_op_definition
class ReduceOp(IRDLOperation):
    """A reduction along ``axis`` (see the module docstring for the kinds)."""

    name = "triton.reduce"

    kind = prop_def(StringAttr)
    axis = prop_def(IntAttr)
    inputs = var_operand_def()
    outputs = var_result_def()

    traits = traits_def(Pure())

    def __init__(self, kind: str, inputs: Sequence[SSAValue], axis: int) -> None:
        results = []
        for value in inputs:
            shape = list(shape_of(value.type))
            del shape[axis]
            results.append(with_shape(shape, element_of(value.type)))
        super().__init__(
            operands=[list(inputs)],
            properties={"kind": StringAttr(kind), "axis": IntAttr(axis)},
            result_types=[results],
        )

    def verify_(self) -> None:
        kind = self.kind.data
        if kind not in REDUCE_ARITY:
            raise VerifyException(f"{self.name}: unknown kind '{kind}'")
        arity = REDUCE_ARITY[kind]
        if len(self.inputs) != arity or len(self.outputs) != arity:
            raise VerifyException(f"{self.name} {kind} takes and gives {arity} value(s)")
        shape = shape_of(self.inputs[0].type)
        if not 0 <= self.axis.data < len(shape):
            raise VerifyException(f"{self.name}: axis {self.axis.data} out of range for {shape}")
        reduced = list(shape)
        del reduced[self.axis.data]
        for value, result in zip(self.inputs, self.outputs, strict=True):
            if shape_of(value.type) != shape:
                raise VerifyException(f"{self.name}: operands must have one shape")
            expected = with_shape(reduced, element_of(value.type))
            if result.type != expected:
                raise VerifyException(f"{self.name}: result {result.type} should be {expected}")
        element = element_of(self.inputs[0].type)
        if kind in ("any", "all") and element != i1:
            raise VerifyException(f"{self.name} {kind} reduces i1, not {element}")
        if kind in ("argmax", "argmin") and not isinstance(
            element_of(self.inputs[1].type), IntegerType
        ):
            raise VerifyException(f"{self.name} {kind}: the second operand holds integer indices")
        if kind == "welford" and not isinstance(element, AnyFloat):
            raise VerifyException(f"{self.name} welford reduces floats")

    assembly_format = (
        "custom<Ident>($kind) $inputs `axis` custom<Int>($axis) attr-dict "
        "`:` functional-type($inputs, $outputs)"
    )
    custom_directives = (Ident, Int)


@irdl_op_definition
class CombineOp(IRDLOperation):
    """An elementwise accumulator update of a looped reduction (module docstring)."""

    name = "triton.combine"

    kind = prop_def(StringAttr)
    inputs = var_operand_def()
    outputs = var_result_def()

    traits = traits_def(Pure())

    def __init__(self, kind: str, inputs: Sequence[SSAValue]) -> None:
        n_results = COMBINE_ARITY[kind][1]
        result_types = []
        for k in range(n_results):
            partners = (
                [inputs[k], inputs[k + n_results]] if kind != "welford" else [inputs[k], inputs[4]]
            )
            result_types.append(broadcast_result(self, partners, element_of(inputs[k].type)))
        super().__init__(
            operands=[list(inputs)],
            properties={"kind": StringAttr(kind)},
            result_types=[result_types],
        )

    def verify_(self) -> None:
        kind = self.kind.data
        if kind not in COMBINE_ARITY:
            raise VerifyException(f"{self.name}: unknown kind '{kind}'")
        n_in, n_out = COMBINE_ARITY[kind]
        if len(self.inputs) != n_in or len(self.outputs) != n_out:
            raise VerifyException(f"{self.name} {kind} takes {n_in} operands and gives {n_out}")
        shape = broadcast_result(self, list(self.inputs), i1)
        for result in self.outputs:
            if shape_of(result.type) != shape_of(shape):
                raise VerifyException(
                    f"{self.name}: results must have the operands' broadcast shape"
                )

    assembly_format = (
        "custom<Ident>($kind) $inputs attr-dict `:` functional-type($inputs, $outputs)"
    )
    custom_directives = (Ident,)


__all__ = ["COMBINE_ARITY", "REDUCE_ARITY", "CombineOp", "ReduceOp"]

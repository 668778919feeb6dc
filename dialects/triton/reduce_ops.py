"""Reductions along a block axis, and the elementwise combines of looped accumulators.

``triton.reduce`` removes ``axis`` from its operands' shape:

* ``sum``, ``prod``, ``max``, ``min``, ``any``, ``all``: one operand, one result
  (``max``/``min`` of floats propagate NaN, as ``torch.amax`` does);
* ``argmax``, ``argmin``: values and their indices in, the winning value and index out
  (the first index among equal values; NaN wins, as in torch);
* ``welford``: per-lane mean, m2 (sum of squared deviations) and weight in, their
  combination out.

``triton.combine`` merges an accumulator with a new block elementwise, inside the loop
of a looped reduction: ``argmax``/``argmin`` take (value, index) twice, ``welford`` takes
(mean, m2, weight) and a new value (one Welford update).

```mlir
%s = triton.reduce sum %x axis 1 : (!triton.block<[XBLOCK, RBLOCK], f32>) -> !triton.block<[XBLOCK], f32>
%v, %i = triton.reduce argmax %x, %idx axis 1 : (!triton.block<[XBLOCK, RBLOCK], f32>, !triton.block<[XBLOCK, RBLOCK], i64>) -> (!triton.block<[XBLOCK], f32>, !triton.block<[XBLOCK], i64>)
%m, %m2, %w = triton.combine welford %mean, %acc2, %weight, %x : (...) -> (...)
```
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import AnyFloat, IntAttr, IntegerType, StringAttr, i1
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    prop_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

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
    "welford": 3,
}
"""``triton.reduce`` kinds and how many operands (and results) each has."""

COMBINE_ARITY = {"argmax": (4, 2), "argmin": (4, 2), "welford": (4, 3)}
"""``triton.combine`` kinds: (operands, results)."""


def _print_generic_tail(op: IRDLOperation, printer: Printer, kind: str, suffix: str = "") -> None:
    printer.print_string(f" {kind} ")
    printer.print_list(op.operands, printer.print_ssa_value)
    printer.print_string(suffix)
    printer.print_op_attributes(op.attributes)
    printer.print_string(" : ")
    printer.print_function_type(op.operand_types, op.result_types)


def _parse_generic_tail(
    parser: Parser, kinds: Sequence[str], axis: bool
) -> tuple[str, list[SSAValue], list[Attribute], int | None, dict[str, Attribute]]:
    pos = parser.pos
    kind = parser.parse_identifier("expected a kind")
    if kind not in kinds:
        parser.raise_error(f"unknown kind '{kind}' (one of {', '.join(kinds)})", pos)
    operands = parser.parse_comma_separated_list(
        parser.Delimiter.NONE, parser.parse_unresolved_operand
    )
    axis_value = None
    if axis:
        parser.parse_keyword("axis")
        axis_value = parser.parse_integer(allow_boolean=False, allow_negative=False)
    attributes = parser.parse_optional_attr_dict()
    parser.parse_punctuation(":")
    fn_type = parser.parse_function_type()
    values = parser.resolve_operands(operands, fn_type.inputs.data, pos)
    return kind, list(values), list(fn_type.outputs.data), axis_value, attributes


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

    def print(self, printer: Printer) -> None:
        _print_generic_tail(self, printer, self.kind.data, f" axis {self.axis.data}")

    @classmethod
    def parse(cls, parser: Parser) -> ReduceOp:
        kind, values, _, axis, attributes = _parse_generic_tail(parser, list(REDUCE_ARITY), True)
        assert axis is not None
        op = cls(kind, values, axis)
        op.attributes.update(attributes)
        return op


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
                [inputs[k], inputs[k + n_results]] if kind != "welford" else [inputs[k], inputs[3]]
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

    def print(self, printer: Printer) -> None:
        _print_generic_tail(self, printer, self.kind.data)

    @classmethod
    def parse(cls, parser: Parser) -> CombineOp:
        kind, values, _, _, attributes = _parse_generic_tail(parser, list(COMBINE_ARITY), False)
        op = cls(kind, values)
        op.attributes.update(attributes)
        return op


__all__ = ["COMBINE_ARITY", "REDUCE_ARITY", "CombineOp", "ReduceOp"]

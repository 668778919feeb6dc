"""The ``aten`` Dialect object: generated ops, the generic op and constants."""

from __future__ import annotations

from functools import cache

from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, TensorType
from xdsl.ir import Dialect, Operation
from xdsl.irdl import IRDLOperation, irdl_op_definition, prop_def, result_def, traits_def
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import ConstantLike, Pure
from xdsl.utils.exceptions import VerifyException

from kiln.dialects.aten.attributes import OpaqueDtypeType, OpaqueObjectType, SymRefAttr
from kiln.dialects.aten.ops import AtenOp, GenericOp, make_op_class


@irdl_op_definition
class ConstantOp(IRDLOperation):
    """A tensor constant (a lifted tensor, or a parameter embedded in the graph).

    ```mlir
    %0 = aten.constant dense<[1.0, 2.0]> : tensor<2xf32>
    ```
    """

    name = "aten.constant"

    value = prop_def(DenseIntOrFPElementsAttr)
    result = result_def(TensorType)

    traits = traits_def(Pure(), ConstantLike())

    def __init__(self, value: DenseIntOrFPElementsAttr) -> None:
        super().__init__(properties={"value": value}, result_types=[value.type])

    def verify_(self) -> None:
        if self.value.type != self.result.type:
            raise VerifyException(
                f"aten.constant: value type {self.value.type} != result type {self.result.type}"
            )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_attribute(self.value)

    @classmethod
    def parse(cls, parser: Parser) -> ConstantOp:
        pos = parser.pos
        value = parser.parse_attribute()
        if not isinstance(value, DenseIntOrFPElementsAttr):
            parser.raise_error("aten.constant expects a dense tensor attribute", pos)
        return cls(value)


@cache
def op_classes() -> dict[str, type[AtenOp]]:
    """Generated op classes by qualified overload name (``add.Tensor``)."""
    from kiln.dialects.aten.schemas import SCHEMAS

    classes: dict[str, type[AtenOp]] = {}
    for text, tags in SCHEMAS:
        cls = make_op_class(text, tags)
        classes[cls.SCHEMA.qualified_name] = cls
    return classes


def op_class(qualified_name: str) -> type[AtenOp] | None:
    """The generated op for ``add.Tensor`` (another namespace spelled out:
    ``_c10d_functional::all_reduce.default``), or None (use :class:`GenericOp` then)."""
    found = op_classes().get(qualified_name)
    if found is None and "::" in qualified_name:
        from kiln.dialects.aten.collectives import collective_op_classes

        found = collective_op_classes().get(qualified_name)
    return found


def generated_op_classes() -> list[type[AtenOp]]:
    """Every generated op class: the aten overloads and the functional collectives."""
    from kiln.dialects.aten.collectives import collective_op_classes

    return [*op_classes().values(), *collective_op_classes().values()]


def _all_ops() -> list[type[Operation]]:
    return [*generated_op_classes(), GenericOp, ConstantOp]


Aten = Dialect("aten", _all_ops(), [SymRefAttr, OpaqueDtypeType, OpaqueObjectType])

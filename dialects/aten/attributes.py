"""Attributes of the aten dialect."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Attribute, Data, ParametrizedAttribute, TypeAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer


@irdl_attr_definition
class SymRefAttr(Data[int]):
    """A non-tensor argument whose value is an SSA scalar (a SymInt or SymFloat).

    The integer indexes the op's ``sym`` operands. In an op's custom syntax the
    reference prints as the SSA value itself (``size = [%s0, 16]``); in generic
    syntax as ``#aten.sym<0>``.
    """

    name = "aten.sym"

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> int:
        with parser.in_angle_brackets():
            return parser.parse_integer(allow_negative=False, allow_boolean=False)

    def print_parameter(self, printer: Printer) -> None:
        printer.print_string(f"<{self.data}>")


@irdl_attr_definition
class OpaqueDtypeType(ParametrizedAttribute, TypeAttribute):
    """The element type of a torch dtype kiln does not compute on (quantized, packed,
    bit and sub-byte types): ``tensor<4x!aten.dtype<"qint8">>``.

    Tensors of it only flow between ATen calls (``loop.extern``): no lowering reads or
    writes their elements, so they never need a representation of their own.
    """

    name = "aten.dtype"

    dtype: StringAttr
    """The torch dtype's name without ``torch.`` (``qint8``)."""

    def __init__(self, dtype: str | StringAttr) -> None:
        super().__init__(StringAttr(dtype) if isinstance(dtype, str) else dtype)

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string_literal(self.dtype.data)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            return (StringAttr(parser.parse_str_literal()),)


@irdl_attr_definition
class OpaqueObjectType(ParametrizedAttribute, TypeAttribute):
    """A graph input that is an object, not a value: ``!aten.object<"...DeviceMesh">``.

    torch 2.13's DTensor graphs take the device meshes of their DTensor inputs as opaque
    objects (``FakeScriptObject`` while tracing) and return them for the backward. kiln
    never looks inside: such a value is only passed through, from an argument to a result.
    """

    name = "aten.object"

    class_name: StringAttr
    """The object's class (``torch.distributed.device_mesh.DeviceMesh``)."""

    def __init__(self, class_name: str | StringAttr) -> None:
        super().__init__(StringAttr(class_name) if isinstance(class_name, str) else class_name)

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string_literal(self.class_name.data)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            return (StringAttr(parser.parse_str_literal()),)

"""Attributes of the aten dialect."""

from __future__ import annotations

from xdsl.ir import Data
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

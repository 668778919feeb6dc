"""Scalar literals in triton op syntax (``0.0``, ``-inf``, ``true``, ``7``) and their checks."""

from __future__ import annotations

import math

from xdsl.dialects.builtin import AnyFloat, FloatAttr, IntegerAttr, IntegerType
from xdsl.ir import Attribute
from xdsl.irdl import IRDLOperation
from xdsl.irdl.declarative_assembly_format import (
    AttributeVariable,
    CustomDirective,
    ParsingState,
    PrintingState,
    irdl_custom_directive,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from kiln.dialects.loop.syntax import parse_fill as parse_literal
from kiln.dialects.loop.syntax import untyped_literal, untyped_value

Literal = IntegerAttr | FloatAttr


def literal_value(attr: Attribute) -> float | int | bool:
    """The Python value of a literal attribute (``i1`` gives a bool)."""
    if isinstance(attr, FloatAttr):
        return float(attr.value.data)  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
    assert isinstance(attr, IntegerAttr)
    value = int(attr.value.data)  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
    if isinstance(attr.type, IntegerType) and attr.type.width.data == 1:
        return bool(value)
    return value


def make_literal(value: float | int | bool, element_type: Attribute) -> Literal:
    """The literal attribute for ``value`` in ``element_type``."""
    if isinstance(element_type, AnyFloat):
        return FloatAttr(float(value), element_type)
    if isinstance(element_type, IntegerType):
        if element_type.width.data == 1:
            return IntegerAttr(int(bool(value)), element_type)
        return IntegerAttr(int(value), element_type)
    raise VerifyException(f"no literal of type {element_type}")


def literal_text(attr: Attribute) -> str:
    """The syntax of a literal without its type."""
    value = literal_value(attr)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return repr(value)


def print_literal(printer: Printer, attr: Attribute) -> None:
    printer.print_string(literal_text(attr))


def check_literal(op_name: str, attr: Attribute, element_type: Attribute) -> None:
    if not isinstance(attr, IntegerAttr | FloatAttr) or attr.type != element_type:
        raise VerifyException(f"{op_name}: {attr} is not a {element_type} literal")


@irdl_custom_directive
class Lit(CustomDirective):
    """A literal typed by a type printed after it (``triton.full``'s value): held untyped
    (:func:`~kiln.dialects.loop.syntax.untyped_literal`) until that type's directive
    calls :func:`typed_literal`."""

    value: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        self.value.set(state, untyped_literal(parse_literal(parser)))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        attr = self.value.get(op)
        assert attr is not None
        print_literal(printer, attr)


def typed_literal(
    parser: Parser, state: ParsingState, value: AttributeVariable, element_type: Attribute, pos: int
) -> None:
    """Give the literal :class:`Lit` parsed (if any) its type, ``element_type``."""
    untyped = state.properties.get(value.name)
    if untyped is not None:
        try:
            value.set(state, make_literal(untyped_value(untyped), element_type))
        except VerifyException as e:
            parser.raise_error(str(e), pos)


__all__ = [
    "Lit",
    "Literal",
    "check_literal",
    "literal_text",
    "literal_value",
    "make_literal",
    "parse_literal",
    "print_literal",
    "typed_literal",
]

"""Custom directives for kiln's declarative op syntax (``assembly_format``).

xDSL's declarative format prints a property as an attribute (``#loop.expr<"d0">``,
``#builtin.int<0>``); kiln's syntax prints index expressions as bare string literals and
block sizes, axes and names as bare words. These directives keep that syntax, so that an
op can say ``assembly_format = "$index `<` custom<Expr>($size) attr-dict"`` instead of a
hand-written ``parse``/``print`` pair. Used by the loop, kernel, cpp and triton dialects,
and so are the helpers the hand-written ``parse`` methods share with them: sizes in
brackets (:func:`parse_sizes`, :func:`parse_one_size`) and an enum property as a bare
word (:func:`parse_enum_word`, the :class:`EnumWord` directives).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar, TypeVar

import sympy
from xdsl.dialects.builtin import (
    AnyFloat,
    ArrayAttr,
    FloatAttr,
    FloatData,
    IndexType,
    IntAttr,
    IntegerAttr,
    IntegerType,
    MemRefType,
    StringAttr,
    i1,
)
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import Attribute
from xdsl.irdl import IRDLOperation
from xdsl.irdl.declarative_assembly_format import (
    AttributeVariable,
    CustomDirective,
    ParsingState,
    PrintingState,
    TypeDirective,
    VariadicOperandVariable,
    irdl_custom_directive,
)
from xdsl.parser import AttrParser, Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.utils.str_enum import StrEnum

from kiln.dialects.loop.attributes import IndexExprAttr, parse_expr_literal

E = TypeVar("E", bound=StrEnum)


def print_sizes(printer: Printer, sizes: Sequence[IndexExprAttr]) -> None:
    """``[4, "s0"]``: integers bare, other index expressions as string literals."""
    printer.print_string("[")
    printer.print_list(
        sizes,
        lambda s: (
            printer.print_string(s.text)
            if s.data.is_Integer
            else printer.print_string_literal(s.text)
        ),
    )
    printer.print_string("]")


def parse_sizes(parser: Parser) -> ArrayAttr[IndexExprAttr]:
    """What :func:`print_sizes` printed."""

    def one() -> IndexExprAttr:
        if (n := parser.parse_optional_integer(allow_boolean=False)) is not None:
            return IndexExprAttr(sympy.Integer(n))
        return IndexExprAttr(parse_expr_literal(parser))

    return ArrayAttr(parser.parse_comma_separated_list(parser.Delimiter.SQUARE, one))


def parse_one_size(parser: Parser) -> IndexExprAttr:
    """``[128]`` or ``["s0"]``: exactly one size in brackets."""
    pos = parser.pos
    sizes = parse_sizes(parser)
    if len(sizes.data) != 1:
        parser.raise_error("expected one size in brackets", pos)
    return sizes.data[0]


def parse_enum_word(parser: Parser, enum: type[E], what: str) -> E:
    """A member of ``enum`` as a bare word; the error for another word lists them all."""
    pos = parser.pos
    word = parser.parse_identifier(f"expected a {what}")
    try:
        return enum(word)
    except ValueError:
        parser.raise_error(f"unknown {what} '{word}' (one of {', '.join(map(str, enum))})", pos)


def fill_text(attr: Attribute) -> str:
    """A fill property as the custom syntax prints it (``0.0``, ``-inf``, ``true``)."""
    from kiln.dialects.aten.encoding import format_float

    if isinstance(attr, FloatAttr):
        return format_float(attr.value.data)  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
    assert isinstance(attr, IntegerAttr)
    value: int = attr.value.data  # pyright: ignore[reportUnknownMemberType]
    if attr.type == i1:
        return "true" if value else "false"
    return str(value)


def fill_attr(value: float | int | bool, element_type: Attribute) -> Attribute:
    """The fill property for ``value`` in a buffer of ``element_type``."""
    if isinstance(element_type, AnyFloat):
        return FloatAttr(float(value), element_type)
    if isinstance(element_type, IntegerType | IndexType):
        if isinstance(value, float) and not value.is_integer():
            raise ValueError(f"fill {value} is not an integer")
        return IntegerAttr(int(value), element_type)
    raise ValueError(f"no fill value for element type {element_type}")


def parse_fill(parser: AttrParser) -> float | int | bool:
    """The value :func:`fill_text` printed (also a Triton literal: ``-inf``, ``true``, ``0.5``)."""
    if (flag := parser.parse_optional_boolean()) is not None:
        return flag
    negative = parser.parse_optional_punctuation("-") is not None
    if parser.parse_optional_keyword("inf") is not None:
        return -math.inf if negative else math.inf
    if not negative and parser.parse_optional_keyword("nan") is not None:
        return math.nan
    number = parser.parse_number()
    return -number if negative else number


@irdl_custom_directive
class Expr(CustomDirective):
    """An :class:`IndexExprAttr` as a string literal: ``"8*d0 + d1"``."""

    expr: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        self.expr.set(state, IndexExprAttr(parse_expr_literal(parser)))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        attr = self.expr.get(op)
        assert isinstance(attr, IndexExprAttr)
        printer.print_string_literal(attr.text)


def _parse_index_operands(parser: Parser) -> list[UnresolvedOperand]:
    """``(%a, %b)`` after an address, or nothing."""
    if parser.parse_optional_punctuation("(") is None:
        return []
    operands = parser.parse_comma_separated_list(
        parser.Delimiter.NONE, parser.parse_unresolved_operand
    )
    parser.parse_punctuation(")")
    return operands


@irdl_custom_directive
class Address(CustomDirective):
    """``"16*i0 + i1"(%a, %b)``: an :class:`IndexExprAttr` over the op's index operands
    (``i<k>`` is the k-th), the operands in parentheses right after it (none: no
    parentheses)."""

    expr: AttributeVariable
    indices: VariadicOperandVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        self.expr.set(state, IndexExprAttr(parse_expr_literal(parser)))
        self.indices.set(state, _parse_index_operands(parser))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        attr = self.expr.get(op)
        assert isinstance(attr, IndexExprAttr)
        printer.print_string_literal(attr.text)
        if operands := self.indices.get(op):
            printer.print_string("(")
            printer.print_list(operands, printer.print_ssa_value)
            printer.print_string(")")


@irdl_custom_directive
class Subscript(CustomDirective):
    """``["8*i0 + i1"](%a, %b)`` right after a buffer: :class:`Address` in brackets."""

    expr: AttributeVariable
    indices: VariadicOperandVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        parser.parse_punctuation("[")
        self.expr.set(state, IndexExprAttr(parse_expr_literal(parser)))
        parser.parse_punctuation("]")
        self.indices.set(state, _parse_index_operands(parser))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        attr = self.expr.get(op)
        assert isinstance(attr, IndexExprAttr)
        printer.print_string("[")
        printer.print_string_literal(attr.text)
        printer.print_string("]")
        if operands := self.indices.get(op):
            printer.print_string("(")
            printer.print_list(operands, printer.print_ssa_value)
            printer.print_string(")")


@irdl_custom_directive
class ElementOf(CustomDirective):
    """A buffer's type, which also gives the type of a value operand (its element type):
    ``: memref<16xf32>`` types both the buffer and the stored value."""

    buffer: TypeDirective
    value: TypeDirective

    def parse(self, parser: Parser, state: ParsingState) -> None:
        pos = parser.pos
        ty = parser.parse_type()
        if not isinstance(ty, MemRefType):
            parser.raise_error(f"expected a memref type, got {ty}", pos)
        self.buffer.set(state, [ty])
        self.value.set(state, [ty.element_type])

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        printer.print_attribute(self.buffer.get(op)[0])


@irdl_custom_directive
class Below(CustomDirective):
    """``< "s0"``: an upper bound, an :class:`IndexExprAttr` (the declarative format would
    print a ``<`` literal without spaces around it)."""

    bound: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        parser.parse_punctuation("<")
        self.bound.set(state, IndexExprAttr(parse_expr_literal(parser)))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        attr = self.bound.get(op)
        assert isinstance(attr, IndexExprAttr)
        printer.print_string("< ")
        printer.print_string_literal(attr.text)


@irdl_custom_directive
class Int(CustomDirective):
    """An :class:`IntAttr` as a bare non-negative integer: ``0``."""

    value: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        self.value.set(state, IntAttr(parser.parse_integer(allow_boolean=False)))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        attr = self.value.get(op)
        assert isinstance(attr, IntAttr)
        printer.print_string(str(attr.data))


@irdl_custom_directive
class Ident(CustomDirective):
    """A :class:`StringAttr` holding an identifier, bare: ``XBLOCK``."""

    name: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        self.name.set(state, StringAttr(parser.parse_identifier("expected a name")))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        attr = self.name.get(op)
        assert isinstance(attr, StringAttr)
        printer.print_string(attr.data)


@irdl_custom_directive
class BlockDim(CustomDirective):
    """A block dimension, bare: a constexpr name (``StringAttr``) or a size (``IntAttr``)."""

    dim: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        if (n := parser.parse_optional_integer(allow_boolean=False)) is not None:
            self.dim.set(state, IntAttr(n))
        else:
            self.dim.set(state, StringAttr(parser.parse_identifier("expected a block size")))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        attr = self.dim.get(op)
        assert isinstance(attr, StringAttr | IntAttr)
        printer.print_string(str(attr.data))


@irdl_custom_directive
class Sizes(CustomDirective):
    """``[4, "s0"]``: sizes as integers or index expression literals."""

    sizes: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        self.sizes.set(state, parse_sizes(parser))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        sizes = self.sizes.get(op)
        assert isinstance(sizes, ArrayAttr)
        print_sizes(printer, sizes.data)  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
        state.last_was_punctuation = True


@irdl_custom_directive
class OneSize(CustomDirective):
    """``[128]`` or ``["s0"]``: one size in brackets (may anchor an optional group)."""

    size: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        self.size.set(state, parse_one_size(parser))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        size = self.size.get(op)
        assert isinstance(size, IndexExprAttr)
        print_sizes(printer, [size])

    def is_anchorable(self) -> bool:
        return True

    def is_present(self, op: IRDLOperation) -> bool:
        return self.size.get(op) is not None


def untyped_literal(value: float | int | bool) -> Attribute:
    """A literal before its type is known, for directives that parse a literal typed by a
    type printed after it (:class:`Fill`): ``IntAttr``, ``FloatData``, an ``i1`` for booleans."""
    if isinstance(value, bool):
        return IntegerAttr(int(value), i1)
    return IntAttr(value) if isinstance(value, int) else FloatData(value)


def untyped_value(attr: Attribute) -> float | int | bool:
    """The value of an :func:`untyped_literal`."""
    if isinstance(attr, IntegerAttr):
        return bool(attr.value.data)  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
    assert isinstance(attr, IntAttr | FloatData)
    return attr.data


@irdl_custom_directive
class Fill(CustomDirective):
    """A masked load's fill literal (``0.0``, ``-inf``, ``true``). Its type is the buffer's
    element type, printed after it: until :class:`FilledBuffer` parses that type and types
    it, the literal is held untyped (``IntAttr``, ``FloatData``, an ``i1`` for booleans)."""

    fill: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        self.fill.set(state, untyped_literal(parse_fill(parser)))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        attr = self.fill.get(op)
        assert attr is not None
        printer.print_string(fill_text(attr))


@irdl_custom_directive
class FilledBuffer(CustomDirective):
    """``memref<8xf32>``: a load's buffer type, which types its result (the element type)
    and its fill, parsed before it by :class:`Fill` (passed as ``ref($fill)``)."""

    buffer: TypeDirective
    result: TypeDirective
    fill: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        pos = parser.pos
        ty = parser.parse_type()
        if not isinstance(ty, MemRefType):
            parser.raise_error(f"{state.op_type.name} reads a memref, not {ty}", pos)
        self.buffer.set(state, [ty])
        self.result.set(state, [ty.element_type])
        untyped = state.properties.get(self.fill.name)
        if untyped is not None:
            try:
                self.fill.set(state, fill_attr(untyped_value(untyped), ty.element_type))
            except ValueError as e:
                parser.raise_error(str(e), pos)

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        printer.print_attribute(self.buffer.get(op)[0])


class EnumWord(CustomDirective):
    """An ``EnumAttribute`` property as its bare word (``sum``, ``looped``), with a parse
    error listing the words. A dialect subclasses it once per enum, decorated with
    ``@irdl_custom_directive`` (the format names the directive by its class name),
    setting ``attr`` and ``what`` and declaring ``kind: AttributeVariable``."""

    attr: ClassVar[type[EnumAttribute[Any]]]
    what: ClassVar[str]
    kind: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        self.kind.set(state, self.attr(parse_enum_word(parser, self.attr.enum_type, self.what)))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        kind = self.kind.get(op)
        assert isinstance(kind, self.attr)
        printer.print_string(str(kind.data))


__all__ = [
    "Address",
    "Below",
    "BlockDim",
    "ElementOf",
    "EnumWord",
    "Expr",
    "Fill",
    "FilledBuffer",
    "Ident",
    "Int",
    "OneSize",
    "Sizes",
    "Subscript",
    "fill_attr",
    "fill_text",
    "parse_enum_word",
    "parse_fill",
    "parse_one_size",
    "parse_sizes",
    "print_sizes",
    "untyped_literal",
    "untyped_value",
]

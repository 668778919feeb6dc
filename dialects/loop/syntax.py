"""Custom directives for kiln's declarative op syntax (``assembly_format``).

xDSL's declarative format prints a property as an attribute (``#loop.expr<"d0">``,
``#builtin.int<0>``); kiln's syntax prints index expressions as bare string literals and
block sizes, axes and names as bare words. These directives keep that syntax, so that an
op can say ``assembly_format = "$index `<` custom<Expr>($size) attr-dict"`` instead of a
hand-written ``parse``/``print`` pair. Used by the loop, kernel, cpp and triton dialects.
"""

from __future__ import annotations

from xdsl.dialects.builtin import IntAttr, MemRefType, StringAttr
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
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer

from kiln.dialects.loop.attributes import IndexExprAttr, parse_expr_literal


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


__all__ = ["Address", "Below", "BlockDim", "ElementOf", "Expr", "Ident", "Int", "Subscript"]

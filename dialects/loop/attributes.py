"""Attributes of the loop dialect: index expressions and reduction kinds."""

from __future__ import annotations

from enum import auto

import sympy
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import Data, SpacedOpaqueSyntaxAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from kiln.dialects.loop.expr import (
    ExprSyntaxError,
    format_expr,
    is_index_expr,
    parse_expr,
    var_kind,
)


@irdl_attr_definition
class IndexExprAttr(Data[sympy.Expr]):
    """An integer index expression (see :mod:`kiln.dialects.loop.expr`).

    ```mlir
    #loop.expr<"8*d0 + d1">
    #loop.expr<"(d0 + 3) // 4 % 2">
    ```
    """

    name = "loop.expr"

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> sympy.Expr:
        with parser.in_angle_brackets():
            return parse_expr_literal(parser)

    def print_parameter(self, printer: Printer) -> None:
        printer.print_string("<")
        printer.print_string_literal(format_expr(self.data))
        printer.print_string(">")

    def verify(self) -> None:
        if not isinstance(self.data, sympy.Expr) or not is_index_expr(self.data):
            raise VerifyException(f"loop.expr: {self.data!r} is not an index expression")

    @property
    def text(self) -> str:
        return format_expr(self.data)

    def is_constant(self) -> bool:
        return bool(self.data.is_Integer)

    def foreign_symbol(self, kind: str, count: int | None = None) -> sympy.Symbol | None:
        """The first symbol (by name) that is not ``<kind><k>`` with ``k < count`` (any
        ``k`` when ``count`` is None), or None: the check that every verifier of an
        expression over an op's own variables (sizes over ``s<k>``, addresses over
        ``i<k>``) makes, each with its own message."""
        for symbol in sorted(self.data.free_symbols, key=str):
            assert isinstance(symbol, sympy.Symbol)
            got, k = var_kind(symbol)
            if got != kind or (count is not None and k >= count):
                return symbol
        return None


def parse_expr_literal(parser: AttrParser) -> sympy.Expr:
    """A string literal holding an index expression; errors point into the string."""
    pos = parser.pos
    text = parser.parse_str_literal("expected an index expression string")
    try:
        return parse_expr(text)
    except ExprSyntaxError as e:
        parser.raise_error(f"bad index expression {text!r}: {e}", pos + 1 + e.pos, pos + 2 + e.pos)


class ReductionKind(StrEnum):
    """What a ``loop.reduction`` computes over its reduction variables."""

    SUM = auto()
    PROD = auto()
    MAX = auto()
    MIN = auto()
    ARGMAX = auto()
    ARGMIN = auto()
    ANY = auto()
    ALL = auto()
    WELFORD = auto()
    """Three results: mean, m2 (sum of squared deviations) and count."""


@irdl_attr_definition
class ReductionKindAttr(EnumAttribute[ReductionKind], SpacedOpaqueSyntaxAttribute):
    """``#loop<reduction_kind sum>`` (in an op's syntax just ``sum``)."""

    name = "loop.reduction_kind"

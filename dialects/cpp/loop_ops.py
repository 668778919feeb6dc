"""``cpp.for``: a C ``for`` loop nest, serial, OpenMP-parallel or SIMD; and ``cpp.yield``.

```mlir
cpp.for parallel (%x0, %x1) = (%c0, %c0) to (%c4, %n) if %big {
  cpp.for simd (%x2) = (%c0) to (%c16) {
    ...
  }
}
cpp.for serial (%r0) = (%c0) to (%n) step (16) {
  ...
}
```

Each induction variable runs from its lower bound (inclusive) to its upper bound
(exclusive) by its step; several variables are a perfect nest, outermost first
(``collapse(n)`` for OpenMP). ``if %cond`` (parallel loops only) runs the loop on one
thread when the condition is false at run time (OpenMP's ``if`` clause): too little work
to pay for waking the thread pool.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import ArrayAttr, IndexType, IntAttr, i1
from xdsl.ir import Region, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_op_definition,
    lazy_traits_def,
    opt_operand_def,
    prop_def,
    region_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.traits import HasParent, IsTerminator, SingleBlockImplicitTerminator, ensure_terminator
from xdsl.utils.exceptions import VerifyException

from kiln.dialects.cpp.attributes import LoopKind, LoopKindAttr
from kiln.dialects.loop.syntax import parse_enum_word


@irdl_op_definition
class YieldOp(IRDLOperation):
    """Ends a ``cpp.for`` body (implicit in the custom syntax)."""

    name = "cpp.yield"

    traits = lazy_traits_def(lambda: (IsTerminator(), HasParent(ForOp)))

    assembly_format = "attr-dict"


@irdl_op_definition
class ForOp(IRDLOperation):
    """A loop nest over one or more induction variables (see the module docstring)."""

    name = "cpp.for"

    lower_bounds = var_operand_def(IndexType)
    upper_bounds = var_operand_def(IndexType)
    condition = opt_operand_def(i1)
    kind = prop_def(LoopKindAttr)
    steps = prop_def(ArrayAttr[IntAttr])
    body = region_def("single_block")

    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(SingleBlockImplicitTerminator(YieldOp))

    def __init__(
        self,
        kind: LoopKind,
        lower_bounds: Sequence[SSAValue],
        upper_bounds: Sequence[SSAValue],
        steps: Sequence[int] | None = None,
        condition: SSAValue | None = None,
        body: Region | None = None,
    ) -> None:
        from xdsl.ir import Block

        if body is None:
            body = Region(Block([YieldOp()], arg_types=[IndexType()] * len(lower_bounds)))
        super().__init__(
            operands=[
                list(lower_bounds),
                list(upper_bounds),
                [] if condition is None else [condition],
            ],
            properties={
                "kind": LoopKindAttr(kind),
                "steps": ArrayAttr(IntAttr(s) for s in (steps or [1] * len(lower_bounds))),
            },
            regions=[body],
        )

    @property
    def loop_kind(self) -> LoopKind:
        return self.kind.data

    @property
    def ivs(self) -> Sequence[SSAValue]:
        return self.body.block.args

    def step_values(self) -> list[int]:
        return [s.data for s in self.steps.data]

    def verify_(self) -> None:
        n = len(self.lower_bounds)
        if n == 0:
            raise VerifyException(f"{self.name} needs at least one induction variable")
        if len(self.upper_bounds) != n or len(self.steps.data) != n:
            raise VerifyException(
                f"{self.name}: {n} lower bounds, {len(self.upper_bounds)} upper bounds and "
                f"{len(self.steps.data)} steps; they must match"
            )
        if tuple(self.body.block.arg_types) != (IndexType(),) * n:
            raise VerifyException(f"{self.name}: the body takes {n} index induction variables")
        if any(s <= 0 for s in self.step_values()):
            raise VerifyException(f"{self.name}: steps must be positive")
        if self.condition is not None and not self.loop_kind.is_parallel:
            raise VerifyException(f"{self.name}: only a parallel loop takes an 'if' condition")

    # -- syntax ------------------------------------------------------------------

    # Hand-written: the header names the induction variables, the region's block arguments
    # (%x0), which xDSL's declarative format cannot print or parse.
    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.loop_kind} (")
        printer.print_list(self.ivs, printer.print_ssa_value)
        printer.print_string(") = (")
        printer.print_list(self.lower_bounds, printer.print_ssa_value)
        printer.print_string(") to (")
        printer.print_list(self.upper_bounds, printer.print_ssa_value)
        printer.print_string(")")
        steps = self.step_values()
        if any(s != 1 for s in steps):
            printer.print_string(f" step ({', '.join(map(str, steps))})")
        if self.condition is not None:
            printer.print_string(" if ")
            printer.print_ssa_value(self.condition)
        if self.attributes:
            printer.print_op_attributes(self.attributes, print_keyword=True)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False, print_block_terminators=False)

    @classmethod
    def parse(cls, parser: Parser) -> ForOp:
        kind = parse_enum_word(parser, LoopKind, "loop kind")
        ivs = parser.parse_comma_separated_list(
            parser.Delimiter.PAREN, lambda: parser.parse_argument(expect_type=False)
        )
        parser.parse_punctuation("=")
        lower = _parse_index_operands(parser)
        parser.parse_keyword("to")
        upper = _parse_index_operands(parser)
        steps: list[int] = [1] * len(ivs)
        if parser.parse_optional_keyword("step") is not None:
            steps = parser.parse_comma_separated_list(
                parser.Delimiter.PAREN,
                lambda: parser.parse_integer(allow_boolean=False, allow_negative=False),
            )
        condition = None
        if parser.parse_optional_keyword("if") is not None:
            condition = parser.resolve_operand(parser.parse_unresolved_operand(), i1)
        attributes = parser.parse_optional_attr_dict_with_keyword()
        region = parser.parse_region([iv.resolve(IndexType()) for iv in ivs])
        op = cls(kind, lower, upper, steps, condition, region)
        if attributes is not None:
            op.attributes.update(attributes.data)
        for trait in op.get_traits_of_type(SingleBlockImplicitTerminator):
            ensure_terminator(op, trait)
        return op


def _parse_index_operands(parser: Parser) -> list[SSAValue]:
    unresolved: list[UnresolvedOperand] = parser.parse_comma_separated_list(
        parser.Delimiter.PAREN, parser.parse_unresolved_operand
    )
    return [parser.resolve_operand(u, IndexType()) for u in unresolved]


__all__ = ["ForOp", "YieldOp"]

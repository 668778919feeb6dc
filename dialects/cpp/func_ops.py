"""``cpp.func``: one C function (a kernel), and ``cpp.return``.

A ``cpp.func`` is an ``extern "C"`` function: its parameters are the buffers it reads
(``const T*``), the sizes it needs (``int64_t``) and, after ``outs``, the buffers it
writes (``T*``). It returns an ``int`` status: 0, or the error flags its checks raised
(see ``cpp.load``'s ``checked``). Its signature (``function_type``) is the kernel's it
was lowered from, (read buffers, sizes) -> (written buffers), so ``kernel.launch`` can
call it as it called the kernel.

```mlir
cpp.func @kernel0(%in_ptr0: memref<4x8xf32>, %s0: index) outs(%out_ptr0: memref<4x8xf32>) {
  ...
  cpp.return
}
```

The optional ``provenance`` attribute (strings) becomes the comment block above the
function: the aten ops and FX nodes the kernel computes.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    ArrayAttr,
    FunctionType,
    IndexType,
    MemRefType,
    StringAttr,
    SymbolNameConstraint,
)
from xdsl.ir import Attribute, Block, BlockArgument, Region
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    opt_attr_def,
    prop_def,
    region_def,
    traits_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import HasParent, IsolatedFromAbove, IsTerminator, SymbolOpInterface
from xdsl.utils.exceptions import VerifyException

from kiln.dialects.kernel.program_ops import LaunchTarget


@irdl_op_definition
class FuncOp(IRDLOperation):
    """An ``extern "C"`` kernel function (see the module docstring for the syntax)."""

    name = "cpp.func"

    sym_name = prop_def(SymbolNameConstraint())
    function_type = prop_def(FunctionType)
    body = region_def("single_block")
    provenance = opt_attr_def(ArrayAttr[StringAttr])

    traits = traits_def(IsolatedFromAbove(), SymbolOpInterface(), LaunchTarget())

    def __init__(
        self,
        name: str,
        inputs: Sequence[Attribute],
        outputs: Sequence[Attribute],
        body: Region | None = None,
    ) -> None:
        super().__init__(
            properties={
                "sym_name": StringAttr(name),
                "function_type": FunctionType.from_lists(inputs, outputs),
            },
            regions=[body if body is not None else Region(Block(arg_types=[*inputs, *outputs]))],
        )

    # -- accessors ---------------------------------------------------------------

    @property
    def num_inputs(self) -> int:
        return len(self.function_type.inputs.data)

    def input_args(self) -> Sequence[BlockArgument]:
        """The parameters before ``outs``: read buffers, then sizes."""
        return self.body.block.args[: self.num_inputs]

    def output_args(self) -> Sequence[BlockArgument]:
        """The buffers the function writes."""
        return self.body.block.args[self.num_inputs :]

    def size_args(self) -> Sequence[BlockArgument]:
        return [a for a in self.input_args() if isinstance(a.type, IndexType)]

    # -- verification ------------------------------------------------------------

    def verify_(self) -> None:
        where = f"@{self.sym_name.data}"
        inputs = self.function_type.inputs.data
        outputs = self.function_type.outputs.data
        if tuple(self.body.block.arg_types) != (*inputs, *outputs):
            raise VerifyException(f"{where}: block arguments do not match {self.function_type}")
        seen_index = False
        for ty in inputs:
            if isinstance(ty, IndexType):
                seen_index = True
            elif not isinstance(ty, MemRefType) or seen_index:
                raise VerifyException(
                    f"{where}: parameters must be buffers (memref) followed by sizes (index), got {ty}"
                )
        for ty in outputs:
            if not isinstance(ty, MemRefType):
                raise VerifyException(f"{where}: an output must be a buffer (memref), got {ty}")
        if not isinstance(self.body.block.last_op, ReturnOp):
            raise VerifyException(f"{where}: body must end with cpp.return")

    # -- syntax --------------------------------------------------------------------

    # Hand-written: the header names the entry block's arguments (%x: type), which xDSL's
    # declarative format cannot print or parse.
    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        printer.print_string("(")
        printer.print_list(self.input_args(), printer.print_block_argument)
        printer.print_string(") outs(")
        printer.print_list(self.output_args(), printer.print_block_argument)
        printer.print_string(")")
        printer.print_op_attributes(self.attributes, print_keyword=True)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False)

    @classmethod
    def parse(cls, parser: Parser) -> FuncOp:
        name = parser.parse_symbol_name().data
        inputs = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_argument)
        parser.parse_keyword("outs")
        outputs = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_argument)
        attributes = parser.parse_optional_attr_dict_with_keyword()
        region = parser.parse_region([*inputs, *outputs])
        op = cls(name, [a.type for a in inputs], [a.type for a in outputs], region)
        if attributes is not None:
            op.attributes.update(attributes.data)
        return op


@irdl_op_definition
class ReturnOp(IRDLOperation):
    """Ends a ``cpp.func`` (the C function returns its error flags, 0 when none).

    ```mlir
    cpp.return
    ```
    """

    name = "cpp.return"

    traits = traits_def(IsTerminator(), HasParent(FuncOp))

    assembly_format = "attr-dict"


__all__ = ["FuncOp", "ReturnOp"]

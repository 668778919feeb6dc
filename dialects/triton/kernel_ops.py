"""``triton.kernel`` (a ``@triton.jit`` function) and the ops that read its launch.

A kernel's block arguments are its Python parameters in order (pointers, then integer
sizes); ``params`` names them as the emitted source does, ``constexprs`` lists the
``tl.constexpr`` block sizes that follow them. ``numel`` x ``rnumel`` is the iteration
space (index expressions over ``s<k>``, the k-th integer parameter), ``ynumel`` the
outer extent of a 2-D tile. Loops inside a kernel are ``scf.for`` (as in Triton's own
IR), with ``i32``/``i64`` bounds.

```mlir
triton.kernel @kiln_poi_fused_add_0 pointwise [128] x [1] params [in_ptr0, in_ptr1, out_ptr0] constexprs [XBLOCK] {
^bb0(%in_ptr0: !triton.ptr<f32>, %in_ptr1: !triton.ptr<f32>, %out_ptr0: !triton.ptr<f32>):
  %pid = triton.program_id 0
  %block = triton.constexpr XBLOCK : i32
  %xoffset = triton.mul %pid, %block : i32, i32 -> i32
  %lanes = triton.arange XBLOCK : !triton.block<[XBLOCK], i32>
  %xindex = triton.add %xoffset, %lanes : i32, !triton.block<[XBLOCK], i32> -> !triton.block<[XBLOCK], i32>
  ...
  triton.return
}
```
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import auto

import sympy
from xdsl.dialects.builtin import (
    ArrayAttr,
    IntAttr,
    IntegerType,
    StringAttr,
    SymbolNameConstraint,
    i32,
)
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import Attribute, Block, Region, SpacedOpaqueSyntaxAttribute
from xdsl.irdl import (
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
)
from xdsl.irdl.declarative_assembly_format import (
    AttributeVariable,
    CustomDirective,
    ParsingState,
    PrintingState,
    irdl_custom_directive,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import HasParent, IsolatedFromAbove, IsTerminator, Pure, SymbolOpInterface
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from kiln.dialects.loop.attributes import IndexExprAttr
from kiln.dialects.loop.syntax import EnumWord, Ident, Int, OneSize
from kiln.dialects.triton.types import PointerType


class TritonKernelKind(StrEnum):
    """``pointwise``; reductions with the whole reduction in one block (``persistent``) or
    a loop over reduction blocks (``looped``, and ``split``: the partial first stage of a
    split reduction, which loops too); ``matmul``: ``tl.dot`` over a loop of ``RBLOCK``
    chunks for a ``YBLOCK`` x ``XBLOCK`` output tile, then the epilogue."""

    POINTWISE = auto()
    PERSISTENT = auto()
    LOOPED = auto()
    SPLIT = auto()
    MATMUL = auto()


@irdl_attr_definition
class TritonKernelKindAttr(EnumAttribute[TritonKernelKind], SpacedOpaqueSyntaxAttribute):
    """``#triton<kind looped>`` (in ``triton.kernel``'s syntax just ``looped``)."""

    name = "triton.kind"


KERNEL_KINDS = tuple(str(kind) for kind in TritonKernelKind)
"""The kinds' names, in order."""


@irdl_custom_directive
class SymName(CustomDirective):
    """``@name``."""

    name: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        self.name.set(state, parser.parse_symbol_name())

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        name = self.name.get(op)
        assert isinstance(name, StringAttr)
        printer.print_symbol_name(name.data)


@irdl_custom_directive
class KindWord(EnumWord):
    """``looped``: the kernel kind, bare."""

    attr = TritonKernelKindAttr
    what = "kernel kind"
    kind: AttributeVariable


@irdl_custom_directive
class Names(CustomDirective):
    """``[in_ptr0, out_ptr0]``: a list of identifiers."""

    names: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        names = parser.parse_comma_separated_list(
            parser.Delimiter.SQUARE, lambda: parser.parse_identifier("expected a name")
        )
        self.names.set(state, ArrayAttr(StringAttr(n) for n in names))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        names = self.names.get(op)
        assert isinstance(names, ArrayAttr)
        printer.print_string(f"[{', '.join(n.data for n in names)}]")  # pyright: ignore


@irdl_op_definition
class KernelOp(IRDLOperation):
    """A ``@triton.jit`` kernel (see the module docstring for the syntax)."""

    name = "triton.kernel"

    sym_name = prop_def(SymbolNameConstraint())
    kind = prop_def(TritonKernelKindAttr)
    numel = prop_def(IndexExprAttr)
    rnumel = prop_def(IndexExprAttr)
    ynumel = opt_prop_def(IndexExprAttr)
    params = prop_def(ArrayAttr[StringAttr])
    constexprs = prop_def(ArrayAttr[StringAttr])
    body = region_def("single_block")

    traits = traits_def(IsolatedFromAbove(), SymbolOpInterface())

    def __init__(
        self,
        name: str,
        kind: str | TritonKernelKind,
        numel: sympy.Expr | int,
        rnumel: sympy.Expr | int,
        params: Sequence[tuple[str, Attribute]],
        constexprs: Sequence[str],
        ynumel: sympy.Expr | int | None = None,
    ) -> None:
        block = Block(arg_types=[ty for _, ty in params])
        for arg, (param, _) in zip(block.args, params, strict=True):
            arg.name_hint = param
        super().__init__(
            properties={
                "sym_name": StringAttr(name),
                "kind": TritonKernelKindAttr(TritonKernelKind(kind)),
                "numel": IndexExprAttr(sympy.sympify(numel)),
                "rnumel": IndexExprAttr(sympy.sympify(rnumel)),
                "ynumel": None if ynumel is None else IndexExprAttr(sympy.sympify(ynumel)),
                "params": ArrayAttr(StringAttr(p) for p, _ in params),
                "constexprs": ArrayAttr(StringAttr(c) for c in constexprs),
            },
            regions=[Region(block)],
        )

    @property
    def param_names(self) -> list[str]:
        return [p.data for p in self.params.data]

    @property
    def constexpr_names(self) -> list[str]:
        return [c.data for c in self.constexprs.data]

    def size_params(self) -> list[str]:
        """The integer parameters, in order: ``s<k>`` of the size expressions is the k-th."""
        return [
            name
            for name, arg in zip(self.param_names, self.body.block.args, strict=True)
            if isinstance(arg.type, IntegerType)
        ]

    def verify_(self) -> None:
        where = f"{self.name} @{self.sym_name.data}"
        block = self.body.block
        names = self.param_names + self.constexpr_names
        if len(self.param_names) != len(block.args):
            raise VerifyException(
                f"{where}: {len(self.param_names)} parameter names for {len(block.args)} arguments"
            )
        if len(set(names)) != len(names) or not all(n.isidentifier() for n in names):
            raise VerifyException(f"{where}: parameter names must be distinct identifiers: {names}")
        seen_int = False
        for arg in block.args:
            if isinstance(arg.type, IntegerType):
                seen_int = True
            elif not isinstance(arg.type, PointerType) or seen_int:
                raise VerifyException(
                    f"{where}: parameters are pointers followed by integers, got {arg.type}"
                )
        n_sizes = len(self.size_params())
        for what, attr in (("numel", self.numel), ("rnumel", self.rnumel), ("ynumel", self.ynumel)):
            if attr is None:
                continue
            if (symbol := attr.foreign_symbol("s", n_sizes)) is not None:
                raise VerifyException(f"{where}: {what} '{attr.text}' uses undefined {symbol}")
        if self.kind.data is TritonKernelKind.POINTWISE and self.rnumel.data != 1:
            raise VerifyException(
                f"{where}: a pointwise kernel has rnumel 1, not {self.rnumel.text}"
            )
        if not isinstance(block.last_op, ReturnOp):
            raise VerifyException(f"{where}: body must end with triton.return")

    assembly_format = (
        "custom<SymName>($sym_name) custom<KindWord>($kind) custom<OneSize>($numel) `x` "
        "custom<OneSize>($rnumel) (`ynumel` custom<OneSize>($ynumel)^)? "
        "`params` custom<Names>($params) `constexprs` custom<Names>($constexprs) "
        "attr-dict-with-keyword $body"
    )
    custom_directives = (SymName, KindWord, OneSize, Names)


@irdl_op_definition
class ReturnOp(IRDLOperation):
    """Ends a kernel.

    ```mlir
    triton.return
    ```
    """

    name = "triton.return"

    traits = traits_def(IsTerminator(), HasParent(KernelOp))

    assembly_format = "attr-dict"


@irdl_op_definition
class ProgramIdOp(IRDLOperation):
    """``tl.program_id(axis)``: this program's position in the launch grid.

    ```mlir
    %pid = triton.program_id 0
    ```
    """

    name = "triton.program_id"

    axis = prop_def(IntAttr)
    result = result_def(i32)

    traits = traits_def(Pure())

    def __init__(self, axis: int) -> None:
        super().__init__(properties={"axis": IntAttr(axis)}, result_types=[i32])

    assembly_format = "custom<Int>($axis) attr-dict"
    custom_directives = (Int,)

    def verify_(self) -> None:
        if self.axis.data not in (0, 1, 2):
            raise VerifyException(f"{self.name}: axis must be 0, 1 or 2, not {self.axis.data}")


@irdl_op_definition
class ConstexprOp(IRDLOperation):
    """The value of a ``tl.constexpr`` parameter of the kernel (a block size).

    ```mlir
    %block = triton.constexpr XBLOCK : i32
    ```
    """

    name = "triton.constexpr"

    param = prop_def(StringAttr)
    result = result_def(IntegerType)

    traits = traits_def(Pure())

    def __init__(self, param: str, ty: Attribute = i32) -> None:
        super().__init__(properties={"param": StringAttr(param)}, result_types=[ty])

    def verify_(self) -> None:
        kernel = self.parent_op()
        while kernel is not None and not isinstance(kernel, KernelOp):
            kernel = kernel.parent_op()
        if kernel is not None and self.param.data not in kernel.constexpr_names:
            raise VerifyException(
                f"{self.name}: '{self.param.data}' is not a constexpr of the kernel"
            )

    assembly_format = "custom<Ident>($param) attr-dict `:` type($result)"
    custom_directives = (Ident,)


__all__ = ["KERNEL_KINDS", "ConstexprOp", "KernelOp", "ProgramIdOp", "ReturnOp"]

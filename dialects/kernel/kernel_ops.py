"""``kernel.kernel``: loop nodes that run in one launch, and ``kernel.yield``.

A kernel is a symbol at module level, like a function: its arguments are the global
buffers it reads, then the size symbols (``index``) it needs; its results are the
global buffers it writes (``kernel.launch`` passes the destinations). The body holds
the fused ``loop.pointwise``/``loop.reduction`` nodes in execution order, unchanged:
a node reads a fused producer's *value* (its SSA result inside the kernel), so a
producer whose result is not yielded is kernel-local and never gets a buffer.

The kernel iterates over ``numel`` x ``rnumel`` points (``rnumel`` is 1 for pointwise
kernels); sizes are index expressions over ``s<k>``, the k-th ``index`` argument. Every
node carries ``kernel.vars``: each of its loop variables (``d..`` then ``r..``) as an
index expression over the kernel's two iteration variables, written ``d0`` (the flat
pointwise index, ``0 <= d0 < numel``) and ``r0`` (the flat reduction index). A node whose
variables use ``r0`` runs at every point (``x``-and-``r`` level); one that uses only
``d0`` runs once per pointwise index (before or after the reductions it depends on).

```mlir
kernel.kernel @kernel0 reduction [4] x [8] (%x: memref<4x8xf32>) -> memref<4x8xf32> {
  %m = loop.reduction max [4] reduce [8] (%x) {kernel.vars = [#loop.expr<"d0">, #loop.expr<"r0">]} : (memref<4x8xf32>) -> memref<4xf32> {
  ^bb0(%d0: index, %r0: index, %in0: memref<4x8xf32>):
    %v = loop.load %in0["8*d0 + r0"] : memref<4x8xf32>
    loop.yield %v : f32
  }
  %e = loop.pointwise [4, 8] (%x, %m) {kernel.vars = [#loop.expr<"d0">, #loop.expr<"r0">]} : (memref<4x8xf32>, memref<4xf32>) -> memref<4x8xf32> {
  ^bb0(%d0: index, %d1: index, %in0: memref<4x8xf32>, %in1: memref<4xf32>):
    %a = loop.load %in0["8*d0 + d1"] : memref<4x8xf32>
    %b = loop.load %in1["d0"] : memref<4xf32>
    %c = arith.subf %a, %b : f32
    loop.yield %c : f32
  }
  kernel.yield %e : memref<4x8xf32>
}
```

A ``loop.scatter`` node adds into its output buffer (atomically, on a device) instead
of writing it: the program zero-fills that buffer with a launch of its own first, and
no other node of the kernel reads it.

After ``tile``, the kernel also carries ``tiling`` (the chosen
:class:`~kiln.dialects.kernel.attributes.ConfigAttr`), ``configs`` (candidates for
autotuning), ``reduction_hint`` (``inner``/``outer``) and, for 2-D tiles, ``ynumel`` (the
pointwise space split as ``ynumel`` x ``numel / ynumel``, ``y`` outer).
"""

from __future__ import annotations

from collections.abc import Sequence

import sympy
from xdsl.dialects.builtin import (
    ArrayAttr,
    FunctionType,
    IndexType,
    MemRefType,
    StringAttr,
    SymbolNameConstraint,
)
from xdsl.ir import Attribute, Block, Region, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    opt_attr_def,
    prop_def,
    region_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import IsolatedFromAbove, IsTerminator, SymbolOpInterface
from xdsl.utils.exceptions import VerifyException

from kiln.dialects.kernel.attributes import ConfigAttr, KernelKind, KernelKindAttr
from kiln.dialects.loop.attributes import IndexExprAttr
from kiln.dialects.loop.expr import var_kind
from kiln.dialects.loop.ops import LoopNestOp, is_contiguous_buffer
from kiln.dialects.loop.syntax import parse_enum_word, parse_one_size, print_sizes

VARS_ATTR = "kernel.vars"
"""Attribute of each node in a kernel: its loop variables over the kernel's ``d0``/``r0``."""

COLUMN_MAJOR_ATTR = "kernel.column_major"
"""Unit attribute of a node over the whole space whose points run column-major over the
kernel (position ``r0 * numel + d0``: a pointwise producer of a column sum, level ``XRT``
of :mod:`kiln.passes.scheduling.legality`). Passes that compare positions row-major
(in-place updates) leave such a kernel's buffers alone."""

REDUCTION_HINTS = ("inner", "outer")


def node_vars(node: LoopNestOp) -> list[sympy.Expr]:
    """The node's loop variables as expressions over the kernel's ``d0`` and ``r0``."""
    attr = node.attributes.get(VARS_ATTR)
    if not isinstance(attr, ArrayAttr):
        raise VerifyException(f"{node.name} inside a kernel needs a '{VARS_ATTR}' attribute")
    return [a.data for a in attr.data]  # pyright: ignore[reportUnknownMemberType, reportAttributeAccessIssue, reportUnknownVariableType]


def vars_attr(exprs: Sequence[sympy.Expr]) -> ArrayAttr[IndexExprAttr]:
    return ArrayAttr(IndexExprAttr(sympy.sympify(e)) for e in exprs)


def _check_symbols(op: IRDLOperation, what: str, expr: sympy.Expr, allowed: dict[str, int]) -> None:
    for symbol in expr.free_symbols:
        kind, k = var_kind(symbol)  # pyright: ignore[reportArgumentType]
        if k >= allowed.get(kind, 0):
            raise VerifyException(f"{what} '{expr}' uses {symbol}, which is not defined here")


@irdl_op_definition
class KernelOp(IRDLOperation):
    """Fused loop nodes that run in one launch (see the module docstring for the syntax)."""

    name = "kernel.kernel"

    sym_name = prop_def(SymbolNameConstraint())
    function_type = prop_def(FunctionType)
    kind = prop_def(KernelKindAttr)
    numel = prop_def(IndexExprAttr)
    rnumel = prop_def(IndexExprAttr)
    body = region_def("single_block")

    tiling = opt_attr_def(ConfigAttr)
    configs = opt_attr_def(ArrayAttr[ConfigAttr])
    reduction_hint = opt_attr_def(StringAttr)
    ynumel = opt_attr_def(IndexExprAttr)

    traits = traits_def(IsolatedFromAbove(), SymbolOpInterface())

    def __init__(
        self,
        name: str,
        kind: KernelKind,
        numel: sympy.Expr | int,
        rnumel: sympy.Expr | int,
        input_types: Sequence[Attribute],
        output_types: Sequence[Attribute],
        body: Region | None = None,
    ) -> None:
        super().__init__(
            properties={
                "sym_name": StringAttr(name),
                "function_type": FunctionType.from_lists(input_types, output_types),
                "kind": KernelKindAttr(kind),
                "numel": IndexExprAttr(sympy.sympify(numel)),
                "rnumel": IndexExprAttr(sympy.sympify(rnumel)),
            },
            regions=[body if body is not None else Region(Block(arg_types=input_types))],
        )

    # -- accessors ---------------------------------------------------------------

    @property
    def kernel_kind(self) -> KernelKind:
        return self.kind.data

    def buffer_args(self) -> Sequence[SSAValue]:
        """The block arguments that are global input buffers."""
        return [a for a in self.body.block.args if isinstance(a.type, MemRefType)]

    def sym_args(self) -> Sequence[SSAValue]:
        """The ``index`` block arguments: ``s0``, ``s1``, ... of the size expressions."""
        return [a for a in self.body.block.args if isinstance(a.type, IndexType)]

    def nodes(self) -> list[LoopNestOp]:
        return [op for op in self.body.block.ops if isinstance(op, LoopNestOp)]

    def yield_op(self) -> YieldOp:
        last = self.body.block.last_op
        assert isinstance(last, YieldOp)
        return last

    # -- verification --------------------------------------------------------------

    def verify_(self) -> None:
        block = self.body.block
        inputs = self.function_type.inputs.data
        if tuple(block.arg_types) != inputs:
            raise VerifyException(
                f"@{self.sym_name.data}: block arguments do not match the "
                f"signature {self.function_type}"
            )
        seen_index = False
        for ty in inputs:
            if isinstance(ty, IndexType):
                seen_index = True
            elif not is_contiguous_buffer(ty) or seen_index:
                raise VerifyException(
                    f"@{self.sym_name.data}: arguments must be contiguous memrefs "
                    f"followed by index size symbols, got {ty}"
                )
        for ty in self.function_type.outputs.data:
            if not is_contiguous_buffer(ty):
                raise VerifyException(
                    f"@{self.sym_name.data}: result {ty} is not a contiguous buffer"
                )
        n_syms = len(self.sym_args())
        for what, attr in (("numel", self.numel), ("rnumel", self.rnumel)):
            _check_symbols(self, what, attr.data, {"s": n_syms})
        if self.ynumel is not None:
            _check_symbols(self, "ynumel", self.ynumel.data, {"s": n_syms})
        if not self.kernel_kind.reduces and self.rnumel.data != 1:
            raise VerifyException(
                f"@{self.sym_name.data}: a pointwise kernel has rnumel 1, not {self.rnumel.text}"
            )
        if self.reduction_hint is not None and self.reduction_hint.data not in REDUCTION_HINTS:
            raise VerifyException(
                f"reduction_hint must be one of {REDUCTION_HINTS}, not '{self.reduction_hint.data}'"
            )
        self._verify_body(n_syms)

    def _verify_body(self, n_syms: int) -> None:
        block = self.body.block
        last = block.last_op
        if not isinstance(last, YieldOp):
            raise VerifyException(f"@{self.sym_name.data}: body must end with kernel.yield")
        sym_args = set(self.sym_args())
        kernel_vars = {"d": 1, "r": 1 if self.kernel_kind.reduces else 0, "s": n_syms}
        for op in block.ops:
            if op is last:
                break
            if not isinstance(op, LoopNestOp):
                raise VerifyException(
                    f"@{self.sym_name.data}: only loop.pointwise and loop.reduction "
                    f"may run in a kernel, not {op.name}"
                )
            for sym in op.syms:
                if sym not in sym_args:
                    raise VerifyException(
                        f"@{self.sym_name.data}: the sizes of {op.name} must be the kernel's index arguments"
                    )
            exprs = node_vars(op)
            if len(exprs) != op.num_loop_vars:
                raise VerifyException(
                    f"@{self.sym_name.data}: '{VARS_ATTR}' of {op.name} has {len(exprs)} expressions for "
                    f"{op.num_loop_vars} loop variables"
                )
            for expr in exprs:
                _check_symbols(self, VARS_ATTR, expr, kernel_vars)
        outputs = self.function_type.outputs.data
        if tuple(last.values.types) != outputs:
            raise VerifyException(
                f"@{self.sym_name.data}: yields ({', '.join(map(str, last.values.types))})"
                f" but the signature returns ({', '.join(map(str, outputs))})"
            )
        for value in last.values:
            if not isinstance(value.owner, LoopNestOp):
                raise VerifyException(
                    f"@{self.sym_name.data}: a yielded buffer must be computed by a "
                    "node of the kernel"
                )

    # -- syntax ----------------------------------------------------------------------

    # Hand-written: the header names the entry block's arguments (%x: type), which xDSL's
    # declarative format cannot print or parse.
    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        printer.print_string(f" {self.kernel_kind} ")
        print_sizes(printer, [self.numel])
        printer.print_string(" x ")
        print_sizes(printer, [self.rnumel])
        printer.print_string(" (")
        printer.print_list(self.body.block.args, printer.print_block_argument)
        printer.print_string(") -> (")
        printer.print_list(self.function_type.outputs.data, printer.print_attribute)
        printer.print_string(")")
        printer.print_op_attributes(self.attributes, print_keyword=True)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False)

    @classmethod
    def parse(cls, parser: Parser) -> KernelOp:
        name = parser.parse_symbol_name().data
        kind = parse_enum_word(parser, KernelKind, "kernel kind")
        numel = parse_one_size(parser).data
        parser.parse_keyword("x")
        rnumel = parse_one_size(parser).data
        args = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_argument)
        parser.parse_punctuation("->")
        outputs = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_type)
        attributes = parser.parse_optional_attr_dict_with_keyword()
        region = parser.parse_region(args)
        op = cls(name, kind, numel, rnumel, [a.type for a in args], outputs, region)
        if attributes is not None:
            op.attributes.update(attributes.data)
        return op


@irdl_op_definition
class YieldOp(IRDLOperation):
    """Ends a ``kernel.kernel`` (its global outputs) or a ``kernel.extern`` body (its values).

    ```mlir
    kernel.yield %e : memref<4x8xf32>
    ```
    """

    name = "kernel.yield"

    values = var_operand_def()

    traits = traits_def(IsTerminator())

    assembly_format = "attr-dict ($values^ `:` type($values))?"

    def __init__(self, *values: SSAValue) -> None:
        super().__init__(operands=[list(values)])

    def verify_(self) -> None:
        from kiln.dialects.kernel.program_ops import ExternOp

        parent = self.parent_op()
        if parent is not None and not isinstance(parent, KernelOp | ExternOp):
            raise VerifyException(f"{self.name} must end a kernel.kernel or a kernel.extern body")


__all__ = [
    "COLUMN_MAJOR_ATTR",
    "REDUCTION_HINTS",
    "VARS_ATTR",
    "KernelOp",
    "YieldOp",
    "node_vars",
    "vars_attr",
]

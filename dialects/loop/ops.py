"""Region ops of the loop dialect: each computes buffers from input buffers.

A buffer is a builtin ``memref`` (sizes, strides through its layout, and dtype). A loop
op takes its input buffers and size symbols as operands and *defines* its output
buffer(s) as results. Its body is an isolated single-block region whose block
arguments are the index variables (``d0..``), then the reduction variables (``r0..``),
then one argument per input buffer; ``loop.load`` reads those at index expressions.

```mlir
%2 = loop.pointwise [4, 8] (%0, %1) : (memref<4x8xf32>, memref<8xf32>) -> memref<4x8xf32> {
^bb0(%d0: index, %d1: index, %x: memref<4x8xf32>, %y: memref<8xf32>):
  %a = loop.load %x["8*d0 + d1"] : memref<4x8xf32>
  %b = loop.load %y["d1"] : memref<8xf32>
  %c = arith.addf %a, %b : f32
  loop.yield %c : f32
}
%3 = loop.reduction sum [4] reduce [8] (%2) : (memref<4x8xf32>) -> memref<4xf32> {
^bb0(%d0: index, %r0: index, %x: memref<4x8xf32>):
  %a = loop.load %x["8*d0 + r0"] : memref<4x8xf32>
  loop.yield %a : f32
}
```

Sizes are index expressions over ``s<k>``, the k-th ``syms`` operand (``["s0", 8]``).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import ClassVar, Self

import sympy
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    ArrayAttr,
    DenseArrayBase,
    IndexType,
    IntegerType,
    MemRefType,
    NoneAttr,
    TensorType,
    i1,
    i32,
    i64,
)
from xdsl.ir import Attribute, Region, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_op_definition,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.irdl.declarative_assembly_format import (
    AttributeVariable,
    CustomDirective,
    ParsingState,
    PrintingState,
    TypeDirective,
    VariadicOperandVariable,
    irdl_custom_directive,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import IsolatedFromAbove, Pure, RecursiveMemoryEffect
from xdsl.utils.exceptions import VerifyException

from kiln.dialects.loop.attributes import (
    IndexExprAttr,
    ReductionKind,
    ReductionKindAttr,
)
from kiln.dialects.loop.body_ops import YieldOp
from kiln.dialects.loop.expr import var_kind
from kiln.dialects.loop.syntax import EnumWord, Expr, Sizes, parse_sizes, print_sizes

DYNAMIC = DYNAMIC_INDEX
"""xDSL's marker for a dynamic (``?``) dimension."""


@cache
def segment_sizes(*counts: int) -> DenseArrayBase:
    """The ``operandSegmentSizes`` property for operand groups of these sizes (shared:
    building it verifies, and hot lowering code builds ops with ``Op.create``)."""
    return DenseArrayBase.from_list(i32, list(counts))


def size_attr(size: int | sympy.Expr) -> IndexExprAttr:
    return IndexExprAttr(sympy.sympify(size))


def buffer_type(element_type: Attribute, sizes: Sequence[int | sympy.Expr]) -> MemRefType:
    """The contiguous memref for a buffer of these sizes (``?`` for symbolic ones)."""
    shape = tuple(int(s) if sympy.sympify(s).is_Integer else DYNAMIC for s in sizes)
    return _memref(element_type, shape)


@cache
def _memref(element_type: Attribute, shape: tuple[int, ...]) -> MemRefType:
    return MemRefType(element_type, shape)


def is_contiguous_buffer(ty: Attribute) -> bool:
    return isinstance(ty, MemRefType) and isinstance(ty.layout, NoneAttr)


def _verify_sizes(
    op: IRDLOperation, sizes: ArrayAttr[IndexExprAttr], what: str, n_syms: int
) -> None:
    for size in sizes.data:
        if size.foreign_symbol("s", n_syms) is not None:
            raise VerifyException(
                f"{op.name}: {what} '{size.text}' may only use s0..s{n_syms - 1}"
                if n_syms
                else f"{op.name}: {what} '{size.text}' uses a symbol but the op has no syms"
            )
        if size.data.is_Integer and int(size.data) < 0:
            raise VerifyException(f"{op.name}: negative {what} {size.text}")


def _verify_result_shape(op: IRDLOperation, ty: Attribute, sizes: ArrayAttr[IndexExprAttr]) -> None:
    if not is_contiguous_buffer(ty):
        raise VerifyException(f"{op.name}: result must be a contiguous memref, got {ty}")
    assert isinstance(ty, MemRefType)
    shape = ty.get_shape()
    if len(shape) != len(sizes.data):
        raise VerifyException(
            f"{op.name}: {len(sizes.data)} sizes but result {ty} has rank {len(shape)}"
        )
    for dim, size in zip(shape, sizes.data, strict=True):
        static = int(size.data) if size.data.is_Integer else DYNAMIC
        if dim != static:
            raise VerifyException(f"{op.name}: size {size.text} does not match result type {ty}")


class LoopNestOp(IRDLOperation):
    """Shared fields and syntax of ``loop.pointwise`` and ``loop.reduction``."""

    inputs = var_operand_def(MemRefType)
    syms = var_operand_def(IndexType)
    sizes = prop_def(ArrayAttr[IndexExprAttr])
    body = region_def("single_block")

    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(IsolatedFromAbove(), Pure())

    @property
    def num_loop_vars(self) -> int:
        """Index plus reduction variables: the leading block arguments."""
        return len(self.sizes.data) + len(self.reduction_sizes_list())

    def reduction_sizes_list(self) -> list[IndexExprAttr]:
        return []

    def input_args(self) -> Sequence[SSAValue]:
        """The block arguments that stand for the input buffers."""
        return self.body.block.args[self.num_loop_vars :]

    def result_sizes_list(self) -> list[IndexExprAttr]:
        """The sizes of the buffer(s) the op defines (its index sizes, but for a scatter)."""
        return list(self.sizes.data)

    def _verify_yield(self, last: YieldOp) -> None:
        if len(last.values) != 1:
            raise VerifyException(f"{self.name}: body must end with 'loop.yield' of one value")

    def verify_(self) -> None:
        _verify_sizes(self, self.sizes, "size", len(self.syms))
        block = self.body.block
        n = self.num_loop_vars
        expected = [IndexType()] * n + [v.type for v in self.inputs]
        if list(block.arg_types) != expected:
            raise VerifyException(
                f"{self.name}: body arguments must be {n} index variables followed by the "
                f"{len(self.inputs)} input buffers' types; got ({', '.join(map(str, block.arg_types))})"
            )
        for value in self.inputs:
            if not is_contiguous_buffer(value.type):
                raise VerifyException(f"{self.name}: input {value.type} is not a contiguous buffer")
        last = block.last_op
        if not isinstance(last, YieldOp):
            raise VerifyException(f"{self.name}: body must end with 'loop.yield' of one value")
        self._verify_yield(last)

    def yielded_type(self) -> Attribute:
        last = self.body.block.last_op
        assert isinstance(last, YieldOp)
        return last.values[0].type


# -- syntax: custom directives of the declarative formats below ---------------------------


@irdl_custom_directive
class Inputs(CustomDirective):
    """`` (%a, %b)``: the input buffers, always after a space."""

    inputs: VariadicOperandVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        self.inputs.set(
            state,
            parser.parse_comma_separated_list(
                parser.Delimiter.PAREN, parser.parse_unresolved_operand
            ),
        )

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        printer.print_string(" (")
        printer.print_list(self.inputs.get(op), printer.print_ssa_value)
        printer.print_string(")")
        state.should_emit_space = True
        state.last_was_punctuation = True


@irdl_custom_directive
class Signature(CustomDirective):
    """``(input and sym types) -> result types``: one function type for both operand
    groups (which the declarative ``functional-type`` cannot split)."""

    inputs: TypeDirective
    syms: TypeDirective
    results: TypeDirective

    def parse(self, parser: Parser, state: ParsingState) -> None:
        inner = self.inputs.inner
        assert isinstance(inner, VariadicOperandVariable)
        n_inputs = len(state.operands[inner.index] or ())
        syms = self.syms.inner
        assert isinstance(syms, VariadicOperandVariable)
        n_syms = len(state.operands[syms.index] or ())
        pos = parser.pos
        fn_type = parser.parse_function_type()
        types = fn_type.inputs.data
        if len(types) != n_inputs + n_syms:
            parser.raise_error(f"{n_inputs + n_syms} operands but {len(types)} operand types", pos)
        self.inputs.set(state, types[:n_inputs])
        self.syms.set(state, types[n_inputs:])
        self.results.set(state, fn_type.outputs.data)

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        printer.print_function_type(
            [*self.inputs.get(op), *self.syms.get(op)], self.results.get(op)
        )


@irdl_custom_directive
class ReductionKindWord(EnumWord):
    """``sum``: a reduction kind, bare."""

    attr = ReductionKindAttr
    what = "reduction kind"
    kind: AttributeVariable


OPERANDS_AND_REGION = (
    "custom<Inputs>($inputs) (`syms` `(` $syms^ `)`)? attr-dict "
    "`:` custom<Signature>(type($inputs), type($syms), type({results})) $body"
)
"""The tail shared by loop nests and the extern ops of the loop and kernel dialects:
`` (inputs) syms(...) {attrs} : (types) -> results {region}``."""
LOOP_DIRECTIVES = (Sizes, Inputs, Signature, ReductionKindWord)


@irdl_op_definition
class PointwiseOp(LoopNestOp):
    """Computes each element of one buffer from its index: the body yields its value.

    ```mlir
    %1 = loop.pointwise [8, 4] (%0) : (memref<4x8xf32>) -> memref<8x4xf32> {
    ^bb0(%d0: index, %d1: index, %x: memref<4x8xf32>):
      %v = loop.load %x["d0 + 8*d1"] : memref<4x8xf32>
      loop.yield %v : f32
    }
    ```
    """

    name = "loop.pointwise"

    result = result_def(MemRefType)

    def verify_(self) -> None:
        super().verify_()
        _verify_result_shape(self, self.result.type, self.sizes)
        assert isinstance(self.result.type, MemRefType)
        if self.yielded_type() != self.result.type.element_type:
            raise VerifyException(
                f"{self.name}: body yields {self.yielded_type()} but the buffer holds "
                f"{self.result.type.element_type}"
            )

    assembly_format = "custom<Sizes>($sizes) " + OPERANDS_AND_REGION.format(results="$result")
    custom_directives = LOOP_DIRECTIVES


_RESULT_COUNT = {ReductionKind.WELFORD: 3}


@irdl_op_definition
class ReductionOp(LoopNestOp):
    """Reduces the body's value over the reduction variables, for each index.

    ``argmax``/``argmin`` give the (row-major) position in the reduction space as
    ``i64``; ``any``/``all`` reduce ``i1``; ``welford`` has three results, mean, m2 (the
    sum of squared deviations from the mean) and count, all of the yielded float type.

    ```mlir
    %m, %m2, %n = loop.reduction welford [4] reduce [8] (%0) : (memref<4x8xf32>) -> (memref<4xf32>, memref<4xf32>, memref<4xf32>) {
    ^bb0(%d0: index, %r0: index, %x: memref<4x8xf32>):
      %v = loop.load %x["8*d0 + r0"] : memref<4x8xf32>
      loop.yield %v : f32
    }
    ```
    """

    name = "loop.reduction"

    kind = prop_def(ReductionKindAttr)
    reduction_sizes = prop_def(ArrayAttr[IndexExprAttr])
    outputs = var_result_def(MemRefType)

    def reduction_sizes_list(self) -> list[IndexExprAttr]:
        return list(self.reduction_sizes.data)

    def verify_(self) -> None:
        super().verify_()
        _verify_sizes(self, self.reduction_sizes, "reduction size", len(self.syms))
        kind = self.kind.data
        count = _RESULT_COUNT.get(kind, 1)
        if len(self.outputs) != count:
            raise VerifyException(
                f"{self.name}: {kind} has {count} result(s), got {len(self.outputs)}"
            )
        value = self.yielded_type()
        for out in self.outputs:
            _verify_result_shape(self, out.type, self.sizes)
            assert isinstance(out.type, MemRefType)
            elem = out.type.element_type
            if kind in (ReductionKind.ARGMAX, ReductionKind.ARGMIN):
                if elem != i64:
                    raise VerifyException(f"{self.name}: {kind} produces i64, not {elem}")
            elif elem != value:
                raise VerifyException(
                    f"{self.name}: body yields {value} but the {kind} buffer holds {elem}"
                )
        if kind in (ReductionKind.ANY, ReductionKind.ALL) and value != i1:
            raise VerifyException(f"{self.name}: {kind} reduces i1 values, not {value}")
        if kind is ReductionKind.WELFORD and isinstance(value, IntegerType | IndexType):
            raise VerifyException(f"{self.name}: welford reduces floats, not {value}")

    assembly_format = (
        "custom<ReductionKindWord>($kind) custom<Sizes>($sizes) `reduce` "
        "custom<Sizes>($reduction_sizes) " + OPERANDS_AND_REGION.format(results="$outputs")
    )
    custom_directives = LOOP_DIRECTIVES


@irdl_op_definition
class ScatterOp(LoopNestOp):
    """Adds the body's value into one element of a zero-initialised buffer, for each point.

    The iteration space is ``sizes`` (the source's: index and value tensors); the result is
    a new buffer of ``into`` sizes that starts at zero, and each point adds its value at
    the flat position ``at``, an index expression over the loop variables, the sizes and
    ``i<k>``: the k-th ``index`` value yielded after the value (indices loaded from index
    tensors, wrapped and checked by ``loop.check_index`` like a gather's). Several points
    may hit one element: each adds (``index_put(accumulate=True)``, ``index_add``,
    ``scatter_add``, the embedding gradient). ``sum`` is the only kind.

    ```mlir
    %g = loop.scatter sum [4, 8] into [100, 8] at "d1 + 8*i0" (%idx, %src) : (memref<4xi64>, memref<4x8xf32>) -> memref<100x8xf32> {
    ^bb0(%d0: index, %d1: index, %ix: memref<4xi64>, %v: memref<4x8xf32>):
      %i = loop.load %ix["d0"] : memref<4xi64>
      %k = arith.index_cast %i : i64 to index
      %j = loop.check_index %k < "100"
      %x = loop.load %v["8*d0 + d1"] : memref<4x8xf32>
      loop.yield %x, %j : f32, index
    }
    ```

    In a kernel (``kernel.kernel``), a scatter node accumulates into its output buffer,
    which the program zero-fills before the launch; nothing in the same kernel reads it.
    """

    name = "loop.scatter"

    kind = prop_def(ReductionKindAttr)
    out_sizes = prop_def(ArrayAttr[IndexExprAttr])
    index = prop_def(IndexExprAttr)
    result = result_def(MemRefType)

    def result_sizes_list(self) -> list[IndexExprAttr]:
        return list(self.out_sizes.data)

    def indices_yielded(self) -> int:
        """How many ``i<k>`` index values the body yields after the value."""
        last = self.body.block.last_op
        assert isinstance(last, YieldOp)
        return len(last.values) - 1

    def _verify_yield(self, last: YieldOp) -> None:
        if not last.values:
            raise VerifyException(f"{self.name}: body must yield a value and its indices")
        for value in list(last.values)[1:]:
            if not isinstance(value.type, IndexType):
                raise VerifyException(
                    f"{self.name}: values yielded after the first are indices, not {value.type}"
                )

    def verify_(self) -> None:
        super().verify_()
        if self.kind.data is not ReductionKind.SUM:
            raise VerifyException(f"{self.name}: only sum is supported, not {self.kind.data}")
        _verify_sizes(self, self.out_sizes, "size", len(self.syms))
        _verify_result_shape(self, self.result.type, self.out_sizes)
        assert isinstance(self.result.type, MemRefType)
        if self.yielded_type() != self.result.type.element_type:
            raise VerifyException(
                f"{self.name}: body yields {self.yielded_type()} but the buffer holds "
                f"{self.result.type.element_type}"
            )
        limits = {
            "d": len(self.sizes.data),
            "s": len(self.syms),
            "i": self.indices_yielded(),
            "r": 0,
        }
        for symbol in sorted(self.index.data.free_symbols, key=str):
            kind, k = var_kind(symbol)  # pyright: ignore[reportArgumentType]
            if k >= limits[kind]:
                raise VerifyException(
                    f"{self.name}: position '{self.index.text}' uses {symbol}, which is not "
                    "defined here (d<k> index variables, s<k> sizes, i<k> yielded indices)"
                )

    assembly_format = (
        "custom<ReductionKindWord>($kind) custom<Sizes>($sizes) `into` custom<Sizes>($out_sizes) "
        "`at` custom<Expr>($index) " + OPERANDS_AND_REGION.format(results="$result")
    )
    custom_directives = (*LOOP_DIRECTIVES, Expr)


def tensor_for_buffer(ty: Attribute) -> Attribute:
    """Inside ``loop.extern`` a buffer is seen as the tensor of the same shape."""
    if isinstance(ty, MemRefType):
        return TensorType(ty.element_type, ty.get_shape())
    return ty


class ExternOpBase(IRDLOperation):
    """Shared fields, verifier and syntax of ``loop.extern`` and ``kernel.extern``: calls
    to ATen whose body is aten ops on the input buffers seen as tensors.

    Block arguments are the input buffers as tensors, then the ``syms`` operands; results
    are the yielded tensors as contiguous buffers (non-tensor values pass through).
    Subclasses set ``YIELD_OP`` (their dialect's terminator) and their traits.
    """

    inputs = var_operand_def(MemRefType)
    syms = var_operand_def()
    outputs = var_result_def()
    body = region_def("single_block")

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    YIELD_OP: ClassVar[type[IRDLOperation]] = YieldOp
    """The terminator of the body."""
    CONTIGUOUS_INPUTS: ClassVar[bool] = True
    """Whether the verifier requires contiguous input buffers."""

    def verify_(self) -> None:
        block = self.body.block
        expected = [tensor_for_buffer(v.type) for v in self.inputs] + [v.type for v in self.syms]
        if list(block.arg_types) != expected:
            raise VerifyException(
                f"{self.name}: body arguments must be the inputs as tensors and then the syms: "
                f"expected ({', '.join(map(str, expected))}), got "
                f"({', '.join(map(str, block.arg_types))})"
            )
        if self.CONTIGUOUS_INPUTS:
            for value in self.inputs:
                if not is_contiguous_buffer(value.type):
                    raise VerifyException(
                        f"{self.name}: input {value.type} is not a contiguous buffer"
                    )
        last = block.last_op
        if not isinstance(last, self.YIELD_OP):
            raise VerifyException(f"{self.name}: body must end with '{self.YIELD_OP.name}'")
        values: Sequence[SSAValue] = last.operands
        if len(values) != len(self.outputs):
            raise VerifyException(
                f"{self.name}: body yields {len(values)} values for {len(self.outputs)} results"
            )
        for value, out in zip(values, self.outputs, strict=True):
            if isinstance(out.type, MemRefType) and not is_contiguous_buffer(out.type):
                raise VerifyException(f"{self.name}: result {out.type} is not a contiguous buffer")
            if tensor_for_buffer(out.type) != value.type:
                raise VerifyException(
                    f"{self.name}: yielded {value.type} does not match result {out.type}"
                )

    @classmethod
    def create_with_body(
        cls,
        inputs: Sequence[SSAValue],
        syms: Sequence[SSAValue],
        result_types: Sequence[Attribute],
        body: Region,
    ) -> Self:
        return cls.build(
            operands=[list(inputs), list(syms)], result_types=[list(result_types)], regions=[body]
        )


@irdl_op_definition
class ExternOp(ExternOpBase):
    """Buffers computed by an ATen kernel: the body is aten ops on tensors.

    Block arguments are the input buffers seen as tensors, then the ``syms`` operands;
    results are the yielded tensors as contiguous buffers (non-tensor values pass
    through). Strided views of inputs appear as ``aten.as_strided`` in the body.

    ```mlir
    %2 = loop.extern (%0, %1) : (memref<4x8xf32>, memref<3x8xf32>) -> memref<4x3xf32> {
    ^bb0(%a: tensor<4x8xf32>, %b: tensor<3x8xf32>):
      %t = aten.as_strided.default(%b, size = [8, 3], stride = [1, 8]) : (tensor<3x8xf32>) -> tensor<8x3xf32>
      %c = aten.mm.default(%a, %t) : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
      loop.yield %c : tensor<4x3xf32>
    }
    ```
    """

    name = "loop.extern"

    traits = traits_def(IsolatedFromAbove(), RecursiveMemoryEffect())

    assembly_format = OPERANDS_AND_REGION.format(results="$outputs")
    custom_directives = LOOP_DIRECTIVES


__all__ = [
    "ExternOp",
    "ExternOpBase",
    "LoopNestOp",
    "PointwiseOp",
    "ReductionOp",
    "ScatterOp",
    "buffer_type",
    "is_contiguous_buffer",
    "parse_sizes",
    "print_sizes",
    "size_attr",
    "tensor_for_buffer",
]

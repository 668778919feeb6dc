"""``kernel.program`` and the ops it runs: allocations, launches, extern calls, frees.

``kernel.program`` replaces the lowered ``func.func``: same symbol, signature, argument
attributes and function attributes (``kiln.outputs``), so a backend's wrapper has the
calling convention of the original graph. Its body runs in order:

```mlir
kernel.program @forward(%x: memref<4x8xf32>, %w: memref<8x3xf32>) -> memref<4x3xf32> {
  %0 = kernel.alloc : memref<4x8xf32>
  kernel.launch @kernel0(%x) outs(%0) : (memref<4x8xf32>) -> (memref<4x8xf32>)
  %1 = kernel.extern (%0, %w) : (memref<4x8xf32>, memref<8x3xf32>) -> memref<4x3xf32> {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<8x3xf32>):
    %c = aten.mm.default(%a, %b) : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
    kernel.yield %c : tensor<4x3xf32>
  }
  kernel.free %0 : memref<4x8xf32>
  kernel.return %1 : memref<4x3xf32>
}
```

Buffers are SSA ``memref`` values. The program owns those that ``kernel.alloc``,
``kernel.reuse`` and ``kernel.extern`` (ATen allocates its own outputs) define; it
borrows its arguments. ``kernel.launch`` writes its ``outs`` (destination-passing); an
``outs`` buffer that is also an argument is updated in place. ``kernel.free`` ends an
owned buffer's life; ``kernel.reuse`` ends one and hands its memory to a new buffer of
the same dtype and byte size. The verifier (:mod:`kiln.dialects.kernel.lifetimes`)
checks that every buffer is written before it is read, freed at most once, never a
program argument, and never used after its free or reuse. Scalar ops (``arith`` on
``index``, ``memref.dim``) may appear too: they compute sizes.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import ClassVar

from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    FunctionType,
    IndexType,
    MemRefType,
    ModuleOp,
    StringAttr,
    SymbolNameConstraint,
    SymbolRefAttr,
)
from xdsl.dialects.utils import parse_func_op_like, print_func_op_like
from xdsl.ir import Attribute, Operation, Region, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import (
    CallableOpInterface,
    HasParent,
    IsolatedFromAbove,
    IsTerminator,
    OpTrait,
    SymbolOpInterface,
    SymbolTable,
    SymbolUserOpInterface,
)
from xdsl.utils.exceptions import VerifyException

from kiln.dialects.kernel.kernel_ops import KernelOp, YieldOp
from kiln.dialects.loop.ops import (
    LOOP_DIRECTIVES,
    OPERANDS_AND_REGION,
    ExternOpBase,
    is_contiguous_buffer,
)

_RESERVED = ("sym_name", "function_type", "arg_attrs", "res_attrs")


class _ProgramCallable(CallableOpInterface):
    @classmethod
    def get_callable_region(cls, op: Operation) -> Region:
        assert isinstance(op, ProgramOp)
        return op.body

    @classmethod
    def get_argument_types(cls, op: Operation) -> tuple[Attribute, ...]:
        assert isinstance(op, ProgramOp)
        return op.function_type.inputs.data

    @classmethod
    def get_result_types(cls, op: Operation) -> tuple[Attribute, ...]:
        assert isinstance(op, ProgramOp)
        return op.function_type.outputs.data


@irdl_op_definition
class ProgramOp(IRDLOperation):
    """The scheduled function: allocations, launches, extern calls and frees, in order."""

    name = "kernel.program"

    sym_name = prop_def(SymbolNameConstraint())
    function_type = prop_def(FunctionType)
    arg_attrs = opt_prop_def(ArrayAttr[DictionaryAttr])
    res_attrs = opt_prop_def(ArrayAttr[DictionaryAttr])
    body = region_def("single_block")

    traits = traits_def(IsolatedFromAbove(), SymbolOpInterface(), _ProgramCallable())

    def __init__(
        self,
        name: str,
        function_type: FunctionType,
        body: Region,
        *,
        arg_attrs: ArrayAttr[DictionaryAttr] | None = None,
        res_attrs: ArrayAttr[DictionaryAttr] | None = None,
    ) -> None:
        super().__init__(
            properties={
                "sym_name": StringAttr(name),
                "function_type": function_type,
                "arg_attrs": arg_attrs,
                "res_attrs": res_attrs,
            },
            regions=[body],
        )

    def verify_(self) -> None:
        from kiln.dialects.kernel.lifetimes import check_lifetimes

        block = self.body.block
        if tuple(block.arg_types) != self.function_type.inputs.data:
            raise VerifyException(
                f"@{self.sym_name.data}: block arguments do not match the "
                f"signature {self.function_type}"
            )
        last = block.last_op
        if not isinstance(last, ReturnOp):
            raise VerifyException(f"@{self.sym_name.data}: body must end with kernel.return")
        if tuple(last.values.types) != self.function_type.outputs.data:
            raise VerifyException(
                f"@{self.sym_name.data}: returns ({', '.join(map(str, last.values.types))})"
                f" but the signature says ({', '.join(map(str, self.function_type.outputs.data))})"
            )
        check_lifetimes(block)

    # Hand-written: the header names the entry block's arguments (%x: type), which xDSL's
    # declarative format cannot print or parse.
    def print(self, printer: Printer) -> None:
        print_func_op_like(
            printer,
            self.sym_name,
            self.function_type,
            self.body,
            self.attributes,
            arg_attrs=self.arg_attrs,
            res_attrs=self.res_attrs,
            reserved_attr_names=_RESERVED,
        )

    @classmethod
    def parse(cls, parser: Parser) -> ProgramOp:
        name, inputs, outputs, region, extra, arg_attrs, res_attrs = parse_func_op_like(
            parser, reserved_attr_names=_RESERVED
        )
        op = cls(
            name,
            FunctionType.from_lists(inputs, outputs),
            region,
            arg_attrs=arg_attrs,
            res_attrs=res_attrs,
        )
        if extra is not None:
            op.attributes |= extra.data
        return op


@irdl_op_definition
class AllocOp(IRDLOperation):
    """A new contiguous buffer; one ``index`` operand per dynamic dimension.

    ```mlir
    %0 = kernel.alloc : memref<4x8xf32>
    %1 = kernel.alloc(%n) : memref<?x8xf32>
    ```
    """

    name = "kernel.alloc"

    dynamic_sizes = var_operand_def(IndexType)
    result = result_def(MemRefType)

    traits = traits_def(HasParent(ProgramOp))

    assembly_format = "(`(` $dynamic_sizes^ `)`)? attr-dict `:` type($result)"

    def __init__(self, ty: MemRefType, dynamic_sizes: Sequence[SSAValue] = ()) -> None:
        super().__init__(operands=[list(dynamic_sizes)], result_types=[ty])

    def verify_(self) -> None:
        ty = self.result.type
        if not is_contiguous_buffer(ty):
            raise VerifyException(f"{ty} is not a contiguous buffer")
        assert isinstance(ty, MemRefType)
        dynamic = sum(1 for d in ty.get_shape() if d < 0)
        if dynamic != len(self.dynamic_sizes):
            raise VerifyException(
                f"{ty} has {dynamic} dynamic dimension(s) but "
                f"{len(self.dynamic_sizes)} size operand(s) were given"
            )


@irdl_op_definition
class FreeOp(IRDLOperation):
    """Ends the life of a buffer the program allocated.

    ```mlir
    kernel.free %0 : memref<4x8xf32>
    ```
    """

    name = "kernel.free"

    buffer = operand_def(MemRefType)

    traits = traits_def(HasParent(ProgramOp))

    assembly_format = "$buffer attr-dict `:` type($buffer)"

    def __init__(self, buffer: SSAValue) -> None:
        super().__init__(operands=[buffer])


@cache
def byte_size(ty: MemRefType) -> int | None:
    """Bytes of a static contiguous buffer (None for dynamic shapes)."""
    from kiln.dialects.loop.body_eval import torch_dtype

    shape = ty.get_shape()
    if any(d < 0 for d in shape):
        return None
    n = 1
    for d in shape:
        n *= d
    return n * torch_dtype(ty.element_type).itemsize


def can_reuse(old: MemRefType, new: MemRefType) -> bool:
    """Whether ``new`` may live in ``old``'s memory: same dtype and memory space, same
    number of elements (or the very same type, for dynamic shapes)."""
    if old == new:
        return True
    if old.element_type != new.element_type or old.memory_space != new.memory_space:
        return False
    old_bytes, new_bytes = byte_size(old), byte_size(new)
    return old_bytes is not None and old_bytes == new_bytes


@irdl_op_definition
class ReuseOp(IRDLOperation):
    """Ends the life of ``source`` and gives its memory to a new buffer (contents undefined).

    The new buffer has the same dtype and byte size, possibly another shape.

    ```mlir
    %2 = kernel.reuse %0 : memref<4x8xf32> -> memref<32xf32>
    ```
    """

    name = "kernel.reuse"

    source = operand_def(MemRefType)
    result = result_def(MemRefType)

    traits = traits_def(HasParent(ProgramOp))

    assembly_format = "$source attr-dict `:` type($source) `->` type($result)"

    def __init__(self, source: SSAValue, ty: MemRefType) -> None:
        super().__init__(operands=[source], result_types=[ty])

    def verify_(self) -> None:
        old = self.source.type
        new = self.result.type
        assert isinstance(old, MemRefType)
        assert isinstance(new, MemRefType)
        if not is_contiguous_buffer(new):
            raise VerifyException(f"{new} is not a contiguous buffer")
        if not can_reuse(old, new):
            raise VerifyException(
                f"{new} cannot reuse {old} (dtype, memory space and size must match)"
            )


class LaunchTarget(OpTrait):
    """A lowered kernel that ``kernel.launch`` may call in place of a ``kernel.kernel``
    (a backend's kernel function, e.g. ``cpp.func``): a symbol with the kernel's
    ``function_type``, (read buffers, sizes) -> (written buffers)."""


class _LaunchSymbolUser(SymbolUserOpInterface):
    def verify(self, op: Operation) -> None:
        assert isinstance(op, LaunchOp)
        kernel = SymbolTable.lookup_symbol(op, op.kernel)
        if not isinstance(kernel, KernelOp) and not (
            kernel is not None and kernel.has_trait(LaunchTarget)
        ):
            raise VerifyException(f"'{op.kernel}' is not a kernel.kernel")
        signature = kernel.function_type  # pyright: ignore[reportAttributeAccessIssue, reportOptionalMemberAccess]
        if tuple(op.args.types) != signature.inputs.data:
            raise VerifyException(
                f"{op.kernel}: arguments ({', '.join(map(str, op.args.types))}) do not "
                f"match the kernel's ({', '.join(map(str, signature.inputs.data))})"
            )
        if len(op.outs) != len(signature.outputs):
            raise VerifyException(
                f"{op.kernel}: {len(op.outs)} outs for {len(signature.outputs)} kernel results"
            )
        for out, ty in zip(op.outs.types, signature.outputs.data, strict=True):
            assert isinstance(out, MemRefType)
            assert isinstance(ty, MemRefType)
            if out != ty and not can_reuse(out, ty):
                raise VerifyException(f"{op.kernel}: out {out} cannot hold a {ty} result")


@irdl_op_definition
class LaunchOp(IRDLOperation):
    """Runs a kernel: its arguments (buffers, then sizes) and the buffers it writes.

    An ``outs`` buffer may have another shape than the kernel's result if it has the
    same dtype and size (a reused buffer holds the result's elements in order).

    ```mlir
    kernel.launch @kernel0(%x, %n) outs(%0) : (memref<?x8xf32>, index) -> (memref<?x8xf32>)
    ```
    """

    name = "kernel.launch"

    kernel = prop_def(SymbolRefAttr)
    args = var_operand_def()
    outs = var_operand_def(MemRefType)

    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(HasParent(ProgramOp), _LaunchSymbolUser())

    assembly_format = (
        "$kernel `(` $args `)` `outs` `(` $outs `)` attr-dict "
        "`:` `(` type($args) `)` `->` `(` type($outs) `)`"
    )

    def __init__(self, kernel: str, args: Sequence[SSAValue], outs: Sequence[SSAValue]) -> None:
        super().__init__(
            operands=[list(args), list(outs)], properties={"kernel": SymbolRefAttr(kernel)}
        )

    def verify_(self) -> None:
        if len(set(self.outs)) != len(self.outs):
            raise VerifyException(f"{self.kernel}: a buffer appears twice in outs")


@irdl_op_definition
class ExternOp(ExternOpBase):
    """Calls ATen: the body (aten ops on the inputs seen as tensors) is ``loop.extern``'s.

    Tensor results come back as new buffers that the program owns (ATen allocates
    them); other results (sizes) pass through. Fields, verifier and syntax are
    :class:`~kiln.dialects.loop.ops.ExternOpBase`'s; inputs need not be contiguous.

    ```mlir
    %1 = kernel.extern (%0, %w) : (memref<4x8xf32>, memref<8x3xf32>) -> memref<4x3xf32> {
    ^bb0(%a: tensor<4x8xf32>, %b: tensor<8x3xf32>):
      %c = aten.mm.default(%a, %b) : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
      kernel.yield %c : tensor<4x3xf32>
    }
    ```
    """

    name = "kernel.extern"

    traits = traits_def(HasParent(ProgramOp), IsolatedFromAbove())

    assembly_format = OPERANDS_AND_REGION.format(results="$outputs")
    custom_directives = LOOP_DIRECTIVES

    YIELD_OP: ClassVar[type[IRDLOperation]] = YieldOp
    CONTIGUOUS_INPUTS: ClassVar[bool] = False


@irdl_op_definition
class ReturnOp(IRDLOperation):
    """Ends ``kernel.program`` with its results.

    ```mlir
    kernel.return %1 : memref<4x3xf32>
    ```
    """

    name = "kernel.return"

    values = var_operand_def()

    traits = traits_def(IsTerminator(), HasParent(ProgramOp))

    assembly_format = "attr-dict ($values^ `:` type($values))?"

    def __init__(self, *values: SSAValue) -> None:
        super().__init__(operands=[list(values)])


class ProgramNotFound(LookupError):
    """The module has no ``kernel.program`` of the name asked for."""


def find_program(module: ModuleOp, name: str | None = None) -> ProgramOp:
    """The module's ``kernel.program @name`` (its first program when ``name`` is None);
    the interpreter and both backends look programs up through this one helper."""
    programs = [op for op in module.ops if isinstance(op, ProgramOp)]
    for program in programs:
        if name is None or program.sym_name.data == name:
            return program
    raise ProgramNotFound(
        f"the module has no kernel.program{f' @{name}' if name else ''} (programs: "
        f"{[p.sym_name.data for p in programs]}); run lower-aten and fuse first"
    )


__all__ = [
    "AllocOp",
    "ExternOp",
    "FreeOp",
    "LaunchOp",
    "ProgramNotFound",
    "ProgramOp",
    "ReturnOp",
    "ReuseOp",
    "byte_size",
    "can_reuse",
    "find_program",
]

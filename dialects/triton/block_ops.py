"""Ops that make blocks and move them to and from memory.

```mlir
%r = triton.arange XBLOCK : !triton.block<[XBLOCK], i32>                         // tl.arange(0, XBLOCK)
%e = triton.expand_dims %r, 1 : !triton.block<[XBLOCK], i32> -> !triton.block<[XBLOCK, 1], i32>   // r[:, None]
%b = triton.broadcast_to %e : !triton.block<[XBLOCK, 1], i32> -> !triton.block<[XBLOCK, RBLOCK], i32>
%c = triton.constant 2.0 : f32                                                   // 2.0
%z = triton.full 0.0 : !triton.block<[XBLOCK, RBLOCK], f32>                      // tl.full([XBLOCK, RBLOCK], 0.0, tl.float32)
%p = triton.addptr %in_ptr0, %e : !triton.ptr<f32>, !triton.block<[XBLOCK, 1], i32> -> !triton.block<[XBLOCK, 1], !triton.ptr<f32>>
%v = triton.load %p mask %m other 0.0 : !triton.block<[XBLOCK, 1], !triton.ptr<f32>> -> !triton.block<[XBLOCK, 1], f32>
triton.store %p, %v mask %m : !triton.block<[XBLOCK, 1], !triton.ptr<f32>>, !triton.block<[XBLOCK, 1], f32>
triton.device_assert %ok, "index out of bounds" : !triton.block<[XBLOCK, 1], i1>  // tl.device_assert(ok, "...")
```
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import FloatAttr, IntAttr, IntegerAttr, IntegerType, StringAttr, i1, i32
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import (
    AnyAttr,
    AttrSizedOperandSegments,
    IRDLOperation,
    ParamAttrConstraint,
    VarConstraint,
    base,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.irdl.declarative_assembly_format import (
    AttributeVariable,
    CustomDirective,
    ParsingState,
    PrintingState,
    TypeDirective,
    irdl_custom_directive,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import MemoryReadEffect, MemoryWriteEffect, Pure
from xdsl.utils.exceptions import VerifyException

from kiln.dialects.loop.syntax import BlockDim, Int
from kiln.dialects.triton.literals import (
    Lit,
    check_literal,
    make_literal,
    typed_literal,
)
from kiln.dialects.triton.types import (
    BlockType,
    Dim,
    PointerType,
    broadcast_shapes,
    element_of,
    shape_of,
    with_shape,
)

EVICTION_POLICIES = ("evict_first", "evict_last")


@irdl_op_definition
class ArangeOp(IRDLOperation):
    """``tl.arange(0, end)``: the ``i32`` lane numbers of a block dimension.

    ```mlir
    %r = triton.arange RBLOCK : !triton.block<[RBLOCK], i32>
    ```
    """

    name = "triton.arange"

    end = prop_def(StringAttr | IntAttr)
    result = result_def(BlockType)

    traits = traits_def(Pure())

    def __init__(self, end: Dim) -> None:
        attr = StringAttr(end) if isinstance(end, str) else IntAttr(end)
        super().__init__(properties={"end": attr}, result_types=[BlockType([end], i32)])

    def verify_(self) -> None:
        if self.result.type != BlockType([self.end.data], i32):
            raise VerifyException(
                f"{self.name}: result must be !triton.block<[{self.end.data}], i32>"
            )

    assembly_format = "custom<BlockDim>($end) attr-dict `:` type($result)"
    custom_directives = (BlockDim,)


@irdl_op_definition
class ExpandDimsOp(IRDLOperation):
    """``x[:, None]`` / ``x[None, :]``: a new dimension of size 1 at ``axis``.

    ```mlir
    %e = triton.expand_dims %r, 0 : !triton.block<[RBLOCK], i32> -> !triton.block<[1, RBLOCK], i32>
    ```
    """

    name = "triton.expand_dims"

    source = operand_def(BlockType)
    axis = prop_def(IntAttr)
    result = result_def(BlockType)

    traits = traits_def(Pure())

    def __init__(self, source: SSAValue, axis: int) -> None:
        ty = source.type
        assert isinstance(ty, BlockType)
        shape = list(ty.shape)
        shape.insert(axis, 1)
        super().__init__(
            operands=[source],
            properties={"axis": IntAttr(axis)},
            result_types=[BlockType(shape, ty.element_type)],
        )

    def verify_(self) -> None:
        ty = self.source.type
        assert isinstance(ty, BlockType)
        shape = list(ty.shape)
        if not 0 <= self.axis.data <= len(shape):
            raise VerifyException(f"{self.name}: axis {self.axis.data} out of range")
        shape.insert(self.axis.data, 1)
        if self.result.type != BlockType(shape, ty.element_type):
            raise VerifyException(
                f"{self.name}: result must be {BlockType(shape, ty.element_type)}"
            )

    assembly_format = (
        "$source `,` custom<Int>($axis) attr-dict `:` type($source) `->` type($result)"
    )
    custom_directives = (Int,)


@irdl_op_definition
class BroadcastToOp(IRDLOperation):
    """``tl.broadcast_to(x, shape)``.

    ```mlir
    %b = triton.broadcast_to %x : !triton.block<[XBLOCK, 1], f32> -> !triton.block<[XBLOCK, RBLOCK], f32>
    ```
    """

    name = "triton.broadcast_to"

    source = operand_def()
    result = result_def(BlockType)

    traits = traits_def(Pure())

    assembly_format = "$source attr-dict `:` type($source) `->` type($result)"

    def __init__(self, source: SSAValue, shape: tuple[Dim, ...]) -> None:
        super().__init__(
            operands=[source], result_types=[BlockType(shape, element_of(source.type))]
        )

    def verify_(self) -> None:
        ty = self.result.type
        assert isinstance(ty, BlockType)
        src = shape_of(self.source.type)
        if element_of(self.source.type) != ty.element_type:
            raise VerifyException(f"{self.name}: element types differ")
        if (len(src) not in (0, len(ty.shape))) or broadcast_shapes(src, ty.shape) != ty.shape:
            raise VerifyException(f"{self.name}: {self.source.type} does not broadcast to {ty}")


@irdl_op_definition
class ConstantOp(IRDLOperation):
    """A scalar constant (a Python literal in the kernel).

    ```mlir
    %c = triton.constant 0.5 : f32
    %t = triton.constant true
    ```
    """

    name = "triton.constant"

    T: ClassVar = VarConstraint("T", AnyAttr())
    value = prop_def(
        IntegerAttr.constr(base(IntegerType) & T) | ParamAttrConstraint(FloatAttr, (AnyAttr(), T))
    )
    result = result_def(T)

    traits = traits_def(Pure())

    assembly_format = "attr-dict $value"

    def __init__(self, value: float | int | bool, ty: Attribute) -> None:
        super().__init__(properties={"value": make_literal(value, ty)}, result_types=[ty])

    def verify_(self) -> None:
        check_literal(self.name, self.value, self.result.type)


@irdl_custom_directive
class FullType(CustomDirective):
    """``!triton.block<[XBLOCK], f32>``: ``triton.full``'s block type, which types its
    value literal (parsed before it by :class:`Lit`)."""

    result: TypeDirective
    value: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        pos = parser.pos
        ty = parser.parse_type()
        if not isinstance(ty, BlockType):
            parser.raise_error(f"triton.full makes a !triton.block, not {ty}", pos)
        self.result.set(state, [ty])
        typed_literal(parser, state, self.value, ty.element_type, pos)

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        printer.print_attribute(self.result.get(op)[0])


@irdl_op_definition
class FullOp(IRDLOperation):
    """``tl.full(shape, value, dtype)``: a block with every element ``value``.

    ```mlir
    %z = triton.full -inf : !triton.block<[XBLOCK, RBLOCK], f32>
    ```
    """

    name = "triton.full"

    value = prop_def()
    result = result_def(BlockType)

    traits = traits_def(Pure())

    def __init__(self, value: float | int | bool, ty: BlockType) -> None:
        super().__init__(
            properties={"value": make_literal(value, ty.element_type)}, result_types=[ty]
        )

    def verify_(self) -> None:
        check_literal(self.name, self.value, element_of(self.result.type))

    assembly_format = (
        "custom<Lit>($value) attr-dict `:` custom<FullType>(type($result), ref($value))"
    )
    custom_directives = (Lit, FullType)


@irdl_op_definition
class AddPtrOp(IRDLOperation):
    """``ptr + offsets``: a block of pointers, ``offsets`` elements past ``ptr``.

    ```mlir
    %p = triton.addptr %in_ptr0, %off : !triton.ptr<f32>, !triton.block<[XBLOCK], i32> -> !triton.block<[XBLOCK], !triton.ptr<f32>>
    ```
    """

    name = "triton.addptr"

    ptr = operand_def(PointerType)
    offset = operand_def()
    result = result_def()

    traits = traits_def(Pure())

    assembly_format = (
        "$ptr `,` $offset attr-dict `:` type($ptr) `,` type($offset) `->` type($result)"
    )

    def __init__(self, ptr: SSAValue, offset: SSAValue) -> None:
        super().__init__(
            operands=[ptr, offset], result_types=[with_shape(shape_of(offset.type), ptr.type)]
        )

    def verify_(self) -> None:
        if not isinstance(element_of(self.offset.type), IntegerType):
            raise VerifyException(f"{self.name}: offsets must be integers, got {self.offset.type}")
        expected = with_shape(shape_of(self.offset.type), self.ptr.type)
        if self.result.type != expected:
            raise VerifyException(f"{self.name}: result must be {expected}")


def _pointee(ty: Attribute) -> Attribute:
    ptr = element_of(ty)
    if not isinstance(ptr, PointerType):
        raise VerifyException(f"expected pointers, got {ty}")
    return ptr.pointee


def _check_mask(op: IRDLOperation, mask: SSAValue | None, shape: tuple[Dim, ...]) -> None:
    if mask is None:
        return
    if element_of(mask.type) != i1:
        raise VerifyException(f"{op.name}: the mask must be i1, got {mask.type}")
    mask_shape = shape_of(mask.type)
    if mask_shape and mask_shape != shape:
        raise VerifyException(f"{op.name}: mask {mask.type} does not match the pointers' shape")


@irdl_custom_directive
class Policy(CustomDirective):
    """``evict_last``: a load's eviction policy, a bare word (optional)."""

    policy: AttributeVariable

    def parse_optional(self, parser: Parser, state: ParsingState) -> None:
        if (word := parser.parse_optional_keyword_in(EVICTION_POLICIES)) is not None:
            self.policy.set(state, StringAttr(word))

    def parse(self, parser: Parser, state: ParsingState) -> None:
        pos = parser.pos
        self.parse_optional(parser, state)
        if parser.pos == pos:
            parser.raise_error(f"expected an eviction policy ({', '.join(EVICTION_POLICIES)})")

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        policy = self.policy.get(op)
        assert isinstance(policy, StringAttr)
        printer.print_string(policy.data)

    def is_optional_like(self) -> bool:
        return True

    def is_anchorable(self) -> bool:
        return True

    def is_present(self, op: IRDLOperation) -> bool:
        return self.policy.get(op) is not None


@irdl_custom_directive
class LoadedType(CustomDirective):
    """A load's result type, which types its ``other`` literal (parsed before it by
    :class:`Lit`) with its element type."""

    result: TypeDirective
    other: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        pos = parser.pos
        ty = parser.parse_type()
        self.result.set(state, [ty])
        typed_literal(parser, state, self.other, element_of(ty), pos)

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        printer.print_attribute(self.result.get(op)[0])


@irdl_op_definition
class LoadOp(IRDLOperation):
    """``tl.load(ptrs, mask, other=..., eviction_policy=...)``.

    Lanes whose mask is false read nothing and give ``other`` (required with a mask).

    ```mlir
    %v = triton.load %p mask %m other 0.0 : !triton.block<[XBLOCK], !triton.ptr<f32>> -> !triton.block<[XBLOCK], f32>
    ```
    """

    name = "triton.load"

    ptr = operand_def()
    mask = opt_operand_def(BlockType | IntegerType)
    other = opt_prop_def()
    eviction_policy = opt_prop_def(StringAttr)
    result = result_def()

    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(MemoryReadEffect())

    def __init__(
        self,
        ptr: SSAValue,
        mask: SSAValue | None = None,
        other: float | int | bool | None = None,
        eviction_policy: str | None = None,
    ) -> None:
        pointee = _pointee(ptr.type)
        properties: dict[str, Attribute] = {}
        if other is not None:
            properties["other"] = make_literal(other, pointee)
        if eviction_policy is not None:
            properties["eviction_policy"] = StringAttr(eviction_policy)
        super().__init__(
            operands=[ptr, [mask] if mask is not None else []],
            properties=properties,
            result_types=[with_shape(shape_of(ptr.type), pointee)],
        )

    def verify_(self) -> None:
        pointee = _pointee(self.ptr.type)
        shape = shape_of(self.ptr.type)
        if self.result.type != with_shape(shape, pointee):
            raise VerifyException(f"{self.name}: result must be {with_shape(shape, pointee)}")
        _check_mask(self, self.mask, shape)
        if (self.mask is None) != (self.other is None):
            raise VerifyException(f"{self.name}: a mask needs an 'other' value and vice versa")
        if self.other is not None:
            check_literal(self.name, self.other, pointee)
        if self.eviction_policy is not None and self.eviction_policy.data not in EVICTION_POLICIES:
            raise VerifyException(
                f"{self.name}: eviction policy must be one of {EVICTION_POLICIES}"
            )

    assembly_format = (
        "$ptr (`mask` $mask^ `other` custom<Lit>($other))? "
        "(custom<Policy>($eviction_policy)^)? attr-dict `:` type($ptr) (`,` type($mask)^)? "
        "`->` custom<LoadedType>(type($result), ref($other))"
    )
    custom_directives = (Lit, Policy, LoadedType)


@irdl_op_definition
class StoreOp(IRDLOperation):
    """``tl.store(ptrs, value, mask)``: the value broadcasts to the pointers' shape.

    ```mlir
    triton.store %p, %v mask %m : !triton.block<[XBLOCK], !triton.ptr<f32>>, !triton.block<[XBLOCK], f32>, !triton.block<[XBLOCK], i1>
    ```
    """

    name = "triton.store"

    ptr = operand_def()
    value = operand_def()
    mask = opt_operand_def(BlockType | IntegerType)

    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(MemoryWriteEffect())

    def __init__(self, ptr: SSAValue, value: SSAValue, mask: SSAValue | None = None) -> None:
        super().__init__(operands=[ptr, value, [mask] if mask is not None else []])

    def verify_(self) -> None:
        pointee = _pointee(self.ptr.type)
        shape = shape_of(self.ptr.type)
        if element_of(self.value.type) != pointee:
            raise VerifyException(
                f"{self.name}: cannot store {element_of(self.value.type)} through a pointer to {pointee}"
            )
        value_shape = shape_of(self.value.type)
        if value_shape and broadcast_shapes(value_shape, shape) != shape:
            raise VerifyException(
                f"{self.name}: value {self.value.type} does not broadcast to {shape}"
            )
        _check_mask(self, self.mask, shape)

    assembly_format = (
        "$ptr `,` $value (`mask` $mask^)? attr-dict "
        "`:` type($ptr) `,` type($value) (`,` type($mask)^)?"
    )


@irdl_op_definition
class AtomicAddOp(IRDLOperation):
    """``tl.atomic_add(ptrs, value, mask, sem="relaxed")``: adds into memory that other
    programs may add to as well (a scatter); the old values it returns are not used.

    ```mlir
    triton.atomic_add %p, %v mask %m : !triton.block<[XBLOCK], !triton.ptr<f32>>, !triton.block<[XBLOCK], f32>, !triton.block<[XBLOCK], i1>
    ```
    """

    name = "triton.atomic_add"

    ptr = operand_def()
    value = operand_def()
    mask = opt_operand_def(BlockType | IntegerType)

    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(MemoryWriteEffect())

    def __init__(self, ptr: SSAValue, value: SSAValue, mask: SSAValue | None = None) -> None:
        super().__init__(operands=[ptr, value, [mask] if mask is not None else []])

    def verify_(self) -> None:
        pointee = _pointee(self.ptr.type)
        shape = shape_of(self.ptr.type)
        if element_of(self.value.type) != pointee:
            raise VerifyException(
                f"{self.name}: cannot add {element_of(self.value.type)} through a pointer to {pointee}"
            )
        value_shape = shape_of(self.value.type)
        if value_shape and broadcast_shapes(value_shape, shape) != shape:
            raise VerifyException(
                f"{self.name}: value {self.value.type} does not broadcast to {shape}"
            )
        _check_mask(self, self.mask, shape)

    assembly_format = (
        "$ptr `,` $value (`mask` $mask^)? attr-dict "
        "`:` type($ptr) `,` type($value) (`,` type($mask)^)?"
    )


INDEX_ASSERT = "index out of bounds"
"""How the message of a ``triton.device_assert`` checking an index begins (the runtime
recognises the interpreter's failed assert by it)."""


@irdl_op_definition
class DeviceAssertOp(IRDLOperation):
    """``tl.device_assert(cond, msg)``: fails the launch where a lane's ``cond`` is false.

    Triton compiles it only with ``debug=True`` (the runtime does so for kernels that
    hold one); on a GPU a failed assert is a device-side assert (the CUDA context is
    lost, as with Inductor's index asserts), in the interpreter an ``AssertionError``.

    ```mlir
    triton.device_assert %ok, "index out of bounds" : !triton.block<[XBLOCK, 1], i1>
    ```
    """

    name = "triton.device_assert"

    cond = operand_def(BlockType | IntegerType)
    msg = prop_def(StringAttr)

    traits = traits_def(MemoryWriteEffect())

    assembly_format = "$cond `,` $msg attr-dict `:` type($cond)"

    def __init__(self, cond: SSAValue, msg: str) -> None:
        super().__init__(operands=[cond], properties={"msg": StringAttr(msg)})

    def verify_(self) -> None:
        if element_of(self.cond.type) != i1:
            raise VerifyException(f"{self.name}: the condition must be i1, not {self.cond.type}")


__all__ = [
    "EVICTION_POLICIES",
    "INDEX_ASSERT",
    "AddPtrOp",
    "ArangeOp",
    "AtomicAddOp",
    "BroadcastToOp",
    "ConstantOp",
    "DeviceAssertOp",
    "ExpandDimsOp",
    "FullOp",
    "LoadOp",
    "StoreOp",
]

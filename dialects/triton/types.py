"""Types of the triton dialect: blocks (Triton tensors) and pointers.

A Triton tensor has a static shape made of ``tl.constexpr`` block sizes and integers;
``!triton.block`` writes those dimensions by name, so the IR reads like the kernel:

```mlir
!triton.block<[XBLOCK, 1], f32>          // tl.arange(0, XBLOCK)[:, None] shaped, float32
!triton.block<[XBLOCK, RBLOCK], i1>      // a mask
!triton.block<[XBLOCK], !triton.ptr<f16>> // a block of pointers (in_ptr0 + offsets)
!triton.ptr<f32>                          // a pointer argument (a torch tensor)
```

Scalars are builtin types (``i32``, ``i64``, ``f32``, ...) or ``!triton.ptr``.
Elementwise ops broadcast like Triton (NumPy rules over the named dimensions: equal, or
one of them is 1, or a scalar); :func:`broadcast_shapes` implements them.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    AnyFloat,
    ArrayAttr,
    IndexType,
    IntAttr,
    IntegerType,
    StringAttr,
)
from xdsl.ir import Attribute, ParametrizedAttribute, TypeAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

Dim = str | int
"""A block dimension: a constexpr block size name (``XBLOCK``) or an integer."""
Shape = tuple[Dim, ...]


@irdl_attr_definition
class PointerType(ParametrizedAttribute, TypeAttribute):
    """A pointer to global memory holding elements of ``pointee``.

    ```mlir
    !triton.ptr<f32>
    ```
    """

    name = "triton.ptr"

    pointee: Attribute

    def __init__(self, pointee: Attribute) -> None:
        super().__init__(pointee)

    def verify(self) -> None:
        if not is_scalar_element(self.pointee):
            raise VerifyException(f"triton.ptr: cannot point to {self.pointee}")


def _dim_attr(dim: Dim) -> StringAttr | IntAttr:
    return StringAttr(dim) if isinstance(dim, str) else IntAttr(dim)


@irdl_attr_definition
class BlockType(ParametrizedAttribute, TypeAttribute):
    """A Triton tensor: a shape of named block sizes and integers, and an element type.

    ```mlir
    !triton.block<[XBLOCK, RBLOCK], f32>
    ```
    """

    name = "triton.block"

    dims: ArrayAttr[StringAttr | IntAttr]
    element_type: Attribute

    def __init__(self, shape: Sequence[Dim], element_type: Attribute) -> None:
        super().__init__(ArrayAttr(_dim_attr(d) for d in shape), element_type)

    @property
    def shape(self) -> Shape:
        return tuple(d.data for d in self.dims.data)

    def verify(self) -> None:
        if not self.dims.data:
            raise VerifyException("triton.block: a block has at least one dimension")
        for d in self.dims.data:
            if isinstance(d, IntAttr) and d.data < 1:
                raise VerifyException(f"triton.block: dimension {d.data} must be positive")
            if isinstance(d, StringAttr) and not d.data.isidentifier():
                raise VerifyException(f"triton.block: '{d.data}' is not a block size name")
        if not (is_scalar_element(self.element_type) or isinstance(self.element_type, PointerType)):
            raise VerifyException(f"triton.block: bad element type {self.element_type}")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> list[Attribute]:
        def dim() -> StringAttr | IntAttr:
            if (
                n := parser.parse_optional_integer(allow_boolean=False, allow_negative=False)
            ) is not None:
                return IntAttr(n)
            return StringAttr(parser.parse_identifier("expected a block size name or an integer"))

        with parser.in_angle_brackets():
            dims = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, dim)
            parser.parse_punctuation(",")
            element = parser.parse_type()
        return [ArrayAttr(dims), element]

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string("<[")
        printer.print_string(", ".join(str(d) for d in self.shape))
        printer.print_string("], ")
        printer.print_attribute(self.element_type)
        printer.print_string(">")


def is_scalar_element(ty: Attribute) -> bool:
    """An element type Triton computes with: floats and signless/unsigned integers."""
    return isinstance(ty, AnyFloat | IntegerType)


def shape_of(ty: Attribute) -> Shape:
    """The shape of a value's type (``()`` for scalars)."""
    return ty.shape if isinstance(ty, BlockType) else ()


def element_of(ty: Attribute) -> Attribute:
    """The element type of a block, or the scalar type itself."""
    return ty.element_type if isinstance(ty, BlockType) else ty


def with_shape(shape: Sequence[Dim], element: Attribute) -> Attribute:
    """A block of ``shape`` (the scalar type itself for ``()``)."""
    return BlockType(shape, element) if shape else element


def broadcast_shapes(*shapes: Shape) -> Shape | None:
    """Triton's (NumPy's) broadcast of shapes, or None when they do not broadcast."""
    rank = max((len(s) for s in shapes), default=0)
    out: list[Dim] = []
    for k in range(rank):
        dim: Dim = 1
        for shape in shapes:
            d = shape[k - rank + len(shape)] if k - rank + len(shape) >= 0 else 1
            if d == 1:
                continue
            if dim not in (1, d):
                return None
            dim = d
        out.append(dim)
    return tuple(out)


def is_value_type(ty: Attribute) -> bool:
    """Types an SSA value of a kernel body may have."""
    return (
        isinstance(ty, BlockType | PointerType)
        or is_scalar_element(ty)
        or isinstance(ty, IndexType)
    )


__all__ = [
    "BlockType",
    "Dim",
    "PointerType",
    "Shape",
    "broadcast_shapes",
    "element_of",
    "is_scalar_element",
    "is_value_type",
    "shape_of",
    "with_shape",
]

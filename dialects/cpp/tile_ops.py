"""``cpp.transpose_tile``: a square block of a buffer, transposed into a local array.

```mlir
cpp.transpose_tile %in_ptr0["i0 + 2048*i1"](%x0_start, %x1_start) stride 2048 into %tile
    : memref<2048x2048xf32>, memref<256xf32>
```

With ``n`` the tile's side (``n * n`` elements in the local array) it sets
``tile[a * n + b] = src[address + a + b * stride]`` for ``a, b < n``: the source's
``n`` rows of ``n`` contiguous elements become the tile's columns. The C++ backend
moves whole rows and transposes them in vector registers (``kiln_transpose16``), which
is how a pointwise kernel that reads a transposed input avoids a gather per vector.
Only 4-byte elements and ``n = 16`` are supported.
"""

from __future__ import annotations

from collections.abc import Sequence

import sympy
from xdsl.dialects.builtin import IndexType, IntAttr, MemRefType
from xdsl.ir import SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    prop_def,
    var_operand_def,
)
from xdsl.utils.exceptions import VerifyException

from kiln.dialects.cpp.memory_ops import (  # pyright: ignore[reportPrivateUsage]
    check_operand_symbols,
)
from kiln.dialects.loop.attributes import IndexExprAttr
from kiln.dialects.loop.syntax import Int, Subscript

TILE_SIDE = 16
"""The side of a transposed tile (16 4-byte elements: one 512-bit vector per row)."""


def element_bytes(ty: MemRefType) -> int | None:
    width = getattr(ty.element_type, "bitwidth", None)
    if width is None:
        width = getattr(getattr(ty.element_type, "width", None), "data", None)
    return None if width is None else (int(width) + 7) // 8


@irdl_op_definition
class TransposeTileOp(IRDLOperation):
    """Copies a transposed ``16 x 16`` block of a buffer into a local array (module docstring)."""

    name = "cpp.transpose_tile"

    source = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    tile = operand_def(MemRefType)
    index = prop_def(IndexExprAttr)
    stride = prop_def(IntAttr)

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    def __init__(
        self,
        source: SSAValue,
        index: sympy.Expr,
        indices: Sequence[SSAValue],
        stride: int,
        tile: SSAValue,
    ) -> None:
        super().__init__(
            operands=[source, list(indices), tile],
            properties={"index": IndexExprAttr(index), "stride": IntAttr(stride)},
        )

    def verify_(self) -> None:
        source, tile = self.source.type, self.tile.type
        assert isinstance(source, MemRefType)
        assert isinstance(tile, MemRefType)
        if source.element_type != tile.element_type:
            raise VerifyException(f"{self.name}: {source} and {tile} hold different elements")
        if element_bytes(source) != 4:
            raise VerifyException(
                f"{self.name}: only 4-byte elements are supported, not {source.element_type}"
            )
        if tile.get_shape() != (TILE_SIDE * TILE_SIDE,):
            raise VerifyException(
                f"{self.name}: the tile must be a memref<{TILE_SIDE * TILE_SIDE}x...>, not {tile}"
            )
        if self.stride.data < TILE_SIDE:
            raise VerifyException(
                f"{self.name}: rows {self.stride.data} apart overlap a {TILE_SIDE}-wide row"
            )
        check_operand_symbols(self, self.index, len(self.indices))

    assembly_format = (
        "$source custom<Subscript>($index, $indices) `stride` custom<Int>($stride) `into` "
        "$tile attr-dict `:` type($source) `,` type($tile)"
    )
    custom_directives = (Subscript, Int)


__all__ = ["TILE_SIDE", "TransposeTileOp", "element_bytes"]

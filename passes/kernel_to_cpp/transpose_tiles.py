"""Transposed loads of a tiled kernel read from a tile transposed in registers.

In a 16 x 16 tile of ``out[i, j] = x[j, i] + y[i, j]`` (rows ``i`` serial, ``j``
vectorized) the load ``x[j, i]`` is 2048 elements apart from lane to lane: a gather
per vector. Instead, before the tile's rows, ``cpp.transpose_tile`` copies the 16 x 16
block of ``x`` the tile reads into a local array, transposed (16 whole-row loads, 64
shuffles, 16 stores), and the load becomes a contiguous read of that array::

    float tile[256];
    kiln_transpose16(in_ptr0 + (x0_start + 2048*x1_start), 2048LL, tile);
    for (x0 = x0_start; x0 < x0_stop; ++x0)
        #pragma omp simd
        for (x1 = x1_start; x1 < x1_stop; ++x1)
            ... tile[16*x0 - 16*x0_start + x1 - x1_start] ...

Only full tiles do this (the tile's loops are versioned, :mod:`.versioning`); a
partial tile at the edge keeps the strided loads. Staged: 4-byte input loads, neither
masked nor checked, contiguous along the rows and at least 16 elements apart along the
vectorized dim, whose other index operands are fixed for the whole tile. Measured faster
on a transpose-add: docs/benchmarks/design-notes.md.
"""

from __future__ import annotations

import sympy
from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr, MemRefType
from xdsl.ir import Operation, SSAValue

from kiln.dialects.cpp.attributes import LoopKind
from kiln.dialects.cpp.loop_ops import ForOp
from kiln.dialects.cpp.memory_ops import AllocaOp, IndexOp, LoadOp
from kiln.dialects.cpp.tile_ops import TILE_SIDE, TransposeTileOp, element_bytes
from kiln.dialects.loop.expr import var
from kiln.passes.kernel_to_cpp.strides import stride
from kiln.passes.kernel_to_cpp.tiling import Tile
from kiln.passes.kernel_to_cpp.versioning import version


def _staged(load: Operation, rows: ForOp, columns: ForOp, inputs: set[SSAValue]) -> int | None:
    """The row stride of a load to stage through a transposed tile, or None."""
    if not isinstance(load, LoadOp) or load.mask is not None or load.checked is not None:
        return None
    ty = load.buffer.type
    if load.buffer not in inputs or not isinstance(ty, MemRefType) or element_bytes(ty) != 4:
        return None
    operands = list(load.indices)
    row, column = rows.body.block.args[0], columns.body.block.args[0]
    if row not in operands or column not in operands:
        return None
    if any(v not in (row, column) and rows.is_ancestor(v.owner) for v in operands):
        return None
    expr = load.index.data
    across = stride(expr, var(f"i{operands.index(column)}"))
    if stride(expr, var(f"i{operands.index(row)}")) != 1 or across is None or across < TILE_SIDE:
        return None
    return across


def _columns_loop(rows: ForOp) -> ForOp | None:
    for op in rows.body.block.ops:
        if isinstance(op, ForOp) and op.loop_kind is LoopKind.SIMD:
            return op
    return None


def _full(tile: Tile, start: SSAValue, stop: SSAValue) -> list[Operation]:
    """Ops computing ``stop - start == side``."""
    extent = IndexOp(var("i0") - var("i1"), [stop, start])
    side = arith.ConstantOp(IntegerAttr(tile.side, IndexType()))
    return [extent, side, arith.CmpiOp(extent.result, side.result, "eq")]


def stage_transposed_loads(tile: Tile, inputs: set[SSAValue]) -> None:
    """Stage the tile's transposed loads (module docstring); ``inputs`` are the function's
    input buffers."""
    if tile.side != TILE_SIDE or not any(
        _staged(op, tile.rows, tile.columns, inputs) for op in tile.columns.body.block.ops
    ):
        return
    block = tile.rows.parent_block()
    assert block is not None
    checks = [
        *_full(tile, tile.row_start, tile.row_stop),
        *_full(tile, tile.column_start, tile.column_stop),
    ]
    both = arith.AndIOp(checks[2].results[0], checks[5].results[0])
    for op in [*checks, both]:
        block.insert_op_before(op, tile.rows)
    fast, _ = version(tile.rows, both.result, "full_tile")
    assert isinstance(fast, ForOp)
    columns = _columns_loop(fast)
    assert columns is not None
    guard = fast.parent_block()
    assert guard is not None
    row, column = fast.body.block.args[0], columns.body.block.args[0]
    # A full tile's loops run exactly ``side`` times: say so (one vector per row, no tail).
    for loop, start in ((fast, tile.row_start), (columns, tile.column_start)):
        stop = IndexOp(var("i0") + tile.side, [start])
        stop.result.name_hint = "tile_end"
        (loop.parent_block() or guard).insert_op_before(stop, loop)
        loop.operands[1] = stop.result
    tiles: dict[tuple[SSAValue, sympy.Expr, tuple[SSAValue, ...]], SSAValue] = {}
    for load in list(columns.body.block.ops):
        across = _staged(load, fast, columns, inputs)
        if across is None:
            continue
        assert isinstance(load, LoadOp)
        corner = tuple(
            tile.row_start if v is row else tile.column_start if v is column else v
            for v in load.indices
        )
        key = (load.buffer, load.index.data, corner)
        if key not in tiles:
            ty = load.buffer.type
            assert isinstance(ty, MemRefType)
            local = AllocaOp(MemRefType(ty.element_type, [TILE_SIDE * TILE_SIDE]))
            local.result.name_hint = "tile"
            guard.insert_op_before(local, fast)
            guard.insert_op_before(
                TransposeTileOp(load.buffer, load.index.data, corner, across, local.result), fast
            )
            tiles[key] = local.result
        i0, i1, i2, i3 = (var(f"i{k}") for k in range(4))
        staged = LoadOp(
            tiles[key],
            TILE_SIDE * (i0 - i1) + i2 - i3,
            [row, tile.row_start, column, tile.column_start],
        )
        staged.result.name_hint = load.result.name_hint
        columns.body.block.insert_op_before(staged, load)
        load.result.replace_all_uses_with(staged.result)
        load.detach()
        load.erase()


__all__ = ["stage_transposed_loads"]

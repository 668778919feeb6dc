"""2-D tiles for pointwise kernels that read across the vectorized dim (transposes).

``out[i, j] = x[j, i] + y[i, j]`` vectorized along ``j`` reads ``x`` with a large stride:
without tiling every lane touches another cache line and nothing is reused. Cutting the
``i``/``j`` plane into ``tile`` x ``tile`` blocks keeps the lines a block needs in L1 (each
is reused by the next ``tile`` values of ``i``), which is what Inductor's 2-D tiles are
for. The dim to tile with the innermost is the one along which such a load is
contiguous.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import sympy
from xdsl.dialects import arith
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import SSAValue

from kiln.dialects.cpp.attributes import LoopKind
from kiln.dialects.cpp.loop_ops import ForOp
from kiln.dialects.cpp.tile_ops import TILE_SIDE, element_bytes
from kiln.dialects.loop.body_ops import LoadOp as LoopLoadOp
from kiln.passes.kernel_to_cpp.emit import Emitter
from kiln.passes.kernel_to_cpp.options import parallel_depth
from kiln.passes.kernel_to_cpp.space import floordiv
from kiln.passes.kernel_to_cpp.strides import stride

if TYPE_CHECKING:
    from kiln.passes.kernel_to_cpp.kernel import KernelLowering


def transposed_dim(lowering: KernelLowering) -> int | None:
    """The pointwise dim to tile together with the innermost one, if some load is
    contiguous along it and strided along the innermost."""
    space = lowering.space
    if len(space.x_sizes) < 2:
        return None
    last = space.x_syms[-1]
    for node in lowering.analysis.nodes:
        for expr in lowering.global_load_exprs(node):
            if stride(expr, last) in (0, 1):
                continue
            for k, symbol in enumerate(space.x_syms[:-1]):
                if stride(expr, symbol) == 1:
                    return k
    return None


NARROW = 8
"""An innermost dim of fewer points than this is too narrow to vectorize along."""


def narrow_inner(lowering: KernelLowering) -> bool:
    """Whether the innermost pointwise dim has a static size below :data:`NARROW`
    (ShuffleNet's channel shuffle stores ``[..., 116, 2]``: vectorized along the 2, and
    a tile of it, every lane does scalar work). A kernel whose loads are contiguous along
    another dim (:func:`transposed_dim`) then vectorizes along that one instead, the
    narrow dim a short serial loop around it (its stores strided)."""
    size = lowering.space.x_sizes[-1] if lowering.space.x_sizes else None
    return size is not None and size.is_Integer and int(size) < NARROW


@dataclass(frozen=True)
class Tile:
    """The innermost loops of a tiled kernel: ``dim`` serially, then the innermost dim
    vectorized, over ``[row_start, row_stop) x [column_start, column_stop)``."""

    rows: ForOp
    columns: ForOp
    row_start: SSAValue
    row_stop: SSAValue
    column_start: SSAValue
    column_stop: SSAValue
    side: int


def tiled_loops(
    lowering: KernelLowering, emit: Emitter, dim: int, side: int
) -> tuple[Emitter, dict[sympy.Symbol, SSAValue], Tile]:
    """Loops over blocks of dims ``dim`` and the innermost (outer dims first), then a tile
    of ``side`` x ``side``: ``dim`` serially, the innermost vectorized. Returns the tile
    body, its environment and the tile's loops."""
    space = lowering.space
    n = len(space.x_sizes)
    tiled = (dim, n - 1)
    others = [k for k in range(n) if k not in tiled]
    blocks = [floordiv(space.x_sizes[k] + side - 1, side) for k in tiled]
    dims = [*(space.x_sizes[k] for k in others), *blocks]
    names = [f"x{k}" for k in others] + [f"x{k}_block" for k in tiled]
    bounds = [lowering.size(emit, d) for d in dims]
    zero = emit.const(0)
    depth = parallel_depth(dims, side * side, lowering.options)
    env: dict[sympy.Symbol, SSAValue] = dict(lowering.sizes)
    body = emit
    ivs: list[SSAValue] = []
    if depth:
        condition = lowering.parallel_condition(emit, dims, sympy.Integer(side * side))
        body, outer = body.loop(
            LoopKind.PARALLEL, [zero] * depth, bounds[:depth], names[:depth], condition=condition
        )
        ivs += outer
    for k in range(depth, len(dims)):
        body, (iv,) = body.loop(LoopKind.SERIAL, [zero], [bounds[k]], [names[k]])
        ivs.append(iv)
    for k, iv in zip(others, ivs, strict=False):
        env[space.x_syms[k]] = iv
    block_ivs = ivs[len(others) :]
    b = sympy.Symbol("_b", integer=True, nonnegative=True)
    ranges: list[tuple[SSAValue, SSAValue]] = []
    for k, block in zip(tiled, block_ivs, strict=True):
        start = body.index(b * side, {b: block})
        end = body.index(b * side + side, {b: block})
        ranges.append(
            (start, body.value(arith.MinSIOp(end, lowering.size(body, space.x_sizes[k]))))
        )
    loops: list[ForOp] = []
    for k, (start, stop), kind in zip(tiled, ranges, (LoopKind.SERIAL, LoopKind.SIMD), strict=True):
        body, (iv,) = body.loop(kind, [start], [stop], [f"x{k}"])
        env[space.x_syms[k]] = iv
        loop = body.block.parent_op()
        assert isinstance(loop, ForOp)
        loops.append(loop)
    (row_start, row_stop), (column_start, column_stop) = ranges
    return body, env, Tile(loops[0], loops[1], row_start, row_stop, column_start, column_stop, side)


def tile_side(lowering: KernelLowering, dim: int) -> int:
    """16 when some transposed load can be staged through ``cpp.transpose_tile`` (a 4-byte
    input read contiguously along ``dim`` and at least 16 elements apart along the
    innermost dim), else ``options.tile``."""
    space = lowering.space
    last, along = space.x_syms[-1], space.x_syms[dim]
    for node in lowering.analysis.nodes:
        for op in node.body.block.ops:
            if not isinstance(op, LoopLoadOp) or op.indirect or op.mask is not None:
                continue
            source = lowering.global_input(node, op)
            if source is None:
                continue
            ty = source.type
            if not isinstance(ty, MemRefType) or element_bytes(ty) != 4:
                continue
            expr = lowering.compose(node, op.index.data)
            across = stride(expr, last)
            if stride(expr, along) == 1 and across is not None and across >= TILE_SIDE:
                return TILE_SIDE
    return lowering.options.tile


__all__ = ["NARROW", "Tile", "narrow_inner", "tile_side", "tiled_loops", "transposed_dim"]

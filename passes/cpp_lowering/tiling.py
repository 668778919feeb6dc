"""2-D tiles for pointwise kernels that read across the vectorized dim (transposes).

``out[i, j] = x[j, i] + y[i, j]`` vectorized along ``j`` reads ``x`` with a large stride:
without tiling every lane touches another cache line and nothing is reused. Cutting the
``i``/``j`` plane into ``tile`` x ``tile`` blocks keeps the lines a block needs in L1 (each
is reused by the next ``tile`` values of ``i``), which is what Inductor's 2-D tiles are
for. The dim to tile with the innermost is the one along which such a load is
contiguous.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sympy
from xdsl.dialects import arith
from xdsl.ir import SSAValue

from kiln.dialects.cpp.attributes import LoopKind
from kiln.passes.cpp_lowering.emit import Emitter
from kiln.passes.cpp_lowering.options import parallel_depth
from kiln.passes.cpp_lowering.space import floordiv
from kiln.passes.cpp_lowering.strides import stride

if TYPE_CHECKING:
    from kiln.passes.cpp_lowering.kernel import KernelLowering


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


def tiled_loops(
    lowering: KernelLowering, emit: Emitter, dim: int
) -> tuple[Emitter, dict[sympy.Symbol, SSAValue]]:
    """Loops over blocks of dims ``dim`` and the innermost (outer dims first), then a tile:
    ``dim`` serially, the innermost vectorized. Returns the tile body and environment."""
    space = lowering.space
    tile = lowering.options.tile
    n = len(space.x_sizes)
    tiled = (dim, n - 1)
    others = [k for k in range(n) if k not in tiled]
    blocks = [floordiv(space.x_sizes[k] + tile - 1, tile) for k in tiled]
    dims = [*(space.x_sizes[k] for k in others), *blocks]
    names = [f"x{k}" for k in others] + [f"x{k}_block" for k in tiled]
    bounds = [lowering.size(emit, d) for d in dims]
    zero = emit.const(0)
    depth = parallel_depth(dims, tile * tile, lowering.options)
    env: dict[sympy.Symbol, SSAValue] = dict(lowering.sizes)
    body = emit
    ivs: list[SSAValue] = []
    if depth:
        condition = lowering.parallel_condition(emit, dims, sympy.Integer(tile * tile))
        body, outer = body.loop(LoopKind.PARALLEL, [zero] * depth, bounds[:depth], names[:depth], condition=condition)
        ivs += outer
    for k in range(depth, len(dims)):
        body, (iv,) = body.loop(LoopKind.SERIAL, [zero], [bounds[k]], [names[k]])
        ivs.append(iv)
    for k, iv in zip(others, ivs, strict=False):
        env[space.x_syms[k]] = iv
    block_ivs = ivs[len(others) :]
    b = sympy.Symbol("_b", integer=True, nonnegative=True)
    for k, block, kind in zip(tiled, block_ivs, (LoopKind.SERIAL, LoopKind.SIMD), strict=True):
        start = body.index(b * tile, {b: block})
        end = body.index(b * tile + tile, {b: block})
        stop = body.value(arith.MinSIOp(end, lowering.size(body, space.x_sizes[k])))
        body, (iv,) = body.loop(kind, [start], [stop], [f"x{k}"])
        env[space.x_syms[k]] = iv
    return body, env


__all__ = ["tiled_loops", "transposed_dim"]

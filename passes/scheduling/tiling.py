"""Tiling heuristics: block sizes, reduction strategy and candidate configs of a kernel.

The numbers start from Inductor's (``torch/_inductor/runtime/triton_heuristics.py`` and
``choices.py``): a reduction is *persistent* (one block holds the whole reduction) up to
``rnumel`` 1024 when it reads contiguously along the reduction (``inner``), 512 otherwise
(:data:`PERSISTENT_OUTER_MAX`);
pointwise blocks are ``max(256, min(numel / 128, 1024))``; persistent configs try
``XBLOCK`` in 1, 8, 32, 128 within 4096 elements per block; looped reductions try
Inductor's (1, 2048), (64, 64), (8, 512) and (64, 4) shapes. A large reduction with a
small output is split (:func:`split_factor`) so that enough blocks run in parallel.
Sizes that are symbolic count :data:`~kiln.passes.scheduling.graph.SIZE_HINT`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import sympy

from kiln.dialects.kernel.attributes import ConfigAttr, KernelKind
from kiln.dialects.kernel.kernel_ops import KernelOp, node_vars
from kiln.dialects.loop.attributes import ReductionKind
from kiln.dialects.loop.body_ops import LoadOp
from kiln.dialects.loop.dot import is_dot
from kiln.dialects.loop.expr import FloorDiv, as_int, index_var, reduction_var, var_kind
from kiln.dialects.loop.ops import LoopNestOp, ReductionOp, ScatterOp
from kiln.passes.scheduling.graph import SIZE_HINT

PERSISTENT_INNER_MAX = 1024
PERSISTENT_BLOCK_ELEMENTS = 4096
OUTER_MIN_XBLOCK = 8
"""Outputs (neighbours in memory) per program of an outer reduction: 8 floats fill a
32-byte sector."""
PERSISTENT_OUTER_MAX = PERSISTENT_BLOCK_ELEMENTS // OUTER_MIN_XBLOCK
"""Outer reductions up to this length are persistent: a block of OUTER_MIN_XBLOCK
neighbouring outputs still holds the whole reduction. Batch norm statistics and their
backward sums over NHWC activations (64 to 960 channels of 128 or 512 rows in a small
CNN's training step) ran looped before, 8 iterations of dependent loads in each of a
handful of programs (docs/benchmarks/design-notes.md)."""
MAX_XBLOCK = 4096
MAX_YBLOCK = 1024
GRID_Y_LIMIT = 65535
"""CUDA's limit on the grid's y dimension (2-D tiles put row blocks there)."""
TILE_ELEMENTS = 1024
"""Elements a 2-D tile aims at (32x32)."""
SPLIT_MIN_RNUMEL = 8192
"""Inner reductions up to this size are never split."""
SPLIT_MIN_CHUNK = 1024
OUTER_SPLIT_MIN_RNUMEL = 1024
"""Outer reductions up to this size are never split. Lower than for inner ones: an outer
program covers OUTER_XBLOCK outputs, so even long-ish reductions leave the GPU idle
(measured: docs/benchmarks/design-notes.md)."""
OUTER_SPLIT_MIN_CHUNK = 256
"""Rows per chunk, at least, of a split outer reduction on the CPU."""
GPU_OUTER_SPLIT_MIN_CHUNK = 64
"""Rows per chunk, at least, of a split outer reduction on a GPU: batch norm statistics
over 2048 NHWC rows of 64 channels split 32 ways rather than 8
(docs/benchmarks/design-notes.md)."""
MAX_SPLITS = 512


def next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def hint(expr: sympy.Expr) -> int:
    """An integer size for heuristics (symbols count :data:`SIZE_HINT`)."""
    value = sympy.sympify(expr).subs({s: SIZE_HINT for s in expr.free_symbols})
    return max(1, int(value))


def _num_warps(elements: int, cap: int = 16) -> int:
    return max(1, min(cap, next_pow2(max(1, elements // 256))))


@dataclass(frozen=True)
class Tiling:
    kind: KernelKind
    chosen: ConfigAttr
    candidates: tuple[ConfigAttr, ...]
    reduction_hint: str | None = None
    ynumel: sympy.Expr | None = None


def _config(**values: int) -> ConfigAttr:
    return ConfigAttr.of({**values, "num_stages": 1})


def _unique(configs: Sequence[ConfigAttr]) -> tuple[ConfigAttr, ...]:
    return tuple(dict.fromkeys(configs))


def _stride(expr: sympy.Expr, var: sympy.Symbol) -> sympy.Expr | None:
    """The coefficient of ``var`` in an index expression (None: not affine in it)."""
    expanded = sympy.expand(expr)
    coefficient = cast(sympy.Expr, expanded.coeff(var))
    if coefficient.has(var) or (expanded - coefficient * var).has(var):
        return None
    return coefficient


CONTIGUOUS_RUN = 32
"""Elements a load must read contiguously, per run, to count as contiguous along a
variable that also moves it by larger steps (see :func:`_runs_along`)."""


def _runs_along(expr: sympy.Expr, var: sympy.Symbol) -> bool:
    """Whether ``expr`` reads runs of at least :data:`CONTIGUOUS_RUN` consecutive
    elements as ``var`` steps: a unit-coefficient ``var`` or ``var % P`` (``P`` a
    multiple of the run), every other term depending on ``var`` only through
    ``var // Q`` with ``Q`` a multiple of ``P`` (constant within a run). Swin's
    patch-merging LayerNorm reduces over the concatenation of four 96-channel slices,
    ``96*(r // 192) + r % 96 + 5376*((r // 96) % 2)``: contiguous in runs of 96, which
    an affine test calls "not contiguous" (it ran as an outer reduction of 8-wide blocks,
    98 us a call on the H200)."""
    period: int | None = None
    rest: list[sympy.Expr] = []
    for term in sympy.Add.make_args(sympy.expand(expr)):
        if not term.has(var):
            continue
        coefficient, factor = term.as_coeff_Mul()
        unit = coefficient == 1 and period is None
        if unit and factor == var:
            period = 0  # plain var: contiguous throughout
        elif (
            unit
            and isinstance(factor, sympy.Mod)
            and factor.args[0] == var
            and factor.args[1].is_Integer
            and as_int(factor.args[1]) % CONTIGUOUS_RUN == 0
        ):
            period = as_int(factor.args[1])
        else:
            rest.append(cast(sympy.Expr, term))
    if period is None:
        return False
    for term in rest:
        quotients = [
            q
            for q in sympy.preorder_traversal(term)
            if isinstance(q, FloorDiv) and q.args[0] == var and q.args[1].is_Integer
        ]
        if period == 0 or not quotients or any(as_int(q.args[1]) % period for q in quotients):
            return False
        stripped = term.xreplace({q: sympy.Dummy() for q in quotients})
        if stripped.has(var):
            return False
    return True


def _global_loads(kernel: KernelOp, node: LoopNestOp) -> list[LoadOp]:
    """Loads of the node that read the kernel's argument buffers (memory, not registers)."""
    globals_ = set(kernel.buffer_args())
    outer = dict(zip(node.input_args(), node.inputs, strict=True))
    return [
        op for op in node.body.walk() if isinstance(op, LoadOp) and outer.get(op.buffer) in globals_
    ]


def reduction_hint(kernel: KernelOp) -> str:
    """``inner`` when some reduction reads contiguously along its last reduction variable
    (in runs: :func:`_runs_along`).

    Only loads that differ between outputs decide: a vector indexed by the reduction
    alone (a layer norm's per-row mean and rstd in the backward's weight and bias sums,
    ``sum(g * (x - mean[r]) * rstd[r])`` over rows) is read once for every output and
    cached, while the ``[rows, channels]`` reads beside it stride by the row. Counting the
    vector made those sums "inner": one column of 6304 rows a program, every load a
    separate sector (ViT-S's 24 of them took 32 us each on the H200, Inductor's 6).
    A gather (``wte[768*i0 + r0]``, an embedding feeding a layer norm) differs between
    outputs through its indirect index: it decides (counted as indexed by the reduction
    alone, it made GPT-2's, BERT's and LLaMA's embedding norms "outer", 0.08 ms more a
    call at the large size on the H200). See :func:`_spans_outputs`."""
    for node in kernel.nodes():
        if not isinstance(node, ReductionOp) or not node.reduction_sizes.data:
            continue
        loads = _global_loads(kernel, node) or [
            op for op in node.body.walk() if isinstance(op, LoadOp)
        ]
        if reads_along_reduction(node, loads):
            return "inner"
    return "outer"


def reads_along_reduction(node: ReductionOp, loads: Sequence[LoadOp]) -> bool:
    """Whether ``node`` reads contiguously along its last reduction variable through one
    of ``loads`` (those that differ between outputs, if any; see :func:`reduction_hint`)."""
    if not node.reduction_sizes.data:
        return False
    last_r = reduction_var(len(node.reduction_sizes.data) - 1)
    per_output = [load for load in loads if _spans_outputs(load.index.data, node)]
    return any(
        _stride(load.index.data, last_r) == 1 or _runs_along(load.index.data, last_r)
        for load in per_output or loads
    )


def _spans_outputs(index: sympy.Expr, node: ReductionOp) -> bool:
    """Whether a load reads other elements for neighbouring outputs: its index uses the
    innermost output variable (of an extent above 1) or an indirect one. A per-row vector
    does not, even where it depends on an outer output variable: the chunk of a split
    reduction, ``197*d0 + r0`` beside the gradient's ``75648*d0 + d1 + 384*r0``."""
    sizes = node.sizes.data
    innermost = next(
        (index_var(k) for k in reversed(range(len(sizes))) if sizes[k].data != 1), None
    )
    symbols = index.free_symbols
    return (innermost is not None and innermost in symbols) or any(
        var_kind(cast(sympy.Symbol, s))[0] == "i" for s in symbols
    )


def transposed_split(kernel: KernelOp) -> sympy.Expr | None:
    """``ynumel`` for a 2-D tile when a load is contiguous along another dimension than
    the kernel's writes (a transpose) or gathers per channel (:func:`_channel_gather_split`);
    None when 1-D tiles suffice."""
    numel = kernel.numel.data
    if any(isinstance(node, ScatterOp) for node in kernel.nodes()):
        return None  # its writes go wherever its indices say: no layout to tile for
    for node in kernel.nodes():
        sizes = [s.data for s in node.sizes.data]
        exprs = node_vars(node)
        # Only nodes whose own variables unflatten the kernel's d0 in order can be tiled
        # by splitting d0 at one of their dimensions.
        if len(sizes) < 2 or any(e.has(reduction_var(0)) for e in exprs):
            continue
        last = len(sizes) - 1
        for load in _global_loads(kernel, node):
            for k in range(last):
                if sizes[k] == 1 or _stride(load.index.data, index_var(k)) != 1:
                    continue
                # stride 1 along the last dim: not transposed; 0: a broadcast (batch
                # norm's per-channel parameters over NCHW), which a 1-D block reads as well
                if _stride(load.index.data, index_var(last)) in (0, 1):
                    continue
                ynumel = sympy.Integer(1)
                for size in sizes[: k + 1]:
                    ynumel = ynumel * size
                if ynumel.free_symbols or kernel.sym_args():
                    return None
                if 1 < int(ynumel) < hint(numel):
                    return ynumel
    return _channel_gather_split(kernel)


CHANNEL_GATHER_MIN = 16
"""Innermost extent (channels) from which a per-channel gather gets a 2-D tile."""


def _channel_gather_split(kernel: KernelOp) -> sympy.Expr | None:
    """``ynumel`` (the product of the outer dimensions) when a node reads a buffer by its
    innermost variable alone with a stride other than 0 or 1: a per-channel gather, such
    as a depthwise convolution's weight ``[C, 1, kh, kw]`` read at ``kh*kw*c + tap`` for
    each of its taps over an NHWC output. A 1-D block gathers it per element (9 to 49
    loads an element) and divides the flat index for every tap's bounds; a 2-D tile of
    pixels x channels loads it as one channel vector per block and divides only the pixel
    index. (The same shape as the reduction tiles that run ConvNeXt's depthwise
    convolution fused into its layer norm at about 3x the taps a second of the 1-D
    pointwise kernels of MobileNet-v2's, H200, bfloat16.)"""
    for node in kernel.nodes():
        sizes = [s.data for s in node.sizes.data]
        if len(sizes) < 2 or any(e.has(reduction_var(0)) for e in node_vars(node)):
            continue
        last = len(sizes) - 1
        if not sympy.sympify(sizes[last]).is_Integer or int(sizes[last]) < CHANNEL_GATHER_MIN:
            continue
        for load in _global_loads(kernel, node):
            index = load.index.data
            if _stride(index, index_var(last)) in (None, 0, 1):
                continue
            if any(index.has(index_var(k)) for k in range(last)):
                continue
            ynumel = sympy.Integer(1)
            for size in sizes[:last]:
                ynumel = ynumel * size
            if ynumel.free_symbols or kernel.sym_args():
                return None
            if 1 < int(ynumel) < hint(kernel.numel.data):
                return ynumel
    return None


GPU_SM_COUNT = 132
"""Parallel units a GPU's split decision aims to fill (an H100's or H200's SMs): the
tile pass's ``sm-count`` default, and what fusion assumes when it keeps a reduction
splittable."""
OUTER_XBLOCK = 64
"""Outputs per program of an outer (non-contiguous) looped reduction (see reduction_tiling)."""
SPLIT_OUTER_SHAPE = (32, 32, 4)
"""XBLOCK, RBLOCK, num_warps of the first kernel of a split outer reduction: the best of
the shapes tried on a GPU (docs/benchmarks/design-notes.md)."""
SHORT_ROW_MAX_WARPS = 4
"""Warps of an inner reduction over at most 2048 elements (one row per program): fewer
warps measured faster for such short rows; rows of 4096 and more (softmax, layer norm)
stay best at 8 (docs/benchmarks/design-notes.md)."""


COMBINABLE = frozenset(
    {
        ReductionKind.SUM,
        ReductionKind.PROD,
        ReductionKind.MAX,
        ReductionKind.MIN,
        ReductionKind.ANY,
        ReductionKind.ALL,
    }
)
"""Reductions whose partial results combine with the same reduction (split reductions)."""


def combinable(red: ReductionOp) -> bool:
    """Whether ``red``'s partial results combine (the split's second kernel)."""
    kind = red.kind.data
    return (kind in COMBINABLE and len(red.outputs) == 1) or kind is ReductionKind.WELFORD


def split_factor(
    numel: int,
    rnumel: int,
    sm_count: int,
    outputs_per_program: int = 1,
    gpu: bool = False,
) -> int:
    """How many chunks to split a reduction into (1: do not split).

    Parallelism is counted in programs: an outer reduction covers ``outputs_per_program``
    outputs per program, so 4096 column maxima are only 64 programs and need splitting
    on a 132-SM GPU (a small fraction of copy bandwidth unsplit). Outer
    reductions split from shorter lengths and into shorter chunks
    (:data:`OUTER_SPLIT_MIN_RNUMEL`; on a GPU :data:`GPU_OUTER_SPLIT_MIN_CHUNK`).
    """
    programs = max(1, numel // outputs_per_program)
    outer = outputs_per_program > 1
    min_rnumel, min_chunk = (
        (OUTER_SPLIT_MIN_RNUMEL, GPU_OUTER_SPLIT_MIN_CHUNK if gpu else OUTER_SPLIT_MIN_CHUNK)
        if outer
        else (SPLIT_MIN_RNUMEL, SPLIT_MIN_CHUNK)
    )
    if rnumel <= min_rnumel or programs >= 2 * sm_count:
        return 1
    wanted = next_pow2(-(-4 * sm_count // programs))
    splits = min(MAX_SPLITS, wanted, 1 << ((rnumel // min_chunk).bit_length() - 1))
    while splits > 1 and rnumel % splits:
        splits //= 2
    return splits


def pointwise_tiling(kernel: KernelOp) -> Tiling:
    numel = hint(kernel.numel.data)
    ynumel = transposed_split(kernel)
    if ynumel is not None:
        y = int(ynumel)
        x = numel // y
        # Rows go on the grid's y axis (at most GRID_Y_LIMIT blocks); a narrow tile (few
        # columns, as in an NCHW -> NHWC copy of 3 channels) takes more rows instead.
        min_yblock = next_pow2(-(-y // GRID_Y_LIMIT))
        if min_yblock <= MAX_YBLOCK:
            candidates: list[ConfigAttr] = []
            for yb, xb in ((32, 32), (64, 16), (16, 64), (8, 128)):
                xblock = min(next_pow2(x), xb)
                yblock = max(yb, TILE_ELEMENTS // xblock, min_yblock)
                yblock = min(next_pow2(y), yblock, MAX_YBLOCK)
                candidates.append(_config(YBLOCK=yblock, XBLOCK=xblock, num_warps=4))
            return Tiling(KernelKind.POINTWISE, candidates[0], _unique(candidates), ynumel=ynumel)
    block = max(256, min(numel // 128, 1024))
    block = min(next_pow2(block), next_pow2(numel), MAX_XBLOCK)
    candidates = [
        _config(XBLOCK=b, num_warps=_num_warps(b, cap=8))
        for b in (block, max(1, block // 2), min(MAX_XBLOCK, block * 2, next_pow2(numel)))
    ]
    return Tiling(KernelKind.POINTWISE, candidates[0], _unique(candidates))


def _cap(where: str, xblock: int, rnumel: int) -> int:
    """The most warps for a reduction block (see :data:`SHORT_ROW_MAX_WARPS`)."""
    return SHORT_ROW_MAX_WARPS if where == "inner" and xblock == 1 and rnumel <= 2048 else 16


OUTER_MIN_PROGRAMS = 32
"""Programs a looped outer reduction should have at least, at no fewer than
:data:`OUTER_MIN_XBLOCK` outputs each."""


def _outer_shape(numel: int) -> tuple[int, int, int | None]:
    """``(XBLOCK, RBLOCK, warps)`` of a looped outer reduction: OUTER_XBLOCK outputs per
    program, fewer where that leaves the GPU idle, with the block kept at 512 elements.
    Batch norm statistics over NHWC activations of 64 channels ran as one program of 64
    channels over every row (30 us a launch for ResNet-18's 2x64x16x16 on an H200)."""
    xblock = OUTER_XBLOCK
    while xblock > OUTER_MIN_XBLOCK and -(-numel // xblock) < OUTER_MIN_PROGRAMS:
        xblock //= 2
    return xblock, OUTER_XBLOCK * 8 // xblock, None


def _outer_persistent(candidates: list[ConfigAttr], numel: int) -> ConfigAttr:
    """The widest block that leaves :data:`OUTER_MIN_PROGRAMS` programs, else the
    narrowest of at least :data:`OUTER_MIN_XBLOCK` outputs. The widest alone made
    MobileNet-v2's batch norms over NHWC one to five programs of 128 channels."""
    wide = [c for c in candidates if (c.value("XBLOCK") or 1) >= OUTER_MIN_XBLOCK] or candidates
    for config in reversed(wide):
        if -(-numel // (config.value("XBLOCK") or 1)) >= OUTER_MIN_PROGRAMS:
            return config
    return wide[0]


SHORT_ROW_BLOCK_ELEMENTS = 1024
"""Elements an inner persistent reduction's block covers at least, in whole rows, when
its rows are short (:data:`SHORT_ROW_MAX`): ``XBLOCK`` of 8, 32 or 128 rows, Inductor's
candidates. One row a program ran a single warp over 64 elements: Swin-tiny's window
softmax (301056 rows of 49, bfloat16, batch 32) took 182 us a call on the H200 against
Inductor's 72 us; ConvNeXt-atto's depthwise convolution + layer norm kernels 0.98 ms a
call in all, 0.48 ms now. 512 and 2048 measured the same (docs/benchmarks/design-notes.md)."""


SHORT_ROW_MAX = 512
"""Rows whose block (``RBLOCK``) is this long or longer keep a program each, as
Inductor's inner persistent reductions do from 256 elements; rows of 129 to 256 shared
programs best on the H200 (ConvNeXt-atto's 160 channels: 1.04 -> 0.87 ms a call),
rows of 257 to 512 did not (ViT-S's 384: 1.10 -> 1.13 ms)."""


def _inner_persistent(candidates: list[ConfigAttr], rblock: int) -> ConfigAttr:
    """One row per program for row blocks of :data:`SHORT_ROW_MAX` and more; shorter rows
    the narrowest candidate whose block holds :data:`SHORT_ROW_BLOCK_ELEMENTS`, else the
    widest (candidates are ordered by ``XBLOCK``)."""
    if rblock >= SHORT_ROW_MAX:
        return candidates[0]
    for config in candidates:
        if (config.value("XBLOCK") or 1) * rblock >= SHORT_ROW_BLOCK_ELEMENTS:
            return config
    return candidates[-1]


def reduction_tiling(kernel: KernelOp, kind: KernelKind | None = None) -> Tiling:
    numel = hint(kernel.numel.data)
    rnumel = hint(kernel.rnumel.data)
    where = reduction_hint(kernel)
    static = not kernel.rnumel.data.free_symbols
    limit = PERSISTENT_INNER_MAX if where == "inner" else PERSISTENT_OUTER_MAX
    if kind is None:
        kind = KernelKind.PERSISTENT if static and rnumel <= limit else KernelKind.LOOPED
    if kind is KernelKind.PERSISTENT:
        rblock = next_pow2(rnumel)
        xblocks = [
            x
            for x in (1, 8, 32, 128)
            if x == 1 or (x * rblock <= PERSISTENT_BLOCK_ELEMENTS and x <= next_pow2(numel))
        ]
        cap = SHORT_ROW_MAX_WARPS if where == "inner" else 16
        candidates = [
            _config(XBLOCK=x, RBLOCK=rblock, num_warps=_num_warps(x * rblock, cap)) for x in xblocks
        ]
        chosen = (
            _inner_persistent(candidates, rblock)
            if where == "inner"
            else _outer_persistent(candidates, numel)
        )
        return Tiling(kind, chosen, _unique([chosen, *candidates]), where)
    inner_r = min(next_pow2(rnumel), 2048)
    shapes: list[tuple[int, int, int | None]] = [
        (1, inner_r, None),
        (64, 64, None),
        (8, 512, None),
        (64, 4, None),
    ]
    if where == "outer":
        shapes = [_outer_shape(numel), *shapes]
        if kind is KernelKind.SPLIT:
            shapes = [SPLIT_OUTER_SHAPE, *shapes]
    candidates = [
        _config(
            XBLOCK=min(x, next_pow2(numel)),
            RBLOCK=min(r, next_pow2(rnumel)),
            num_warps=warps
            or _num_warps(
                min(x, next_pow2(numel)) * min(r, next_pow2(rnumel)), _cap(where, x, rnumel)
            ),
        )
        for x, r, warps in shapes
    ]
    return Tiling(kind, candidates[0], _unique(candidates), where)


__all__ = [
    "Tiling",
    "hint",
    "next_pow2",
    "pointwise_tiling",
    "reads_along_reduction",
    "reduction_hint",
    "reduction_tiling",
    "split_factor",
    "transposed_split",
]


MATMUL_TILES = (
    (64, 64, 64, 4, 3),
    (64, 64, 32, 4, 3),
    (32, 32, 32, 4, 2),
    (32, 64, 32, 4, 3),
    (64, 32, 32, 4, 3),
    (64, 128, 32, 4, 3),
    (128, 64, 32, 4, 3),
    (16, 32, 64, 2, 2),
)
"""Candidate (``YBLOCK``, ``XBLOCK``, ``RBLOCK``, warps, stages) of a matmul kernel, a
subset of Inductor's ``mm_configs``; each block is clamped to the product's size (at
least 16: ``tl.dot``'s smallest operand). The first is the default: with ``autotune``
on an H100, 64-wide inner chunks won on GPT-2's bfloat16 products (32 x 64 x 64 at 32
rows, docs/benchmarks/dot-kernels.md)."""


def dot_node(kernel: KernelOp) -> ReductionOp | None:
    """The matrix product node of ``kernel`` (:mod:`kiln.dialects.loop.dot`), if any."""
    for node in kernel.nodes():
        if is_dot(node):
            assert isinstance(node, ReductionOp)
            return node
    return None


def matmul_tiling(kernel: KernelOp, product: ReductionOp) -> Tiling:
    """Output tiles and inner chunks of a kernel around a matrix product."""
    m, n = (hint(s.data) for s in product.sizes.data)
    k = hint(product.reduction_sizes.data[0].data)

    def clamp(block: int, size: int) -> int:
        return max(16, min(block, next_pow2(size)))

    candidates = [
        ConfigAttr.of(
            {
                "YBLOCK": clamp(bm, m),
                "XBLOCK": clamp(bn, n),
                "RBLOCK": clamp(bk, k),
                "num_warps": warps,
                "num_stages": stages,
            }
        )
        for bm, bn, bk, warps, stages in MATMUL_TILES
    ]
    unique = _unique(candidates)
    return Tiling(KernelKind.MATMUL, unique[0], unique, ynumel=product.sizes.data[0].data)

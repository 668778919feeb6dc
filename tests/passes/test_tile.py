"""The ``tile`` pass: reduction strategies, block sizes, split reductions, 2-D tiles;
the program computes the same numbers before and after."""

from __future__ import annotations

import pytest
import torch
from fuse_checks import assert_schedule_preserves, kernels, launches, parse, schedule
from xdsl.utils.exceptions import DiagnosticException

from kiln.dialects.kernel import KernelKind
from kiln.dialects.loop.ops import ReductionOp
from kiln.passes.scheduling.tiling import next_pow2, split_factor


def lowered(aten_text: str) -> str:
    return str(schedule(parse(aten_text), "decompose,lower-aten"))


def reduction(shape: tuple[int, int], dim: int) -> str:
    out = shape[1 - dim]
    return f"""
    func.func @forward(%x: tensor<{shape[0]}x{shape[1]}xf32>) -> tensor<{out}xf32> {{
      %0 = aten.exp.default(%x) : (tensor<{shape[0]}x{shape[1]}xf32>) -> tensor<{shape[0]}x{shape[1]}xf32>
      %1 = aten.sum.dim_IntList(%0, dim = [{dim}]) : (tensor<{shape[0]}x{shape[1]}xf32>) -> tensor<{out}xf32>
      %2 = aten.mul.Scalar(%1, other = 3) : (tensor<{out}xf32>) -> tensor<{out}xf32>
      func.return %2 : tensor<{out}xf32>
    }}
    """


@pytest.mark.parametrize(
    ("shape", "dim", "kind", "hint"),
    [
        ((4, 16), 1, KernelKind.PERSISTENT, "inner"),
        ((4, 1024), 1, KernelKind.PERSISTENT, "inner"),
        ((4, 4096), 1, KernelKind.LOOPED, "inner"),
        ((32, 4), 0, KernelKind.PERSISTENT, "outer"),
        ((512, 4), 0, KernelKind.PERSISTENT, "outer"),
        ((1024, 4), 0, KernelKind.LOOPED, "outer"),
    ],
)
def test_reduction_strategy(shape: tuple[int, int], dim: int, kind: KernelKind, hint: str) -> None:
    module, _ = assert_schedule_preserves(parse(lowered(reduction(shape, dim))), "fuse,tile")
    (kernel,) = kernels(module)
    assert kernel.kernel_kind is kind
    assert kernel.reduction_hint is not None
    assert kernel.reduction_hint.data == hint
    assert kernel.tiling is not None
    assert kernel.configs is not None
    assert kernel.tiling in kernel.configs.data
    rblock = kernel.tiling.value("RBLOCK")
    assert rblock is not None
    if kind is KernelKind.PERSISTENT:
        assert rblock >= shape[dim]
        assert all(c.value("RBLOCK") == next_pow2(shape[dim]) for c in kernel.configs.data)
    else:
        assert rblock < shape[dim]


def test_split_reduction() -> None:
    loop = parse(
        lowered(
            reduction((16, 1024), 0)
            .replace("dim = [0]", "dim = [0, 1]")
            .replace("tensor<1024xf32>", "tensor<f32>")
        )
    )
    module, trace = assert_schedule_preserves(loop, "fuse,tile")
    first, second = kernels(module)
    assert first.kernel_kind is KernelKind.SPLIT
    assert (str(first.numel.data), str(first.rnumel.data)) == ("16", "1024")
    assert (str(second.numel.data), str(second.rnumel.data)) == ("1", "16")
    assert second.kernel_kind is KernelKind.PERSISTENT
    assert [launch.kernel.string_value() for launch in launches(module)] == [
        "kernel0_split",
        "kernel0_combine",
    ]
    assert trace.allocations == 2  # the result and the partials
    # No split when asked not to, or when the outputs alone fill the device.
    module, _ = assert_schedule_preserves(loop, "fuse,tile{split=false}")
    assert [k.kernel_kind for k in kernels(module)] == [KernelKind.LOOPED]
    rows = parse(lowered(reduction((4, 16384), 1)))
    module, _ = assert_schedule_preserves(rows, "fuse,tile")
    assert [k.kernel_kind for k in kernels(module)] == [KernelKind.SPLIT, KernelKind.PERSISTENT]
    module, _ = assert_schedule_preserves(rows, "fuse,tile{sm-count=1}")
    assert [k.kernel_kind for k in kernels(module)] == [KernelKind.LOOPED]


def test_outer_split_puts_chunks_first() -> None:
    """A column reduction split in chunks keeps neighbouring columns neighbours in the
    partials (``[S, cols]``), so a block of the split kernel reads contiguous memory."""
    cols = parse(lowered(reduction((16384, 8), 0)))
    module, trace = assert_schedule_preserves(cols, "fuse,tile")
    first, second = kernels(module)
    assert first.kernel_kind is KernelKind.SPLIT
    assert first.reduction_hint is not None
    assert first.reduction_hint.data == "outer"
    (partials,) = [t for t in first.function_type.outputs.data if t.get_shape() != (8,)]
    splits = partials.get_shape()[0]
    assert partials.get_shape() == (splits, 8)
    assert splits > 1
    assert str(second.rnumel.data) == str(splits)
    assert trace.allocations == 2


def test_split_factor() -> None:
    assert split_factor(1, 1 << 24, 132) == 512  # Inductor's split of x.sum() over 2^24
    assert split_factor(1, 8192, 132) == 1  # small reductions are never split
    assert split_factor(1024, 1 << 20, 132) == 1  # enough outputs to fill the device
    assert split_factor(1, 10010, 132) == 2  # the split divides rnumel


def test_transpose_gets_a_2d_tile() -> None:
    loop = parse(
        lowered(
            """
            func.func @forward(%x: tensor<16x32xf32>) -> tensor<32x16xf32> {
              %t = aten.t.default(%x) : (tensor<16x32xf32>) -> tensor<32x16xf32>
              %y = aten.neg.default(%t) : (tensor<32x16xf32>) -> tensor<32x16xf32>
              func.return %y : tensor<32x16xf32>
            }
            """
        )
    )
    module, _ = assert_schedule_preserves(loop, "fuse,tile")
    (kernel,) = kernels(module)
    assert kernel.ynumel is not None
    assert kernel.ynumel.text == "32"
    assert kernel.tiling is not None
    assert kernel.tiling.value("YBLOCK") is not None
    assert kernel.tiling.value("XBLOCK") is not None


def test_narrow_transpose_tile_fits_the_grid() -> None:
    """An NCHW -> NHWC copy of a 3-channel image: millions of rows, 3 columns. The rows
    go on the grid's y axis (65535 blocks at most), so YBLOCK grows with them, and a
    narrow tile takes more rows (the tile keeps about 1024 elements)."""
    text = """
    func.func @forward(%x: tensor<64x3x224x224xf32>) -> tensor<64x224x224x3xf32> {
      %p = aten.permute.default(%x, dims = [0, 2, 3, 1]) : (tensor<64x3x224x224xf32>) -> tensor<64x224x224x3xf32>
      %y = aten.neg.default(%p) : (tensor<64x224x224x3xf32>) -> tensor<64x224x224x3xf32>
      func.return %y : tensor<64x224x224x3xf32>
    }
    """
    module = schedule(parse(lowered(text)), "fuse,tile")
    (kernel,) = kernels(module)
    assert kernel.ynumel is not None
    assert kernel.ynumel.text == str(64 * 224 * 224)
    assert kernel.configs is not None
    for config in kernel.configs.data:
        yblock, xblock = config.value("YBLOCK"), config.value("XBLOCK")
        assert yblock is not None
        assert xblock == 4
        assert -(-64 * 224 * 224 // yblock) <= 65535
        assert yblock * xblock >= 1024


def test_pointwise_blocks() -> None:
    text = """
    func.func @forward(%x: tensor<256x512xf32>) -> tensor<256x512xf32> {
      %0 = aten.relu.default(%x) : (tensor<256x512xf32>) -> tensor<256x512xf32>
      func.return %0 : tensor<256x512xf32>
    }
    """
    module = schedule(parse(lowered(text)), "fuse,tile")
    (kernel,) = kernels(module)
    assert kernel.kernel_kind is KernelKind.POINTWISE
    assert kernel.tiling is not None
    assert kernel.tiling.value("XBLOCK") == 1024
    assert kernel.ynumel is None


def test_tile_is_idempotent() -> None:
    module = schedule(parse(lowered(reduction((4, 16), 1))), "fuse,tile")
    once = str(module)
    assert str(schedule(module, "tile")) == once


def test_dynamic_reduction_is_looped() -> None:
    loop = parse(
        lowered(
            """
            func.func @forward(%x: tensor<4x?xf32>) -> tensor<4xf32> {
              %0 = aten.sum.dim_IntList(%x, dim = [1]) : (tensor<4x?xf32>) -> tensor<4xf32>
              func.return %0 : tensor<4xf32>
            }
            """
        )
    )
    module, _ = assert_schedule_preserves(loop, "fuse,tile", inputs=[torch.randn(4, 7)])
    (kernel,) = kernels(module)
    assert kernel.kernel_kind is KernelKind.LOOPED


def test_bad_option() -> None:
    with pytest.raises(DiagnosticException, match="sm-count must be positive"):
        schedule(parse(lowered(reduction((4, 16), 1))), "fuse,tile{sm-count=0}")


def test_outer_reductions_count_programs_not_outputs_when_splitting() -> None:
    from kiln.passes.scheduling.tiling import OUTER_XBLOCK, split_factor

    # 4096 column maxima over 16384 rows: 4096 outputs, but only 64 programs of 64 outputs.
    assert split_factor(4096, 16384, 132) == 1
    splits = split_factor(4096, 16384, 132, OUTER_XBLOCK)
    assert splits > 1
    assert 16384 % splits == 0
    # ResNet's average pool over NHWC (64 x 128 channels, 56 x 56 rows): 128 programs
    # unsplit; outer reductions split from 1024 rows on, in chunks of at least 256.
    assert split_factor(64 * 128, 56 * 56, 132) == 1
    assert split_factor(64 * 128, 56 * 56, 132, OUTER_XBLOCK) == 8
    assert split_factor(64 * 128, 1024, 132, OUTER_XBLOCK) == 1


def test_gpu_splits_outer_reductions_into_shorter_chunks() -> None:
    """Batch norm statistics over NHWC rows (2048 rows of 64 channels: ResNet-18's
    first batch norm in a small training step) split 32 ways on a GPU, 8 on the CPU; on
    the H200 the shorter chunks took 4 % off the training step's kernel time."""
    text = reduction((2048, 64), 0)
    on_cuda = (
        text.replace("func.func", 'builtin.module attributes {kiln.device = "cuda"} {\n func.func')
        + "}"
    )
    inputs = [torch.randn(2048, 64) / 16]
    for module_text, splits in ((text, 8), (on_cuda, 32)):
        module, _ = assert_schedule_preserves(
            parse(lowered(module_text)), "fuse,tile", inputs=inputs
        )
        first, second = kernels(module)
        assert first.kernel_kind is KernelKind.SPLIT
        assert str(second.rnumel.data) == str(splits)


NHWC = "3x24x24x24xf32"
"""An activation stored channels-last, as ``channels-last`` writes it: ``[N, H, W, C]``."""


def test_nhwc_channel_sum_beside_a_pointwise_is_split() -> None:
    """A batch-norm backward over NHWC: ``sum(grad)`` is fused with ``grad * (x - mean)``
    (both read ``grad``), which does not read the sum. The kernel was not split, so it ran
    one program per 64 channels over all N*H*W elements (MobileNet-v2 on an H200: 81 ms
    for such a kernel); now every per-channel reduction is split, reading along the
    channels (outer hint, XBLOCK > 1)."""
    loop = parse(
        lowered(
            f"""
            func.func @forward(%g: tensor<{NHWC}>, %x: tensor<{NHWC}>, %m: tensor<24xf32>) -> (tensor<24xf32>, tensor<{NHWC}>, tensor<24xf32>) {{
              %s = aten.sum.dim_IntList(%g, dim = [0, 1, 2]) : (tensor<{NHWC}>) -> tensor<24xf32>
              %d = aten.sub.Tensor(%x, %m) : (tensor<{NHWC}>, tensor<24xf32>) -> tensor<{NHWC}>
              %p = aten.mul.Tensor(%g, %d) : (tensor<{NHWC}>, tensor<{NHWC}>) -> tensor<{NHWC}>
              %s2 = aten.sum.dim_IntList(%p, dim = [0, 1, 2]) : (tensor<{NHWC}>) -> tensor<24xf32>
              func.return %s, %p, %s2 : tensor<24xf32>, tensor<{NHWC}>, tensor<24xf32>
            }}
            """
        )
    )
    # small values: the sums of 1728 elements, added in another order, agree within 1e-5
    inputs = [torch.randn(3, 24, 24, 24) / 16, torch.randn(3, 24, 24, 24) / 16, torch.randn(24)]
    module, _ = assert_schedule_preserves(loop, "fuse,tile", inputs=inputs)
    reductions = [k for k in kernels(module) if k.kernel_kind is not KernelKind.POINTWISE]
    assert [k.kernel_kind for k in reductions] == [KernelKind.SPLIT, KernelKind.PERSISTENT] * 2
    for first in reductions[::2]:
        assert first.reduction_hint is not None
        assert first.reduction_hint.data == "outer"
        assert first.tiling is not None
        xblock = first.tiling.value("XBLOCK")
        assert xblock is not None
        assert xblock > 1
    # the pointwise node runs in the first kernel of the split beside the partial sums
    assert any(len(k.nodes()) == 2 for k in reductions[::2])


def test_reduction_over_contiguous_runs_is_inner() -> None:
    # Swin's patch merging: the 2x2 neighbours' channels side by side, reduced by a
    # LayerNorm. The reduction reads runs of 96 contiguous channels (index
    # 96*(r // 192) + r % 96 + ...*((r // 96) % 2)): an inner, persistent reduction, not
    # an outer one of 8-wide looped blocks.
    text = """
    func.func @forward(%x: tensor<2x8x8x96xf32>) -> tensor<2x4x4xf32> {
      %0 = aten.view.default(%x, size = [2, 4, 2, 4, 2, 96]) : (tensor<2x8x8x96xf32>) -> tensor<2x4x2x4x2x96xf32>
      %1 = aten.permute.default(%0, dims = [0, 1, 3, 4, 2, 5]) : (tensor<2x4x2x4x2x96xf32>) -> tensor<2x4x4x2x2x96xf32>
      %2 = aten.reshape.default(%1, shape = [2, 4, 4, 384]) : (tensor<2x4x4x2x2x96xf32>) -> tensor<2x4x4x384xf32>
      %3 = aten.sum.dim_IntList(%2, dim = [3]) : (tensor<2x4x4x384xf32>) -> tensor<2x4x4xf32>
      func.return %3 : tensor<2x4x4xf32>
    }
    """
    module, _ = assert_schedule_preserves(parse(lowered(text)), "fuse,tile")
    (kernel,) = kernels(module)
    assert kernel.reduction_hint is not None
    assert kernel.reduction_hint.data == "inner"
    assert kernel.kernel_kind is KernelKind.PERSISTENT


def test_two_reductions_of_one_kernel_split_together() -> None:
    """Batch norm's backward per channel: ``sum(g)`` and ``sum(g * (x - m))`` over NCHW,
    one kernel (the product is recomputed in the second sum, which shares the first's
    reads of ``g``). 4 channels of 32768 elements need a split; each sum gets partials
    of its own in the first kernel and its own combine in the second (a kernel of two
    reductions was never split: one program per channel over all N*H*W)."""
    shape = "8x4x64x64xf32"
    loop = parse(
        lowered(
            f"""
            func.func @forward(%g: tensor<{shape}>, %x: tensor<{shape}>, %m: tensor<4x1x1xf32>) -> (tensor<4xf32>, tensor<4xf32>) {{
              %s = aten.sum.dim_IntList(%g, dim = [0, 2, 3]) : (tensor<{shape}>) -> tensor<4xf32>
              %d = aten.sub.Tensor(%x, %m) : (tensor<{shape}>, tensor<4x1x1xf32>) -> tensor<{shape}>
              %p = aten.mul.Tensor(%g, %d) : (tensor<{shape}>, tensor<{shape}>) -> tensor<{shape}>
              %s2 = aten.sum.dim_IntList(%p, dim = [0, 2, 3]) : (tensor<{shape}>) -> tensor<4xf32>
              func.return %s, %s2 : tensor<4xf32>, tensor<4xf32>
            }}
            """
        )
    )
    inputs = [torch.randn(8, 4, 64, 64) / 64, torch.randn(8, 4, 64, 64) / 64, torch.randn(4, 1, 1)]
    module, trace = assert_schedule_preserves(loop, "fuse,tile", inputs=inputs)
    first, second = kernels(module)
    assert first.kernel_kind is KernelKind.SPLIT
    assert sum(isinstance(n, ReductionOp) for n in first.nodes()) == 2
    assert sum(isinstance(n, ReductionOp) for n in second.nodes()) == 2
    assert [launch.kernel.string_value() for launch in launches(module)] == [
        f"{first.sym_name.data}",
        f"{second.sym_name.data}",
    ]
    assert trace.allocations == 4  # the two sums and their partials


@pytest.mark.parametrize(
    ("shape", "dims"), [("8x4x64x64", "[0, 2, 3]"), ("8x64x64x4", "[0, 1, 2]")]
)
def test_welford_statistics_split_with_chan_s_combine(shape: str, dims: str) -> None:
    """Batch norm's forward statistics (``var_mean``: one ``welford`` reduction) over
    32768 elements a channel, NCHW (inner) and NHWC (outer): the first kernel writes
    per-chunk mean, m2 and count, the second combines them by Chan's formula (sums of
    the counts, of count * mean, and of m2 plus count * squared deviation from the
    combined mean). Unsplit, one program per channel read every element."""
    text = f"""
    func.func @forward(%x: tensor<{shape}xf32>) -> (tensor<4xf32>, tensor<4xf32>) {{
      %v, %m = aten.var_mean.correction(%x, dim = {dims}, correction = 0) : (tensor<{shape}xf32>) -> (tensor<4xf32>, tensor<4xf32>)
      func.return %v, %m : tensor<4xf32>, tensor<4xf32>
    }}
    """
    sizes = [int(s) for s in shape.split("x")]
    # far from zero: a combine by sums of squares would lose the variance
    inputs = [torch.randn(*sizes) * 3 + 50]
    module, trace = assert_schedule_preserves(parse(lowered(text)), "fuse,tile", inputs=inputs)
    first, second = kernels(module)
    assert first.kernel_kind is KernelKind.SPLIT
    (welford,) = [n for n in first.nodes() if isinstance(n, ReductionOp) and len(n.outputs) == 3]
    assert all(str(out.type).count("x") == 2 for out in welford.outputs)  # [4, S] or [S, 4]
    combine = [n for n in second.nodes() if isinstance(n, ReductionOp)]
    assert {n.kind.data.value for n in combine} == {"sum"}
    assert trace.allocations == 2 + len(first.function_type.outputs.data)


@pytest.mark.parametrize(("columns", "xblock"), [(64, 8), (512, 16), (4096, 64)])
def test_outer_reductions_of_few_outputs_take_narrower_blocks(columns: int, xblock: int) -> None:
    """Column sums of 1024 rows (too long to be persistent, too short to split): 64
    outputs a program left a batch norm's statistics over NHWC with 64 channels one
    program for the whole GPU (30 us a launch on an H200 for 2x64x16x16); now blocks
    narrow to 8 outputs until there are 32 programs, reading 512 elements a step either
    way."""
    module, _ = assert_schedule_preserves(
        parse(lowered(reduction((1024, columns), 0))), "fuse,tile"
    )
    (kernel,) = kernels(module)
    assert kernel.kernel_kind is KernelKind.LOOPED
    assert kernel.tiling is not None
    assert kernel.tiling.value("XBLOCK") == xblock
    assert kernel.tiling.value("RBLOCK") == 512 // xblock


@pytest.mark.parametrize(("columns", "xblock"), [(96, 8), (2048, 32), (8192, 128)])
def test_persistent_outer_reductions_keep_programs(columns: int, xblock: int) -> None:
    """Column sums of 32 rows (one block of rows): the widest block (128 columns) made
    MobileNet-v2's NHWC batch norms over 96 channels one program; now the widest that
    leaves 32 programs, else 8 columns."""
    module, _ = assert_schedule_preserves(parse(lowered(reduction((32, columns), 0))), "fuse,tile")
    (kernel,) = kernels(module)
    assert kernel.kernel_kind is KernelKind.PERSISTENT
    assert kernel.tiling is not None
    assert kernel.tiling.value("XBLOCK") == xblock


@pytest.mark.parametrize(
    ("shape", "xblock"),
    [
        ((4096, 49), 32),
        ((4096, 128), 8),
        ((4096, 16), 128),
        ((4096, 160), 8),
        ((4096, 384), 1),
        ((4096, 768), 1),
    ],
)
def test_short_inner_rows_share_a_program(shape: tuple[int, int], xblock: int) -> None:
    """Row sums over rows of at most 256: several rows a program, the narrowest block of
    at least 1024 elements (one 49-element row a program ran Swin's window softmax at 2.5x
    Inductor's kernel time on the H200); longer rows keep one a program."""
    module, _ = assert_schedule_preserves(parse(lowered(reduction(shape, 1))), "fuse,tile")
    (kernel,) = kernels(module)
    assert kernel.kernel_kind is KernelKind.PERSISTENT
    assert kernel.tiling is not None
    assert kernel.tiling.value("XBLOCK") == xblock
    assert kernel.configs is not None
    assert kernel.tiling in kernel.configs.data


def norm_weight_sums(rows: int, channels: int) -> str:
    """A layer norm backward's weight and bias gradients over ``[rows, channels]``: sums
    over rows of ``g * (x - mean) * rstd`` and of ``g``, ``mean`` and ``rstd`` one value a
    row."""
    m, v, c = f"tensor<{rows}x{channels}xf32>", f"tensor<{rows}x1xf32>", f"tensor<{channels}xf32>"
    return f"""
    func.func @forward(%g: {m}, %x: {m}, %m: {v}, %s: {v}) -> ({c}, {c}) {{
      %0 = aten.sub.Tensor(%x, %m) : ({m}, {v}) -> {m}
      %1 = aten.mul.Tensor(%0, %s) : ({m}, {v}) -> {m}
      %2 = aten.mul.Tensor(%g, %1) : ({m}, {m}) -> {m}
      %3 = aten.sum.dim_IntList(%2, dim = [0]) : ({m}) -> {c}
      %4 = aten.sum.dim_IntList(%g, dim = [0]) : ({m}) -> {c}
      func.return %3, %4 : {c}, {c}
    }}
    """


def test_per_row_vectors_do_not_make_a_column_sum_inner() -> None:
    """A layer norm backward's weight and bias gradients (:func:`norm_weight_sums`). The
    ``[rows, channels]`` reads stride by the row: an outer reduction (it ran as an inner
    one, one column a program, because the per-row vectors read contiguously along the
    reduction)."""
    text = norm_weight_sums(2048, 64)
    module, _ = assert_schedule_preserves(parse(lowered(text)), "fuse,tile{split=false}")
    reductions = [k for k in kernels(module) if k.kernel_kind is not KernelKind.POINTWISE]
    assert reductions
    for kernel in reductions:
        assert kernel.reduction_hint is not None
        assert kernel.reduction_hint.data == "outer"
        assert kernel.tiling is not None
        assert (kernel.tiling.value("XBLOCK") or 1) >= 8


def test_a_gathered_row_reduction_stays_inner() -> None:
    """An embedding feeding a layer norm: the reduction reads rows of the table through
    the token ids (``64*i0 + r0``), the same for no two outputs, contiguous along the
    reduction: inner (taken for a vector indexed by the reduction alone, it tiled as an
    outer reduction, 0.08 ms more a call on GPT-2/BERT/LLaMA at the large size)."""
    text = """
    func.func @forward(%w: tensor<100x64xf32>, %ids: tensor<512xi64>) -> tensor<512xf32> {
      %0 = aten.embedding.default(%w, %ids) : (tensor<100x64xf32>, tensor<512xi64>) -> tensor<512x64xf32>
      %1 = aten.mul.Tensor(%0, %0) : (tensor<512x64xf32>, tensor<512x64xf32>) -> tensor<512x64xf32>
      %2 = aten.sum.dim_IntList(%1, dim = [1]) : (tensor<512x64xf32>) -> tensor<512xf32>
      func.return %2 : tensor<512xf32>
    }
    """
    module = schedule(parse(lowered(text)), "fuse,tile")
    (kernel,) = [k for k in kernels(module) if k.kernel_kind is not KernelKind.POINTWISE]
    assert kernel.reduction_hint is not None
    assert kernel.reduction_hint.data == "inner"


def test_per_row_vectors_do_not_make_a_split_column_sum_inner() -> None:
    """The same sums at ViT-S's size on a GPU split into chunks of rows: the first
    kernel's per-row vectors are then indexed by the chunk too (``197*d0 + r0``), still
    the same for every column of a chunk. Both kernels are outer, the first in blocks of
    columns (it was inner: one column of a chunk a program, 32 us a call on the H200)."""
    text = (
        f'builtin.module attributes {{"kiln.device" = "cuda:0"}} {{{norm_weight_sums(6304, 384)}}}'
    )
    module = schedule(parse(text), "decompose,lower-aten,fuse,tile")
    first, second = kernels(module)
    assert first.kernel_kind is KernelKind.SPLIT
    for kernel in (first, second):
        assert kernel.reduction_hint is not None
        assert kernel.reduction_hint.data == "outer"
    assert first.tiling is not None
    assert (first.tiling.value("XBLOCK") or 1) >= 8

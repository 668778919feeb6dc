"""The C++ kernel-level rewrites made for speed keep eager PyTorch's numbers.

* division by a loop-invariant value as a multiplication by its reciprocal, with the
  original loop kept for divisors whose reciprocal is not a normal number
  (:mod:`kiln.passes.kernel_to_cpp.reciprocals`);
* loop-invariant loads moved out of vector loops, and bounds-checked gathers read under
  their guard (:mod:`kiln.passes.kernel_to_cpp.invariants`, ``emit.py``);
* the NaN-propagating max/min of the prelude, its inline float ``erf``, and wide
  reduction accumulators;
* vector loops whose masks are uniform over their lanes, versioned with plain loads
  where every mask holds (:mod:`kiln.passes.kernel_to_cpp.uniform_masks`);
* index checks the loop bounds prove, dropped (:mod:`kiln.passes.kernel_to_cpp.bounds`),
  and loop dims split at the divisors of the index (``split_by_periods``).
"""

from __future__ import annotations

import pytest
import sympy
import torch
import torch.nn.functional as F
from cpp_checks import check, lower

from kiln.dialects.loop.expr import floordiv, mod
from kiln.passes.kernel_to_cpp.space import LoopSpace, split_by_periods
from kiln.targets import build_cpp_program


def _rows_of_every_magnitude() -> torch.Tensor:
    """Rows whose maximum is normal, subnormal, above 2^126, zero, infinite or NaN."""
    n = 24
    normal = torch.rand(n) + 0.5
    subnormal = torch.rand(n) * 1e-39 + 1e-44
    huge = torch.rand(n) * 2e38 + 1e38
    zero = torch.zeros(n)
    infinite = torch.randn(n)
    infinite[3] = float("inf")
    nan = torch.randn(n)
    nan[5] = float("nan")
    negative = -(torch.rand(n) + 0.5)
    return torch.stack([normal, subnormal, huge, zero, infinite, nan, negative, normal * 3])


@pytest.mark.parametrize("threads", [1, 2])
def test_division_by_row_max_keeps_eager_numbers(threads: int) -> None:
    fn = lambda x: x / x.amax(-1, keepdim=True)  # noqa: E731
    program = build_cpp_program(lower(fn, (_rows_of_every_magnitude(),)), threads=threads)
    assert "reciprocal" in program.cpp_source
    for _ in range(2):
        x = _rows_of_every_magnitude()
        (actual,) = program([x])
        # The max is exact, so the quotients may differ from eager's by the 1.5 ulp
        # of one rounded reciprocal at most (and subnormal divisors not at all).
        torch.testing.assert_close(actual, fn(x), atol=0.0, rtol=2.5e-7, equal_nan=True)


def test_division_by_a_float64_sum() -> None:
    program = check(
        lambda x: [x / x.sum(-1, keepdim=True), F.softmax(x, -1)],
        lambda: (torch.randn(6, 70, dtype=torch.float64),),
    )
    assert "reciprocal" in program.cpp_source


def test_softmax_multiplies_by_the_reciprocal_of_the_sum() -> None:
    program = check(lambda x: F.softmax(x, -1), lambda: (torch.randn(5, 300) * 10,), runs=2)
    body = program.cpp_source.split('extern "C" int kernel', 1)[1]
    assert "* reciprocal" in body


def test_embedding_row_index_is_read_once_per_row() -> None:
    """The ids load moves out of the inner (row) loop, so the row is a contiguous read.
    (The row loop checks its indices, so it is a plain loop rather than ``omp simd``: see
    ``FunctionEmitter.for_op`` in backends/cpp/emit.py.)"""
    program = check(
        lambda w, i: F.embedding(i, w) * 2,
        lambda: (torch.randn(50, 64), torch.randint(0, 50, (9,))),
    )
    body = program.cpp_source.split('extern "C" int kernel', 1)[1]
    ids_load = body.index("in_ptr0[")
    loops = [k for k in range(len(body)) if body.startswith("for (int64_t", k)]
    assert len(loops) == 2
    assert loops[0] < ids_load < loops[1]


def test_masked_gather_out_of_range_still_raises() -> None:
    fn = lambda w, i: torch.where(i[:, None] >= 0, F.embedding(i.clamp(min=0), w), 0.0) * 3  # noqa: E731
    check(fn, lambda: (torch.randn(12, 20), torch.randint(-3, 12, (7,))))
    program = build_cpp_program(
        lower(lambda w, i: F.embedding(i, w), (torch.randn(12, 20), torch.randint(0, 12, (7,))))
    )
    with pytest.raises(IndexError):
        program([torch.randn(12, 20), torch.tensor([0, 1, 12, 3, 4, 5, 6])])
    with pytest.raises(IndexError):
        program([torch.randn(12, 20), torch.tensor([0, -1, 2, 3, 4, 5, 6])])


def test_max_min_of_nan_and_signed_zeros_match_eager() -> None:
    def make() -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn(9, 130)
        y = torch.randn(9, 130)
        x[1, 7] = float("nan")
        y[2, 100] = float("nan")
        x[3, :] = 0.0
        y[3, :] = -0.0
        x[4, 64] = float("inf")
        y[5, 3] = float("-inf")
        return x, y

    check(
        lambda x, y: [
            torch.maximum(x, y),
            torch.minimum(x, y),
            x.amax(-1),
            y.amin(-1),
            x.amax(0),
            torch.maximum(x, y).amax(-1),
        ],
        make,
    )


def test_padded_max_pool_with_nans_matches_eager() -> None:
    """A 3x3 max pool, padded, over channels-last data: interior windows run the
    unmasked version of the vector loop (``cpp-uniform-masks``), border ones the masked
    original; NaNs propagate in both, wherever in the window they are."""

    def make() -> tuple[torch.Tensor]:
        x = torch.randn(2, 24, 9, 11)
        x[0, 3, 4, 5] = float("nan")  # interior
        x[1, 7, 0, 0] = float("nan")  # corner
        x[1, 8, 2, 0] = float("-inf")
        return (x.contiguous(memory_format=torch.channels_last),)

    check(lambda x: [F.max_pool2d(x, 3, 2, 1), F.max_pool2d(x, 3, 1, 1)], make)


@pytest.mark.parametrize("length", [1, 15, 16, 17, 40, 64, 65, 200, 1000])
def test_row_reductions_of_every_length(length: int) -> None:
    """Rows shorter and longer than the accumulator lanes (and not multiples of them)."""
    check(
        lambda x: [
            x.sum(-1),
            x.amax(-1),
            x.argmax(-1),
            torch.var_mean(x, -1, correction=0),
            F.softmax(x, -1),
        ],
        lambda: (torch.randn(5, length),),
        tolerance=(1e-5, 1e-5),
    )


def _floats_of_every_magnitude() -> torch.Tensor:
    """Random floats from 1e-40 to 10 (both signs), the erf branch points, and specials."""
    exponent = torch.rand(200_000, dtype=torch.float64) * 41 - 40
    values = (10.0**exponent).to(torch.float32)
    near = torch.tensor([0.875, 3.919206, 4.0], dtype=torch.float32)
    edges = torch.cat(
        [torch.nextafter(near, torch.zeros(3)), near, torch.nextafter(near, torch.full((3,), 9.0))]
    )
    special = torch.tensor([0.0, float("inf"), float("nan"), 1e-45, 6.0, 100.0])
    values = torch.cat([values, torch.rand(50_000) * 5, edges, special])
    return torch.cat([values, -values])


def test_float_erf_is_within_two_ulp() -> None:
    x = _floats_of_every_magnitude()
    program = build_cpp_program(lower(torch.erf, (x,)))
    assert "kiln_erff(" in program.cpp_source.split('extern "C" int kernel', 1)[1]
    (actual,) = program([x])
    exact = torch.erf(x.to(torch.float64))
    rounded = exact.to(torch.float32)
    ulp = (torch.nextafter(rounded.abs(), torch.tensor(float("inf"))) - rounded.abs()).to(
        torch.float64
    )
    ulp = torch.where(rounded.abs() == 1, ulp / 2, ulp)  # below 1 the spacing halves
    error = (actual.to(torch.float64) - exact).abs() / ulp.clamp(min=2.0**-149)
    finite = ~torch.isnan(x)
    assert error[finite].max().item() <= 1.7
    assert torch.isnan(actual[~finite]).all()
    assert torch.equal(torch.signbit(actual[finite]), torch.signbit(x[finite]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
def test_transposes_read_whole_tiles_transposed_in_registers(dtype: torch.dtype) -> None:
    """Full 16 x 16 tiles go through kiln_transpose16, the partial ones at the edges
    (here 40 = 2 * 16 + 8 rows) keep strided loads; both give eager's numbers."""

    def make() -> tuple[torch.Tensor, torch.Tensor]:
        if dtype.is_floating_point:
            return torch.randn(40, 48, dtype=dtype), torch.randn(48, 40, dtype=dtype)
        return torch.randint(-99, 99, (40, 48), dtype=dtype), torch.randint(
            -99, 99, (48, 40), dtype=dtype
        )

    program = check(lambda x, y: [x.t() + y, (x.t() * 2).contiguous()], make, threads=2)
    assert "kiln_transpose16(" in program.cpp_source.split('extern "C" int kernel', 1)[1]


def test_division_by_a_broadcast_input_stays_exact() -> None:
    """``x / y[:, None]`` divides exactly, as eager does (no reciprocal for a divisor
    that is read from an input): bit-equal results."""
    program = check(
        lambda x, y: x / y[:, None], lambda: (torch.randn(6, 300), torch.randn(6) + 3.0)
    )
    body = program.cpp_source.split('extern "C" int kernel', 1)[1]
    assert "reciprocal" not in body
    x, y = torch.randn(6, 300), torch.randn(6) + 3.0
    (out,) = program([x, y])
    assert torch.equal(out, x / y[:, None])


def test_a_roll_over_two_dims_is_one_vectorized_kernel_without_checks() -> None:
    """Swin's ``torch.roll`` over H and W: two gathers at ``(x + 3) % 56``. The second
    inlines the first (one kernel), the indices are proven in range by the loop bounds
    (no check, no error flag: the loop is ``omp simd``), and the numbers are eager's."""
    program = check(
        lambda x: torch.roll(x, shifts=(-3, 5), dims=(1, 2)) * 2,
        lambda: (torch.randn(2, 14, 10, 24),),
        runs=2,
    )
    source = program.cpp_source
    assert source.count('extern "C" int kernel') == 1
    kernel = source.split('extern "C" int kernel', 1)[1]
    assert "kiln_err" not in kernel
    assert "KILN_ERR" not in kernel
    assert "#pragma omp simd" in kernel


def test_an_index_the_loop_bounds_cannot_prove_is_still_checked() -> None:
    """A gather by an index read from a tensor keeps its check: out of range raises."""
    program = check(
        lambda x, i: x[:, i] * 2,
        lambda: (torch.randn(3, 10, 16), torch.randint(0, 10, (7,))),
    )
    with pytest.raises(IndexError):
        program([torch.randn(3, 10, 16), torch.tensor([0, 1, 10, 2, 3, 4, 5])])


def test_a_reduction_over_merged_patches_loops_over_their_dims() -> None:
    """Swin's patch merging: a LayerNorm over the 4 * 96 channels of 2 x 2 patches reads
    its input at ``r // 192``, ``r % 96`` and ``r // 96 % 2``. The reduction loops over
    ``[2, 2, 96]`` instead (the divisors of the index split the dim): no integer division
    per element, and the numbers are eager's."""

    def merge(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        n, h, wd, c = x.shape
        y = x.reshape(n, h // 2, 2, wd // 2, 2, c).permute(0, 1, 3, 4, 2, 5).flatten(3)
        return F.layer_norm(y, (4 * c,), w, b)

    program = check(
        merge, lambda: (torch.randn(2, 12, 12, 96), torch.randn(384), torch.randn(384)), runs=2
    )
    kernel = program.cpp_source.split('extern "C" int kernel', 1)[1]
    assert " % " not in kernel
    assert "r2_block" in kernel


def test_split_by_periods_splits_a_dim_at_a_chain_of_divisors() -> None:
    space = LoopSpace.of([sympy.Integer(8)], [sympy.Integer(384)])
    r = space.r_syms[0]
    x = space.x_syms[0]
    split = split_by_periods(space, [96 * floordiv(r, 192) + mod(r, 96) + 384 * x])
    assert split is not None
    assert split.r_sizes == [2, 2, 96]
    assert split.x_sizes == [8]
    # 64 and 96 are no chain: no split.
    assert split_by_periods(space, [mod(r, 96) + floordiv(r, 64)]) is None


def test_a_transpose_onto_a_narrow_inner_dim_vectorizes_along_the_wide_one() -> None:
    """ShuffleNet's channel shuffle with 2 groups writes ``[..., 116, 2]``: vectorized
    along the 2 (or tiled with it), every lane did scalar work. The loads are contiguous
    along the 116, so that loop runs innermost, vectorized, the 2 a serial loop outside."""
    program = check(
        lambda x: (x.reshape(8, 2, 116).transpose(1, 2).contiguous() + 1).relu(),
        lambda: (torch.randn(8, 232),),
        runs=2,
    )
    kernel = program.cpp_source.split('extern "C" int kernel', 1)[1]
    simd = kernel.split("#pragma omp simd", 1)[1]
    assert "< 116;" in simd.split("\n")[1]


def _shuffle_unit(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """Two ShuffleNet-v2 units over channels-last data: concatenate, shuffle the two
    groups of channels, split, concatenate with a branch, shuffle again."""
    n, h, w, k = a.shape
    x = torch.cat([a, torch.relu(b + c)], dim=3)
    x = x.view(n, h, w, 2, k).transpose(3, 4).reshape(n, h, w, 2 * k)
    first, second = x.chunk(2, dim=3)
    y = torch.cat([first, torch.relu(second) * 2], dim=3)
    return y.view(n, h, w, 2, k).transpose(3, 4).reshape(n, h, w, 2 * k)


def test_a_channel_shuffle_between_cats_divides_nothing_and_selects_inputs_per_block() -> None:
    """ShuffleNet-v2's units: each ``cat`` input's load, inlined through the shuffle's
    view, unflattened a channel that the mask bounds but the loop does not
    (``(28*d1 + d2 + d3 % 2 - 1) // 784`` at every element: the large ShuffleNet's worst
    kernel, 9 ms a call, now 3); the comparisons selecting the inputs split the channel
    loop at the offsets, and each input's block is a vectorized loop of plain loads."""
    program = check(
        _shuffle_unit,
        lambda: (torch.randn(2, 3, 5, 58), torch.randn(2, 3, 5, 58), torch.randn(58)),
        runs=2,
    )
    kernels = program.cpp_source[program.cpp_source.index("// kernel0") :]
    assert "kiln_floordiv" not in kernels
    assert "kiln_mod" not in kernels
    assert " % " not in kernels
    assert "selected" in kernels

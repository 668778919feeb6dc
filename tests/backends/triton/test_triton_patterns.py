"""Every lowering pattern of lower-to-triton, run as Triton kernels and compared with eager.

Pointwise kernels (broadcasts, dtypes, integer semantics, math functions, masks,
indirect loads, 2-D tiles) and every reduction kind, persistent and looped, split
reductions and multi-loop fused reductions, on small random inputs.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from triton_checks import check, kernel_kinds, looped, persistent, randn

# -- pointwise ---------------------------------------------------------------------------


def test_pointwise_broadcast_add_relu() -> None:
    compiled = check(lambda x, y: torch.relu(x + y) * 2.0, randn(6, 10), randn(10))
    assert kernel_kinds(compiled) == ["pointwise"]
    assert "kiln_poi_fused" in compiled.program.source


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_computes_in_f32(dtype: torch.dtype) -> None:
    compiled = check(
        lambda x, y: torch.sigmoid(x) * y + 1.0, randn(5, 7, dtype=dtype), randn(7, dtype=dtype)
    )
    assert ".to(tl.float32)" in compiled.program.source


def test_integer_semantics() -> None:
    a = torch.randint(-50, 50, (33,))
    b = torch.randint(1, 7, (33,)) * torch.where(torch.rand(33) < 0.5, -1, 1)
    check(
        lambda a, b: (a // b, torch.remainder(a, b), torch.fmod(a, b), a.abs() & 5, a > b),
        a,
        b,
    )


def test_math_functions() -> None:
    x = torch.rand(40) * 1.8 - 0.9  # inside every function's domain
    check(
        lambda x: (
            torch.tanh(x),
            torch.expm1(x),
            torch.log1p(x),
            torch.erf(x),
            torch.atan(x),
            torch.asin(x),
            torch.sinh(x),
            torch.exp2(x),
            torch.rsqrt(x.abs() + 1),
            torch.atan2(x, x + 2),
            torch.pow(x.abs() + 0.5, x),
            torch.round(x * 4),
            torch.trunc(x * 3),
            torch.sign(x),
            torch.copysign(x, -x),
        ),
        x,
    )


def test_small_integer_powers_are_multiplications() -> None:
    """``pow(x, 3)`` (GPT-2's GELU) is ``x * x * x`` as ATen's own kernel computes it, not
    libdevice's ``pow`` (log + exp: the GELU kernel ran 2.3x Inductor's time on the H200)."""
    x = randn(64, 48)
    compiled = check(
        lambda x: (
            0.5 * x * (1 + torch.tanh(0.79788456 * (x + 0.044715 * torch.pow(x, 3.0)))),
            torch.pow(x, -2),
            torch.pow(x.abs() + 0.1, -0.5),
        ),
        x,
    )
    source = compiled.program.source
    assert "libdevice.pow" not in source
    assert "rsqrt" in source


def test_math_functions_of_0d_tensors() -> None:
    """A libdevice function of scalars (0-d tensors) is a scalar: the interpreter's NumPy
    shim returned a 1-element block, whose store into a scalar pointer failed (OpInfo's
    pow, logaddexp, binary_cross_entropy_with_logits)."""
    x, y = torch.rand(()) + 0.5, torch.randn(())
    check(lambda x, y: (torch.pow(x, y), torch.logaddexp(x, y), torch.atan2(y, x)), x, y)
    check(lambda x, y: torch.log1p(x) + y, x, randn(3, 4))  # scalar result broadcast


def test_where_and_nan_propagation() -> None:
    x = randn(24)
    x[3] = float("nan")
    check(
        lambda x, y: (torch.maximum(x, y), torch.where(x > y, x, y * 2), torch.clamp(x, -0.5, 0.5)),
        x,
        randn(24),
    )


def test_masked_loads_padding() -> None:
    check(lambda x: F.pad(x, (2, 1, 0, 3), value=-1.5) + 1, randn(3, 5))
    check(lambda x: F.pad(x, (2, 2), mode="reflect") * 2, randn(2, 3, 7))


def test_indirect_loads() -> None:
    weight = randn(11, 6)
    index = torch.tensor([[3, 0, 10], [7, 7, 1]])
    check(lambda w, i: F.embedding(i, w) * 2, weight, index)
    check(lambda x, i: torch.gather(x, 1, i) + 1, randn(4, 9), torch.randint(0, 9, (4, 5)))


def test_two_dimensional_tile_transpose() -> None:
    compiled = check(lambda x: x.transpose(0, 1).contiguous() + 1.0, randn(48, 40))
    from kiln.dialects.triton import KernelOp

    assert any(op.ynumel is not None for op in compiled.module.ops if isinstance(op, KernelOp))
    assert "tl.program_id(1)" in compiled.program.source


# -- reductions --------------------------------------------------------------------------

REDUCTIONS = {
    "sum": lambda x: x.sum(-1),
    "prod": lambda x: (x * 0.3 + 1).prod(-1),
    "amax": lambda x: x.amax(-1),
    "amin": lambda x: x.amin(-1),
    "argmax": lambda x: x.argmax(-1),
    "argmin": lambda x: x.argmin(-1),
    "any": lambda x: (x > 1.0).any(-1),
    "all": lambda x: (x > -1.5).all(-1),
    "var_mean": lambda x: torch.var_mean(x, -1),
    "int_sum": lambda x: (x * 10).to(torch.int64).sum(-1),
}


def _reduction_input() -> torch.Tensor:
    x = randn(5, 37)
    x[1, 4] = float("nan")  # NaN wins max/min/argmax/argmin, as in torch
    x[2, 7] = x[2, 20] = 5.0  # ties: the first index wins
    return x


@pytest.mark.parametrize("strategy", ["persistent", "looped"])
@pytest.mark.parametrize("kind", sorted(REDUCTIONS))
def test_reduction(kind: str, strategy: str) -> None:
    retile = persistent() if strategy == "persistent" else looped(rblock=8)
    compiled = check(REDUCTIONS[kind], _reduction_input(), retile=retile)
    assert strategy in kernel_kinds(compiled)


def test_half_precision_sum_accumulates_in_f32() -> None:
    x = (torch.rand(3, 300) + 0.5).to(torch.float16)
    for retile in (persistent(), looped(rblock=32)):
        check(lambda x: x.sum(-1), x, retile=retile)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("kind", ["amax", "amin", "argmax", "argmin"])
def test_half_precision_max_min_of_signed_values(kind: str, dtype: torch.dtype) -> None:
    # Mixed signs: Triton's interpreter compared bfloat16 as raw bits (negatives "larger").
    x = _reduction_input().to(dtype)
    for retile in (persistent(), looped(rblock=8)):
        check(REDUCTIONS[kind], x, retile=retile)


def test_residual_output_of_a_looped_norm_is_not_written_over_its_input() -> None:
    # h = x + x @ w is returned and normalized: the second pass recomputes h from the
    # product, so writing h in place over the product would feed it h instead.
    def fn(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = x + x @ w
        return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6), h

    for retile in (persistent(), looped(rblock=8)):
        check(fn, randn(4, 32), randn(32, 32), retile=retile)


def test_split_reduction() -> None:
    compiled = check(lambda x: (x * x).sum(), randn(16384), retile=looped(rblock=256, xblock=4))
    assert "split" in kernel_kinds(compiled)


@pytest.mark.parametrize("strategy", ["persistent", "looped"])
def test_softmax_and_layer_norm_fused(strategy: str) -> None:
    retile = persistent() if strategy == "persistent" else looped(rblock=16)
    compiled = check(
        lambda x, w, b: (torch.softmax(x, -1), F.layer_norm(x, (50,), w, b)),
        randn(6, 50),
        randn(50),
        randn(50),
        retile=retile,
    )
    if strategy == "looped":
        # one kernel: every statistic (max and online exp-sum, mean and variance) in a
        # first loop over r, both normalized outputs in a second
        assert compiled.program.source.count("for roffset") == 2


def test_online_softmax_saves_a_pass() -> None:
    x = randn(6, 50)
    x[2] = float("-inf")  # a fully masked row: NaN, as in eager
    x[3, 5] = float("nan")
    compiled = check(lambda x: torch.softmax(x, -1), x, retile=looped(rblock=16))
    # max and exp-sum in one loop (the sum rescaled as the max grows), then the store
    assert compiled.program.source.count("for roffset") == 2
    check(
        lambda x, t: F.cross_entropy(x, t),
        randn(6, 50),
        torch.randint(0, 50, (6,)),
        retile=looped(rblock=16),
    )


def test_outer_reduction() -> None:
    check(lambda x: x.sum(0) + x.amax(0), randn(33, 6), retile=looped(rblock=4))

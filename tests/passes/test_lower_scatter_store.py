"""lower-aten of non-accumulating scatters (``scatter.value``, ``scatter.src``,
``index_put`` without accumulate): lowered only where the result is exact whatever the
duplicate indices (one index per row: a pointwise select; one value written everywhere:
an i32 hit count, then ``where``), ATen otherwise. Compared with eager on fresh inputs
with duplicate (and, where eager wraps them, negative) indices."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch
from lower_aten_checks import assert_same, function, interpret
from test_lower_scatter import lowered, ops

from kiln.dialects.loop import ScatterOp


def check(fn: Callable[..., Any], make: Callable[[], Sequence[Any]]) -> list[str]:
    """Lower ``fn``, compare the loop interpreter with eager on fresh inputs; its ops."""
    module = lowered(fn, make())
    for _ in range(2):
        inputs = list(make())
        assert_same(interpret(module, inputs), fn(*[t.clone() for t in inputs]))
    return ops(module)


def _zeros_scatter(t: torch.Tensor) -> torch.Tensor:
    return torch.zeros(6, 5).scatter(1, t, -1.0)


def test_nll_style_scatter_of_a_value_is_a_pointwise_select() -> None:
    """``nll_loss_backward``'s ``scatter(zeros, 1, target, -1.0)``: one index per row, so
    no position is written twice: no scatter, no ATen."""
    found = check(_zeros_scatter, lambda: (torch.randint(0, 5, (6, 1)),))
    assert found == ["loop.pointwise", "loop.pointwise"]  # zeros, then the select


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.bool])
def test_one_per_row_src_into_non_zero_self(dtype: torch.dtype) -> None:
    """``scatter.src`` with one index per row (dim 0, negative dim): exact, any dtype."""

    def fn(x: torch.Tensor, i: torch.Tensor, s: torch.Tensor) -> Any:
        return x.scatter(0, i, s), x.scatter(-2, i, s)

    def make() -> tuple[torch.Tensor, ...]:
        x = torch.randn(4, 6)
        s = torch.randn(2, 7)
        if dtype is torch.bool:
            return x > 0, torch.randint(0, 4, (1, 6)), s > 0
        return x.to(dtype), torch.randint(0, 4, (1, 6)), s.to(dtype)

    found = check(fn, make)
    assert "loop.scatter" not in found
    assert "loop.extern" not in found


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_value_scatter_with_duplicates_counts_hits(dtype: torch.dtype) -> None:
    """Many indices per row, repeated, fewer rows than ``self``: every write is the same
    value, so ``where(hits != 0, value, self)`` is exact (the hits an i32 scatter: no
    atomics of ``dtype`` needed)."""

    def fn(x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
        return x.scatter(1, i, 3)

    def make() -> tuple[torch.Tensor, ...]:
        x = torch.randint(-5, 5, (5, 8)).to(dtype)
        return x, torch.randint(0, 8, (3, 12))

    found = check(fn, make)
    assert found == ["loop.scatter", "loop.pointwise"]
    module = lowered(fn, make())
    (scatter,) = [o for o in function(module).body.block.ops if isinstance(o, ScatterOp)]
    assert str(scatter.result.type) == "memref<5x8xi32>"


def test_value_scatter_negative_index_raises_like_eager() -> None:
    """scatter does not wrap negative indices: eager raises, so does kiln."""
    for fn, width in ((_zeros_scatter, 1), (lambda t: torch.zeros(6, 5).scatter(1, t, 2.0), 3)):
        module = lowered(fn, (torch.randint(0, 5, (6, width)),))
        bad = torch.randint(0, 5, (6, width))
        bad[2, 0] = -1
        with pytest.raises(RuntimeError):
            fn(bad)
        with pytest.raises(IndexError, match="out of bounds"):
            interpret(module, [bad])


def test_src_scatter_with_repeated_positions_stays_aten() -> None:
    """Several values where positions may repeat: eager keeps an unspecified one."""
    found = check(
        lambda x, i, s: x.scatter(1, i, s),
        lambda: (
            torch.randn(3, 6),
            torch.randint(0, 6, (3, 1)).expand(3, 2).clone(),
            torch.randn(3, 2),
        ),
    )
    assert found == ["loop.extern"]


def test_src_scatter_of_a_constant_counts_hits() -> None:
    found = check(
        lambda x, i: x.scatter(1, i, torch.full((3, 4), 2.5)),
        lambda: (torch.randn(3, 6), torch.randint(0, 6, (3, 4))),
    )
    assert "loop.scatter" in found
    assert "loop.extern" not in found


def _rows(n: int, size: int) -> torch.Tensor:
    """Indices with many duplicates and some negative ones (counted from the end)."""
    return torch.randint(-size, size, (n,))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bool])
def test_index_put_of_one_value_with_duplicates(dtype: torch.dtype) -> None:
    def fn(x: torch.Tensor, i: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return torch.index_put(x, (i,), v)

    def make() -> tuple[torch.Tensor, ...]:
        x, v = torch.randn(5, 3), torch.randn(())
        if dtype is torch.bool:
            return x > 0, _rows(12, 5), torch.tensor(True)
        return x.to(dtype), _rows(12, 5), v.to(dtype)

    assert check(fn, make) == ["loop.scatter", "loop.pointwise"]


def test_index_put_two_indices_of_a_broadcast_row() -> None:
    """``x[i, j] = v`` with ``v`` one element of shape [1, 1]."""
    found = check(
        lambda x, i, j, v: torch.index_put(x, (i, j), v),
        lambda: (torch.randn(4, 6, 2), _rows(9, 4), torch.randint(0, 6, (9,)), torch.randn(1, 1)),
    )
    assert found == ["loop.scatter", "loop.pointwise"]


def test_index_put_of_several_values_stays_aten() -> None:
    found = check(
        lambda x, i, v: torch.index_put(x, (i,), v),
        lambda: (torch.randn(5, 3), torch.randint(0, 5, (4,)), torch.randn(4, 3)),
    )
    assert found == ["loop.extern"]


@pytest.mark.parametrize("mask_shape", [(5,), (5, 3)])
def test_boolean_mask_index_put_is_a_where(mask_shape: tuple[int, ...]) -> None:
    """``x[mask] = v`` with one value: ``where(mask, v, x)``, no scatter."""
    found = check(
        lambda x, m, v: torch.index_put(x, (m,), v),
        lambda: (torch.randn(5, 3), torch.rand(mask_shape) > 0.5, torch.randn(())),
    )
    assert found == ["loop.pointwise"]


def test_nll_loss_backward_fuses_with_the_log_softmax_gradient() -> None:
    """Cross-entropy's backward: the one-hot select of ``nll_loss_backward`` and the
    ``log_softmax`` gradient land in the same kernels (no launch for the scatter)."""
    from kiln.dialects.kernel.interpreter import run_program
    from kiln.dialects.kernel.kernel_ops import KernelOp
    from kiln.registry import default_registry

    def fn(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        x = x.detach().requires_grad_(True)
        loss = torch.nn.functional.cross_entropy(x, t)
        (g,) = torch.autograd.grad(loss, x)
        return g

    make = lambda: (torch.randn(6, 10), torch.randint(0, 10, (6,)))  # noqa: E731
    module = lowered(fn, make())
    assert "loop.extern" not in ops(module)
    assert "loop.scatter" not in ops(module)
    registry = default_registry()
    ctx = registry.make_context()
    for name in ("fuse", "tile", "buffer-reuse"):
        registry.get_pass(name)().apply(ctx, module)
    kernels = [k for k in module.walk() if isinstance(k, KernelOp)]
    # log_softmax's max and sum of exp (one or two reductions), then one pointwise
    # gradient kernel holding the one-hot select.
    assert len(kernels) <= 3, [k.sym_name.data for k in kernels]
    for _ in range(2):
        inputs = list(make())
        (out,), _ = run_program(module, inputs)
        assert_same(out, fn(*inputs))


@pytest.mark.parametrize("sm90", [False, True])
def test_bf16_atomics_on_cuda_follow_the_device(
    monkeypatch: pytest.MonkeyPatch, sm90: bool
) -> None:
    """A bf16 accumulating scatter for CUDA is a ``loop.scatter`` when the device has
    bf16 atomics (sm90: asked of the device at compile time), else ATen."""
    from kiln.passes.aten_to_loop import scatter

    monkeypatch.setattr(scatter, "cuda_bf16_atomics", lambda device: sm90)
    fn = lambda x, i, v: torch.index_put(x, (i,), v, accumulate=True)  # noqa: E731
    x = torch.randn(5, 3).to(torch.bfloat16)
    found = ops(lowered(fn, (x, _rows(4, 5), x[:4]), "cuda:0"))
    assert ("loop.scatter" in found) is sm90
    assert ("loop.extern" in found) is not sm90


def test_no_bf16_atomics_without_a_gpu_of_sm90() -> None:
    from kiln.passes.aten_to_loop.scatter import cuda_bf16_atomics

    assert not cuda_bf16_atomics("cpu")
    if not torch.cuda.is_available():
        assert not cuda_bf16_atomics("cuda:0")


def test_hit_counts_stay_lowered_in_deterministic_mode() -> None:
    """Integer atomic adds give the same counts in any order: the value scatter is
    deterministic, unlike a float accumulation (which stays ATen there)."""
    fn = lambda x, i: x.scatter(1, i, 3.0)  # noqa: E731
    torch.use_deterministic_algorithms(True)
    try:
        module = lowered(fn, (torch.randn(5, 8), torch.randint(0, 8, (5, 12))))
    finally:
        torch.use_deterministic_algorithms(False)
    assert ops(module) == ["loop.scatter", "loop.pointwise"]

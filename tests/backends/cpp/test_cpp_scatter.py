"""Accumulating scatters in the C++ backend: ``#pragma omp atomic`` adds, in parallel
loops (``threads=2``) with many duplicate indices, against eager on fresh inputs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch
from cpp_checks import check, lower

from kiln.backends.cpp.emit import emit_module
from kiln.registry import default_registry


def _index_put(x: torch.Tensor, i: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return torch.index_put(x, (i,), v * 2, accumulate=True)


def _embedding_backward(g: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
    return torch.ops.aten.embedding_dense_backward(g, i, 50, 3, False)


CASES: dict[str, tuple[Callable[..., Any], Callable[[], Sequence[Any]]]] = {
    "index_put_f32_negative": (
        _index_put,
        lambda: (torch.randn(7, 33), torch.randint(-7, 7, (300,)), torch.randn(300, 33)),
    ),
    "index_put_f64_2d_index": (
        lambda x, i, v: torch.index_put(x, (i,), v, accumulate=True),
        lambda: (
            torch.randn(6, 5, dtype=torch.float64),
            torch.randint(0, 6, (4, 9)),
            torch.randn(5, dtype=torch.float64),
        ),
    ),
    "index_put_i32": (
        lambda x, i, v: torch.index_put(x, (i,), v, accumulate=True),
        lambda: (
            torch.randint(-50, 50, (9,), dtype=torch.int32),
            torch.randint(-9, 9, (500,)),
            torch.randint(-50, 50, (500,), dtype=torch.int32),
        ),
    ),
    "index_put_i64_two_indices": (
        lambda x, i, j, v: torch.index_put(x, (i, j), v, accumulate=True),
        lambda: (
            torch.randint(-50, 50, (4, 5)),
            torch.randint(0, 4, (200,)),
            torch.randint(-5, 5, (200,)),
            torch.randint(-50, 50, (200,)),
        ),
    ),
    "scatter_add": (
        lambda x, i, s: x.scatter_add(0, i, s).relu(),
        lambda: (torch.randn(5, 40), torch.randint(0, 5, (64, 40)), torch.randn(64, 41)),
    ),
    "embedding_backward_padding_idx": (
        _embedding_backward,
        lambda: (torch.randn(4, 64, 16), torch.randint(0, 50, (4, 64))),
    ),
    # Non-accumulating scatters that are exact (tests/passes/test_lower_scatter_store.py).
    "scatter_value_one_per_row": (
        lambda g, t: torch.zeros(64, 40).scatter(1, t, -1.0) * g,
        lambda: (torch.randn(64, 1), torch.randint(0, 40, (64, 1))),
    ),
    "scatter_value_duplicates_bf16": (
        lambda x, i: x.scatter(1, i, 2.5),
        lambda: (torch.randn(6, 40).to(torch.bfloat16), torch.randint(0, 40, (6, 90))),
    ),
    "index_put_one_value_negative": (
        lambda x, i, v: torch.index_put(x, (i,), v),
        lambda: (torch.randn(9, 33), torch.randint(-9, 9, (300,)), torch.randn(())),
    ),
    "index_put_bool_mask": (
        lambda x, m, v: torch.index_put(x, (m,), v),
        lambda: (torch.randn(9, 33), torch.rand(9) > 0.5, torch.randn(())),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_scatter(name: str) -> None:
    fn, make = CASES[name]
    check(fn, make, threads=2, runs=2)


def test_atomic_add_is_emitted_in_scalar_loops() -> None:
    fn, make = CASES["index_put_f32_negative"]
    module = lower(fn, make(), "decompose,canonicalize,cse,dce,lower-aten,fuse,tile,buffer-reuse")
    registry = default_registry()
    registry.get_pass("lower-to-cpp")().apply(registry.make_context(), module)
    text = emit_module(module)
    assert "#pragma omp atomic" in text
    atomic_kernel = text[text.index("scatter-add") :]
    atomic_kernel = atomic_kernel[: atomic_kernel.index("\n}")]
    assert "simd" not in atomic_kernel


def test_out_of_range_index_raises() -> None:
    fn, make = CASES["index_put_f32_negative"]

    program = check(fn, make)
    x, i, v = make()
    i[17] = 7
    with pytest.raises(IndexError):
        fn(x, i, v)
    with pytest.raises(IndexError, match="index out of bounds"):
        program([x, i, v])


class _Tagger(torch.nn.Module):
    def __init__(self, scale_grad_by_freq: bool) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(30, 8, padding_idx=2, scale_grad_by_freq=scale_grad_by_freq)
        self.head = torch.nn.Linear(8, 3)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.embed(ids).tanh())


@pytest.mark.parametrize(("executor", "scale_grad_by_freq"), [("cpp", False), ("interpret", True)])
def test_embedding_training_step(executor: str, scale_grad_by_freq: bool) -> None:
    """A real ``nn.Embedding`` training step through torch.compile: the gradients of the
    embedding (padding row included) match eager's."""
    import copy

    torch.manual_seed(0)
    eager = _Tagger(scale_grad_by_freq)
    compiled = copy.deepcopy(eager)
    step = torch.compile(compiled, backend="kiln", options={"executor": executor})
    for _ in range(2):
        ids = torch.randint(0, 30, (4, 12))
        ids[0, :3] = 2  # the padding row gets no gradient
        weights = torch.randn(4, 12, 3)
        (eager(ids) * weights).sum().backward()
        (step(ids) * weights).sum().backward()
    for a, b in zip(compiled.parameters(), eager.parameters(), strict=True):
        assert a.grad is not None
        assert b.grad is not None
        torch.testing.assert_close(a.grad, b.grad, atol=1e-5, rtol=1e-5)


def test_scatter_accumulates_onto_the_product_it_is_added_to() -> None:
    """A tied embedding's weight gradient (the LM head's product plus the embedding's
    scatter): the C++ scatter's atomic adds land on the product, with eager's numbers
    (64 ids over 100 rows: repeated rows)."""

    def tied(ids: torch.Tensor, g: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> Any:
        return a.t() @ b + torch.zeros(100, 16).index_put((ids,), g, accumulate=True)

    def make() -> list[torch.Tensor]:
        ids = torch.randint(0, 100, (64,))
        return [ids, torch.randn(64, 16), torch.randn(32, 100), torch.randn(32, 16)]

    check(tied, make, runs=2)
    assert "kernel.alloc" not in str(lower(tied, make()))  # onto the product's buffer

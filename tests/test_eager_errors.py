"""Inputs eager rejects must raise under kiln too, never compute something (issue 20).

Each case runs through ``torch.compile(backend="kiln")`` and compares with eager: the
same exception class (and the dimension or dtype named in the message), or, where eager
computes, the same values.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

import kiln


def _eager_error(fn: Callable[..., object], *inputs: torch.Tensor) -> Exception:
    try:
        fn(*inputs)
    except Exception as e:  # what eager raises is the expectation
        return e
    raise AssertionError("eager accepted the inputs")


def _raises_like_eager(fn: Callable[..., object], *inputs: torch.Tensor) -> None:
    expected = _eager_error(fn, *inputs)
    compiled = kiln.compile(fn, verbose=False)
    with pytest.raises(type(expected)):
        compiled(*inputs)


# --- dtypes eager's kernels reject (their meta functions accept them) --------------------

_BOOL = torch.tensor([True, False, True])
_INT = torch.tensor([3, -1, 2])
_FLOAT = torch.tensor([1.5, -2.0, 0.25])


@pytest.mark.parametrize(
    ("fn", "inputs"),
    [
        (torch.abs, (_BOOL,)),
        (lambda x: x.abs() | x, (_BOOL,)),
        (torch.relu, (_BOOL,)),
        (torch.ceil, (_BOOL,)),
        (lambda x: F.silu(x) * 2, (_INT,)),  # decompose must keep silu of int
        (lambda x: F.gelu(x) + 1, (_INT,)),
        (torch.hypot, (_INT, _INT)),
        (lambda x, y: torch.lerp(x, y, 0.5), (_INT, _INT)),
        (torch.bitwise_and, (_FLOAT, _FLOAT)),
        (torch.bitwise_not, (_FLOAT,)),
    ],
    ids=[
        "abs-bool",
        "abs-bool-fused",
        "relu-bool",
        "ceil-bool",
        "silu-int",
        "gelu-int",
        "hypot-int",
        "lerp-int",
        "bitwise_and-float",
        "bitwise_not-float",
    ],
)
def test_dtype_eager_rejects_raises(
    fn: Callable[..., object], inputs: tuple[torch.Tensor, ...]
) -> None:
    _raises_like_eager(fn, *inputs)


def test_dtype_probe_keeps_supported_ops_native() -> None:
    from kiln.compiler import last_compile_stats

    def fn(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return x.abs() + F.silu(x) + (b ^ (x > 0)).float()

    x, b = torch.randn(16), torch.rand(16) > 0.5
    torch.testing.assert_close(kiln.compile(fn, verbose=False)(x, b), fn(x, b))
    stats = last_compile_stats()
    assert not stats.externs, stats.externs


# --- indirect indices outside the dimension they index ----------------------------------


def _gather(x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
    return torch.gather(x, 1, i)


def _index_select(x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
    return torch.index_select(x, 1, i) + 1


def _embedding(w: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
    return F.embedding(i, w) * 2


def _advanced(x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
    return x[:, i] - 1


def _cross_entropy(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(x, t)


_X46 = torch.randn(4, 6)
_INDEX_CASES = [
    # The example: index 6 of a dim of 6 read the next row's element 0.
    ("gather-past-end", _gather, _X46, [[0], [6], [1], [2]]),
    ("gather-negative", _gather, _X46, [[0], [-1], [1], [2]]),
    ("index_select-past-end", _index_select, _X46, [0, 6]),
    ("index_select-negative", _index_select, _X46, [-1, 2]),
    ("embedding-past-end", _embedding, torch.randn(10, 8), [[1, 10], [0, 3]]),
    ("embedding-negative", _embedding, torch.randn(10, 8), [[1, -1], [0, 3]]),
    ("advanced-past-end", _advanced, _X46, [0, 6]),
    ("advanced-below-minus-size", _advanced, _X46, [0, -7]),
    ("cross_entropy-5-of-5", _cross_entropy, torch.randn(4, 5), [1, 5, 4, 0]),
    ("cross_entropy-negative", _cross_entropy, torch.randn(4, 5), [1, -1, 4, 0]),
    ("cross_entropy-7", _cross_entropy, torch.randn(4, 5), [1, 7, 4, 0]),
]


@pytest.mark.parametrize("executor", ["cpp", "interpret"])
@pytest.mark.parametrize(
    ("fn", "x", "index"),
    [case[1:] for case in _INDEX_CASES],
    ids=[case[0] for case in _INDEX_CASES],
)
def test_out_of_range_index_raises(
    executor: str, fn: Callable[..., torch.Tensor], x: torch.Tensor, index: list[int]
) -> None:
    bad = torch.tensor(index)
    expected = _eager_error(fn, x, bad)
    compiled = kiln.compile(fn, verbose=False, executor=executor)
    with pytest.raises(type(expected)):
        compiled(x, bad)


@pytest.mark.parametrize("executor", ["cpp", "interpret"])
def test_in_range_indices_still_compute(executor: str) -> None:
    """The checks reject nothing eager accepts: the last row, and negative indices where
    advanced indexing wraps them."""
    x, w = torch.randn(4, 6), torch.randn(10, 8)

    def fn(x: torch.Tensor, w: torch.Tensor, i: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
        return torch.gather(x, 1, i).sum() + F.embedding(j, w).sum() + x[:, j % 6 - 6].sum()

    i = torch.tensor([[5], [0], [3], [5]])
    j = torch.tensor([9, 0, 3])
    compiled = kiln.compile(fn, verbose=False, executor=executor)
    torch.testing.assert_close(compiled(x, w, i, j), fn(x, w, i, j))

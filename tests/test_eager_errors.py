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


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> None:
    torch._dynamo.reset()


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

"""Cases for ``torch.compile(..., backend="kiln", dynamic=True)`` against eager, shared
by the C++ (``tests/backends/cpp/test_cpp_dynamic.py``) and the Triton interpreter
(``tests/backends/triton/test_triton_dynamic.py``) tests: views with symbolic sizes
(uneven chunk/split, slices, expand), host arithmetic on sizes (``sym_float``, ``pow``,
``trunc``, floor/ceil division, min/max, sqrt)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch
import torch.nn.functional as F

Case = Callable[..., object]


def run_dynamic(
    fn: Case,
    shapes: Sequence[Sequence[int]] | Sequence[Sequence[Sequence[int]]],
    executor: str = "cpp",
    check_strides: bool = True,
    options: dict[str, str] | None = None,
    device: str | torch.device = "cpu",
) -> None:
    """Compile ``fn`` once with dynamic shapes; every shape (or tuple of shapes, one per
    argument) must give eager's values, shapes and strides."""
    settings: dict[str, Any] = {"verbose": False, "executor": executor, **(options or {})}
    compiled: Any = torch.compile(fn, backend="kiln", dynamic=True, options=settings)
    with torch._dynamo.config.patch(cache_size_limit=64):
        for shape in shapes:
            shape_list: list[Any] = list(shape) if isinstance(shape[0], list | tuple) else [shape]
            inputs = [torch.randn(*s, device=device) for s in shape_list]
            expected = fn(*inputs)
            actual = compiled(*inputs)
            _compare(actual, expected, check_strides, f"shapes {shape_list}")


def _compare(actual: object, expected: object, check_strides: bool, where: str) -> None:
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), where
        assert actual.shape == expected.shape, where
        torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5, msg=where)
        if check_strides:
            big = [d for d in range(expected.dim()) if expected.shape[d] > 1]
            assert [actual.stride(d) for d in big] == [expected.stride(d) for d in big], where
    elif isinstance(expected, list | tuple):
        assert isinstance(actual, list | tuple), where
        assert len(actual) == len(expected), where
        for a, e in zip(actual, expected, strict=True):
            _compare(a, e, check_strides, where)
    else:
        assert actual == pytest.approx(expected), where


SIZES_2D = [(3, 7), (4, 10), (2, 13), (5, 24)]

VIEW_CASES: dict[str, Case] = {
    # A view of the input returned as it is (AOTAutograd rebuilds it from the input).
    "chunk_view": lambda x: torch.chunk(x, 6, 1)[1],
    "chunk_last_view": lambda x: torch.chunk(x, 3, 1)[-1],
    "chunk_math": lambda x: torch.chunk(x, 6, 1)[1] * 2 + torch.chunk(x, 6, 1)[0],
    "chunk_cat": lambda x: torch.cat([c * (i + 1) for i, c in enumerate(torch.chunk(x, 3, 1))], 1),
    "tensor_split_view": lambda x: torch.tensor_split(x, 3, 1)[1],
    "tensor_split_math": lambda x: [t.exp() for t in torch.tensor_split(x, 3, 1)],
    "split_symbolic": lambda x: [t + 1 for t in torch.split(x, x.shape[1] // 3 + 1, 1)],
    "split_symbolic_view": lambda x: torch.split(x, x.shape[1] // 3 + 1, 1)[1],
    "narrow_symbolic": lambda x: x.narrow(1, 1, x.shape[1] - 2) * 3,
    "narrow_symbolic_view": lambda x: x.narrow(1, 1, x.shape[1] - 2),
    "slice_half": lambda x: x[:, x.shape[1] // 2 :] - x[:, : x.shape[1] - x.shape[1] // 2],
    "slice_empty": lambda x: torch.cat([x[:, 5:2], x * 2, x[:, 6:3]], 1),
    "expand": lambda x: x[:, :1].expand(-1, x.shape[1]) + x,
    "expand_view": lambda x: x[:, :1].expand(-1, x.shape[1]),
    "expand_bigger_view": lambda x: x.unsqueeze(0).expand(3, -1, -1),
    "narrow_start_view": lambda x: x.narrow(1, x.shape[1] // 2, 2),
    "as_strided_view": lambda x: x.as_strided((x.shape[0], 2), (x.shape[1], 1), 1),
    "as_strided_offset_view": lambda x: x.as_strided((1, 2), (x.shape[1], 1), x.shape[1]),
    "broadcast": lambda x: x.sum(1, keepdim=True) * x.unsqueeze(0),
}


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v)


ARITH_CASES: dict[str, Case] = {
    "sym_float": lambda x: x * (x.shape[1] / 3.0),
    "sym_float_mean": lambda x: x.sum(1) / float(x.shape[1]),
    "pow": lambda x: x * (x.shape[1] ** 0.5),
    "pow_int": lambda x: x * (x.shape[1] ** 2),
    "sqrt": lambda x: x / math.sqrt(x.shape[1]),
    "trunc": lambda x: x * math.trunc(x.shape[1] / 3),
    "floor_ceil": lambda x: x * math.floor(x.shape[1] / 4) + math.ceil(x.shape[1] / 4),
    "min_max": lambda x: (
        x * torch.sym_min(x.shape[0], x.shape[1]) + torch.sym_max(x.shape[0], x.shape[1])
    ),
    "float_min_max": lambda x: x * min(x.shape[1] / 2.0, 3.5) + max(x.shape[0] * 0.5, 1.25),
    "pow_neg_half": lambda x: x * x.shape[1] ** -0.5,
    "float_size_to_view": lambda x: x[:, : math.trunc(x.shape[1] * 0.5)] * 2,
    "attention_scale": lambda x: torch.softmax((x @ x.t()) * (x.shape[-1] ** -0.5), -1),
}

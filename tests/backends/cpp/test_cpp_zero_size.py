"""Zero-size dims: every shape with a 0 compiles and runs as eager does.

Kernels over an empty space are not emitted (their index algebra divided by the empty
dims' strides: ``ZeroDivisionError: index expression divides by zero``), nodes with an
empty space are not fused into others (they ran over the other's points), and
reductions without identity (max/min/argmax/argmin) over an empty dim raise eager's
error through ATen instead of returning ``-inf``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import sympy
import torch
import torch.utils._pytree as pytree

from kiln.compiler import CompileOptions, compile_graph
from kiln.dialects.loop.expr import floordiv, mod
from kiln.frontends.capture import capture_make_fx

CASES: dict[str, tuple[Callable[..., Any], tuple[tuple[int, ...], ...]]] = {
    "eye_0": (lambda: torch.eye(0), ()),
    "eye_of_empty_plus_sum": (lambda x: torch.eye(x.shape[0]) + x.sum(), ((0, 3),)),
    "block_diag_empty_cols": (lambda a, b: torch.block_diag(a, b) * 2.0, ((2, 0), (3, 2))),
    "block_diag_empty_rows": (lambda a, b: torch.block_diag(a, b), ((0, 2), (3, 0))),
    "softmax_logsumexp_over_empty": (lambda x: (x.softmax(-1), x.logsumexp(-1)), ((4, 0),)),
    "max_over_kept_dim_of_empty": (lambda x: x.max(1).values + 1.0, ((0, 4),)),
    "sum_prod_over_empty": (lambda x: (x.sum(0), x.prod(0) * 2.0), ((0, 4),)),
    # An empty tensor constant (HF GPT-2/LLaMA/T5 on CUDA): IndexError in lowering before.
    "empty_tensor_constant": (
        lambda x: (torch.cat([x, torch.tensor([])]) * 2.0, torch.tensor([]) + 1.0),
        ((5,),),
    ),
}


def run(fn: Callable[..., Any], inputs: list[torch.Tensor], executor: str) -> Any:
    cap = capture_make_fx(fn, *inputs)
    options = CompileOptions(executor=executor, verbose=False)  # pyright: ignore[reportArgumentType]
    return compile_graph(cap.gm, cap.example_inputs, options)(*inputs)


@pytest.mark.parametrize("name", list(CASES))
def test_zero_size_graph_matches_eager(name: str) -> None:
    fn, shapes = CASES[name]
    inputs = [torch.randn(s) for s in shapes]
    expected = pytree.tree_leaves(fn(*inputs))
    actual = pytree.tree_leaves(run(fn, inputs, "cpp"))
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected, strict=True):
        assert a.shape == e.shape
        torch.testing.assert_close(a, e)


def test_reductions_without_identity_over_an_empty_dim_raise() -> None:
    executor = "cpp"
    with pytest.raises(IndexError, match="non-zero size"):
        run(lambda x: x.max(0).values, [torch.randn(0, 4)], executor)
    with pytest.raises(IndexError, match="non-zero size"):
        run(lambda x: torch.min(x, 0).indices, [torch.randn(0, 4)], executor)


def test_index_algebra_over_an_empty_dim_is_defined() -> None:
    d = sympy.Symbol("d0", integer=True, nonnegative=True)
    assert floordiv(d, 0) == 0
    assert mod(d, 0) == 0

"""Normalizations' saved statistics: the dtype rule kiln declares them by is what eager's
kernels return, and the verifier accepts IR declaring it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch._subclasses import FakeTensorMode
from xdsl.parser import Parser
from xdsl.utils.exceptions import VerifyException

from kiln.dialects.aten.interpreter import run_function
from kiln.dialects.aten.norm_statistics import (
    NORMALIZATIONS,
    STATISTICS,
    bind_arguments,
    eager_statistics_dtype,
)
from kiln.registry import make_context

Make = Callable[[tuple[int, ...], torch.dtype], torch.Tensor]


def _calls(
    make: Make, input_dtype: torch.dtype, param_dtype: torch.dtype | None, running: torch.dtype
) -> Any:
    """(overload, args) for each normalization: a [4, 6, 5] input, weight and bias of
    ``param_dtype`` (None: none), batch norm's running statistics of ``running``."""
    aten = torch.ops.aten
    x = make((4, 6, 5), input_dtype)

    def param(size: int) -> torch.Tensor | None:
        return None if param_dtype is None else make((size,), param_dtype)

    running_mean, running_var = make((6,), running), make((6,), running).abs()
    w, b = param(6), param(6)
    yield (
        aten._native_batch_norm_legit_functional.default,
        (x, w, b, running_mean, running_var, True, 0.1, 1e-5),
    )
    yield (
        aten._native_batch_norm_legit.default,
        (x, w, b, running_mean.clone(), running_var.clone(), True, 0.1, 1e-5),
    )
    yield aten._native_batch_norm_legit.no_stats, (x, w, b, True, 0.1, 1e-5)
    yield (
        aten._native_batch_norm_legit_no_training.default,
        (x, w, b, running_mean, running_var, 0.1, 1e-5),
    )
    yield aten.native_batch_norm.default, (x, w, b, running_mean, running_var, True, 0.1, 1e-5)
    yield aten.native_group_norm.default, (x, w, b, 4, 6, 5, 3, 1e-5)
    yield aten.native_layer_norm.default, (x, [5], param(5), param(5), 1e-5)


@pytest.mark.parametrize("input_dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("mix", ["float32", "input", "none", "float32 running stats only"])
def test_the_rule_is_what_eager_returns(input_dtype: torch.dtype, mix: str) -> None:
    """Per op and dtype mix: eager's statistics dtype is the rule's where it gives one,
    else the one torch's meta (a CPU FakeTensor, what Dynamo traces with) declares."""
    params, running = {
        "float32": (torch.float32, torch.float32),
        "input": (input_dtype, input_dtype),
        "none": (None, input_dtype),
        "float32 running stats only": (None, torch.float32),
    }[mix]
    real = list(_calls(lambda s, d: torch.randn(s, dtype=d), input_dtype, params, running))
    with FakeTensorMode():
        fake = list(_calls(lambda s, d: torch.empty(s, dtype=d), input_dtype, params, running))
        traced = [[r.dtype for r in op(*args)] for op, args in fake]
    covered = set()
    for (op, args), declared in zip(real, traced, strict=True):
        covered.add(str(op))
        try:
            results = op(*args)
        except RuntimeError:  # eager rejects this mix (batch norm: params of two dtypes)
            continue
        rule = eager_statistics_dtype(str(op), bind_arguments(op._schema, args, {}))
        for k in STATISTICS:
            assert results[k].dtype == (rule or declared[k]), (op, k)
    assert covered == NORMALIZATIONS


def test_the_rule_keeps_the_meta_dtype_where_it_agrees_with_eager() -> None:
    x, w = torch.empty(2, 3, dtype=torch.bfloat16), torch.empty(3)
    layer_norm = "aten.native_layer_norm.default"
    assert eager_statistics_dtype(layer_norm, {"input": x, "weight": w}) == torch.float32
    assert eager_statistics_dtype(layer_norm, {"input": x, "weight": None}) is None
    assert eager_statistics_dtype(layer_norm, {"input": x, "weight": w.bfloat16()}) is None
    assert eager_statistics_dtype("aten.add.Tensor", {"input": x, "weight": w}) is None
    on_cuda = torch.empty(2, 3, dtype=torch.bfloat16, device="meta")
    assert eager_statistics_dtype(layer_norm, {"input": on_cuda, "weight": w}) == torch.float32


_GROUP_NORM = """
func.func @forward(%x: tensor<4x6x5xbf16>, %w: tensor<6xf32>, %b: tensor<6xf32>) -> (tensor<4x6x5xbf16>, tensor<4x3x{dtype}>, tensor<4x3x{dtype}>) {{
  %out, %mean, %rstd = aten.native_group_norm.default(%x, weight = %w, bias = %b, N = 4, C = 6, HxW = 5, group = 3, eps = 1.0e-05) : (tensor<4x6x5xbf16>, tensor<6xf32>, tensor<6xf32>) -> (tensor<4x6x5xbf16>, tensor<4x3x{dtype}>, tensor<4x3x{dtype}>)
  func.return %out, %mean, %rstd : tensor<4x6x5xbf16>, tensor<4x3x{dtype}>, tensor<4x3x{dtype}>
}}
"""

_BATCH_NORM = """
func.func @forward(%x: tensor<4x6xbf16>, %w: tensor<6xf32>, %m: tensor<6xf32>, %v: tensor<6xf32>) -> (tensor<6x{dtype}>, tensor<6x{dtype}>) {{
  %out, %mean, %rstd, %m2, %v2 = aten._native_batch_norm_legit_functional.default(%x, %m, %v, weight = %w, bias = %w, training = true, momentum = 0.1, eps = 1.0e-05) : (tensor<4x6xbf16>, tensor<6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<6xf32>) -> (tensor<4x6xbf16>, tensor<6x{dtype}>, tensor<6x{dtype}>, tensor<6xf32>, tensor<6xf32>)
  func.return %mean, %rstd : tensor<6x{dtype}>, tensor<6x{dtype}>
}}
"""


def test_the_verifier_accepts_eager_statistics_and_the_interpreter_computes_them() -> None:
    module = Parser(make_context(), _GROUP_NORM.format(dtype="f32")).parse_module()
    module.verify()
    x, w, b = torch.randn(4, 6, 5).bfloat16(), torch.randn(6), torch.randn(6)
    out, mean, rstd = run_function(module, [x, w, b])
    expected = torch.ops.aten.native_group_norm(x, w, b, 4, 6, 5, 3, 1e-5)
    for got, want in zip((out, mean, rstd), expected, strict=True):
        assert isinstance(got, torch.Tensor)
        assert got.dtype == want.dtype
        torch.testing.assert_close(got, want)
    # torch's meta reading (bfloat16) verifies too: both are what torch says
    Parser(make_context(), _GROUP_NORM.format(dtype="bf16")).parse_module().verify()


def test_the_verifier_rejects_statistics_of_neither_dtype() -> None:
    Parser(make_context(), _BATCH_NORM.format(dtype="f32")).parse_module().verify()
    module = Parser(make_context(), _BATCH_NORM.format(dtype="f16")).parse_module()
    with pytest.raises(VerifyException, match="result #1 is declared"):
        module.verify()

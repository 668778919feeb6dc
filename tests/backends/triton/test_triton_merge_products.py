"""``merge-products`` in training steps as ``torch.compile`` runs them for a GPU (the pass is
on by default there, bfloat16 products included, which become dot kernels): the
forward's query/key/value projections, the backward's weight gradients (returned as row
slices of one product) and its input-gradient sum, against eager; kernels in Triton's
interpreter on the CPU (or on a GPU with KILN_TRITON_DEVICE=cuda)."""

from __future__ import annotations

import copy
from unittest import mock

import pytest
import torch
from accuracy import assert_as_accurate_as_eager
from product_groups import Attention, count_merges
from triton_checks import DEVICE

from kiln.frontends.dynamo import kiln_backend


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("bias", [False, True])
def test_training_steps_as_on_a_gpu_match_eager(
    monkeypatch: pytest.MonkeyPatch, dtype: torch.dtype, bias: bool
) -> None:
    merged = count_merges(monkeypatch)
    torch.manual_seed(0)
    model = Attention(bias).to(DEVICE, dtype)
    reference = copy.deepcopy(model)
    exact = copy.deepcopy(model).double()
    options = {"executor": "triton", "graph_cache": False, "cuda_graphs": False}
    with mock.patch("kiln.compiler.gpu_device", return_value=torch.device("cuda", 0)):
        compiled = torch.compile(model, backend=kiln_backend, options=options)
        for _ in range(2):
            x = torch.randn(2, 6, 32, device=DEVICE, dtype=dtype)
            got, want, best = compiled(x), reference(x), exact(x.double())
            grad = torch.randn_like(want)
            for out in (got, want, best):
                out.backward(grad.to(out.dtype))
            _assert_close(got, want, best, dtype)
            for name, p in model.named_parameters():
                assert p.grad is not None, name
                r = reference.get_parameter(name).grad
                e = exact.get_parameter(name).grad
                assert r is not None
                assert e is not None
                _assert_close(p.grad, r, e, dtype)
            for net in (model, reference, exact):
                net.zero_grad()
    # Forward: q, k, v; backward: their weight gradients (the input gradient's sum of
    # products merges through the same concatenations, not counted here).
    assert merged == [3, 3]


def _assert_close(
    have: torch.Tensor, want: torch.Tensor, exact: torch.Tensor, dtype: torch.dtype
) -> None:
    if dtype == torch.float32:
        torch.testing.assert_close(have, want, rtol=1e-4, atol=1e-5)
    else:  # kiln rounds once per stored value, eager after every op
        assert_as_accurate_as_eager(
            have.detach().cpu(),
            want.detach().cpu(),
            exact.detach().cpu(),
            relative=2.0**-8,
            absolute=1e-3,
        )

"""Every SDPA backend (math, flash, efficient, cuDNN) in fp32/bf16/fp16, forward and
backward, through ``torch.compile(backend="kiln")`` against eager, on a GPU::

    KILN_TRITON_DEVICE=cuda python -m pytest tests/backends/triton/test_sdpa_gpu.py -q

The fused backends run as ATen externs whose optional outputs may be undefined at run
time (cuDNN's ``cum_seq_q``/``cum_seq_k``) although their FakeTensors are tensors; a
backend or dtype that eager itself refuses on this GPU is skipped. Without a GPU the
module is skipped.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from triton_checks import DEVICE

import kiln

if DEVICE.type != "cuda":
    pytest.skip("needs KILN_TRITON_DEVICE=cuda and a GPU", allow_module_level=True)

from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = {
    "math": SDPBackend.MATH,
    "flash": SDPBackend.FLASH_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
}
TOLERANCE = {torch.float32: 2e-4, torch.bfloat16: 3e-2, torch.float16: 5e-3}


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal) * 1.5


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("backend", list(BACKENDS))
@pytest.mark.parametrize("backward", [False, True], ids=["forward", "backward"])
def test_sdpa(backend: str, dtype: torch.dtype, causal: bool, backward: bool) -> None:
    torch.manual_seed(0)
    shape = (2, 4, 64, 64)
    inputs = [torch.randn(shape, device="cuda", dtype=dtype) for _ in range(3)]
    grad = torch.randn(shape, device="cuda", dtype=dtype)

    def run(fn: object) -> list[torch.Tensor]:
        leaves = [t.clone().requires_grad_(backward) for t in inputs]
        with sdpa_kernel([BACKENDS[backend]]):
            out = fn(*leaves, causal)  # pyright: ignore[reportCallIssue]
            if not backward:
                return [out.detach()]
            out.backward(grad)
        return [out.detach(), *(t.grad for t in leaves)]  # pyright: ignore[reportReturnType]

    try:
        expected = run(attention)
    except RuntimeError as e:  # this backend does not take this dtype/GPU in eager either
        pytest.skip(f"eager refuses {backend} {dtype}: {str(e).splitlines()[0]}")
    torch._dynamo.reset()  # pyright: ignore[reportPrivateImportUsage]
    actual = run(kiln.compile(attention, verbose=False))
    tol = TOLERANCE[dtype] * (4 if backward else 1)
    for a, e in zip(actual, expected, strict=True):
        assert a.device == e.device
        assert a.dtype == e.dtype
        torch.testing.assert_close(a, e, atol=tol, rtol=tol)

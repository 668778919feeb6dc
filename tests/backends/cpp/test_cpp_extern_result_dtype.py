"""An ATen fallback whose kernel returns another dtype than the traced graph declares
is converted to the declared one, never read as it.

Mixed-precision ``native_group_norm_backward`` (bfloat16 input, float32 weight): torch's
meta declares the input gradient float32, the CPU kernel returns bfloat16. Under
``dynamic=True`` group norm's backward stays an ATen call (symbolic ``N``/``HxW``), and the
kernel after it read the bfloat16 buffer as float32: ``GroupNorm`` training with
bfloat16 inputs returned NaN or 1e37 input gradients.
"""

from __future__ import annotations

import copy

import torch

from kiln.backends.host.runtime import as_buffer


def test_group_norm_backward_under_dynamic_shapes_is_eager_s() -> None:
    torch.manual_seed(0)
    module = torch.nn.GroupNorm(3, 12)
    x = torch.randn(4, 12, 5).bfloat16()
    grad = torch.randn(4, 12, 5).bfloat16()

    def step(backend: str | None) -> list[torch.Tensor]:
        m = copy.deepcopy(module)
        xi = x.clone().requires_grad_()
        run = m if backend is None else torch.compile(m, backend=backend, dynamic=True)
        out = run(xi)
        out.backward(grad)
        assert xi.grad is not None
        assert m.weight.grad is not None
        return [out, xi.grad, m.weight.grad]

    for got, want in zip(step("kiln"), step(None), strict=True):
        assert got.dtype == want.dtype
        torch.testing.assert_close(got, want, atol=2e-2, rtol=2e-2)


def test_as_buffer_converts_to_the_declared_dtype() -> None:
    value = torch.randn(3, 4).bfloat16().t()
    converted = as_buffer(value, (), dtype=torch.float32)
    assert converted is not None
    assert converted.dtype == torch.float32
    assert converted.is_contiguous()
    torch.testing.assert_close(converted, value.float(), atol=0, rtol=0)
    assert as_buffer(converted, (), fresh=True, dtype=torch.float32) is converted

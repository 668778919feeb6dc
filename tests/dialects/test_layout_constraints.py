"""ATen kernels that need eager's argument layout get it (dialects/aten/layout_constraints)."""

from __future__ import annotations

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from kiln.dialects.aten import AtenOp
from kiln.dialects.aten.interpreter import build_plan
from kiln.dialects.aten.layout_constraints import adapted_overload, attention_output_layout
from kiln.frontends.fx import import_graph


def test_attention_output_is_laid_out_as_the_fused_kernels_write_it() -> None:
    out = torch.randn(2, 4, 8, 16)  # contiguous: (batch, heads, length, dim) in memory
    relaid = attention_output_layout(out)
    assert relaid.stride() == (512, 16, 64, 1)  # (batch, length, heads, dim) in memory
    torch.testing.assert_close(relaid, out)
    assert attention_output_layout(relaid) is relaid  # already so: no copy


def test_efficient_attention_backward_is_called_through_the_adapter() -> None:
    # On the H200 the bf16 kernel given a contiguous ``out`` returned wrong grad_query and
    # grad_key (test_sdpa_gpu.py backward-efficient); every extern call path asks here.
    name = "aten::_scaled_dot_product_efficient_attention_backward.default"
    adapter = adapted_overload(name)
    assert adapter is not None
    q = torch.randn(1, 2, 8, 16)
    gm = make_fx(
        lambda g, q, o, lse: torch.ops.aten._scaled_dot_product_efficient_attention_backward(
            g,
            q,
            q,
            q,
            None,
            o,
            lse,
            torch.tensor(0),
            torch.tensor(0),
            0.0,
            [True, True, True, False],
        ),
        tracing_mode="fake",
        pre_dispatch=False,
    )
    module = import_graph(gm(q, q, q, torch.randn(1, 2, 8)))  # fake: no CPU kernel needed
    ops = [o for o in module.walk() if isinstance(o, AtenOp) and o.overload_name == name]
    assert ops
    assert build_plan(ops[0]).target is adapter

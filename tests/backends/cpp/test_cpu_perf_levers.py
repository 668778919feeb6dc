"""CPU performance levers (issue 15): each one visible in the IR, each one eager's numbers.

- CPU flash attention stays one ATen call (``decompose`` keeps
  ``_scaled_dot_product_flash_attention_for_cpu``) instead of bmm + softmax + bmm from
  64 x 64 scores per head on; shorter sequences still decompose (and fuse), under
  ``dynamic=True`` too, judged by the length the graph was traced at.
- The NHWC buffer of a channels-last convolution (a permute of ATen's fresh result) is
  taken with a contiguity check only, not ``as_buffer``'s scan of the inputs' storages.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import pytest
import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

import kiln
from kiln.compiler import compile_history, reset_compile_history
from kiln.dialects.aten import AtenOp
from kiln.frontends.fx import import_graph
from kiln.passes.decompose import DecomposePass
from kiln.registry import make_context

FLASH_CPU = "aten::_scaled_dot_product_flash_attention_for_cpu.default"


def _flash(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> Any:
    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default(q, k, v)[0]


def _overloads_after(table: Literal["kiln", "core"], length: int) -> set[str]:
    q, k, v = (torch.randn(1, 2, length, 16) for _ in range(3))
    module = import_graph(make_fx(_flash, tracing_mode="fake")(q, k, v))
    DecomposePass(table=table).apply(make_context(), module)
    return {op.overload_name for op in module.walk() if isinstance(op, AtenOp)}


def test_decompose_keeps_cpu_flash_attention() -> None:
    assert FLASH_CPU in _overloads_after("kiln", 64)
    assert FLASH_CPU not in _overloads_after("kiln", 63)  # short: decomposed, fuses
    # The core table still decomposes it (the option picks the behaviour).
    assert FLASH_CPU not in _overloads_after("core", 64)


@pytest.mark.parametrize(
    ("length", "kwargs"),
    [
        (64, {}),
        (72, {"is_causal": True}),
        (64, {"attn_mask": "bool"}),
        (80, {"attn_mask": "float", "scale": 0.3}),
        (12, {"is_causal": True}),
    ],
    ids=["plain", "causal", "bool_mask", "float_mask_scale", "short_decomposed"],
)
def test_sdpa_on_cpu_runs_flash_attention_extern(length: int, kwargs: dict[str, Any]) -> None:
    def make_mask(kind: str) -> torch.Tensor:
        mask = torch.rand(length, length)
        return mask > 0.3 if kind == "bool" else mask.normal_()

    def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *mask: torch.Tensor) -> Any:
        options = {n: a for n, a in kwargs.items() if n != "attn_mask"}
        if mask:
            options["attn_mask"] = mask[0]
        # A consumer, so that the extern's result feeds a kernel (layout of its output).
        return F.scaled_dot_product_attention(q, k, v, **options).transpose(1, 2).relu()

    def inputs() -> tuple[torch.Tensor, ...]:
        qkv = tuple(torch.randn(2, 3, length, 16) for _ in range(3))
        if "attn_mask" in kwargs:
            qkv += (make_mask(kwargs["attn_mask"]),)
        return qkv

    torch._dynamo.reset()
    reset_compile_history()
    compiled = kiln.compile(attention, verbose=False)
    with torch.no_grad():
        compiled(*inputs())
        fresh = inputs()
        torch.testing.assert_close(compiled(*fresh), attention(*fresh), atol=1e-5, rtol=1e-5)
    externs = {name for stats in compile_history() for name in stats.externs}
    long = length * length >= 64 * 64
    assert (FLASH_CPU in externs) == long
    assert ("aten::bmm.default" in externs) == (not long)


def _self_attention(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """A transformer's attention: q, k, v of one sequence length, split from one
    projection and transposed (the transposes decompose before the attention does)."""
    batch, length = x.shape[0], x.shape[1]
    q, k, v = (x @ w).view(batch, length, 3, 2, 16).permute(2, 0, 3, 1, 4).unbind(0)
    return F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).relu()


@pytest.mark.parametrize(("first", "long"), [(12, False), (80, True)])
def test_symbolic_sequence_length_attention_is_chosen_by_its_traced_length(
    first: int, long: bool
) -> None:
    """With ``dynamic=True`` the sequence length is a symbol: attention first called
    short decomposes as the static program's does (it was always kept as flash
    attention, a slower call at these lengths), and first called long stays flash
    attention; both compute eager's numbers at every later length without a recompile."""
    w = torch.randn(32, 96)
    torch._dynamo.reset()
    reset_compile_history()
    compiled = kiln.compile(_self_attention, dynamic=True, verbose=False)
    with torch.no_grad():
        for length in (first, 7, 33, 100):
            x = torch.randn(2, length, 32)
            # bmm + softmax against eager's flash attention: float32 rounding apart.
            torch.testing.assert_close(compiled(x, w), _self_attention(x, w), atol=1e-4, rtol=1e-4)
    history = compile_history()
    assert len(history) == 1  # one graph for every length
    externs = set(history[0].externs)
    assert (FLASH_CPU in externs) == long
    assert ("aten::bmm.default" in externs) == (not long)


def test_channels_last_convolution_result_needs_no_as_buffer(tmp_path: Path) -> None:
    """The second convolution's output is 1 x 1 spatially: ATen may hand it back in
    either layout, and the contiguity check must copy when the permute is not dense."""
    w1, w2 = torch.randn(6, 3, 3, 3), torch.randn(5, 6, 4, 4)

    def convs(x: torch.Tensor) -> torch.Tensor:
        y = F.conv2d(x, w1, padding=1).relu()
        return F.conv2d(y, w2).relu() + y.mean()

    torch._dynamo.reset()
    compiled = kiln.compile(convs, verbose=False, debug_dir=str(tmp_path))
    with torch.no_grad():
        compiled(torch.randn(2, 3, 4, 4))
        fresh = torch.randn(2, 3, 4, 4)
        torch.testing.assert_close(compiled(fresh), convs(fresh), atol=1e-5, rtol=1e-5)
    (wrapper,) = tmp_path.glob("*/wrapper.py")
    source = wrapper.read_text()
    assert "_permute(" in source
    assert "as_buffer" not in source

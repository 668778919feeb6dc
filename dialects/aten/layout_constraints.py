"""ATen kernels that compute wrong numbers unless an argument has the layout eager gives
it, not just any strides, or that run far slower on the layout kiln gives them.

kiln hands externs contiguous buffers, which almost every ATen kernel takes. The
exceptions are called through an adapter that re-lays the argument out first, as
Inductor's ``sdpa_constraint`` does for the same ops. :func:`adapted_overload` is what
every extern call path (the interpreter's call plans, both host wrappers) asks. The
adapters for speed only (:mod:`kiln.dialects.aten.depthwise_backward`) compute the same
values by another of ATen's algorithms.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from xdsl.ir import Operation

from kiln.dialects.aten.depthwise_backward import convolution_backward, may_split


def attention_output_layout(out: torch.Tensor) -> torch.Tensor:
    """``out`` (batch, heads, length, dim) laid out as the fused attention kernels write
    it: (batch, length, heads, dim) in memory; unchanged when it already is."""
    if out.dim() != 4 or out.transpose(1, 2).is_contiguous():
        return out
    return out.transpose(1, 2).contiguous().transpose(1, 2)


def _efficient_attention_backward(
    grad_out: torch.Tensor,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_bias: torch.Tensor | None,
    out: torch.Tensor,
    *rest: Any,
    **kwargs: Any,
) -> Any:
    # The bf16/f16 kernel reads ``out`` as the forward wrote it: given a contiguous copy
    # it returns grad_query/grad_key off by up to 4 (H200, torch 2.11); float32 is exact.
    return torch.ops.aten._scaled_dot_product_efficient_attention_backward.default(
        grad_out, query, key, value, attn_bias, attention_output_layout(out), *rest, **kwargs
    )


_ADAPTED: dict[str, Callable[..., Any]] = {
    "aten::_scaled_dot_product_efficient_attention_backward.default": (
        _efficient_attention_backward
    ),
    "aten::convolution_backward.default": convolution_backward,
}


def adapted_overload(overload: str, op: Operation | None = None) -> Callable[..., Any] | None:
    """The adapter to call instead of ``overload`` (``aten::name.overload``), if any; for
    ``op`` (the call being built), only where its types and device can need it."""
    adapter = _ADAPTED.get(overload)
    if adapter is convolution_backward and op is not None and not may_split(op):
        return None
    return adapter


__all__ = ["adapted_overload", "attention_output_layout"]

"""``convolution_backward`` of a bfloat16 depthwise convolution on channels-last CPU
tensors, called so that oneDNN picks its fast kernels.

oneDNN has no depthwise kernel for the weight gradient of NHWC (``acdb``) bfloat16
tensors: it runs a generic direct convolution (``jit_bf16``), 5x slower than its
depthwise kernel on blocked tensors or its GEMM on NCHW ones. ConvNeXt-atto's 7x7
depthwise weight gradients at the dashboard's small size (AMD EPYC with AVX512-BF16,
``ONEDNN_VERBOSE``): 1.06 ms a call on ``g320 2x2`` NHWC against 0.20 ms on NCHW copies,
4.4 against 2.2 ms a training step; the gradient of the input is fast either way
(``jit_dw``, 8 us). So the call is split: the input gradient from the channels-last
tensors as given, the weight and bias gradients from NCHW copies of the output gradient
and the input (a few KB each at these sizes). Same math, another oneDNN algorithm: the
weight gradient changes only by its summation order, as between ATen's own algorithms.
Float32 keeps the single call (oneDNN's NHWC float32 depthwise kernel is not slower:
ConvNeXt-atto 25.1 ms a training step either way).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from xdsl.dialects.builtin import BFloat16Type, TensorType
from xdsl.ir import Operation

from kiln.dialects.aten.function_attrs import runs_on_cpu


def may_split(op: Operation) -> bool:
    """Whether a ``convolution_backward`` op can need the split at all: a bfloat16 input
    in a CPU program (decided when the call is built, so that other programs call ATen
    directly, without this adapter's checks at every call)."""
    if len(op.operands) < 2:
        return False
    ty = op.operands[1].type
    top = op.get_toplevel_object()
    return (
        isinstance(ty, TensorType)
        and isinstance(ty.element_type, BFloat16Type)  # pyright: ignore[reportUnknownMemberType]
        and runs_on_cpu(top if isinstance(top, Operation) else None)
    )


def splits_depthwise_backward(
    input: torch.Tensor, weight: torch.Tensor, groups: int, transposed: bool
) -> bool:
    """Whether :func:`convolution_backward` splits this call (see the module docstring)."""
    return (
        input.device.type == "cpu"
        and input.dtype == torch.bfloat16
        and input.dim() == 4
        and not transposed
        and groups > 1
        and groups == input.shape[1]
        and weight.shape[1] == 1
        and not input.is_contiguous()
        and input.is_contiguous(memory_format=torch.channels_last)
    )


def convolution_backward(
    grad_output: torch.Tensor,
    input: torch.Tensor,
    weight: torch.Tensor,
    bias_sizes: Sequence[int] | None,
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    transposed: bool,
    output_padding: Sequence[int],
    groups: int,
    output_mask: Sequence[bool],
) -> tuple[Any, Any, Any]:
    """``aten.convolution_backward.default``, split for bfloat16 depthwise NHWC CPU calls."""
    call = torch.ops.aten.convolution_backward.default
    rest = (bias_sizes, stride, padding, dilation, transposed, output_padding, groups)
    if not output_mask[1] or not splits_depthwise_backward(input, weight, groups, transposed):
        return call(grad_output, input, weight, *rest, output_mask)
    grad_input = None
    if output_mask[0]:
        grad_input = call(grad_output, input, weight, *rest, [True, False, False])[0]
    _, grad_weight, grad_bias = call(
        grad_output.contiguous(),
        input.contiguous(),
        weight,
        *rest,
        [False, True, output_mask[2]],
    )
    return grad_input, grad_weight, grad_bias


__all__ = ["convolution_backward", "may_split", "splits_depthwise_backward"]

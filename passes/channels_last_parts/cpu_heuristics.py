"""CPU heuristics of ``channels-last``: which ATen convolution backend a channels-last
input gets (``Slow2d`` keeps a function NCHW), and whether a function has a 2-D
convolution at all."""

from __future__ import annotations

import math

from xdsl.dialects.builtin import TensorType
from xdsl.dialects.func import FuncOp

from kiln.dialects.aten.encoding import decode_value
from kiln.dialects.aten.ops import AtenOp
from kiln.dialects.aten.prepack import is_prepacked
from kiln.passes.channels_last_parts.aten_helpers import (
    CONVOLUTION,
    is_2d_convolution,
    tensor_shape,
)
from kiln.passes.conv1x1_to_mm import is_pointwise_convolution


def slow_cpu_convolution(func: FuncOp, pointwise_as_mm: bool) -> bool:
    """Whether ATen runs one of ``func``'s convolutions on a channels-last input with its
    reference kernel (``Slow2d``: small batch-1 convolutions, oneDNN's heuristic says no).
    That kernel computes channels-last by first copying the NCHW weight channels-last,
    on every call: ResNet-18 at 64x64 took 31 ms so against 16 ms NCHW. Such a function
    stays NCHW, as eager runs it; symbolic shapes are not asked about. A convolution
    ``prepack-weights`` marked runs in oneDNN, and (``pointwise_as_mm``) a 1x1 one that
    ``conv1x1-to-mm`` will run as a matrix product runs in neither: they do not count."""
    for op in func.body.block.ops:
        if (
            isinstance(op, AtenOp)
            and is_2d_convolution(op)
            and not is_prepacked(op)
            and not (pointwise_as_mm and is_pointwise_convolution(op))
            and cpu_convolution_backend(op) == "Slow2d"
        ):
            return True
    return False


def cpu_convolution_backend(op: AtenOp) -> str | None:
    """The ATen convolution backend (``torch._C._select_conv_backend``) for ``op`` with a
    channels-last input and its weight as it comes (NCHW), or None when unknown."""
    import torch

    from kiln.dialects.aten.dtypes import type_to_dtype

    tensors = op.tensor_operands()
    x, weight = op.operands[0], tensors["weight"][0]
    bias = (tensors.get("bias") or [None])[0]
    x_shape = tensor_shape(x)
    w_shape = tensor_shape(weight) if weight is not None else None
    x_ty = x.type
    if x_shape is None or w_shape is None or not isinstance(x_ty, TensorType):
        return None
    if any(d < 0 for d in (*x_shape, *w_shape)):
        return None
    args = {}
    for name in ("stride", "padding", "dilation", "output_padding", "groups"):
        spec = next(a for a in op.op_schema().arguments if a.name == name)
        args[name] = decode_value(spec, op.arg_attr(name), ())
    try:
        dtype = type_to_dtype(x_ty.element_type)
        example = torch.empty(x_shape, dtype=dtype).to(memory_format=torch.channels_last)
        w = torch.empty(w_shape, dtype=dtype)
        b = torch.empty(w_shape[0], dtype=dtype) if bias is not None else None
        backend = torch._C._select_conv_backend(  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]
            example,
            w,
            b,
            args["stride"],
            args["padding"],
            args["dilation"],
            False,
            args["output_padding"],
            args["groups"],
            None,
        )
    except Exception:  # a dtype or shape ATen's selector rejects: nothing to learn
        return None
    return str(backend).rsplit(".", 1)[-1]


def has_2d_convolution(func: FuncOp) -> bool:
    return any(
        isinstance(op, AtenOp) and op.overload_name == CONVOLUTION and is_2d_convolution(op)
        for op in func.body.block.ops
    )


SAVED_NHWC_CPU_MIN_ELEMENTS = 1 << 22
"""Elements of a function's largest 2-D convolution output from which a CPU training
forward saves its activations channels-last (``channels-last``'s
``saved-nhwc-cpu-min-elements``). AMD EPYC VM, 2 threads, float32 training steps
(``benchmarks/cpu_train_layout.py``, two rounds, ms NCHW -> NHWC): at batch 32, 224x224
(first convolution outputs of 9.6M-25.7M elements) MobileNet-v2 2367/2270 -> 1222/1171,
EfficientNet-b0 2676/2719 -> 1573/1774, ResNet-50 6086/6392 -> 5571/5863, ResNet-18
2115/2207 -> 2137/2172; at batch 2, 64x64 (131K elements) ResNet-18 37/53 -> 62/88,
ResNet-50 110/86 -> 121/136, MobileNet-v3-small 21/23 -> 28/30, the rest even. Sizes in
between are not measured; session 13 found ResNet-18 at batch 8, 96x96 (1.2M) slower
NHWC."""


def largest_convolution_output(func: FuncOp) -> int:
    """Elements of the largest static 2-D convolution result of ``func`` (0: none)."""
    largest = 0
    for op in func.body.block.ops:
        if isinstance(op, AtenOp) and op.overload_name == CONVOLUTION and is_2d_convolution(op):
            shape = tensor_shape(op.results[0])
            if shape is not None and all(d >= 0 for d in shape):
                largest = max(largest, math.prod(shape))
    return largest

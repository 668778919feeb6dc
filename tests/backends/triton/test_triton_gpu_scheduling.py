"""The GPU's own scheduling decisions, run as Triton kernels and compared with eager.

A module marked for a GPU (``kiln.device = "cuda"``) gets decisions the CPU does not:
ReLU's backward mask recomputed in both its consumers (``GPU_LAUNCH_BYTES`` in
:mod:`kiln.passes.scheduling.inline`) and tiny independent kernels merged
(:mod:`kiln.passes.scheduling.tiny_kernels`). The tests of those passes check them in
kiln's interpreters; here the generated Triton code computes eager's numbers (in
Triton's interpreter on the CI machine, on the GPU with ``KILN_TRITON_DEVICE=cuda``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from triton_checks import DEVICE, PIPELINE, assert_close, capture, run_pipeline
from xdsl.dialects.builtin import StringAttr

from kiln.dialects.aten.function_attrs import DEVICE_ATTR
from kiln.dialects.aten.fx import import_graph
from kiln.dialects.kernel.attributes import KernelKind
from kiln.dialects.kernel.kernel_ops import COLUMN_MAJOR_ATTR, KernelOp
from kiln.targets import build_triton_program


def _step(
    c0: torch.Tensor, c1: torch.Tensor, c2: torch.Tensor, y: torch.Tensor, g: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    """Three batch norms' ``num_batches_tracked += 1`` and a ReLU + batch norm backward."""
    masked = torch.where(y <= 0, torch.zeros_like(g), g)
    total = masked.sum((0, 2, 3))
    dx = masked - total[None, :, None, None] * y
    return c0 + 1, c1 + 1, c2 + 1, total, dx


def test_gpu_decisions_compute_eager_s_numbers() -> None:
    counters = [torch.tensor(k + 7, dtype=torch.int64) for k in range(3)]
    y, g = torch.randn(2, 16, 8, 8), torch.randn(2, 16, 8, 8)
    inputs = [*counters, y, g]
    module = import_graph(capture(_step, *inputs).gm)
    module.attributes[DEVICE_ATTR] = StringAttr("cuda")
    run_pipeline(module, PIPELINE)
    kernels = [op for op in module.ops if isinstance(op, KernelOp)]
    bool_outputs = [
        k.sym_name.data for k in kernels if any("xi1" in str(t) for t in k.function_type.outputs)
    ]
    assert bool_outputs == []  # the mask is recomputed, not stored
    counter_kernels = [k.sym_name.data for k in kernels if str(k.numel.data) == "1"]
    assert len(counter_kernels) == 1, counter_kernels  # the three counters, merged
    program = build_triton_program(module)
    # The merged counters load all three values before storing any (a store between
    # them would serialise three memory round trips: Triton must assume they alias).
    (counter_source,) = [
        part for part in program.source.split("@triton.jit") if "def kiln_poi_fused_add" in part
    ]
    lines = counter_source.splitlines()
    loads = [k for k, line in enumerate(lines) if "tl.load(" in line]
    stores = [k for k, line in enumerate(lines) if "tl.store(" in line]
    assert len(loads) == len(stores) == 3
    assert max(loads) < min(stores)
    got = program([x.clone().to(DEVICE) for x in inputs])
    for actual, expected in zip(got, _step(*inputs), strict=True):
        assert_close(actual, expected)


def _packed_causal_mask(position: torch.Tensor) -> torch.Tensor:
    """transformers' packed-sequence causal mask (GPT-2's prologue): sequences numbered
    by the cumsum of ``diff(position) != 1``, a query sees the keys of its sequence at or
    before its position."""
    shifted = torch.cat([position[:1] - 1, position])
    sequence = ((shifted[1:] - shifted[:-1]) != 1).cumsum(-1)
    rows, cols = torch.arange(32)[:, None], torch.arange(32)[None, :]
    same = sequence[rows] == sequence[cols]
    causal = position[cols] <= position[rows]
    return torch.where(same & causal, 0.0, float("-inf"))


def test_tiny_integer_prologue_over_a_buffer_is_recomputed() -> None:
    # Two packed sequences of 20 and 12 positions.
    position = torch.cat([torch.arange(20), torch.arange(12)]) + 3
    module = import_graph(capture(_packed_causal_mask, position).gm)
    module.attributes[DEVICE_ATTR] = StringAttr("cuda")
    run_pipeline(module, PIPELINE)
    kernels = [op for op in module.ops if isinstance(op, KernelOp)]
    # The ``!= 1`` goes into the cumsum's kernel, the gathers into the mask's.
    assert len(kernels) == 2, [k.sym_name.data for k in kernels]
    program = build_triton_program(module)
    (got,) = program([position.clone().to(DEVICE)])
    assert_close(got, _packed_causal_mask(position))


def _gelu_backward_and_bias_grad(
    g: torch.Tensor, h: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """GPT-2's tanh GELU backward and the bias gradient of the linear layer before it:
    the gradient ``[M, N]`` and its column sum ``[N]``."""
    inner = 0.7978845608 * (h + 0.044715 * h * h * h)
    t = torch.tanh(inner)
    grad = g * (0.5 * (1 + t) + 0.5 * h * (1 - t * t) * 0.7978845608 * (1 + 3 * 0.044715 * h * h))
    return grad, grad.sum(0)


def _qkv_grad_and_bias_grad(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """An attention block's ``[B, H, T, D]`` gradients of q, k and v back to the fused
    QKV projection's ``[B * T, 3 * H * D]`` output gradient, and its bias gradient."""
    b, h, t, d = q.shape
    parts = [x.permute(0, 2, 1, 3).reshape(b * t, h * d) for x in (q, k, v)]
    grad = torch.cat(parts, 1)
    return grad, grad.sum(0)


def _gpu_kernels(fn, *inputs: torch.Tensor) -> tuple[list[KernelOp], object]:
    module = import_graph(capture(fn, *inputs).gm)
    module.attributes[DEVICE_ATTR] = StringAttr("cuda")
    run_pipeline(module, PIPELINE)
    return [op for op in module.ops if isinstance(op, KernelOp)], build_triton_program(module)


def test_a_gradient_and_its_column_sum_run_in_one_kernel() -> None:
    # The pointwise producer runs column-major in the column sum's kernel (as Inductor's
    # ``add_mul_pow_sum_tanh_backward``): one launch, the gradient stored once, never read.
    g, h = torch.randn(48, 96), torch.randn(48, 96)
    kernels, program = _gpu_kernels(_gelu_backward_and_bias_grad, g, h)
    assert len(kernels) == 1, [k.sym_name.data for k in kernels]
    got = program([g.clone().to(DEVICE), h.clone().to(DEVICE)])  # type: ignore[operator]
    for actual, expected in zip(got, _gelu_backward_and_bias_grad(g, h), strict=True):
        assert_close(actual, expected)


def test_a_concatenated_gradient_and_its_column_sum_run_in_one_kernel() -> None:
    q, k, v = (torch.randn(2, 3, 10, 4) for _ in range(3))
    kernels, program = _gpu_kernels(_qkv_grad_and_bias_grad, q, k, v)
    assert len(kernels) == 1, [k.sym_name.data for k in kernels]
    got = program([x.clone().to(DEVICE) for x in (q, k, v)])  # type: ignore[operator]
    for actual, expected in zip(got, _qkv_grad_and_bias_grad(q, k, v), strict=True):
        assert_close(actual, expected)


def _stacked_qkv_grads(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, w: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """timm's attention backward: q, k and v gradients ``[B, H, T, D]`` stacked along a
    new leading dim (a ``cat`` over dim 0), permuted back to the QKV projection's
    ``[B * T, 3 * H * D]`` output gradient (a contiguous copy, which the input
    gradient's product reads), that product and the bias gradient."""
    b, h, t, d = q.shape
    stacked = torch.cat([q, k, v], 0).view(3, b, h, t, d)
    grad = stacked.permute(1, 3, 0, 2, 4).contiguous().view(b * t, 3 * h * d)
    return grad @ w, grad.sum(0)


def test_a_cat_read_once_by_a_permuted_copy_is_recomputed_there() -> None:
    # The three-way cat (nine ops of masks and selects, over the bound for recomputed
    # bodies) has one consumer, the copy, reading each element once: inlined, it still
    # runs once per element, and the copy fuses column-major with its column sum.
    q, k, v = (torch.randn(2, 3, 10, 4) for _ in range(3))
    w = torch.randn(36, 8)
    kernels, program = _gpu_kernels(_stacked_qkv_grads, q, k, v, w)
    assert len(kernels) == 1, [k.sym_name.data for k in kernels]
    got = program([x.clone().to(DEVICE) for x in (q, k, v, w)])  # type: ignore[operator]
    for actual, expected in zip(got, _stacked_qkv_grads(q, k, v, w), strict=True):
        assert_close(actual, expected)


def _layer_norm_backward_and_bias_grad(
    x: torch.Tensor,
    mean: torch.Tensor,
    rstd: torch.Tensor,
    w: torch.Tensor,
    g: torch.Tensor,
    residual: torch.Tensor,
) -> tuple[torch.Tensor, ...]:
    """A transformer layer's layer-norm backward (``[M, N]`` rows) with the residual
    stream's gradient added, the norm's weight and bias gradients, and the bias gradient
    of the linear layer before it (the column sum of the summed gradient)."""
    xhat = (x - mean) * rstd
    gw = g * w
    dx = rstd * (gw - gw.mean(-1, keepdim=True) - xhat * (gw * xhat).mean(-1, keepdim=True))
    total = dx + residual
    return total, (g * xhat).sum(0), g.sum(0), total.sum(0)


def test_sibling_column_sums_share_a_kernel() -> None:
    # The norm's column sums read what the row kernel reads; the bias gradient reads what
    # it writes: no buffer in common, one space, one read pattern, merged (two launches,
    # as Inductor's, where kiln launched three).
    m, n = 24, 40
    x, g, residual = torch.randn(m, n), torch.randn(m, n), torch.randn(m, n)
    mean, rstd, w = torch.randn(m, 1), torch.rand(m, 1) + 0.5, torch.randn(n)
    inputs = (x, mean, rstd, w, g, residual)
    kernels, program = _gpu_kernels(_layer_norm_backward_and_bias_grad, *inputs)
    assert len(kernels) == 2, [k.sym_name.data for k in kernels]
    got = program([t.clone().to(DEVICE) for t in inputs])  # type: ignore[operator]
    for actual, expected in zip(got, _layer_norm_backward_and_bias_grad(*inputs), strict=True):
        assert_close(actual, expected)


def _sums_of_two_results(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Column sums of both results of one ATen call (as LLaMA's key and value gradients,
    summed over the heads that share them, read two results of its attention call)."""
    values, indices = torch.sort(x, 0)
    return (values * values).sum(0), indices.float().sum(0)


def test_sums_of_two_results_of_one_call_share_a_kernel() -> None:
    x = torch.randn(12, 20)
    kernels, program = _gpu_kernels(_sums_of_two_results, x)
    assert len(kernels) == 1, [k.sym_name.data for k in kernels]
    got = program([x.clone().to(DEVICE)])  # type: ignore[operator]
    for actual, expected in zip(got, _sums_of_two_results(x), strict=True):
        assert_close(actual, expected)


def _column_major(kernel: KernelOp) -> bool:
    return any(COLUMN_MAJOR_ATTR in node.attributes for node in kernel.nodes())


def _channels_last(*shape: int) -> torch.Tensor:
    return torch.randn(*shape).to(memory_format=torch.channels_last)


def _batch_norm_relu6(
    x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, mean: torch.Tensor, var: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    """A training batch norm + ReLU6 (MobileNet-v2's) over NHWC activations, its result
    stored NHWC as the channels-last pass keeps it between convolutions."""
    y, m, rstd, new_mean, new_var = torch.ops.aten._native_batch_norm_legit_functional(
        x, w, b, mean, var, True, 0.1, 1e-5
    )
    return F.hardtanh(y, 0.0, 6.0).permute(0, 2, 3, 1).contiguous(), m, rstd, new_mean, new_var


def _relu6_batch_norm_backward(
    g: torch.Tensor,
    x: torch.Tensor,
    pre: torch.Tensor,
    mean: torch.Tensor,
    rstd: torch.Tensor,
    w: torch.Tensor,
) -> tuple[torch.Tensor, ...]:
    """The backward of the same: ReLU6's mask, then batch norm's input and weight
    gradients (two column sums over the NHWC rows and the input gradient reading them)."""
    masked = torch.ops.aten.hardtanh_backward(g, pre, 0.0, 6.0)
    dx, dw, db = torch.ops.aten.native_batch_norm_backward(
        masked, x, w, None, None, mean, rstd, True, 1e-5, [True, True, True]
    )
    return dx.permute(0, 2, 3, 1).contiguous(), dw, db


def _check_split_and_apart(fn, *inputs: torch.Tensor) -> None:
    # 2048 NHWC rows of 32 channels: fused with the normalization (column-major), the
    # statistics ran in 4 looped programs (28 to 49 us a launch in MobileNet-v2's step
    # on an H100); the sums split, the normalization a pointwise kernel after them.
    kernels, program = _gpu_kernels(fn, *inputs)
    kinds = [k.kernel_kind for k in kernels]
    assert KernelKind.SPLIT in kinds, kinds
    assert KernelKind.LOOPED not in kinds, kinds
    assert not any(_column_major(k) for k in kernels)
    got = program([t.clone().to(DEVICE) for t in inputs])  # type: ignore[operator]
    for actual, expected in zip(got, fn(*inputs), strict=True):
        assert_close(actual, expected)


def test_long_batch_norm_statistics_split_with_the_normalization_apart() -> None:
    c = 32
    inputs = (_channels_last(2, c, 32, 32), torch.randn(c), torch.randn(c))
    _check_split_and_apart(_batch_norm_relu6, *inputs, torch.randn(c), torch.rand(c) + 0.5)


def test_long_batch_norm_backward_sums_split_with_the_input_gradient_apart() -> None:
    c = 32
    activations = (_channels_last(2, c, 32, 32) for _ in range(3))
    g, x, pre = activations
    inputs = (g, x, pre * 4, torch.randn(c), torch.rand(c) + 0.5, torch.randn(c))
    _check_split_and_apart(_relu6_batch_norm_backward, *inputs)


def test_a_long_column_sum_leaves_its_gradient_row_major() -> None:
    # 1024 rows (timm's Mixer token MLP): a looped column sum runs on 32 programs, too
    # few for the gradient's 256K points; the gradient is its own pointwise kernel.
    g, h = torch.randn(1024, 256), torch.randn(1024, 256)
    kernels, program = _gpu_kernels(_gelu_backward_and_bias_grad, g, h)
    assert len(kernels) == 2, [k.sym_name.data for k in kernels]
    assert not any(_column_major(k) for k in kernels)
    got = program([g.clone().to(DEVICE), h.clone().to(DEVICE)])  # type: ignore[operator]
    for actual, expected in zip(got, _gelu_backward_and_bias_grad(g, h), strict=True):
        assert_close(actual, expected)

"""Strided program arguments (issue 16): a non-contiguous input traced with static strides
(a training step's saved ``t(x)``, a q/k/v slice of one projection) is read in place by
the Triton kernels and the extern calls (``kiln.arg_strides``, dialects/aten/arg_layout.py),
not copied to a contiguous buffer on entry; an input laid out otherwise is still right."""

from __future__ import annotations

import torch
from triton_checks import assert_close, capture, compile_capture, randn, to_device

from kiln.backends.triton import runtime
from kiln.frontends.capture import capture_aot_training


def _mixed(t: torch.Tensor, qkv: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # a transposed activation into mm (an extern) and a pointwise kernel; a slice with a
    # storage offset, permuted, into a reduction and its epilogue
    return torch.mm(t, w) + 1, (qkv * 2).exp() + qkv.sum(-1, keepdim=True)


def _inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    t = to_device(randn(16, 8)).t()
    qkv = to_device(randn(4, 6, 12))[:, :, 6:12].transpose(0, 1)
    return t, qkv, to_device(randn(16, 5))


def test_strided_arguments_are_read_in_place(monkeypatch: object) -> None:
    t, qkv, w = _inputs()
    compiled = compile_capture(capture(_mixed, t, qkv, w))
    source = compiled.program.source
    assert "t = as_layout(t, None, (1, 8))" in source, source  # only mm reads it
    assert "qkv = as_layout(qkv, device, " in source, source
    copies: list[torch.Tensor] = []
    real = runtime.in_layout

    def counting(value: torch.Tensor, strides: tuple[int, ...]) -> torch.Tensor:
        out = real(value, strides)
        if out is not value:
            copies.append(value)
        return out

    monkeypatch.setattr(runtime, "in_layout", counting)  # pyright: ignore[reportAttributeAccessIssue]
    outputs = compiled.run([t, qkv, w])
    assert copies == []
    for actual, expected in zip(outputs, _mixed(t, qkv, w), strict=True):
        assert_close(actual, expected)
    # Laid out otherwise than traced (contiguous): copied into the traced layout, right.
    t2, qkv2, w2 = (x.contiguous() for x in _inputs())
    for actual, expected in zip(compiled.run([t2, qkv2, w2]), _mixed(t2, qkv2, w2), strict=True):
        assert_close(actual, expected)
    assert len(copies) == 2


def test_training_step_backward_reads_saved_views_in_place() -> None:
    # The backward graph of a linear layer + attention-like product saves t(x) views.
    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qkv = torch.nn.Linear(16, 48)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            q, k, v = self.qkv(x).split(16, dim=-1)
            scores = (q @ k.transpose(-1, -2)).softmax(-1)
            return (scores @ v).sum(-1)

    torch.manual_seed(0)
    model = to_device(Block())
    graphs = capture_aot_training(model, to_device(randn(2, 5, 16)))
    compiled = compile_capture(graphs.backward)
    assert "as_layout(" in compiled.program.source
    outputs = compiled.run()
    assert len(outputs) == len(compiled.expected)
    for actual, expected in zip(outputs, compiled.expected, strict=True):
        assert_close(actual, expected)

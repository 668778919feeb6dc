"""Strided program arguments in the C++ wrapper and the reference interpreters (issue 16):
an input traced with static non-contiguous strides is read in place (``kiln.arg_strides``,
dialects/aten/arg_layout.py); one laid out otherwise is copied into the traced layout."""

from __future__ import annotations

import torch
from cpp_checks import assert_matches, lower_graph

from kiln.dialects.kernel.interpreter import run_program
from kiln.frontends.capture import capture_make_fx
from kiln.targets import build_cpp_program


def _mixed(t: torch.Tensor, qkv: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return torch.mm(t, w) + 1, (qkv * 2).exp() + qkv.sum(-1, keepdim=True)


def _inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    t = torch.randn(16, 8).t()
    qkv = torch.randn(4, 6, 12)[:, :, 6:12].transpose(0, 1)
    return t, qkv, torch.randn(16, 5)


def test_cpp_reads_strided_arguments_in_place() -> None:
    t, qkv, w = _inputs()
    module = lower_graph(capture_make_fx(_mixed, t, qkv, w).gm)
    program = build_cpp_program(module)
    source = program.python_source
    assert "t = _in_layout(t, (1, 8))" in source, source
    assert "qkv = _in_layout(qkv, " in source, source
    for args in (_inputs(), tuple(x.contiguous() for x in _inputs())):
        expected = _mixed(*args)
        # the kernel interpreter gives the buffers the recorded layout too
        for outputs in (program.run(list(args)), run_program(module, list(args))[0]):
            assert len(outputs) == len(expected)
            for actual, want in zip(outputs, expected, strict=True):
                assert_matches(actual, want)


def _square(s: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    # s.t() of a transposed square matrix has row-major strides: still a view to make
    return torch.mm(s.t(), w), s.t()


def test_transposed_square_argument_is_not_its_buffer() -> None:
    s, w = torch.randn(6, 6).t(), torch.randn(6, 3)
    module = lower_graph(capture_make_fx(_square, s, w).gm)
    program = build_cpp_program(module)
    for args in ((s, w), (torch.randn(6, 6).t(), torch.randn(6, 3)), (s.contiguous(), w)):
        expected = _square(*args)
        for outputs in (program.run(list(args)), run_program(module, list(args))[0]):
            for actual, want in zip(outputs, expected, strict=True):
                assert_matches(actual, want)

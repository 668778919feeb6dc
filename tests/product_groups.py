"""Random groups of matrix products sharing an operand, for fuzzing ``merge-products`` end
to end: projections of one input, weight gradients of one activation, sums of products,
in float32, bfloat16 and float16, some results returned and some consumed; and the check
that compiles one and compares every output with eager's (values, dtypes, shapes and
strides: a returned slice of a merged product must keep eager's strides). Used on the CPU
(``tests/passes/test_merge_products_fuzz.py``) and as on a GPU
(``tests/backends/triton/test_triton_fuzz.py``)."""

from __future__ import annotations

import functools
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest
import torch
from hypothesis import strategies as st
from test_graph_fuzz import CPU, assert_outputs_match
from xdsl.ir import SSAValue

from kiln.compiler import CompileOptions, compile_graph
from kiln.dialects.aten import AtenOp
from kiln.frontends.capture import capture_make_fx
from kiln.passes import merge_products


@dataclass(frozen=True)
class Products:
    """Products sharing one operand: ``left`` (``x @ w_i``, or ``linear(x, w_i, b_i)``),
    ``right`` (weight gradients ``g_i.T @ x``) or ``sum`` (``sum_i g_i @ w_i``, an input
    gradient through several projections). ``transposed``: the unshared operands are
    stored transposed and read through ``.t()``, as ``nn.Linear`` weights are. ``returned``:
    per product, returned as computed (else through ``relu(r) * 2``)."""

    dtype: torch.dtype
    shared: str
    m: int
    k: int
    widths: tuple[int, ...]
    transposed: bool
    bias: bool
    returned: tuple[bool, ...]

    def inputs(self, device: torch.device = CPU) -> list[torch.Tensor]:
        def randn(*shape: int) -> torch.Tensor:
            return torch.randn(shape, dtype=self.dtype, device=device)

        shared = [randn(self.m, self.k)] if self.shared != "sum" else []
        if self.shared == "right":
            return shared + [randn(self.m, n) for n in self.widths]
        if self.shared == "sum":
            grads = [randn(self.m, n) for n in self.widths]
            return grads + [
                randn(self.k, n) if self.transposed else randn(n, self.k) for n in self.widths
            ]
        weights = [randn(n, self.k) if self.transposed else randn(self.k, n) for n in self.widths]
        biases = [randn(n) for n in self.widths] if self.bias else []
        return shared + weights + biases

    def run(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        n = len(self.widths)
        if self.shared == "sum":
            grads, weights = inputs[:n], inputs[n:]
            total = functools.reduce(
                operator.add,
                (
                    g @ (w.t() if self.transposed else w)
                    for g, w in zip(grads, weights, strict=True)
                ),
            )
            return (total if self.returned[0] else torch.relu(total) * 2,)
        x, rest = inputs[0], inputs[1:]
        if self.shared == "right":
            results = [g.t() @ x for g in rest]
        elif self.bias:
            weights, biases = rest[:n], rest[n:]
            results = [
                torch.nn.functional.linear(x, w if self.transposed else w.t(), b)
                for w, b in zip(weights, biases, strict=True)
            ]
        else:
            results = [x @ (w.t() if self.transposed else w) for w in rest]
        return tuple(
            r if keep else torch.relu(r) * 2 for r, keep in zip(results, self.returned, strict=True)
        )


@st.composite
def products(draw: st.DrawFn) -> Products:
    # Sizes around pad-mm's alignment (8 elements) and cuBLAS's: merged widths that are
    # and are not multiples of 8 decide whether returned slices may merge.
    size = st.one_of(st.integers(1, 20), st.sampled_from([8, 16, 24, 32, 40]))
    shared = draw(st.sampled_from(["left", "left", "right", "sum"]))
    n = draw(st.integers(2, 4))
    return Products(
        dtype=draw(st.sampled_from([torch.float32, torch.float32, torch.bfloat16, torch.float16])),
        shared=shared,
        m=draw(size),
        k=draw(size),
        widths=tuple(draw(size) for _ in range(n)),
        transposed=draw(st.booleans()),
        bias=shared == "left" and draw(st.booleans()),
        returned=tuple(draw(st.booleans()) for _ in range(1 if shared == "sum" else n)),
    )


def check_products(program: Products, options: CompileOptions, device: torch.device = CPU) -> Any:
    """Compiles ``program`` with ``options`` for inputs on ``device`` and compares every
    output with eager's; returns the compiled graph."""
    inputs = program.inputs(device)
    capture = capture_make_fx(program.run, *inputs)
    compiled = compile_graph(capture.gm, capture.example_inputs, options)
    assert_outputs_match(program, inputs, compiled(*capture.example_inputs), dynamic=False)
    return compiled


class Attention(torch.nn.Module):
    """Query, key, value projections of one input (GQA: one key/value head), attention, an
    output projection: a training step merges the forward's projections and the backward's
    weight gradients and input-gradient sum."""

    def __init__(self, bias: bool = False) -> None:
        super().__init__()
        self.q = torch.nn.Linear(32, 32, bias=bias)
        self.k = torch.nn.Linear(32, 8, bias=bias)
        self.v = torch.nn.Linear(32, 8, bias=bias)
        self.o = torch.nn.Linear(8, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = self.q(x).view(2, 6, 4, 8).transpose(1, 2)
        k = self.k(x).view(2, 6, 1, 8).transpose(1, 2)
        v = self.v(x).view(2, 6, 1, 8).transpose(1, 2)
        scores = (q @ k.transpose(-1, -2) / 8**0.5).softmax(-1)
        return self.o((scores @ v).mean(1))


def count_merges(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of the groups ``merge-products`` merges from now on (the list fills as
    it merges), so that a test can tell that the pass did merge."""
    merged: list[int] = []
    merge = merge_products._merge  # pyright: ignore[reportPrivateUsage]

    def counted(side: int, members: Sequence[AtenOp], *rest: Any) -> list[SSAValue]:
        merged.append(len(members))
        return merge(side, members, *rest)

    monkeypatch.setattr(merge_products, "_merge", counted)
    return merged

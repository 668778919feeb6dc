"""The graph fuzzer (``tests/test_graph_fuzz.py``) through the Triton backend: emitted
kernels run in Triton's interpreter on the CPU (or on a GPU with KILN_TRITON_DEVICE=cuda),
once as the tile pass chose and once with every reduction looped over small chunks
(multi-pass kernels that recompute values and reread their inputs); and scheduled as
for a GPU wherever it runs (the decisions only a GPU gets: column-major producers of
column sums, recomputed masks, merged tiny kernels)."""

from __future__ import annotations

import os

import torch
from hypothesis import given
from hypothesis import strategies as st
from test_graph_fuzz import Program, assert_matches_eager, check_program, fuzz, programs
from triton_checks import DEVICE, Retile, capture, compile_capture, looped

EXAMPLES = int(os.environ.get("KILN_FUZZ_EXAMPLES", "40")) // 4


@fuzz(EXAMPLES)
@given(programs())
def test_random_graphs_through_the_triton_backend(program: Program) -> None:
    check_program(program, "triton", device=DEVICE)


@fuzz(EXAMPLES)
@given(programs(), st.sampled_from([2, 4, 8]))
def test_random_graphs_with_looped_reductions(program: Program, rblock: int) -> None:
    _check_compiled(program, looped(rblock=rblock), gpu_decisions=False)


@fuzz(EXAMPLES)
@given(programs(), st.sampled_from([None, 2, 8]))
def test_random_graphs_scheduled_for_a_gpu(program: Program, rblock: int | None) -> None:
    _check_compiled(program, None if rblock is None else looped(rblock=rblock), gpu_decisions=True)


def _check_compiled(program: Program, retile: Retile | None, gpu_decisions: bool) -> None:
    shapes = program.shapes + program.weight_shapes
    inputs = [torch.randn(s, dtype=program.dtype) for s in shapes]
    compiled = compile_capture(
        capture(program.run, *inputs), retile=retile, gpu_decisions=gpu_decisions
    )
    exact = program.run(*(t.double() for t in inputs))
    for have, want, reference in zip(compiled.run(), compiled.expected, exact, strict=True):
        assert_matches_eager(have.cpu(), want, reference, program.dtype)

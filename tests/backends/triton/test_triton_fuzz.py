"""The graph fuzzer (``tests/test_graph_fuzz.py``) through the Triton backend: emitted
kernels run in Triton's interpreter on the CPU (or on a GPU with KILN_TRITON_DEVICE=cuda),
once as the tile pass chose and once with every reduction looped over small chunks
(multi-pass kernels that recompute values and reread their inputs); and scheduled as
for a GPU wherever it runs (the decisions only a GPU gets: column-major producers of
column sums, recomputed masks, merged tiny kernels); and through the whole default
pipeline as ``torch.compile`` runs it for a GPU (the passes only a GPU program gets:
merged products, padded products, dot kernels, channels-last convolutions), with random
groups of products sharing an operand (``tests/product_groups.py``) for ``merge-products``."""

from __future__ import annotations

import os
from unittest import mock

import torch
from hypothesis import given
from hypothesis import strategies as st
from product_groups import Products, check_products, products
from test_graph_fuzz import Program, assert_matches_eager, check_program, fuzz, programs
from triton_checks import DEVICE, Retile, capture, compile_capture, looped

from kiln.compiler import CompileOptions

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


@fuzz(EXAMPLES)
@given(programs())
def test_random_graphs_through_the_default_pipeline_as_on_a_gpu(program: Program) -> None:
    with mock.patch("kiln.compiler.gpu_device", return_value=torch.device("cuda", 0)):
        check_program(program, "triton", device=DEVICE)


@fuzz(EXAMPLES)
@given(products())
def test_random_product_groups_merged_as_on_a_gpu(program: Products) -> None:
    # merge-products is on by default for a GPU program; half-precision products become
    # dot kernels there.
    options = CompileOptions(executor="triton", verbose=False)
    with mock.patch("kiln.compiler.gpu_device", return_value=torch.device("cuda", 0)):
        check_products(program, options, device=DEVICE)


def _check_compiled(program: Program, retile: Retile | None, gpu_decisions: bool) -> None:
    shapes = program.shapes + program.weight_shapes
    inputs = [torch.randn(s, dtype=program.dtype) for s in shapes]
    compiled = compile_capture(
        capture(program.run, *inputs), retile=retile, gpu_decisions=gpu_decisions
    )
    exact = program.run(*(t.double() for t in inputs))
    for have, want, reference in zip(compiled.run(), compiled.expected, exact, strict=True):
        assert_matches_eager(have.cpu(), want, reference, program.dtype)

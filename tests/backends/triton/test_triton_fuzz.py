"""The graph fuzzer (``tests/test_graph_fuzz.py``) through the Triton backend: emitted
kernels run in Triton's interpreter on the CPU (or on a GPU with KILN_TRITON_DEVICE=cuda)."""

from __future__ import annotations

import os

from hypothesis import given
from test_graph_fuzz import Program, check_program, fuzz, programs
from triton_checks import DEVICE


@fuzz(int(os.environ.get("KILN_FUZZ_EXAMPLES", "40")) // 4)
@given(programs())
def test_random_graphs_through_the_triton_backend(program: Program) -> None:
    check_program(program, "triton", device=DEVICE)

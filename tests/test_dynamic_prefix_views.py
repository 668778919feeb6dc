"""A leading part of a buffer under symbolic sizes (the first chunk of a symbolic split,
``x[:n]``) has the buffer's strides but fewer rows: lowering must not take it for the
buffer itself (issue 21). Checked off the dynamo path, where AOTAutograd's rebuilding of
input views does not run: ``make_fx`` graphs compiled with ``compile_graph``."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from kiln.compiler import CompileOptions, compile_graph
from kiln.frontends.capture import capture_make_fx

CASES: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "first_chunk_returned": lambda x: torch.chunk(x, 3, 0)[0],
    "first_chunk_into_an_extern": lambda x: torch.chunk(x, 3, 0)[0].flatten(1) @ x[0].flatten(),
    "prefix_of_a_computed_buffer": lambda x: (x * 2)[: x.shape[0] // 2],
}


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize(
    ("name", "executor"),
    [*((name, "cpp") for name in CASES), ("first_chunk_returned", "interpret")],
)
def test_prefix_views_with_symbolic_sizes(name: str, executor: str) -> None:
    fn = CASES[name]
    cap = capture_make_fx(fn, torch.randn(5, 6, 3), dynamic=True)
    options = CompileOptions(executor=executor, verbose=False)  # pyright: ignore[reportArgumentType]
    compiled = compile_graph(cap.gm, cap.example_inputs, options)
    for shape in ((5, 6, 3), (7, 4, 2)):
        x = torch.randn(shape)
        want = fn(x)
        have = compiled(x)
        assert have.shape == want.shape
        torch.testing.assert_close(have, want)

"""Batched program fuzzing (issue 20): random programs of :mod:`test_program_fuzz` (every
dtype, views and layout-changing copies, in-place updates, aliasing outputs, zero-size
dims, NaN/Inf) compiled through ``kiln.compile`` as ONE function, for long runs
(``benchmarks/fuzz_campaign.py --fuzzers program-batch``).

One Dynamo trace, one AOTAutograd run and one kiln compile serve K programs. Each
program reads and updates only its own inputs; its outputs, and its inputs after the
call, are compared with eager as :func:`test_program_fuzz.check` does (values with NaN,
dtypes, devices, shapes, strides); aliasing is compared over the whole batch (an output
that shares storage with another program's tensor where eager's does not is wrong too).
A failing batch is taken apart as in :mod:`test_graph_batch_fuzz`: the first program that
fails alone raises its own error, for hypothesis to shrink.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from test_program_fuzz import (
    EXECUTORS,
    Program,
    _aliasing,  # pyright: ignore[reportPrivateUsage]
    _close,  # pyright: ignore[reportPrivateUsage]
    _layout,  # pyright: ignore[reportPrivateUsage]
    check,
    fuzz,
    loosest_float,
    make_inputs,
    programs,
)

import kiln
from kiln.compiler import compile_history, reset_compile_history

BATCH = 16
# Executors in a fixed proportion, drawn with the batch (a reproducer names it).
MODES = ("cpp", "cpp", "cpp", "kernel", "loop", "aten", "triton")


@dataclass(frozen=True)
class Batch:
    programs: tuple[Program, ...]

    def run(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        outputs: list[torch.Tensor] = []
        at = 0
        for program in self.programs:
            count = len(program.shapes)
            outputs.extend(program.run(*tensors[at : at + count]))
            at += count
        return tuple(outputs)


@st.composite
def batches(draw: st.DrawFn, size: int = BATCH) -> Batch:
    """Up to ``size`` programs ("one more?" is True 63 times in 64 while generating; the
    shrinker ends the batch early, see test_graph_batch_fuzz.batches)."""
    more = st.sampled_from([False, *[True] * 63])
    drawn = [draw(programs())]
    while len(drawn) < size and draw(more):
        drawn.append(draw(programs()))
    return Batch(tuple(drawn))


def _inputs(batch: Batch, seed: int) -> list[torch.Tensor]:
    return [t for k, p in enumerate(batch.programs) for t in make_inputs(p, seed + k)]


def _check_together(batch: Batch, executor: str, seed: int = 1) -> None:
    torch._dynamo.reset()
    reset_compile_history()
    compiled = kiln.compile(batch.run, fullgraph=True, verbose=False, **EXECUTORS[executor])
    eager_inputs = _inputs(batch, seed)
    kiln_inputs = [t.clone() for t in eager_inputs]
    want = batch.run(*eager_inputs)
    have = compiled(*kiln_inputs)
    history = compile_history()
    level = EXECUTORS[executor]["executor"]
    assert all(s.executor == level for s in history), [s.executor for s in history]
    assert len(have) == len(want)
    at_output = at_input = 0
    for k, program in enumerate(batch.programs):
        what = f"program {k} of a batch of {len(batch.programs)}"
        loosest = loosest_float(program)
        for j in range(len(program.outputs)):
            h, w = have[at_output + j], want[at_output + j]
            _close(h, w, f"{what}: output {j}", loosest)
            if w.numel() > 1:
                assert _layout(h) == _layout(w), (f"{what}: output {j} strides", h.stride())
        for j in range(len(program.shapes)):
            h, w = kiln_inputs[at_input + j], eager_inputs[at_input + j]
            _close(h, w, f"{what}: input {j} after the call", loosest)
        at_output += len(program.outputs)
        at_input += len(program.shapes)
    assert _aliasing(have, kiln_inputs) == _aliasing(want, eager_inputs), "aliasing"


def check_batch(batch: Batch, executor: str) -> None:
    """Every program of ``batch`` through ``executor`` as one compiled function; on a
    failure, the first program that fails alone raises its own error."""
    try:
        _check_together(batch, executor)
        return
    except Exception as error:
        batched = error
    # Outside the except block: a program's own error must not carry the batch's as its
    # context (hypothesis would take the two for different bugs, the shrinker's reruns
    # raising it without).
    for k, program in enumerate(batch.programs):
        try:
            check(program, executor)
        except Exception as alone:
            alone.add_note(f"program {k} of the batch, alone, {executor=}: {program!r}")
            raise
    batched.add_note(f"fails only when the {len(batch.programs)} programs are compiled together")
    raise batched


def check_alone_first(batch: Batch, executor: str, passed: set[str]) -> None:
    """For the shrinker's reruns (see test_graph_batch_fuzz.check_alone_first): each
    program alone unless in ``passed``, then the batch together."""
    for k, program in enumerate(batch.programs):
        key = repr((program, executor))
        if key in passed:
            continue
        try:
            check(program, executor)
        except Exception as alone:
            alone.add_note(f"program {k} of the batch, alone, {executor=}: {program!r}")
            raise
        passed.add(key)
    _check_together(batch, executor)


pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::RuntimeWarning")


@pytest.mark.parametrize("executor", ["cpp"])
def test_batches_of_random_programs(executor: str) -> None:
    # Derandomized in CI: the first example is a one-program batch, the second a full one.
    @fuzz(max(2, int(os.environ.get("KILN_FUZZ_EXAMPLES", "2"))))
    @given(batches(size=6))
    def run(batch: Batch) -> None:
        check_batch(batch, executor)

    run()

"""Batched graph fuzzing (issue 20): many random programs of :mod:`test_graph_fuzz`
compiled as ONE graph, for the long runs (100k graphs, ``benchmarks/fuzz_campaign.py
--fuzzers graph-batch``).

A graph example alone costs about a second of fixed work that does not depend on its
size (tracing, the pipeline's per-module setup, a g++ process and its headers, the
wrapper); a batch of K independent programs pays it once: one capture, one pipeline
run, one C++ translation unit. Each program of the batch reads only its own inputs and
returns its own outputs, so the batch is K graphs side by side, and each program's
outputs are compared with eager separately, with the checks of
:func:`test_graph_fuzz.check_program` (dtypes, shapes, values, strides where static).

A batch that fails (a mismatch or an exception anywhere) is taken apart: every program
is checked alone with the same executor, and the first one that fails alone raises its
own error, so hypothesis shrinks the batch down to that one program (the batch draws
"one more program?" before each, and stopping shrinks first). Only if no program fails
alone does the batch's error itself escape (an interaction between programs in one
graph: a bug too, reported with the whole batch).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from test_graph_fuzz import (
    CPU,
    Program,
    assert_outputs_match,
    check_program,
    fuzz,
    programs,
)

from kiln.compiler import CompileOptions, compile_graph
from kiln.frontends.capture import capture_make_fx

BATCH = 32  # programs per batch in long runs: the fixed cost is well amortized by then
# What a batch is checked on, drawn with it (so a reproducer names it), in a fixed
# proportion: C++ 4, kernel interpreter 2, Triton 1, C++ with symbolic sizes 1 (that
# one costs about five times a static batch: decompositions traced with size symbols).
MODES = ("cpp", "cpp", "cpp", "cpp", "interpret", "interpret", "triton", "cpp-dynamic")


@dataclass(frozen=True)
class Batch:
    """Programs side by side: the inputs of program 0, then of program 1, ...; the
    outputs likewise."""

    programs: tuple[Program, ...]

    def run(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        outputs: list[torch.Tensor] = []
        at = 0
        for program, count in zip(self.programs, self.arity(), strict=True):
            outputs.extend(program.run(*tensors[at : at + count]))
            at += count
        return tuple(outputs)

    def arity(self) -> list[int]:
        return [len(p.shapes) + len(p.weight_shapes) for p in self.programs]


@st.composite
def batches(draw: st.DrawFn, size: int = BATCH) -> Batch:
    """Up to ``size`` programs. Drawn with "one more?" asked before each program after
    the first, True 63 times in 64 while generating: batches are nearly always full,
    and the shrinker, which moves such a choice to its first value (False), ends the
    batch early and deletes programs until one failing program is left."""
    more = st.sampled_from([False, *[True] * 63])
    drawn = [draw(programs())]
    while len(drawn) < size and draw(more):
        drawn.append(draw(programs()))
    return Batch(tuple(drawn))


def _batch_inputs(batch: Batch, device: torch.device) -> list[torch.Tensor]:
    return [
        torch.randn(s, dtype=p.dtype, device=device)
        for p in batch.programs
        for s in p.shapes + p.weight_shapes
    ]


def _check_together(batch: Batch, executor: str, dynamic: bool, device: torch.device) -> None:
    inputs = _batch_inputs(batch, device)
    capture = capture_make_fx(batch.run, *inputs, dynamic=dynamic)
    options = CompileOptions(executor=executor, verbose=False)  # pyright: ignore[reportArgumentType]
    compiled = compile_graph(capture.gm, capture.example_inputs, options)
    assert compiled.stats.executor == executor
    got: Any = compiled(*capture.example_inputs)
    assert len(got) == sum(len(p.outputs) for p in batch.programs)
    at_input = at_output = 0
    for k, (program, count) in enumerate(zip(batch.programs, batch.arity(), strict=True)):
        n = len(program.outputs)
        try:
            assert_outputs_match(
                program,
                inputs[at_input : at_input + count],
                got[at_output : at_output + n],
                dynamic,
            )
        except AssertionError as error:
            error.add_note(f"program {k} of a batch of {len(batch.programs)}: {program!r}")
            raise
        at_input += count
        at_output += n


def check_batch(
    batch: Batch, executor: str, dynamic: bool = False, device: torch.device = CPU
) -> None:
    """Every program of ``batch`` through ``executor``, compiled as one graph (see the
    module docstring for what happens on a failure)."""
    try:
        _check_together(batch, executor, dynamic, device)
        return
    except Exception as error:
        batched = error
    # Outside the except block: a program's own error must not carry the batch's as its
    # context (hypothesis would take the two for different bugs, the shrinker's reruns
    # raising it without).
    for k, program in enumerate(batch.programs):
        try:
            check_program(program, executor, dynamic, device)
        except Exception as alone:
            alone.add_note(f"program {k} of the batch, alone, {executor=}, {dynamic=}: {program!r}")
            raise
    batched.add_note(f"fails only when the {len(batch.programs)} programs are compiled together")
    raise batched


def check_alone_first(
    batch: Batch,
    executor: str,
    dynamic: bool = False,
    device: torch.device = CPU,
    passed: set[str] | None = None,
) -> None:
    """:func:`check_batch` for the shrinker's reruns, where most programs of a batch are
    the ones it has just seen: each program alone, skipping those in ``passed`` (which it
    then records), and the batch together only if none fails alone (a failure that needs
    the batch). Each rerun costs the compiles of the programs the shrinker changed."""
    passed = set() if passed is None else passed
    for k, program in enumerate(batch.programs):
        key = repr((program, executor, dynamic))
        if key in passed:
            continue
        try:
            check_program(program, executor, dynamic, device)
        except Exception as alone:
            alone.add_note(f"program {k} of the batch, alone, {executor=}, {dynamic=}: {program!r}")
            raise
        passed.add(key)
    _check_together(batch, executor, dynamic, device)


def check_mode(
    batch: Batch, mode: str, device: torch.device = CPU, passed: set[str] | None = None
) -> None:
    """One of :data:`MODES`: ``cpp``, ``interpret``, ``triton`` (on ``device``) or
    ``cpp-dynamic``. With ``passed`` (the shrinker's reruns): :func:`check_alone_first`."""
    executor, _, dynamic = mode.partition("-")
    device = device if executor == "triton" else CPU
    if passed is None:
        check_batch(batch, executor, dynamic == "dynamic", device)
    else:
        check_alone_first(batch, executor, dynamic == "dynamic", device, passed)


EXAMPLES = int(os.environ.get("KILN_FUZZ_EXAMPLES", "40"))


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("mode", ["cpp", "cpp-dynamic"])
def test_batches_of_random_graphs(mode: str) -> None:
    # Derandomized in CI: the first example is the one-program batch, the second a full one.
    @fuzz(max(2, EXAMPLES // 20))
    @given(batches(size=6))
    def run(batch: Batch) -> None:
        check_mode(batch, mode)

    run()


def _failing_batch() -> Batch:
    program = Program(torch.float32, ((2, 3),), (), (0,), ())
    return Batch((program, program, program))


def test_a_failing_batch_raises_the_error_of_its_first_failing_program(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What hypothesis then shrinks is one program's failure, with its own message."""
    module = sys.modules[__name__]
    seen: list[int] = []

    def together(*args: object) -> None:
        raise RuntimeError("the batch failed")

    def alone(program: Program, *args: object) -> None:
        seen.append(len(seen))
        if len(seen) == 2:
            raise AssertionError("program 1 is wrong")

    monkeypatch.setattr(module, "_check_together", together)
    monkeypatch.setattr(module, "check_program", alone)
    with pytest.raises(AssertionError, match="program 1 is wrong") as caught:
        check_batch(_failing_batch(), "cpp")
    assert seen == [0, 1]
    assert "program 1 of the batch, alone" in "\n".join(caught.value.__notes__)


def test_a_batch_that_fails_only_together_raises_its_own_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module = sys.modules[__name__]

    def together(*args: object) -> None:
        raise RuntimeError("the batch failed")

    monkeypatch.setattr(module, "_check_together", together)
    monkeypatch.setattr(module, "check_program", lambda *args: None)  # pyright: ignore[reportUnknownLambdaType]
    with pytest.raises(RuntimeError, match="the batch failed") as caught:
        check_batch(_failing_batch(), "cpp")
    assert "compiled together" in "\n".join(caught.value.__notes__)

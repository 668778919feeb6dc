"""Malformed-IR and random-pipeline fuzzing of ``kiln-opt`` (issue 20).

Inputs: valid IR at every level (aten, loop, kernel, cpp, triton: one small model run
through kiln-opt itself), then either mutated as text (a token deleted, two swapped, one
duplicated, a number changed, random bytes inserted, the text truncated) or run through
a random sequence of kiln's registered passes, optionally printed with a target. Each
must end in exit status 0 with IR that parses and verifies again, or exit status 1 with
a diagnostic whose first line names a location (``file:line:col: error:``) or is
kiln-opt's own one-line error; never an escaping exception (a Python traceback), never a
hang (an alarm stops a run past :data:`HANG_SECONDS`), and never an internal error
(a pass failing with ``KeyError``, ``AttributeError`` ...: a bug, however well printed).

``main`` runs in-process (a subprocess per input would cost more than the run). CI runs
a small derandomized budget; ``KILN_OPT_FUZZ_EXAMPLES=10000`` is the long mode.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import signal
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import FrameType

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from xdsl.parser import Parser

from kiln.frontends.capture import capture_make_fx
from kiln.frontends.fx import import_graph
from kiln.registry import default_registry, make_context
from kiln.tools.kiln_opt import main

EXAMPLES = int(os.environ.get("KILN_OPT_FUZZ_EXAMPLES", "12"))
HANG_SECONDS = 60
LEVELS = ("aten", "loop", "kernel", "cpp", "triton")
TO_LEVEL = {
    "aten": None,
    "loop": "decompose,lower-aten",
    "kernel": "decompose,lower-aten,fuse",
    "cpp": "decompose,lower-aten,fuse,lower-to-cpp",
    "triton": "decompose,lower-aten,fuse,lower-to-triton",
}
PASSES = tuple(sorted(default_registry().passes))
TARGETS = (None, None, "cpp", "triton")

_LOCATED = re.compile(r"^\S+:\d+:\d+: error: ")
_OWN = re.compile(r"^kiln-opt: error: ")
# Python's own exception names in a pass failure: kiln code that crashed, however the
# message is printed.
_INTERNAL = re.compile(
    r"\b(AttributeError|KeyError|IndexError|AssertionError|TypeError|UnboundLocalError|"
    r"NameError|ZeroDivisionError|RecursionError|StopIteration|NotImplementedError)\b"
)


def _model(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
    h = torch.relu(x @ w + b)
    s = torch.softmax(h, -1)
    t = torch.cat([s, h.transpose(0, 1).reshape(h.shape)], 0)
    return t.sum(0), (h * 2).exp().mean(), torch.where(h > 0, x[:, :6], -x[:, :6])


@dataclass(frozen=True)
class Outcome:
    code: int
    out: str
    err: str


class Hang(BaseException):
    """Raised by the alarm: a BaseException, so that ``main`` does not catch it."""


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    raise Hang(f"kiln-opt ran for more than {HANG_SECONDS} s")


def run_main(path: Path, *args: str) -> Outcome:
    out, err = io.StringIO(), io.StringIO()
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(HANG_SECONDS)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main([str(path), *args])
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    return Outcome(code, out.getvalue(), err.getvalue())


@cache
def seeds() -> dict[str, str]:
    """Valid IR of one small model at every level."""
    inputs = (torch.randn(4, 8), torch.randn(8, 6), torch.randn(6))
    module = import_graph(capture_make_fx(_model, *inputs).gm)
    aten = str(module)
    texts = {"aten": aten}
    tmp = Path(os.environ.get("TMPDIR", "/tmp")) / f"kiln-opt-fuzz-{os.getpid()}.mlir"
    tmp.write_text(aten)
    try:
        for level, pipeline in TO_LEVEL.items():
            if pipeline is not None:
                result = run_main(tmp, "-p", pipeline)
                assert result.code == 0, result.err
                texts[level] = result.out
    finally:
        tmp.unlink()
    return texts


def check(outcome: Outcome, emitted: bool) -> None:
    """Verified IR or one clean diagnostic (see the module docstring)."""
    if outcome.code == 0:
        if not emitted and outcome.out.strip():
            Parser(make_context(), outcome.out).parse_module().verify()
        return
    assert outcome.code == 1, outcome
    first = outcome.err.splitlines()[0] if outcome.err else ""
    assert _LOCATED.match(first) or _OWN.match(first), outcome.err
    assert not _INTERNAL.search(first), outcome.err
    assert "Traceback" not in outcome.err, outcome.err


_TOKEN = re.compile(r"\s+|[%@^#!]?[\w.$-]+|\"[^\"\n]*\"|.", re.S)


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    text = seeds()[draw(st.sampled_from(LEVELS))]
    tokens = _TOKEN.findall(text)
    kind = draw(st.sampled_from(["delete", "swap", "duplicate", "number", "bytes", "truncate"]))
    count = draw(st.integers(1, 3))
    for _ in range(count):
        i = draw(st.integers(0, len(tokens) - 1))
        if kind == "delete":
            del tokens[i]
        elif kind == "swap":
            j = draw(st.integers(0, len(tokens) - 1))
            tokens[i], tokens[j] = tokens[j], tokens[i]
        elif kind == "duplicate":
            tokens.insert(i, tokens[i])
        elif kind == "number":
            numbers = [k for k, t in enumerate(tokens) if re.fullmatch(r"-?\d+", t)]
            if numbers:
                k = draw(st.sampled_from(numbers))
                tokens[k] = str(draw(st.sampled_from([0, 1, -1, 2, 7, 2**31, 2**63, -(2**63)])))
        elif kind == "truncate":
            tokens = tokens[:i]
            break
    data = "".join(tokens).encode()
    if kind == "bytes":
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.binary(min_size=1, max_size=4)) + data[at:]
    return data


def _fuzz(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=not os.environ.get("KILN_FUZZ_RANDOM"),  # long runs: random inputs
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kiln-opt-fuzz")


@pytest.mark.filterwarnings("ignore")
def test_the_seeds_are_valid_at_every_level(workdir: Path) -> None:
    for level in LEVELS:
        path = workdir / f"{level}.mlir"
        path.write_text(seeds()[level])
        outcome = run_main(path)
        assert outcome.code == 0, (level, outcome.err)


@pytest.mark.filterwarnings("ignore")
def test_mutated_ir_gives_a_clean_diagnostic(workdir: Path) -> None:
    path = workdir / "mutated.mlir"

    @_fuzz(EXAMPLES)
    @given(mutated(), st.sampled_from([(), ("-p", "decompose,lower-aten,fuse")]))
    def run(data: bytes, args: tuple[str, ...]) -> None:
        path.write_bytes(data)
        check(run_main(path, *args), emitted=False)

    run()


@pytest.mark.filterwarnings("ignore")
def test_random_pipelines_end_in_verified_ir_or_a_diagnostic(workdir: Path) -> None:
    path = workdir / "pipeline.mlir"

    @_fuzz(max(1, EXAMPLES // 4))  # a pipeline with fuse costs a second or more
    @given(
        st.sampled_from(LEVELS),
        st.lists(st.sampled_from(PASSES), min_size=1, max_size=5),
        st.sampled_from(TARGETS),
    )
    def run(level: str, passes: list[str], target: str | None) -> None:
        path.write_text(seeds()[level])
        args = ["-p", ",".join(passes)]
        if target is not None:
            args += ["-t", target]
        check(run_main(path, *args), emitted=target is not None)

    run()

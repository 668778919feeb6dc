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

What an input costs is mostly parsing and verifying, so the fuzzers do each only once
where the answer cannot change: the seed IR (the random pipelines' input) is parsed once
per process and each run gets a clone (:class:`SeedCachingMain`, kiln-opt's own parser
and verifier otherwise, every pass still verified after); an output already parsed and
verified once is not parsed again (:data:`_VERIFIED`); and the installed plugins
(entry points, xDSL's multiverse) are looked up once per process, not at each ``main``.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import FrameType
from typing import IO

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.universe import Universe

import kiln.plugins
from kiln.diagnostics import LocatingParser, SourceMap
from kiln.frontends.capture import capture_make_fx
from kiln.frontends.fx import import_graph
from kiln.registry import default_registry, make_context
from kiln.tools.kiln_opt import KilnOptMain, main

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


_PARSED: dict[tuple[bytes, str, int], tuple[ModuleOp, SourceMap | None]] = {}
_SEED_TEXTS: set[bytes] = set()  # filled by seeds()


class SeedCachingMain(KilnOptMain):
    """kiln-opt, parsing and verifying each seed text once per process: a run on a seed
    gets a clone of the module parsed the first time (and its source map, moved over to
    the clone), which is not verified again before the first pass (every pass's result
    still is). Other texts (mutated IR) go through the parser every time."""

    _fresh: ModuleOp | None = None  # the seed clone just handed out

    def _verify(self, module: ModuleOp, previous: ModulePass | None) -> None:
        if previous is None and module is self._fresh:
            return  # the seed verified when it was first parsed
        super()._verify(module, previous)

    def register_all_frontends(self) -> None:
        super().register_all_frontends()
        parse = self.available_frontends["mlir"]

        def parse_or_clone(stream: IO[bytes]) -> ModuleOp:
            raw = stream.read()
            raw = raw if isinstance(raw, bytes) else raw.encode()
            key = (raw, self.get_input_name(), self._line_offset)
            if key not in _PARSED:
                module = parse(io.BytesIO(raw))
                if raw not in _SEED_TEXTS:
                    return module
                module.verify()
                _PARSED[key] = (module, self.source_map)
            module, source_map = _PARSED[key]
            copy = module.clone()
            if source_map is not None:
                positions = source_map.positions
                self.source_map = SourceMap(
                    source_map.input,
                    source_map.line_offset,
                    {
                        b: positions[a]
                        for a, b in zip(module.walk(), copy.walk(), strict=True)
                        if a in positions
                    },
                )
            self._fresh = copy
            return copy

        self.available_frontends["mlir"] = parse_or_clone


@contextlib.contextmanager
def _discovery_once() -> Iterator[None]:
    """The installed plugins do not change while the fuzzers run: look them up once."""
    multiverse = Universe.get_multiverse
    lookup = kiln.plugins.entry_points
    Universe.get_multiverse = staticmethod(cache(multiverse))  # pyright: ignore[reportAttributeAccessIssue]
    kiln.plugins.entry_points = cache(lookup)  # pyright: ignore[reportAttributeAccessIssue]
    try:
        yield
    finally:
        Universe.get_multiverse = staticmethod(multiverse)  # pyright: ignore[reportAttributeAccessIssue]
        kiln.plugins.entry_points = lookup


def run_main(path: Path, *args: str) -> Outcome:
    out, err = io.StringIO(), io.StringIO()
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(HANG_SECONDS)
    try:
        with (
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
            _discovery_once(),
        ):
            code = main([str(path), *args], tool=SeedCachingMain)
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
    _SEED_TEXTS.update(text.encode() for text in texts.values())
    return texts


_VERIFIED: set[bytes] = set()
"""Digests of the outputs that parsed and verified (parsing is deterministic)."""


def check(outcome: Outcome, emitted: bool) -> None:
    """Verified IR or one clean diagnostic (see the module docstring)."""
    if outcome.code == 0:
        if not emitted and outcome.out.strip():
            digest = hashlib.sha256(outcome.out.encode()).digest()
            if digest not in _VERIFIED:
                # kiln-opt's own parser: its output must read back in kiln-opt.
                LocatingParser(make_context(), outcome.out).parse_module().verify()
                _VERIFIED.add(digest)
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


def test_printed_non_ascii_strings_read_back(workdir: Path) -> None:
    """Found on 16 cores (kiln-opt-ir, seed IR with a byte pair C2 80 inserted into a
    kernel's ``provenance``): kiln-opt printed the string with UTF-8 escapes, which xDSL's
    lexer read back as bytes, and the check's re-parse failed ``StringAttr``'s verifier."""
    source = seeds()["cpp"]
    mutated = source.replace('provenance = ["', 'provenance = ["\u0080', 1)
    assert mutated != source
    path = workdir / "in.mlir"
    path.write_text(mutated)
    outcome = run_main(path)
    assert outcome.code == 0, outcome.err
    assert "\\C2\\80" in outcome.out
    check(outcome, emitted=False)

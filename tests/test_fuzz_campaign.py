"""The fuzz campaign tool (benchmarks/fuzz_campaign.py): how it deals fuzzers to workers,
counts examples, and files failures, tracebacks and hangs with their shrunk reproducers.
In-process, with toy fuzzers (the real ones are the test modules it drives)."""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def campaign() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "fuzz_campaign", ROOT / "benchmarks" / "fuzz_campaign.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["fuzz_campaign"] = module
    spec.loader.exec_module(module)
    return module


def test_every_fuzzer_gets_a_worker_and_every_worker_a_fuzzer(campaign: ModuleType) -> None:
    fuzzers = list(campaign.FUZZERS)
    for workers in (1, 2, 5, 6, 16):
        plan = campaign._assign(fuzzers, workers)
        assert len(plan) == workers
        assert all(plan)
        assert {f for names in plan for f in names} == set(fuzzers)


def _run(campaign: ModuleType, tmp_path: Path, check: object, examples: int = 30) -> object:
    state = campaign.WorkerState("0", tmp_path)
    fuzzer = campaign.Fuzzer(st.integers(0, 1000), check)
    campaign.run_batch(state, "toy", fuzzer, examples, 1234, 5)
    return state.tallies["toy"]


def test_passing_examples_are_counted(campaign: ModuleType, tmp_path: Path) -> None:
    tally = _run(campaign, tmp_path, lambda n: None)
    assert (tally.examples, tally.failures, tally.tracebacks, tally.hangs) == (30, 0, 0, 0)
    assert not (tmp_path / "failures").exists()


def test_a_wrong_answer_is_a_failure_with_its_shrunk_example(
    campaign: ModuleType, tmp_path: Path
) -> None:
    def check(n: int) -> None:
        assert n < 100, "mismatch"

    tally = _run(campaign, tmp_path, check, examples=200)
    assert (tally.failures, tally.tracebacks) == (1, 0)
    [report] = (tmp_path / "failures").iterdir()
    text = report.read_text()
    assert report.name.startswith("toy-failures-")
    assert "hypothesis seed: 1234" in text
    assert "example=100" in text  # shrunk to the smallest failing input
    assert "mismatch" in text


def test_an_exception_is_a_traceback(campaign: ModuleType, tmp_path: Path) -> None:
    def check(n: int) -> None:
        if n > 10:
            raise KeyError("internal")

    tally = _run(campaign, tmp_path, check, examples=200)
    assert (tally.failures, tally.tracebacks) == (0, 1)
    assert "KeyError" in next((tmp_path / "failures").iterdir()).read_text()


def test_an_example_past_the_limit_is_a_hang(campaign: ModuleType, tmp_path: Path) -> None:
    import signal

    previous = signal.signal(signal.SIGALRM, campaign._on_alarm)
    try:
        state = campaign.WorkerState("0", tmp_path)
        fuzzer = campaign.Fuzzer(st.just(7), lambda n: time.sleep(30))
        campaign.run_batch(state, "toy", fuzzer, 1, 1, 1)
    finally:
        signal.signal(signal.SIGALRM, previous)
    assert state.tallies["toy"].hangs == 1
    [report] = (tmp_path / "failures").iterdir()
    assert report.name.startswith("toy-hangs-")
    assert "toy\n1\n7" in report.read_text()  # the example that ran too long


def test_summary_table(campaign: ModuleType) -> None:
    tally = campaign.Tally(examples=10, failures=1, seconds=5.0)
    table = campaign._table({"graph": tally}, 5.0)
    assert "graph" in table
    assert "0.500" in table


def test_a_batch_stops_at_its_time_limit(campaign: ModuleType, tmp_path: Path) -> None:
    state = campaign.WorkerState("0", tmp_path)
    fuzzer = campaign.Fuzzer(st.integers(0, 1000), lambda n: None)
    campaign.run_batch(state, "toy", fuzzer, 500, 1, 5, time.monotonic() - 1)
    tally = state.tallies["toy"]
    assert (tally.examples, tally.failures, tally.tracebacks) == (0, 0, 0)


def test_a_batch_past_its_time_limit_draws_no_more_examples(
    campaign: ModuleType, tmp_path: Path
) -> None:
    """Rejecting the examples past the limit made hypothesis draw up to ten times the
    batch's count: minutes for a graph batch, whose draw runs 32 programs eagerly (the
    parent then killed the worker as hung)."""
    draws: list[int] = []

    def drawn(n: int) -> int:
        draws.append(n)
        return n

    state = campaign.WorkerState("0", tmp_path)
    fuzzer = campaign.Fuzzer(st.integers(0, 1000).map(drawn), lambda n: None)
    campaign.run_batch(state, "toy", fuzzer, 500, 1, 5, time.monotonic() - 1)
    assert len(draws) <= 1
    assert state.tallies["toy"].examples == 0
    assert not (tmp_path / "failures").exists()


def test_a_batch_fuzzer_counts_its_graphs(campaign: ModuleType, tmp_path: Path) -> None:
    state = campaign.WorkerState("0", tmp_path)
    fuzzer = campaign.Fuzzer(st.lists(st.integers(), min_size=3, max_size=3), lambda n: None, len)
    campaign.run_batch(state, "toy", fuzzer, 20, 1, 5)
    tally = state.tallies["toy"]
    assert (tally.examples, tally.graphs) == (20, 60)
    assert tally.cpu >= 0
    assert "cpu s/graph" in campaign._table({"toy": tally}, 1.0)


def test_the_shrinker_reruns_a_batch_fuzzers_cheaper_check(
    campaign: ModuleType, tmp_path: Path
) -> None:
    calls = {"check": 0, "shrink": 0, "reset": 0}

    def compare(n: int) -> None:  # one place fails: hypothesis sees one bug
        assert n < 100, "mismatch"

    def check(n: int) -> None:
        calls["check"] += 1
        compare(n)

    def shrink(n: int) -> None:
        calls["shrink"] += 1
        compare(n)

    def reset() -> None:
        calls["reset"] += 1

    state = campaign.WorkerState("0", tmp_path)
    fuzzer = campaign.Fuzzer(
        st.integers(0, 1000), check, shrink_check=shrink, reset=reset, per_run=200
    )
    campaign.run_batch(state, "toy", fuzzer, 200, 1234, 5)
    assert state.tallies["toy"].failures == 1
    assert calls["shrink"] > 0
    assert calls["reset"] == 1
    assert "example=100" in next((tmp_path / "failures").iterdir()).read_text()

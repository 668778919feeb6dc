"""The dashboard's parallel workers (``benchmarks/dashboard.py --jobs N``): the same rows as
one worker, no two timed measurements at once, a crashed worker still a failure row.

Needs the ``bench`` extra, like tests/test_bench_zoo.py; cheap: two tiny hand-written models
(softmax, layer_norm), inference in float32, eager and kiln only.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import multiprocessing
import signal
import sys
import time
from pathlib import Path

import pytest

_MISSING = [
    name
    for name in ("matplotlib", "torchvision", "timm", "transformers", "tqdm")
    if importlib.util.find_spec(name) is None
]
if _MISSING:
    pytest.skip(
        f"the bench extra is not installed ({', '.join(_MISSING)})", allow_module_level=True
    )

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import dashboard  # noqa: E402
import dashboard_isolate  # noqa: E402
from dashboard_measure import TRACE, TimingLock, time_limit  # noqa: E402
from dashboard_render import render  # noqa: E402

MODELS = "softmax,layer_norm"


def _run(tmp_path: Path, jobs: int, *extra: str, isolate: str = "model") -> list[dict]:
    results = tmp_path / f"jobs{jobs}.json"
    argv = ["--models", MODELS, "--modes", "infer", "--dtypes", "float32"]
    argv += ["--backends", "eager,kiln", "--isolate", isolate, "--jobs", str(jobs)]
    assert dashboard.main([*argv, *extra, "--json", str(results)]) == 0
    data = json.loads(results.read_text())
    assert data["runs"][-1]["jobs"] == jobs
    return data["rows"]


def _intervals(trace: Path) -> list[tuple[int, float, float]]:
    out = []
    for line in trace.read_text().splitlines():
        pid, enter, leave = line.split()
        out.append((int(pid), float(enter), float(leave)))
    return sorted(out, key=lambda x: x[1])


def _overlaps(intervals: list[tuple[int, float, float]]) -> int:
    return sum(b[1] < a[2] for a, b in itertools.pairwise(intervals))


def test_two_workers_give_the_rows_of_one_and_never_time_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One worker's rows are the in-process rows (tests/test_bench_zoo.py), and cheaper here.
    serial = {
        (r["model"], r["backend"]): r for r in _run(tmp_path, 1, "--check-only", isolate="off")
    }
    trace = tmp_path / "trace"
    monkeypatch.setenv(TRACE, str(trace))
    parallel = {
        (r["model"], r["backend"]): r for r in _run(tmp_path, 2, "--iters", "2", "--no-warm")
    }
    assert (
        set(serial)
        == set(parallel)
        == {(m, b) for m in MODELS.split(",") for b in ("eager", "kiln")}
    )
    for key, row in serial.items():
        other = parallel[key]
        assert (
            (row["status"], row["reason"]) == (other["status"], other["reason"]) == ("pass", None)
        )
        assert (row["jobs"], other["jobs"]) == (1, 2)
        assert other["ms"] is not None
        assert other["lock_wait_s"] >= 0
        assert row["lock_wait_s"] is None  # one worker: no lock
        if key[1] == "kiln":  # the same computation; only thread counts differ
            assert row["err_eager"] < 1e-5
            assert other["err_eager"] < 1e-5
            assert row["launches"] == other["launches"]
    intervals = _intervals(trace)
    assert len(intervals) == 4  # one hold per row: timing, peak memory (and CUDA profile)
    assert len({pid for pid, _, _ in intervals}) == 2  # one worker per model
    assert _overlaps(intervals) == 0
    page = tmp_path / "d.md"
    render(json.loads((tmp_path / "jobs2.json").read_text()), page, plots=False)
    assert "4 of 4 rows were measured with 2 workers at once" in page.read_text()


def _hold(lock_path: str | None, trace: str, rounds: int) -> None:
    import os

    os.environ[TRACE] = trace
    lock = TimingLock(lock_path)
    for _ in range(rounds):
        with lock():
            if lock_path is None:  # without a lock nothing is traced: trace by hand
                enter = time.time()
                time.sleep(0.05)
                with open(trace, "a") as f:
                    f.write(f"{os.getpid()} {enter!r} {time.time()!r}\n")
            else:
                time.sleep(0.05)


@pytest.mark.parametrize("locked", [True, False])
def test_the_timing_lock_is_exclusive_between_processes(tmp_path: Path, locked: bool) -> None:
    trace = tmp_path / "trace"
    lock = str(tmp_path / "timing.lock") if locked else None
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_hold, args=(lock, str(trace), 4)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    intervals = _intervals(trace)
    assert len(intervals) == 12
    assert len({pid for pid, _, _ in intervals}) == 3
    if locked:
        assert _overlaps(intervals) == 0
    else:  # the check would see overlaps: three processes sleeping at once
        assert _overlaps(intervals) > 0


def test_waiting_for_the_lock_does_not_count_against_the_timeout(tmp_path: Path) -> None:
    path = str(tmp_path / "timing.lock")
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()

    def hold() -> None:
        with TimingLock(path)():
            ready.set()
            time.sleep(2.5)

    holder = ctx.Process(target=hold)
    holder.start()
    assert ready.wait(60)
    waits: list[str] = []
    start = time.monotonic()
    with time_limit(2):  # the wait (~2.5 s) alone would exceed it
        with TimingLock(path, on_wait=lambda: waits.append("wait"))():
            waited = time.monotonic() - start
        assert signal.getitimer(signal.ITIMER_REAL)[0] > 0  # the alarm is armed again
    holder.join(60)
    assert waits == ["wait"]
    assert waited > 2.0


def test_a_crashed_worker_in_a_parallel_run_is_a_failure_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(dashboard_isolate.FAULT, "kiln:crash")
    rows = _run(tmp_path, 2, "--check-only")
    got = {(r["model"], r["backend"]): (r["status"], r["reason"] or "") for r in rows}
    assert set(got) == {(m, b) for m in MODELS.split(",") for b in ("eager", "kiln")}
    for model in MODELS.split(","):
        assert got[(model, "eager")] == ("pass", "")
        status, reason = got[(model, "kiln")]
        assert status == "fail"
        assert reason.startswith("worker killed by SIGABRT")
    assert {r["jobs"] for r in rows} == {2}


def test_worker_cores_are_disjoint_shares() -> None:
    cores = list(range(16))
    shares = [dashboard_isolate.worker_cpus(k, 8, cores) for k in range(8)]
    assert all(len(s) == 2 for s in shares)
    assert sorted(c for s in shares for c in s) == cores
    twelve = [dashboard_isolate.worker_cpus(k, 12, cores) for k in range(12)]
    assert sorted(c for s in twelve for c in s) == cores  # 4 workers get 2 cores, 8 get 1
    assert sorted(len(s) for s in twelve) == [1] * 8 + [2] * 4
    assert dashboard_isolate.worker_cpus(5, 8, [0, 1]) == [1]  # more workers than cores
    assert dashboard_isolate.thread_env(2)["TORCHINDUCTOR_COMPILE_THREADS"] == "2"


def test_jobs_need_isolation() -> None:
    with pytest.raises(SystemExit, match="--jobs"):
        dashboard.main(["--models", "softmax", "--jobs", "2", "--isolate", "off"])


def _workers_under(marker: str) -> list[int]:
    """Processes whose command line names ``marker`` (the workers' temporary folder)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if marker in cmdline and "--worker" in cmdline:
                pids.append(int(proc.name))
    return pids


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the workers through /proc")
def test_a_terminated_parallel_run_kills_its_workers(tmp_path: Path) -> None:
    """``timeout`` ends a dashboard call with SIGTERM: its workers (in sessions of their own)
    must not go on compiling and using the GPU into the next call."""
    import os
    import subprocess

    temp = tmp_path / "tmp"
    temp.mkdir()
    results = tmp_path / "r.json"
    env = {**os.environ, "TMPDIR": str(temp), dashboard_isolate.FAULT: "kiln:hang"}
    argv = ["--models", MODELS, "--modes", "infer", "--dtypes", "float32", "--check-only"]
    argv += ["--backends", "eager,kiln", "--isolate", "model", "--jobs", "2"]
    command = [sys.executable, str(BENCHMARKS / "dashboard.py"), *argv, "--json", str(results)]
    run = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:  # both workers hang in kiln after eager's row
            if results.exists() and len(json.loads(results.read_text())["rows"]) == 2:
                break
            time.sleep(0.5)
        assert len(_workers_under(str(temp))) == 2
        run.terminate()
        run.wait(60)
        gone = time.monotonic() + 30  # a loaded machine takes a moment to reap them
        while _workers_under(str(temp)) and time.monotonic() < gone:
            time.sleep(0.2)
        assert _workers_under(str(temp)) == []
    finally:
        run.kill()
        for pid in _workers_under(str(temp)):
            os.killpg(pid, signal.SIGKILL)


def test_a_worker_waiting_for_the_timing_lock_is_not_taken_for_hung(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Held elsewhere beyond ``--timeout`` + GRACE after both workers began to wait, the lock
    delays the rows, but neither the worker's own timer nor the parent's watchdog fails
    them."""
    import fcntl
    import tempfile
    import threading

    timeout = 20  # beyond the longest silence of a worker on a loaded 2-core machine
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(dashboard_isolate, "GRACE", 0)
    waits = threading.Semaphore(0)
    read_events = dashboard_isolate._read_events

    def spy(path: Path, offset: int) -> tuple[list[dict], int]:
        events, offset = read_events(path, offset)
        for event in events:
            if event.get("lock") == "wait":
                waits.release()
        return events, offset

    monkeypatch.setattr(dashboard_isolate, "_read_events", spy)
    held: list[float] = []

    def hold() -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            runs = list(tmp_path.glob("kiln-dashboard-run-*"))
            if runs:
                with (runs[0] / "timing.lock").open("a") as f:
                    fcntl.flock(f, fcntl.LOCK_EX)
                    if waits.acquire(timeout=300) and waits.acquire(timeout=300):
                        start = time.monotonic()
                        time.sleep(timeout + 3)
                        held.append(time.monotonic() - start)
                return
            time.sleep(0.05)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        rows = _run(tmp_path, 2, "--backends", "eager", "--iters", "2", "--timeout", str(timeout))
    finally:
        holder.join()
    assert held
    assert held[0] > timeout
    assert [(r["status"], r["reason"]) for r in rows] == [("pass", None)] * 2

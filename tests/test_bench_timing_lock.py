"""The dashboard's ``--jobs`` timing lock (benchmarks/dashboard_measure.py): while one worker
times, every other registered worker is paused and resumed after, and the paused seconds
are known to the paused worker (they come off its compile time and its timeout). Real
processes, no bench extra: CI runs it."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from dashboard_measure import TaskTimeout, TimingLock, time_limit, workers_folder

TICKER = """
import sys, time
while True:
    with open(sys.argv[1], "a") as f:
        f.write(repr(time.time()) + "\\n")
    time.sleep(0.01)
"""


def _ticks(path: Path) -> list[float]:
    return [float(t) for t in path.read_text().split()] if path.exists() else []


def _hold_while_ticking(lock: TimingLock, ticks: Path, wait_s: float) -> tuple[float, float]:
    """Once the worker ticks, holds ``lock`` for a second; asserts the worker did not tick
    during the hold (the settle wait comes before it) and ticks again after. Returns the
    hold's start and end."""
    deadline = time.time() + wait_s
    while len(_ticks(ticks)) < 5 and time.time() < deadline:
        time.sleep(0.05)
    with lock():
        entered = time.time()
        time.sleep(1.0)
        left = time.time()
    time.sleep(0.5)
    seen = _ticks(ticks)
    assert not [t for t in seen if entered < t < left]
    assert any(t > left for t in seen)
    return entered, left


@pytest.mark.skipif(sys.platform != "linux", reason="SIGSTOP process groups: Linux")
def test_a_holder_pauses_every_other_worker_and_resumes_them(tmp_path: Path) -> None:
    lock_path = str(tmp_path / "timing.lock")
    ticks = tmp_path / "ticks"
    worker = subprocess.Popen([sys.executable, "-c", TICKER, str(ticks)], start_new_session=True)
    try:
        workers_folder(lock_path).mkdir()
        workers_folder(lock_path).joinpath(str(worker.pid)).touch()
        lock = TimingLock(lock_path)
        entered, left = _hold_while_ticking(lock, ticks, wait_s=20)
        # The paused worker's view: the hold is paused time (its pid is not ours).
        paused = lock.paused_s(entered - 5, left + 5, pid=worker.pid)
        assert 1.0 <= paused <= 2.0
        assert lock.paused_s(entered - 5, left + 5) == 0.0  # our own hold paused nobody here
    finally:
        worker.kill()
        worker.wait()


SELF_REGISTERED_TICKER = """
import sys, time
sys.path.insert(0, sys.argv[3])
from dashboard_measure import register_worker
register_worker(sys.argv[2])
while True:
    with open(sys.argv[1], "a") as f:
        f.write(repr(time.time()) + "\\n")
    time.sleep(0.01)
"""


@pytest.mark.skipif(sys.platform != "linux", reason="SIGSTOP process groups: Linux")
def test_a_process_that_registers_itself_is_paused_and_unregisters_when_terminated(
    tmp_path: Path,
) -> None:
    # train_step_profile.py --lock: processes started side by side (not by the dashboard's
    # parent) register themselves, so that a holder pauses them too.
    lock_path = str(tmp_path / "timing.lock")
    ticks = tmp_path / "ticks"
    benchmarks = str(Path(__file__).resolve().parent.parent / "benchmarks")
    worker = subprocess.Popen(
        [sys.executable, "-c", SELF_REGISTERED_TICKER, str(ticks), lock_path, benchmarks]
    )
    try:
        _hold_while_ticking(TimingLock(lock_path), ticks, wait_s=60)
        assert workers_folder(lock_path).joinpath(str(worker.pid)).exists()
        worker.terminate()  # what `timeout` sends
        assert worker.wait(timeout=30) == 128 + 15
        # A stale entry would have a later holder stop whoever reuses the pid.
        assert not workers_folder(lock_path).joinpath(str(worker.pid)).exists()
    finally:
        worker.kill()
        worker.wait()


def test_paused_seconds_do_not_count_against_a_timeout(tmp_path: Path) -> None:
    # A 2 s limit over 3 s, of which 2 s were paused: no timeout.
    with time_limit(2, paused=lambda start, end: max(0.0, end - start - 1.0)):
        time.sleep(3.0)
    with pytest.raises(TaskTimeout), time_limit(1, paused=lambda start, end: 0.0):
        time.sleep(3.0)

"""Running dashboard tasks in worker processes (``--isolate``, the default on CUDA).

A CUDA fault (an illegal memory access, a device-side assert) poisons the process's CUDA
context: every later task in that process fails, or the process dies. So the parent
hands a batch of tasks (one task, or every task of one model) to a fresh worker process,
which reports what it does as JSON lines in an events file:

* ``{"task": [model, size, mode, dtype]}`` before it builds the model and runs eager;
* ``{"start": [model, size, mode, dtype, backend]}`` before each backend;
* ``{"row": {...}}`` after each (a :class:`~dashboard_results.Row`);
* ``{"stopped": true}`` when it reached the ``--deadline`` and started nothing more;
* ``{"lock": "wait"}`` and ``{"lock": "held"}`` around waiting for the timing lock
  (``--jobs``: see :func:`worker_cpus` and :class:`~dashboard_measure.TimingLock`).

When the worker dies (a signal, a non-zero exit) or makes no progress for the task
timeout plus :data:`GRACE` seconds (a hang in a kernel or a compiler: it is killed, with
its process group, so Inductor's compile workers go too), the backend it was running gets
a failure row saying so (or every backend of the task, when it died building the model or
running eager), and a new worker takes the rest. After a backend fails on CUDA the worker
checks that the context still works; when it does not, it exits, and the next backend
starts in a fresh process.

With ``--jobs N`` the parent runs N such workers at once (one thread each, waiting on its
worker), each pinned to its own share of the cores (:func:`worker_cpus`) with its
thread pools sized to them, and every timed measurement under one exclusive lock. A worker
waiting for that lock is not hung: the watchdog's clock restarts when it gets it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from dashboard_measure import TimingLock, describe, signal_workers, time_limit, workers_folder
from dashboard_results import Row, failed_rows
from dashboard_task import Settings, Task, run_task

DASHBOARD = Path(__file__).resolve().parent / "dashboard.py"
GRACE = 60
"""Seconds beyond the task timeout before a silent worker is killed (its own timer, a
signal in the interpreter, cannot interrupt a hung kernel or native call)."""
STARTUP = 300
"""Seconds a worker may take to start (import torch, kiln, the zoo) before its first event."""
POISONED = 3
"""The worker's exit status after a failure left the CUDA context unusable."""
FAULT = "KILN_DASHBOARD_FAULT"
"""``backend:crash``, ``backend:hang`` or ``backend:poison``: when the worker starts that
backend, it aborts, hangs beyond its own timer's reach, or (CUDA) queues a device-side
assert that poisons the context under the backend's run (tests/test_bench_zoo.py and the
H200 check in docs/benchmarks/dashboard.md test the isolation with it)."""

TaskKey = tuple[str, str, str, str]
"""(model, size, mode, dtype)."""


class Interrupted(Exception):
    """The dashboard was interrupted (Ctrl-C, ``timeout``'s SIGTERM): the worker was killed
    with its process group, rather than left running on the machine."""


@dataclass
class Job:
    """Tasks for one worker and the backends still to run for each."""

    tasks: list[tuple[TaskKey, list[str]]]


@dataclass
class Outcome:
    rows: list[Row] = field(default_factory=list[Row])
    stopped: list[TaskKey] = field(default_factory=list[TaskKey])
    """Tasks left for a later invocation (``--deadline``)."""


# -- the worker ---------------------------------------------------------------------------


def _context_usable(device: torch.device) -> bool:
    if device.type != "cuda":
        return True
    try:
        torch.cuda.synchronize()
        return float((torch.ones(4, device=device) * 2).sum().item()) == 8.0
    except Exception:
        return False


def _inject_fault(backend: str) -> None:
    target, _, kind = os.environ.get(FAULT, "").partition(":")
    if target != backend:
        return
    if kind == "crash":
        os.abort()
    if kind == "poison" and torch.cuda.is_available():  # surfaces at the backend's next sync
        x = torch.zeros(1, device="cuda")
        x[torch.tensor([1 << 20], device="cuda")] = 1.0
        return
    if kind == "hang":  # as a hung kernel would: the task timer's SIGALRM never gets through
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        while True:
            time.sleep(3600)


def serve(request_path: Path, events_path: Path) -> int:
    """The worker: run the request's tasks, reporting to the events file."""
    from zoo import registry

    request = json.loads(request_path.read_text())
    settings = Settings(**request["settings"])
    device = torch.device(request["device"])
    deadline = request["deadline"]
    lock_path = request.get("lock")
    zoo = registry()
    built: dict[tuple[str, str], Any] = {}
    with events_path.open("a", buffering=1) as events:

        def emit(event: dict[str, Any]) -> None:
            events.write(json.dumps(event) + "\n")
            events.flush()

        def on_start(key: TaskKey, backend: str) -> None:
            emit({"start": [*key, backend]})
            _inject_fault(backend)

        def on_row(row: Row) -> bool:
            emit({"row": asdict(row)})
            return row.status == "pass" or _context_usable(device)

        timed = TimingLock(
            lock_path,
            on_wait=lambda: emit({"lock": "wait"}),
            on_held=lambda: emit({"lock": "held"}),
        )

        for (name, size, mode, dtype), backends in request["tasks"]:
            if deadline and time.time() > deadline:
                emit({"stopped": True})
                return 0
            emit({"task": [name, size, mode, dtype]})
            spec = zoo[name]
            try:
                if (name, size) not in built:
                    built.clear()
                    with time_limit(settings.timeout):
                        built[(name, size)] = spec.build(size)
            except Exception as e:  # the model itself did not build
                reason = f"build: {describe(e)}"
                for row in failed_rows(spec, size, mode, dtype, backends, str(device), reason):
                    on_row(row)
                continue
            base, inputs = built[(name, size)]
            task = Task(spec, size, mode, dtype, device, base, inputs)
            rows = run_task(
                task,
                backends,
                settings,
                on_start=lambda b, key=(name, size, mode, dtype): on_start(key, b),
                on_row=on_row,
                timed=timed,
            )
            if len(rows) < len(backends):  # on_row said the context is poisoned
                return POISONED
    return 0


# -- the parent ---------------------------------------------------------------------------


def _exit_reason(returncode: int, log: Path) -> str:
    if returncode < 0:
        with contextlib.suppress(ValueError):
            return f"worker killed by {signal.Signals(-returncode).name}{_log_tail(log)}"
    return f"worker exited with status {returncode}{_log_tail(log)}"


def _log_tail(log: Path) -> str:
    """The worker's last error line (the last line naming an error, else its last line)."""
    try:
        lines = [x.strip() for x in log.read_text(errors="replace").splitlines() if x.strip()]
    except OSError:
        return ""
    lines = [x for x in lines if "%|" not in x]  # progress bars
    if not lines:
        return ""
    errors = [x for x in lines if "error" in x.lower() or "exception" in x.lower()]
    return ": " + (errors or lines)[-1][:300]


def _read_events(path: Path, offset: int) -> tuple[list[dict[str, Any]], int]:
    try:
        with path.open("rb") as f:
            f.seek(offset)
            data = f.read()
    except OSError:
        return [], offset
    end = data.rfind(b"\n") + 1  # complete lines only
    lines = data[:end].decode(errors="replace").splitlines()
    return [json.loads(x) for x in lines if x.strip()], offset + end


def _paused(pid: int) -> bool:
    """Whether the process is stopped (``SIGSTOP``: another worker is timing)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] == "T"


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # the worker's session: its compile workers too
    proc.wait()


def run_job(
    job: Job,
    settings: Settings,
    device: str,
    deadline: float,
    specs: dict[str, Any],
    on_row: Callable[[Row], None],
    lock: str | None = None,
    cpus: Sequence[int] | None = None,
    stop: threading.Event | None = None,
) -> Outcome:
    """Run the job's tasks in worker processes until every (task, backend) has a row (or
    the deadline stopped the rest); a worker that dies or hangs is replaced. ``lock``: the
    timing lock's file (``--jobs``); ``cpus``: the cores the workers are pinned to;
    ``stop``: when set (the dashboard was interrupted), kill the worker and raise
    :class:`Interrupted`. An exception here (Ctrl-C) kills the worker too."""
    outcome = Outcome()
    pending = [(key, list(backends)) for key, backends in job.tasks]
    root = str(DASHBOARD.parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    if cpus:
        env.update(thread_env(len(cpus)))
    while pending:
        with tempfile.TemporaryDirectory(prefix="kiln-dashboard-worker-") as tmp:
            request, events, log = Path(tmp, "request.json"), Path(tmp, "events"), Path(tmp, "log")
            request.write_text(
                json.dumps(
                    {
                        "settings": asdict(settings),
                        "device": device,
                        "deadline": deadline,
                        "lock": lock,
                        "tasks": pending,
                    }
                )
            )
            events.touch()
            command = [sys.executable, str(DASHBOARD), "--worker", str(request), str(events)]
            with log.open("wb") as out:
                proc = subprocess.Popen(
                    command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
                )
            if lock:
                # Registered: a worker holding the timing lock pauses the others.
                workers_folder(lock).mkdir(exist_ok=True)
                workers_folder(lock).joinpath(str(proc.pid)).touch()
            if cpus and hasattr(os, "sched_setaffinity"):
                # Just exec'd, single-threaded: every thread it starts inherits the cores.
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(proc.pid, cpus)
            offset, last_event, hung, seen = 0, time.monotonic(), False, False
            allowed = settings.timeout + GRACE + STARTUP
            current_task: TaskKey | None = None
            running: str | None = None
            stopped = waiting = False
            done: set[tuple[TaskKey, str]] = set()
            try:
                while True:
                    returncode = proc.poll()
                    new, offset = _read_events(events, offset)
                    for event in new:
                        last_event, seen = time.monotonic(), True
                        waiting = event.get("lock") == "wait"
                        if "task" in event:
                            current_task, running = tuple(event["task"]), None  # pyright: ignore[reportAssignmentType]
                        elif "start" in event:
                            current_task, running = tuple(event["start"][:4]), event["start"][4]  # pyright: ignore[reportAssignmentType]
                        elif "row" in event:
                            row = Row(**event["row"])
                            key = (row.model, row.size, row.mode, row.dtype)
                            done.add((key, row.backend))
                            running = None
                            outcome.rows.append(row)
                            on_row(row)
                        elif event.get("stopped"):
                            stopped = True
                    if returncode is not None:
                        break
                    allowed = settings.timeout + GRACE + (0 if seen else STARTUP)
                    # Waiting for the timing lock, or paused while another worker holds it,
                    # is not a hang: the holder has its own watchdog.
                    if _paused(proc.pid):
                        last_event = time.monotonic()
                    if settings.timeout and not waiting and time.monotonic() - last_event > allowed:
                        _kill(proc)  # then one more round reads what it reported last
                        hung = True
                        continue
                    if stop is not None and stop.is_set():
                        raise Interrupted("the dashboard was interrupted")
                    time.sleep(0.2)
            except BaseException:
                _kill(proc)  # never leave a worker (and its GPU work) behind
                raise
            finally:
                if lock:
                    workers_folder(lock).joinpath(str(proc.pid)).unlink(missing_ok=True)
                    # A worker killed while it held the lock paused the others for good.
                    signal_workers(lock, signal.SIGCONT)
            reason = (
                f"timed out after {allowed} s without progress (worker killed)"
                if hung
                else _exit_reason(returncode, log)
            )
            remaining = [
                (key, [b for b in backends if (key, b) not in done]) for key, backends in pending
            ]
            remaining = [(key, backends) for key, backends in remaining if backends]
            if stopped or (returncode == 0 and not hung):
                # Normal end: what it did not report was left for --resume (the deadline).
                outcome.stopped += [key for key, _ in remaining]
                return outcome
            if returncode == POISONED and not hung:
                pending = remaining  # its failure row is in; the rest in a fresh process
                continue
            # A crash or a hang: blame what was running, then hand the rest to a new worker.
            blamed = current_task or (remaining[0][0] if remaining else None)
            next_pending = []
            for key, backends in remaining:
                if key != blamed:
                    next_pending.append((key, backends))
                    continue
                spec = specs[key[0]]
                if running is not None and running in backends:
                    culprits, rest = [running], [b for b in backends if b != running]
                    what = reason
                else:  # before any backend started: the build or the eager reference
                    culprits, rest = backends, []
                    what = f"build or eager reference: {reason}"
                for row in failed_rows(spec, *key[1:], culprits, device, what):
                    outcome.rows.append(row)
                    on_row(row)
                if rest:
                    next_pending.append((key, rest))
            pending = next_pending
    return outcome


def thread_env(cores: int) -> dict[str, str]:
    """A worker's thread pools sized to its ``cores`` (``--jobs``): torch's intra-op threads
    and OpenMP, and Inductor's parallel compile (kiln's compile pools size themselves from
    the process's cores)."""
    n = str(max(1, cores))
    return {"OMP_NUM_THREADS": n, "MKL_NUM_THREADS": n, "TORCHINDUCTOR_COMPILE_THREADS": n}


def worker_cpus(slot: int, jobs: int, cores: Sequence[int] | None = None) -> list[int]:
    """The cores of worker ``slot`` of ``jobs``: an equal share (``len(cores) // jobs`` or
    one more), disjoint from the other slots' (one core each, shared round, when there are
    more workers than cores)."""
    if cores is None:
        cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        cores = cores or list(range(os.cpu_count() or 1))
    if jobs >= len(cores):
        return [cores[slot % len(cores)]]
    return list(cores[slot * len(cores) // jobs : (slot + 1) * len(cores) // jobs])


def jobs_for(tasks: Sequence[TaskKey], backends: Sequence[str], per: str) -> list[Job]:
    """One job per task (``per="task"``) or per model and size (``"model"``), in order."""
    jobs: list[Job] = []
    for key in tasks:
        same_model = jobs and jobs[-1].tasks[-1][0][:2] == key[:2]
        if per == "model" and same_model:
            jobs[-1].tasks.append((key, list(backends)))
        else:
            jobs.append(Job([(key, list(backends))]))
    return jobs

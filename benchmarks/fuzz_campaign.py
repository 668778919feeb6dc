"""Long-run fuzz campaign (issue 20): kiln's fuzzers in worker processes, for a time budget
or an example count, with one summary table.

    PYTHONPATH=. python benchmarks/fuzz_campaign.py --workers 16 --seconds 480
    PYTHONPATH=. python benchmarks/fuzz_campaign.py --fuzzers kiln-opt-ir --examples 10000
    PYTHONPATH=. python benchmarks/fuzz_campaign.py --list

Fuzzers (the strategies and checks of the test modules, run through every executor):

``graph``             tests/test_graph_fuzz.py programs: kernel interpreter, C++, C++ with
                      symbolic sizes, Triton (interpreter on CPU, or KILN_TRITON_DEVICE=cuda)
``graph-batch``       the same programs, 32 compiled as one graph (one capture, one pipeline
                      run, one C++ build), each compared with eager on its own; each batch
                      on one executor: C++ 4, kernel interpreter 2, Triton 1, C++ with
                      symbolic sizes 1 (tests/test_graph_batch_fuzz.py). Counts graphs.
``program``           tests/test_program_fuzz.py programs via kiln.compile: aten, loop and
                      kernel interpreters, C++, Triton
``program-batch``     the same programs, 16 through one kiln.compile (one Dynamo trace),
                      each compared on its own, aliasing over the batch; each batch on one
                      executor: C++ 3, kernel, loop and aten interpreters and Triton 1 each
                      (tests/test_program_batch_fuzz.py). Counts programs.
``program-backward``  the same, float programs, gradients (C++)
``dynamic``           tests/test_dynamic_fuzz.py: torch.compile(dynamic=True), C++ and the
                      kernel interpreter, two sizes per program
``kiln-opt-ir``       tests/tools/test_kiln_opt_fuzz.py: mutated IR text at every level
``kiln-opt-pipeline`` the same: random pipelines of registered passes, optional target

Each worker is a process of its own with its own random seeds (hypothesis, not
derandomized, no example database); a worker given several fuzzers gives each the same
share of its time, in turns. Workers share one kiln cache under the output directory
(C++ builds are locked per entry, so two workers never build the same library twice).

What counts: ``examples`` are the examples a fuzzer's check ran to the end or to its first
failure (shrinking runs are not counted); ``graphs`` the random programs (or kiln-opt
inputs) in them: one per example, except ``graph-batch`` (the programs of each batch); ``failures`` are wrong answers (an
``AssertionError`` of the check: a mismatch with eager, a bad diagnostic); ``tracebacks``
are exceptions escaping kiln (a crash, or a kiln-opt diagnostic with a Python traceback
or an internal error); ``hangs`` are examples past ``--hang-seconds`` (an alarm in the
worker, or the parent killing a worker stuck in native code). Every failure, traceback
and hang is written to ``<out>/failures/`` with its shrunk reproducer (hypothesis's
"Falsifying example"), the seed and the traceback; ``<out>/summary.json`` has the table.
Exit status 1 when anything failed.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
import zlib
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
FUZZERS = (
    "graph",
    "graph-batch",
    "program",
    "program-batch",
    "program-backward",
    "dynamic",
    "kiln-opt-ir",
    "kiln-opt-pipeline",
)
COUNTS = ("examples", "graphs", "failures", "tracebacks", "hangs")


@dataclass
class Tally:
    examples: int = 0
    graphs: int = 0  # random programs checked: examples, or a batch fuzzer's programs
    failures: int = 0
    tracebacks: int = 0
    hangs: int = 0
    seconds: float = 0.0
    cpu: float = 0.0  # CPU seconds of the worker and its children (g++), where wall time
    # is noisy on a loaded machine

    def add(self, other: Tally) -> None:
        for name in (*COUNTS, "seconds", "cpu"):
            setattr(self, name, getattr(self, name) + getattr(other, name))


# -- the worker ------------------------------------------------------------------------


class Hang(BaseException):
    """Raised by the alarm; a BaseException so that neither kiln nor hypothesis treats it
    as an ordinary failure (hypothesis lets it through at once, without shrinking)."""


def _one(example: Any) -> int:
    return 1


class OutOfTime(BaseException):
    """Raised before an example when the turn is over: a BaseException, which hypothesis
    lets through at once (no shrinking, no more draws)."""


@dataclass
class Fuzzer:
    strategy: Any
    check: Callable[[Any], None]
    graphs: Callable[[Any], int] = _one  # how many graphs an example holds
    # Examples per hypothesis run. Under 10 for the slow fuzzers: hypothesis spends the
    # first tenth of a run's max_examples (up to 50) on small examples (one-program
    # batches, one-op programs), which would be all a slow fuzzer ever ran.
    per_run: int = 9
    # The check for the shrinker's reruns, if cheaper than ``check`` (a batch fuzzer's:
    # programs alone, those already passed skipped); reset at each hypothesis run.
    shrink_check: Callable[[Any], None] | None = None
    reset: Callable[[], None] | None = None


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _prepare_worker() -> None:
    """What the test suite's conftests do: the test helpers importable, Triton's
    interpreter (rounding bfloat16 as a GPU does), kiln as a Dynamo backend."""
    for path in (TESTS, TESTS / "backends" / "triton", TESTS / "tools"):
        sys.path.insert(0, str(path))
    if os.environ.get("KILN_TRITON_DEVICE") != "cuda":
        os.environ["TRITON_INTERPRET"] = "1"
        with contextlib.suppress(ImportError):
            import triton  # noqa: F401

            _load("kiln_triton_conftest", TESTS / "backends" / "triton" / "conftest.py")
    from torch._dynamo.backends.registry import list_backends, register_backend

    if "kiln" not in list_backends(exclude_tags=()):
        from kiln.frontends.dynamo import kiln_backend

        register_backend(kiln_backend, name="kiln")


def _make_fuzzer(name: str, scratch: Path) -> Fuzzer:
    from hypothesis import strategies as st

    if name == "graph":
        import test_graph_fuzz as graph

        executors: list[Callable[[Any], None]] = [
            lambda p: graph.check_program(p, "interpret"),
            lambda p: graph.check_program(p, "cpp"),
            lambda p: graph.check_program(p, "cpp", dynamic=True),
        ]
        with contextlib.suppress(ImportError):  # no Triton: the other executors
            from triton_checks import DEVICE

            executors.append(lambda p: graph.check_program(p, "triton", device=DEVICE))

        def check_graph(program: Any) -> None:
            for run in executors:
                run(program)

        return Fuzzer(graph.programs(), check_graph)
    if name == "graph-batch":
        import test_graph_batch_fuzz as batched

        modes = list(batched.MODES)
        try:
            import triton
            from triton_checks import DEVICE as triton_device
        except ImportError:  # no Triton: its share goes to the other executors
            modes.remove("triton")
            triton_device = batched.CPU

        passed: set[str] = set()

        def check_batch(example: tuple[Any, str]) -> None:
            batch, mode = example
            batched.check_mode(batch, mode, triton_device)

        def shrink_batch(example: tuple[Any, str]) -> None:
            batch, mode = example
            batched.check_mode(batch, mode, triton_device, passed)

        return Fuzzer(
            st.tuples(batched.batches(), st.sampled_from(modes)),
            check_batch,
            lambda example: len(example[0].programs),
            shrink_check=shrink_batch,
            reset=passed.clear,
        )
    if name == "program-batch":
        import test_program_batch_fuzz as program_batch

        modes_ = list(program_batch.MODES)
        try:
            import triton
        except ImportError:
            modes_.remove("triton")

        passed_: set[str] = set()

        def check_program_batch(example: tuple[Any, str]) -> None:
            program_batch.check_batch(*example)

        def shrink_program_batch(example: tuple[Any, str]) -> None:
            program_batch.check_alone_first(*example, passed_)

        return Fuzzer(
            st.tuples(program_batch.batches(), st.sampled_from(modes_)),
            check_program_batch,
            lambda example: len(example[0].programs),
            shrink_check=shrink_program_batch,
            reset=passed_.clear,
        )
    if name in ("program", "program-backward"):
        import test_program_fuzz as prog

        if name == "program-backward":
            return Fuzzer(prog.programs(float_only=True), lambda p: prog.check_backward(p, "cpp"))
        executors_ = list(prog.EXECUTORS)
        try:
            import triton  # noqa: F401
        except ImportError:
            executors_.remove("triton")

        def check_program(program: Any) -> None:
            for executor in executors_:
                prog.check(program, executor)

        return Fuzzer(prog.programs(), check_program)
    if name == "dynamic":
        import test_dynamic_fuzz as dyn

        def check_dynamic(program: Any) -> None:
            for executor in ("cpp", "interpret"):
                dyn.check(program, executor)

        return Fuzzer(dyn.programs(), check_dynamic)
    import test_kiln_opt_fuzz as opt

    path = scratch / f"{name}.mlir"
    if name == "kiln-opt-ir":
        options = st.sampled_from([(), ("-p", "decompose,lower-aten,fuse")])

        def check_ir(example: tuple[bytes, tuple[str, ...]]) -> None:
            data, args = example
            path.write_bytes(data)
            opt.check(opt.run_main(path, *args), emitted=False)

        return Fuzzer(st.tuples(opt.mutated(), options), check_ir, per_run=1000)
    if name == "kiln-opt-pipeline":
        pipelines = st.tuples(
            st.sampled_from(opt.LEVELS),
            st.lists(st.sampled_from(opt.PASSES), min_size=1, max_size=5),
            st.sampled_from(opt.TARGETS),
        )

        def check_pipeline(example: tuple[str, list[str], str | None]) -> None:
            level, passes, target = example
            path.write_text(opt.seeds()[level])
            args = ["-p", ",".join(passes)] + (["-t", target] if target else [])
            opt.check(opt.run_main(path, *args), emitted=target is not None)

        return Fuzzer(pipelines, check_pipeline, per_run=1000)
    raise SystemExit(f"fuzz_campaign: unknown fuzzer {name!r} (known: {', '.join(FUZZERS)})")


def _kind(error: BaseException) -> str | None:
    """failures / tracebacks / hangs for one exception out of a batch, or None for what is
    no finding (hypothesis's own errors, a pytest skip)."""
    from hypothesis.errors import HypothesisException

    # Ours, or the kiln-opt fuzzer's own alarm (tests/tools/test_kiln_opt_fuzz.py: Hang).
    if isinstance(error, Hang) or type(error).__name__ == "Hang":
        return "hangs"
    if isinstance(error, HypothesisException) or type(error).__name__ == "Skipped":
        return None
    if isinstance(error, AssertionError):
        # kiln-opt's check asserts that no traceback was printed.
        if "Traceback (most recent call last)" in str(error):
            return "tracebacks"
        return "failures"
    return "tracebacks"


def _leaves(error: BaseException) -> Iterator[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:  # pyright: ignore[reportUnknownVariableType]
            yield from _leaves(inner)  # pyright: ignore[reportUnknownArgumentType]
    else:
        yield error


@dataclass
class WorkerState:
    worker: str
    out: Path
    tallies: dict[str, Tally] = field(default_factory=dict[str, Tally])
    reports: int = 0

    def save(self) -> None:
        data = {name: asdict(t) for name, t in self.tallies.items()}
        path = self.out / f"status-{self.worker}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, path)

    def report(self, fuzzer: str, kind: str, seed: int, text: str) -> None:
        self.reports += 1
        folder = self.out / "failures"
        folder.mkdir(exist_ok=True)
        name = f"{fuzzer}-{kind}-w{self.worker}-{self.reports}.txt"
        header = f"fuzzer: {fuzzer}\nkind: {kind}\nhypothesis seed: {seed}\n\n"
        (folder / name).write_text(header + text)


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    raise Hang("example ran past --hang-seconds")


def run_batch(
    state: WorkerState,
    name: str,
    fuzzer: Fuzzer,
    examples: int,
    seed: int,
    hang: int,
    stop: float = float("inf"),
) -> None:
    """``examples`` hypothesis examples of ``fuzzer`` (fewer after a failure, or past the
    ``time.monotonic()`` time ``stop``: the batch's last examples are skipped, not run)."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as seeded

    tally = state.tallies.setdefault(name, Tally())
    if fuzzer.reset is not None:
        fuzzer.reset()
    current = state.out / f"current-{state.worker}.txt"
    failing = False

    @seeded(seed)
    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=False,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.generate, Phase.target, Phase.shrink],
        report_multiple_bugs=False,
    )
    @given(fuzzer.strategy)
    def body(example: Any) -> None:
        nonlocal failing
        if not failing:  # the shrinker's reruns are not new examples
            if time.monotonic() > stop:
                # Out of time: end the batch now (rejecting the rest instead made hypothesis
                # draw up to ten times the batch's examples, minutes for a graph batch).
                raise OutOfTime
            tally.examples += 1
            tally.graphs += fuzzer.graphs(example)
        # For the parent's watchdog (a hang in native code): what runs now, and since when.
        current.write_text(f"{name}\n{seed}\n{example!r}")
        signal.alarm(hang)
        try:
            if failing and fuzzer.shrink_check is not None:
                fuzzer.shrink_check(example)
            else:
                fuzzer.check(example)
        except BaseException:
            failing = True
            raise
        finally:
            signal.alarm(0)

    start, cpu = time.perf_counter(), _cpu_seconds()
    try:
        body()
    except KeyboardInterrupt:
        raise
    except OutOfTime:
        pass
    except BaseException as error:  # hypothesis re-raises the shrunk failure
        for leaf in _leaves(error):
            kind = _kind(leaf)
            if kind is None:
                print(f"{name}: seed {seed}: {type(leaf).__name__}: {leaf}", flush=True)
                continue
            setattr(tally, kind, getattr(tally, kind) + 1)
            if kind == "hangs":  # not shrunk: the example that ran too long
                text = current.read_text() + f"\n\n{type(leaf).__name__}: {leaf}"
            else:
                notes = "\n".join(getattr(leaf, "__notes__", []))
                text = notes + "\n\n" + "".join(traceback.format_exception(leaf))
            state.report(name, kind, seed, text)
    finally:
        tally.seconds += time.perf_counter() - start
        tally.cpu += _cpu_seconds() - cpu


def _cpu_seconds() -> float:
    """This process's CPU time and its waited-for children's (the C++ compiler)."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def worker_main(args: argparse.Namespace) -> None:
    deadline = time.monotonic() + args.seconds  # the budget includes the imports below
    signal.signal(signal.SIGALRM, _on_alarm)
    warnings.simplefilter("ignore")  # fallback warnings are not failures
    _prepare_worker()
    out = Path(args.out)
    state = WorkerState(args.worker, out)
    names: list[str] = args.fuzzers.split(",")
    scratch = Path(tempfile.mkdtemp(prefix=f"fuzz-{args.worker}-", dir=out))
    fuzzers = {name: _make_fuzzer(name, scratch) for name in names}
    for name in names:
        state.tallies.setdefault(name, Tally())
    turn = 0
    state.save()
    while True:
        live = [
            n for n in names if args.examples is None or state.tallies[n].examples < args.examples
        ]
        if not live or time.monotonic() >= deadline:
            break
        name = live[turn % len(live)]
        turn += 1
        # One fuzzer left: no turns (a turn's end ends a hypothesis run, and a run starts
        # with hypothesis's simplest example).
        slice_end = deadline if len(live) == 1 else min(deadline, time.monotonic() + args.slice)
        while time.monotonic() < slice_end:
            tally = state.tallies[name]
            left = None if args.examples is None else args.examples - tally.examples
            if left is not None and left <= 0:
                break
            per_run = fuzzers[name].per_run
            count = per_run if left is None else min(per_run, left)
            seed = zlib.crc32(f"{args.seed}/{args.worker}/{name}/{tally.examples}".encode())
            run_batch(state, name, fuzzers[name], count, seed, args.hang_seconds, slice_end)
            state.save()
    state.save()


# -- the parent ------------------------------------------------------------------------


def _assign(fuzzers: list[str], workers: int) -> list[list[str]]:
    """Every fuzzer to at least one worker, every worker at least one fuzzer."""
    if workers >= len(fuzzers):
        return [[fuzzers[i % len(fuzzers)]] for i in range(workers)]
    return [fuzzers[i::workers] for i in range(workers)]


def _worker_env(threads: int, cache: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(ROOT), env.get("PYTHONPATH", "")] if p)
    env["KILN_GRAPH_CACHE"] = "0"  # every graph compiled for real
    env["KILN_CACHE_DIR"] = str(cache)
    env["OMP_NUM_THREADS"] = str(threads)
    env.setdefault("PYTHONWARNINGS", "ignore")
    return env


def _start(
    args: argparse.Namespace, worker: str, fuzzers: list[str], seconds: float, env: dict[str, str]
) -> subprocess.Popen[bytes]:
    command = [
        sys.executable,
        __file__,
        "--worker",
        worker,
        "--fuzzers",
        ",".join(fuzzers),
        "--seconds",
        str(seconds),
        "--out",
        str(args.out),
        "--seed",
        str(args.seed),
        "--hang-seconds",
        str(args.hang_seconds),
        "--slice",
        str(args.slice),
    ]
    if args.examples is not None:
        command += ["--examples", str(args.examples)]
    log = (Path(args.out) / f"worker-{worker}.log").open("ab")
    return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)


def _stuck_hang(out: Path, worker: str, limit: float) -> bool:
    """Whether worker ``worker`` has run one example for longer than ``limit`` s."""
    current = out / f"current-{worker}.txt"
    try:
        return time.time() - current.stat().st_mtime > limit
    except FileNotFoundError:
        return False


def parent_main(args: argparse.Namespace) -> int:
    fuzzers = args.fuzzers.split(",") if args.fuzzers else list(FUZZERS)
    for name in fuzzers:
        if name not in FUZZERS:
            raise SystemExit(
                f"fuzz_campaign: unknown fuzzer {name!r} (known: {', '.join(FUZZERS)})"
            )
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    out = Path(args.out or f"fuzz-campaign-{stamp}").resolve()
    out.mkdir(parents=True, exist_ok=True)
    args.out = str(out)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    threads = max(1, (cores or 1) // args.workers)
    env = _worker_env(threads, out / "cache")
    plan = _assign(fuzzers, args.workers)
    began = time.monotonic()
    deadline = began + args.seconds
    running: dict[str, tuple[subprocess.Popen[bytes], list[str]]] = {}
    incarnation: dict[int, int] = {}
    watchdog: dict[str, Tally] = {}  # hangs the parent found, by fuzzer
    for i, names in enumerate(plan):
        incarnation[i] = 0
        running[f"{i}.0"] = (_start(args, f"{i}.0", names, args.seconds, env), names)
    print(
        f"fuzz campaign: {args.workers} worker(s) x {threads} thread(s), "
        f"{args.seconds:g} s, fuzzers {', '.join(fuzzers)}; output in {out}",
        flush=True,
    )
    try:
        while running:
            time.sleep(1.0)
            for worker, (process, names) in list(running.items()):
                if process.poll() is not None:
                    del running[worker]
                    continue
                # The in-worker alarm failed to stop an example (native code): kill it.
                if _stuck_hang(out, worker, args.hang_seconds + 60):
                    process.kill()
                    process.wait()
                    del running[worker]
                    current = (out / f"current-{worker}.txt").read_text()
                    fuzzer = current.split("\n", 1)[0]
                    watchdog.setdefault(fuzzer, Tally()).hangs += 1
                    folder = out / "failures"
                    folder.mkdir(exist_ok=True)
                    (folder / f"{fuzzer}-hangs-w{worker}-killed.txt").write_text(
                        f"fuzzer: {fuzzer}\nkind: hangs (worker killed)\n\n{current}"
                    )
                    left = deadline - time.monotonic()
                    if left > 30:
                        index = int(worker.split(".")[0])
                        incarnation[index] += 1
                        name = f"{index}.{incarnation[index]}"
                        running[name] = (_start(args, name, names, left, env), names)
            if time.monotonic() > deadline + args.hang_seconds + 120:
                for process, _ in running.values():
                    process.kill()
                break
    except KeyboardInterrupt:
        for process, _ in running.values():
            process.send_signal(signal.SIGINT)
    totals = {name: Tally() for name in fuzzers}
    for status in out.glob("status-*.json"):
        for name, values in json.loads(status.read_text()).items():
            totals.setdefault(name, Tally()).add(Tally(**values))
    for name, tally in watchdog.items():
        totals.setdefault(name, Tally()).add(tally)
    wall = time.monotonic() - began
    (out / "summary.json").write_text(
        json.dumps(
            {
                "workers": args.workers,
                "seconds": wall,
                "seed": args.seed,
                "fuzzers": {name: asdict(t) for name, t in totals.items()},
            },
            indent=1,
        )
    )
    print(_table(totals, wall))
    bad = sum(t.failures + t.tracebacks + t.hangs for t in totals.values())
    if bad:
        print(f"reproducers: {out / 'failures'}")
    return 1 if bad else 0


def _table(totals: dict[str, Tally], wall: float) -> str:
    rows: list[tuple[str, ...]] = [
        ("fuzzer", *COUNTS, "seconds", "s/example", "cpu s", "cpu s/graph")
    ]
    for name, t in totals.items():
        per = f"{t.seconds / t.examples:.3f}" if t.examples else "-"
        per_graph = f"{t.cpu / t.graphs:.3f}" if t.graphs else "-"
        rows.append(
            (
                name,
                *(str(getattr(t, c)) for c in COUNTS),
                f"{t.seconds:.0f}",
                per,
                f"{t.cpu:.0f}",
                per_graph,
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in rows
    ]
    lines.insert(1, "-" * len(lines[0]))
    lines.append(f"wall time {wall:.0f} s (seconds: summed over the workers)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--seconds", type=float, default=600.0, help="time budget (default 600)")
    parser.add_argument(
        "--examples", type=int, default=None, help="stop a fuzzer after N examples per worker"
    )
    parser.add_argument(
        "--fuzzers", default="", help=f"comma-separated (default all: {','.join(FUZZERS)})"
    )
    parser.add_argument(
        "--out", default="", help="output directory (default ./fuzz-campaign-<time>)"
    )
    parser.add_argument("--seed", type=int, default=None, help="campaign seed (default: random)")
    parser.add_argument(
        "--hang-seconds", type=int, default=120, help="one example longer than this is a hang"
    )
    parser.add_argument(
        "--slice",
        type=float,
        default=30.0,
        help="seconds per turn when a worker has several fuzzers",
    )
    parser.add_argument("--list", action="store_true", help="list the fuzzers and exit")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(FUZZERS))
        return 0
    if args.seed is None:
        args.seed = int.from_bytes(os.urandom(4), "little")
    if args.worker is not None:
        worker_main(args)
        return 0
    return parent_main(args)


if __name__ == "__main__":
    sys.exit(main())

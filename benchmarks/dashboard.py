"""The benchmark dashboard: eager vs TorchInductor vs kiln on real architectures.

Models come from benchmarks/zoo/ (torchvision, timm, transformers, built offline from
configs with random weights; plus the hand-written benchmarks/suite_models.py). Needs the
``bench`` extra (``pip install -e .[bench]``). Every (model, size, mode, dtype) runs every
backend; a failure is a row with its reason, never a crash of the run. With ``--isolate``
(the default on CUDA: a CUDA fault poisons the process) each model's tasks run in a worker
process, and a worker that crashes or hangs costs only the backend it was running (see
dashboard_isolate.py); without it, everything runs in this process.

    python benchmarks/dashboard.py --json docs/benchmarks/dashboard-cpu.json
    python benchmarks/dashboard.py --models hf_gpt2,tv_resnet18 --modes infer --iters 2
    python benchmarks/dashboard.py --check-only --dtypes float32   # correctness sweep, no timing
    python benchmarks/dashboard.py --models hf_gpt2 --dynamic      # torch.compile(dynamic=True)
    python benchmarks/dashboard.py --models hf_gpt2 --shapes static,dynamic  # both, compared
    python benchmarks/dashboard.py --device cuda --scaling --layers 1,4,16,48 --no-zoo
    python benchmarks/dashboard.py --render-only --merge a.json b.json --json all.json \\
        --markdown docs/benchmarks/dashboard-h200.md

Backends: ``eager``, ``inductor`` (default mode), ``inductor-ro`` (``mode="reduce-overhead"``,
CUDA only), ``kiln`` (default options), ``kiln-cg`` (``options={"cuda_graphs": True}``, CUDA
only), ``kiln-at`` (``options={"autotune": True}``: kernel configs benchmarked on the first
call, as Inductor does for its reductions; CUDA only), ``kiln-cublas`` (every matrix
product on cuBLAS, ``dot-kernels{mode=none}``: the default runs small bfloat16/float16
products as Triton dot kernels with their epilogues; CUDA only), ``kiln-static`` (only when named; in
``--dynamic`` tasks only: kiln compiled static, Dynamo's default, beside the dynamic
compile, so that ``--interleave`` times kiln's dynamic and static code in the same rounds:
the "dynamic=True against static" section). Modes: ``infer`` (forward under no_grad, eval mode) and ``train`` (train mode,
forward + backward of the compiled model with a fixed random output gradient; the AdamW
step is timed separately, in eager, on the eager row). Dtypes: float32, bfloat16, float16
(CUDA only).

Per row (see docs/benchmarks/README of the rendered dashboard for the definitions):
status and reason; the error against eager (max abs difference over outputs and gradients,
relative to each reference tensor's largest magnitude) and, where that exceeds the dtype's
bound, against a float64 run of the same model (passing when, tensor by tensor, the backend's
float64 error is at most 3x eager's own on that tensor plus a floor, where eager's own is
the worst of eager's and of three eager runs with weights and inputs perturbed by four
units in the last place, so that a tensor that hangs on a near tie is judged by its real
spread; the row
shows the float64 errors of the tensor nearest its limit); median step ms over ``--iters`` (each compiled
backend timed in bursts alternating with eager's steps, ``eager_paired_ms``: the baseline of
its speedup and of kiln/Inductor); cold compile time
(first call, with fresh kiln/Inductor/Triton cache directories, minus one eager step) and warm
compile time (after ``torch._dynamo.reset()``, caches kept); the step's peak memory beyond
what was allocated before it (CUDA: ``max_memory_allocated``; CPU: from the profiler's
allocation events); kernel launches per step (CPU: kiln's ``kernel.launch`` ops, Inductor's
kernel calls in its generated ``call()``; CUDA: device kernels the profiler saw, any
backend) and, on CUDA, the summed kernel time per step from ``torch.profiler`` (the
quieter of two profiled rounds of five steps).

Modules: dashboard_measure.py (compiling, timing, memory, profiles, errors),
dashboard_task.py (one task: eager's reference, then each backend's row),
dashboard_results.py (rows, results files), dashboard_isolate.py (worker processes),
dashboard_scaling.py (compile-time scaling), dashboard_render.py (markdown and plots).

``--jobs N`` (with ``--isolate``) runs N workers at once, each on its own tasks, so that the
cold compiles (CPU work, nearly all of a row's time) of N models overlap. Every timed
measurement (the paired and eager timing bursts, the peak-memory step, the profiled steps,
the AdamW step) runs under one exclusive machine-wide lock (``fcntl.flock`` on a file in
the run's temporary folder; waiting for it counts against no timeout), and while a worker
holds it every other worker is paused (``SIGSTOP`` to its process group, ``SIGCONT``
after, with a short settle for the GPU work they had queued): the timed steps have the
cores, the memory bandwidth and the GPU to themselves, as in a serial run. (Session 12's
first large H200 run had only the lock, and 11 workers compiling and running references
beside each timed burst moved both wall and kernel times by up to 2x: see
docs/benchmarks/dashboard.md.) A paused worker's paused seconds come off its compile
times and its timeouts (:meth:`~dashboard_measure.TimingLock.paused_s`), and the parent's
watchdog does not take it for hung. Compiles, warm recompiles and accuracy checks run in
parallel outside the lock; each worker is pinned to its own ``cores // N`` cores with its
thread pools (torch/OpenMP threads, Inductor's ``TORCHINDUCTOR_COMPILE_THREADS``, kiln's
compile pools, which size themselves from the process's cores) sized to them, so compiles
do not compete for cores; they still share caches, memory bandwidth, clocks and the disk,
and each compiles on N times fewer cores than a serial run. So compile times of a
``--jobs`` run compare with each other (kiln and Inductor got the same cores), not with a
serial run's: every row records ``jobs`` and the rendered page says so. Peak memory is per
process (``torch.cuda.max_memory_allocated`` after ``reset_peak_memory_stats``, both this
process's caching allocator only), so other workers' allocations never enter it; the
GPU's memory itself is shared by the N workers. On the CPU the timed runs, too, get only
the worker's share of the cores (its threads are sized to it), so there ``--jobs`` suits
correctness sweeps (``--check-only``), not timings.

Results are merged into ``--json`` after every task (``--resume`` skips tasks already
there), so a long run can be split over several invocations and rendered once.
"""

from __future__ import annotations

import argparse
import shlex
import signal
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dashboard_backends import BACKENDS, CUDA_ONLY, OPT_IN
from dashboard_measure import describe, time_limit
from dashboard_results import (
    Row,
    commit,
    failed_rows,
    finite,
    load_results,
    machine,
    row_key,
    save_results,
    versions,
)
from dashboard_task import DTYPES, MODES, Settings, Task, run_task
from zoo import SIZES, ModelSpec, registry

TaskKey = tuple[str, str, str, str]
"""(model, size, mode, dtype)."""


# -- command line --------------------------------------------------------------------------


def _csv(value: str) -> list[str]:
    return [v for v in value.split(",") if v]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=(__doc__ or "").splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join((__doc__ or "").splitlines()[1:12]),
    )
    p.add_argument("--device", default="cpu")
    p.add_argument("--models", default="", help="comma-separated names (default: the whole zoo)")
    p.add_argument(
        "--sources", default="", help="only these sources (torchvision,timm,transformers,kiln)"
    )
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--dtypes", default="", help="default: float32,bfloat16 (+float16 on CUDA)")
    p.add_argument("--sizes", default="small", help="small, large or small,large")
    p.add_argument(
        "--backends", default="", help="default: eager,inductor,kiln (+ -ro/-cg on CUDA)"
    )
    p.add_argument("--iters", type=int, default=20, help="timed steps per row (median)")
    p.add_argument(
        "--timeout", type=int, default=900, help="seconds per backend per task (0: none)"
    )
    p.add_argument("--check-only", action="store_true", help="compile and compare; no timing")
    p.add_argument("--no-warm", action="store_true", help="skip the warm recompile")
    p.add_argument(
        "--interleave",
        action="store_true",
        help="after each task, time its passing backends once more in the same rounds "
        "(the page's 'same rounds' table: kiln against Inductor on one machine state)",
    )
    p.add_argument("--no-zoo", action="store_true", help="run no zoo tasks (e.g. only --scaling)")
    p.add_argument("--scaling", action="store_true", help="also run the compile-time scaling")
    p.add_argument("--layers", default="1,4,16,48", help="scaling: GPT-2 layer counts")
    p.add_argument("--json", type=Path, default=None, help="results file (merged into)")
    p.add_argument("--resume", action="store_true", help="skip tasks already in --json/--merge")
    p.add_argument(
        "--deadline",
        type=int,
        default=0,
        help="start no task after this many seconds (0: none); rerun with --resume for the rest",
    )
    p.add_argument("--merge", type=Path, nargs="*", default=[], help="more results files to merge")
    p.add_argument("--markdown", type=Path, default=None, help="render the dashboard here")
    p.add_argument("--render-only", action="store_true", help="render --json/--merge; run nothing")
    p.add_argument("--list", action="store_true", help="list the zoo and exit")
    p.add_argument(
        "--isolate",
        choices=("off", "task", "model"),
        default=None,
        help="run each task (or each model's tasks) in a worker process; default: model on "
        "CUDA, off on the CPU",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="isolated workers at once, each on its own cores; timed measurements never "
        "overlap (one lock); compile times are measured beside the other workers' compiles",
    )
    p.add_argument(
        "--dynamic", action="store_true", help="compile with torch.compile(dynamic=True)"
    )
    p.add_argument(
        "--shapes",
        default="",
        help="static, dynamic or static,dynamic: each task compiled static and/or with"
        " dynamic=True in one run (default: static; --dynamic means dynamic)",
    )
    p.add_argument("--scaling-child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--worker", nargs=2, type=Path, default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def select(args: argparse.Namespace) -> list[ModelSpec]:
    zoo = registry()
    names = _csv(args.models) or list(zoo)
    unknown = [n for n in names if n not in zoo]
    if unknown:
        raise SystemExit(f"unknown model(s) {unknown}; known: {', '.join(zoo)}")
    sources = _csv(args.sources)
    return [zoo[n] for n in names if not sources or zoo[n].source in sources]


def choices(args: argparse.Namespace, cuda: bool) -> tuple[list[str], ...]:
    """(modes, sizes, dtypes, backends) asked for, checked; eager first (the reference)."""
    modes = _csv(args.modes)
    sizes = _csv(args.sizes)
    dtypes = _csv(args.dtypes) or ["float32", "bfloat16", *(["float16"] if cuda else [])]
    backends = _csv(args.backends) or [
        b for b in BACKENDS if (cuda or b not in CUDA_ONLY) and b not in OPT_IN
    ]
    for values, known, what in (
        (modes, MODES, "mode"),
        (sizes, SIZES, "size"),
        (dtypes, DTYPES, "dtype"),
        (backends, BACKENDS, "backend"),
    ):
        bad = [v for v in values if v not in known]
        if bad:
            raise SystemExit(f"unknown {what}(s) {bad}; known: {', '.join(known)}")
    if not cuda:
        dtypes = [d for d in dtypes if d != "float16"]  # no float16 matmuls worth timing on CPU
        backends = [b for b in backends if b not in CUDA_ONLY]
    backends = ["eager", *(b for b in backends if b != "eager")]
    return modes, sizes, dtypes, backends


def run_inline(
    tasks: Sequence[TaskKey],
    backends: Sequence[str],
    settings: Settings,
    device: torch.device,
    deadline: float,
    report: Any,
) -> list[TaskKey]:
    """Every task in this process; the tasks left after the deadline."""
    zoo = registry()
    built: dict[tuple[str, str], Any] = {}
    stopped: list[TaskKey] = []
    for name, size, mode, dtype in tasks:
        if deadline and time.time() > deadline:
            stopped.append((name, size, mode, dtype))  # left for the next invocation (--resume)
            continue
        spec = zoo[name]
        report.begin(name, size, mode, dtype)
        try:
            if (name, size) not in built:
                built.clear()
                with time_limit(settings.timeout):
                    built[(name, size)] = spec.build(size)
            base, inputs = built[(name, size)]
            task = Task(spec, size, mode, dtype, device, base, inputs)
            rows = run_task(task, backends, settings)
        except Exception as e:  # the model itself did not build
            reason = f"build: {describe(e)}"
            rows = failed_rows(spec, size, mode, dtype, backends, str(device), reason)
        for row in rows:
            report.row(row)
        report.task_done()
    return stopped


def run_isolated(
    tasks: Sequence[TaskKey],
    backends: Sequence[str],
    settings: Settings,
    device: torch.device,
    deadline: float,
    report: Any,
    per: str,
    jobs: int = 1,
) -> list[TaskKey]:
    """Every task in worker processes (dashboard_isolate.py), ``jobs`` of them at once; the
    tasks left after the deadline."""
    from dashboard_isolate import Interrupted, jobs_for, run_job, worker_cpus

    zoo = registry()
    queue = deque(jobs_for(tasks, backends, per))
    stopped: list[TaskKey] = []
    guard = threading.Lock()
    stop = threading.Event()

    def on_row(row: Row) -> None:
        row.jobs = jobs  # failure rows written here for a dead worker too
        report.row(row)
        if row.backend == backends[-1]:
            report.task_done()

    def work(slot: int, lock: str | None) -> None:
        """One worker slot: the next job from the queue until there is none."""
        cpus = worker_cpus(slot, jobs) if jobs > 1 else None
        while True:
            with guard:
                if not queue:
                    return
                job = queue.popleft()
                if deadline and time.time() > deadline:
                    stopped.extend(key for key, _ in job.tasks)
                    continue
            report.begin(*job.tasks[0][0])
            try:
                outcome = run_job(
                    job, settings, str(device), deadline, zoo, on_row, lock, cpus, stop
                )
            except Interrupted:
                return
            with guard:
                stopped.extend(outcome.stopped)

    if jobs <= 1:
        work(0, None)
        return stopped
    with tempfile.TemporaryDirectory(prefix="kiln-dashboard-run-") as tmp:
        lock = str(Path(tmp, "timing.lock"))
        threads = [threading.Thread(target=work, args=(k, lock)) for k in range(jobs)]
        for thread in threads:
            thread.start()
        try:
            for thread in threads:
                thread.join()
        except BaseException:  # Ctrl-C, SIGTERM: every thread kills its worker
            stop.set()
            for thread in threads:
                thread.join()
            raise
    return stopped


class Report:
    """Stores each row into the results (and ``--json``) as it comes, and shows progress."""

    def __init__(self, data: dict[str, Any], json_path: Path | None, total: int) -> None:
        self.data, self.json_path = data, json_path
        self.by_key = {row_key(r): r for r in data["rows"]}
        self.progress = _progress(total)
        self.failures = 0
        self.guard = threading.Lock()  # ``--jobs``: rows come from several threads

    def begin(self, *key: str) -> None:
        with self.guard:
            self.progress.set_description(" ".join(key))

    def row(self, row: Row) -> None:
        with self.guard:
            self.by_key[row.key()] = finite(asdict(row))
            self.data["rows"] = list(self.by_key.values())
            if self.json_path:
                save_results(self.json_path, self.data)
            self.failures += row.status == "fail"
            self.progress.write(_line(row))

    def task_done(self) -> None:
        with self.guard:
            self.progress.update(1)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        from dashboard_isolate import serve

        return serve(*args.worker)
    if args.scaling_child:
        from dashboard_scaling import scaling_child

        backend, layers, *warm = args.scaling_child.split(":")
        scaling_child(backend, int(layers), args.device, warm=warm == ["warm"])
        return 0
    from dashboard_render import render

    device = torch.device(args.device)
    cuda = device.type == "cuda"
    if args.list:
        for spec in registry().values():
            print(f"{spec.name:<28} {spec.source:<12} {spec.family}")
        return 0
    if args.render_only:
        paths = [*([args.json] if args.json and args.json.exists() else []), *args.merge]
        if not paths:
            raise SystemExit("--render-only needs --json and/or --merge files")
        data = load_results(paths)
        if args.json and args.merge:
            save_results(args.json, data)
        if args.markdown:
            render(data, args.markdown)
            print(f"wrote {args.markdown}")
        return 0

    specs = select(args)
    modes, sizes, dtypes, backends = choices(args, cuda)
    isolate = args.isolate or ("model" if cuda else "off")
    if args.jobs < 1 or (args.jobs > 1 and isolate == "off"):
        raise SystemExit("--jobs N needs N >= 1, and above 1 --isolate model or task")
    shapes = _shapes(args)

    paths = [*([args.json] if args.json and args.json.exists() else []), *args.merge]
    data = load_results(paths) if paths else {"runs": [], "rows": [], "scaling": []}
    run_info = {
        "commit": commit(),
        "command": "python " + " ".join(shlex.quote(a) for a in sys.argv),
        "device": device.type,
        "machine": machine(device),
        "started": f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        "check_only": args.check_only,
        "iters": args.iters,
        "isolate": isolate,
        "jobs": args.jobs,
        "dynamic": shapes == ["dynamic"],
        "shapes": shapes,
        "versions": versions(),
    }
    data["runs"].append(run_info)
    done = {row_key(r) for r in data["rows"]}

    def pass_backends(dynamic: bool) -> list[str]:
        # kiln-static is kiln itself in a static task.
        return [b for b in backends if dynamic or b != "kiln-static"]

    def finished(key: TaskKey, dynamic: bool) -> bool:
        suffix = ("dynamic",) if dynamic else ()
        return all(
            (*key, b, *(suffix if b != "eager" else ())) in done for b in pass_backends(dynamic)
        )

    # Per shape mode, the tasks still to run (eager's rows carry no shape: a dynamic
    # pass measures eager again, and its row replaces the static pass's).
    passes: list[tuple[bool, list[TaskKey]]] = []
    for shape in shapes:
        dynamic = shape == "dynamic"
        passes.append(
            (
                dynamic,
                [
                    (spec.name, size, mode, dtype)
                    for spec in ([] if args.no_zoo else specs)
                    for size in sizes
                    for mode in modes
                    for dtype in dtypes
                    if not (args.resume and finished((spec.name, size, mode, dtype), dynamic))
                ],
            )
        )
    tasks = [task for _, pass_tasks in passes for task in pass_tasks]
    report = Report(data, args.json, len(tasks))
    deadline = time.time() + args.deadline if args.deadline else 0.0
    stopped: list[TaskKey] = []
    for dynamic, pass_tasks in passes:
        settings = Settings(
            args.iters,
            args.timeout,
            args.check_only,
            args.no_warm,
            dynamic,
            args.jobs,
            args.interleave,
        )
        if isolate == "off":
            stopped += run_inline(
                pass_tasks, pass_backends(dynamic), settings, device, deadline, report
            )
            continue
        # ``timeout``'s SIGTERM as Ctrl-C: the workers are killed, not left running.
        previous = signal.signal(signal.SIGTERM, _interrupt)
        try:
            stopped += run_isolated(
                pass_tasks,
                pass_backends(dynamic),
                settings,
                device,
                deadline,
                report,
                isolate,
                args.jobs,
            )
        finally:
            signal.signal(signal.SIGTERM, previous)
    report.progress.close()
    if args.scaling:
        from dashboard_scaling import run_scaling

        points = run_scaling(
            ["inductor", "kiln"], [int(n) for n in _csv(args.layers)], args.device, args.timeout
        )
        by_key = {(p["backend"], p["layers"]): p for p in data["scaling"]}
        by_key.update({(p["backend"], p["layers"]): p for p in points})
        data["scaling"] = sorted(by_key.values(), key=lambda p: (p["backend"], p["layers"]))
    run_info["finished"] = f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
    if args.json:
        save_results(args.json, data)
    if args.markdown:
        render(data, args.markdown)
        print(f"wrote {args.markdown}")
    left = len(set(stopped))
    print(
        f"{len(tasks) - left} tasks run, {report.failures} failed rows"
        + (f"; {left} tasks left after the --deadline (rerun with --resume)" if left else ""),
        file=sys.stderr,
    )
    return 0


def _shapes(args: argparse.Namespace) -> list[str]:
    """``--shapes`` as a list (``--dynamic`` alone: dynamic only; neither: static)."""
    shapes = _csv(args.shapes) if args.shapes else (["dynamic"] if args.dynamic else ["static"])
    if not shapes or any(s not in ("static", "dynamic") for s in shapes):
        raise SystemExit(f"--shapes takes static, dynamic or both, not {args.shapes!r}")
    if args.dynamic and "dynamic" not in shapes:
        raise SystemExit("--dynamic contradicts --shapes static")
    return list(dict.fromkeys(shapes))


def _interrupt(_signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _line(r: Row) -> str:
    text = (
        f"{r.model:<26} {r.size:<5} {r.mode:<5} {r.dtype:<8} {r.backend:<11} "
        f"{r.status:<4} ms {_fmt(r.ms, '9.3f')}  compile {_fmt(r.cold_compile_s, '6.1f')}s "
        f"err {_fmt(r.err_eager, '.1e')}"
    )
    return text + (f"  {r.reason}" if r.reason else "")


class _NoProgress:
    def set_description(self, _text: str) -> None: ...
    def update(self, _n: int) -> None: ...
    def close(self) -> None: ...
    def write(self, text: str) -> None:
        print(text, flush=True)


def _progress(total: int) -> Any:
    try:
        from tqdm import tqdm
    except ImportError:
        return _NoProgress()
    return tqdm(total=total, unit="task", dynamic_ncols=True, mininterval=5.0)


if __name__ == "__main__":
    raise SystemExit(main())

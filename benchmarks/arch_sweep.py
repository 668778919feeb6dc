"""Correctness sweep of a torch.compile backend (kiln by default) over many real
architectures beyond the benchmark zoo: timm, transformers and torchvision models built
small, with random weights, offline.

Each model runs in its own subprocess (a crash or a hang is a row, not the end of the
sweep): build it (fixed seed, eval mode, dropout and stochastic depth off), run eager on
two fresh random input sets, then ``torch.compile(model, backend=...)`` on the same two
(the second call runs the compiled graphs again, with their caches warm), and compare.

A row is ``pass``, ``wrong`` (with the relative error against eager and against float64),
``error`` (the exception, its first line and the innermost kiln frame), ``timeout`` or
``build-failed`` (the architecture could not be built or run eagerly offline: not the
backend's fault).

Comparison (float32), output tensor by output tensor: the error is max |out - eager| /
max |eager|. At most :data:`BOUND` passes outright; above it, the backend's error against
a float64 run of the same model must be at most 3x eager's own error against float64 plus
:data:`FP64_FLOOR` (the dashboard's rule, ``benchmarks/dashboard_task.py``), else ``wrong``.

    python benchmarks/arch_sweep.py --list
    python benchmarks/arch_sweep.py --models timm_resnet18d,hf_phi \
        --json /tmp/sweep.json --markdown /tmp/sweep.md
    chrt -i 0 python benchmarks/arch_sweep.py --json docs/benchmarks/arch-sweep-cpu.json \
        --markdown docs/benchmarks/arch-sweep-cpu.md

``--models`` takes names (or fnmatch patterns) of :func:`arch_sweep_zoo.registry`, or ``path.py:function``
where the function returns ``(module, make_inputs)`` (``make_inputs(seed)`` gives the input
tuple). ``--backend`` takes a registered backend name or ``path.py:function``.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import datetime
import fnmatch
import importlib.util
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

BENCHMARKS = Path(__file__).resolve().parent
REPO = BENCHMARKS.parent
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))

from arch_sweep_zoo import Arch, registry  # noqa: E402

BOUND = {"float32": 1e-3, "bfloat16": 3e-2}
"""Relative error against eager below which a tensor passes outright."""
FP64_MULTIPLIER = 3.0
FP64_FLOOR = {"float32": 1e-4, "bfloat16": 1e-2}
"""Above BOUND: error against float64 at most 3x eager's own plus this floor."""
PERTURBATION = {"float32": 2.0**-21, "bfloat16": 2.0**-6}
"""Relative size of the perturbations of eager's conditioning runs (four units in the
last place, as the dashboard's)."""
PERTURBED_RUNS = 3
INPUT_SEEDS = (11, 23)
"""Two input sets: the first call compiles, the second reruns the compiled graphs."""
KILN_DIRS = ("passes", "backends", "dialects", "frontends", "kiln")


@dataclass
class Row:
    name: str
    source: str = ""
    status: str = ""
    """pass, wrong, error, timeout or build-failed."""
    err_eager: float | None = None
    """Largest relative error against eager over the output tensors (both calls)."""
    err_fp64: float | None = None
    eager_err_fp64: float | None = None
    max_abs: float | None = None
    detail: str = ""
    """wrong: which tensor and call; error: type, first line; build-failed: why."""
    where: str = ""
    """error: the innermost frame in kiln's code (file:line function)."""
    graph_breaks: int | None = None
    graphs: int | None = None
    compile_s: float | None = None
    seconds: float | None = None
    fallbacks: list[str] = field(default_factory=list)
    """ATen ops kiln left to ATen (from its per-graph lines), with counts."""


# --------------------------------------------------------------------------------------
# One model (in the worker process)


def _load_attr(spec: str) -> Any:
    """``path.py:name`` -> the object."""
    path, _, attr = spec.rpartition(":")
    module_name = "arch_sweep_user_" + Path(path).stem
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    assert module_spec is not None, path
    assert module_spec.loader is not None, path
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_name] = module
    module_spec.loader.exec_module(module)
    return getattr(module, attr)


def resolve_arch(name: str) -> Arch:
    if ":" in name and name.split(":")[0].endswith(".py"):
        return Arch(name, "custom", _load_attr(name))
    return registry()[name]


def resolve_backend(backend: str) -> str | Callable[..., Any]:
    if ":" in backend and backend.split(":")[0].endswith(".py"):
        return _load_attr(backend)
    return backend


def tensors(value: Any) -> list[torch.Tensor]:
    """The tensors of an output (tuples, lists, dicts, ModelOutputs), in order."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in tensors(v)]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in tensors(v)]
    return []


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> tuple[float, float]:
    """(max |out - ref| / max |ref|, max |out - ref|); inf on a shape mismatch or NaN
    where the reference has none."""
    if out.shape != ref.shape:
        return math.inf, math.inf
    if ref.numel() == 0:
        return 0.0, 0.0
    o, r = out.detach().double(), ref.detach().double()
    both_nan = o.isnan() & r.isnan()
    diff = torch.where(both_nan, 0.0, (o - r).abs().nan_to_num(nan=math.inf))
    same_inf = (o == r) & r.isinf()
    diff = torch.where(same_inf, 0.0, diff)
    scale = float(r.abs().nan_to_num(nan=0.0, posinf=0.0, neginf=0.0).max())
    worst = float(diff.max())
    if scale == 0.0:
        return (0.0 if worst < 1e-6 else math.inf), worst
    return worst / scale, worst


def describe_exception(e: BaseException) -> tuple[str, str]:
    """(``Type: first line``, innermost frame in kiln's code)."""
    inner: BaseException = e
    seen = 0
    while seen < 8:
        nxt = getattr(inner, "inner_exception", None) or inner.__cause__
        if nxt is None or nxt is inner:
            break
        inner, seen = nxt, seen + 1
    lines = str(inner).strip().splitlines()
    first = lines[0] if lines else ""
    where = ""
    for frame in traceback.extract_tb(inner.__traceback__):
        path = Path(frame.filename).resolve()
        if "site-packages" in path.parts:
            continue
        for d in KILN_DIRS:
            if d in path.parts:
                rel = "/".join(path.parts[path.parts.index(d) :])
                where = f"{rel}:{frame.lineno} {frame.name}"
                break
    return f"{type(inner).__name__}: {first[:300]}", where


def _fallback_summary(log: str) -> list[str]:
    """The ``ATen fallback: ...`` parts of kiln's per-graph lines."""
    found: list[str] = []
    for line in log.splitlines():
        if line.startswith("kiln:") and "ATen fallback:" in line:
            part = line.split("ATen fallback:", 1)[1].split("[", 1)[0].strip().rstrip(",")
            for item in part.split(", "):
                if item and item not in found:
                    found.append(item)
    return found


def _double(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.double()
    return value


def randomize(model: nn.Module, seed: int = 5) -> None:
    """Give every parameter that holds one value throughout (norm weights of ones, zero
    biases, zero-initialized residual gammas and layer scales) random values around it,
    and batch norm's running statistics random values, so that no branch of the model
    is dead or an identity and every op's result reaches the output."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.is_floating_point() and p.numel() and bool((p == p.flatten()[0]).all()):
                p.add_(0.1 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
        for name, b in model.named_buffers():
            if not b.is_floating_point():
                continue
            leaf = name.rsplit(".", 1)[-1]
            if leaf == "running_var":
                b.copy_(torch.rand(b.shape, generator=gen, dtype=b.dtype) + 0.5)
            elif leaf == "running_mean":
                b.copy_(0.1 * torch.randn(b.shape, generator=gen, dtype=b.dtype))


def _inference(fn: Callable[..., Any], x: tuple[Any, ...]) -> list[torch.Tensor]:
    with torch.no_grad():
        return [t.clone() for t in tensors(fn(*x))]


def _train_step(model: nn.Module, fn: Callable[..., Any], x: tuple[Any, ...]) -> list[torch.Tensor]:
    """Forward, a loss that weighs every output element by a fixed random number,
    backward: the outputs, then every parameter's gradient (an empty tensor where there is
    none)."""
    for p in model.parameters():
        p.grad = None
    outs = tensors(fn(*x))
    loss: Any = 0.0
    for k, o in enumerate(outs):
        if o.is_floating_point() and o.requires_grad:
            weight = torch.randn(o.shape, generator=torch.Generator().manual_seed(7 + k))
            loss = loss + (o * weight.to(o.dtype)).sum()
    if isinstance(loss, torch.Tensor):
        loss.backward()
    grads = [
        p.grad.detach().clone() if p.grad is not None else torch.zeros(0)
        for p in model.parameters()
    ]
    return [o.detach().clone() for o in outs] + grads


def _is_float(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.is_floating_point()


def _fresh(value: Any) -> Any:
    """A copy of a tensor with its sizes, strides and storage offset (a copy of its whole
    storage); anything else as it is."""
    if not isinstance(value, torch.Tensor):
        return value
    out = torch.empty(0, dtype=value.dtype, device=value.device)
    out.set_(value.untyped_storage().clone(), value.storage_offset(), value.size(), value.stride())
    return out


def _buffers(model: nn.Module) -> list[torch.Tensor]:
    return [b.detach().clone() for b in model.buffers() if b.is_floating_point()]


def check_model(
    arch: Arch,
    backend: str | Callable[..., Any] = "kiln",
    options: dict[str, Any] | None = None,
    extra_batch: bool = False,
    mode: str = "inference",
    dtype: str = "float32",
) -> Row:
    """Build, run eager, compile, compare: one row (in this process). ``extra_batch``:
    a third call at twice the batch size (a recompile with a dynamic batch). ``mode``
    ``train``: train mode, each call a forward and a backward; the outputs and every
    parameter's gradient are compared, then the float buffers (batch norm's running
    statistics) after the last call. ``dtype``: the model's parameters, buffers and float
    inputs in that dtype (the float64 reference starts from the same rounded weights)."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    train = mode == "train"
    row = Row(arch.name, arch.source)
    start = time.perf_counter()
    try:
        model, make_inputs = arch.build()
        randomize(model)
        low = getattr(torch, dtype)
        if low != torch.float32:
            model.to(low)
        if train:
            model.train()
        inputs = [make_inputs(seed) for seed in INPUT_SEEDS]
        if extra_batch:
            # A third call at twice the batch: Dynamo recompiles with a symbolic batch.
            a, b = make_inputs(INPUT_SEEDS[0] + 100), make_inputs(INPUT_SEEDS[1] + 100)
            inputs.append(
                tuple(
                    torch.cat([x, y]) if isinstance(x, torch.Tensor) else x
                    for x, y in zip(a, b, strict=True)
                )
            )
        pristine = copy.deepcopy(model)
        eager_model = copy.deepcopy(model)

        def run(
            m: nn.Module, fn: Callable[..., Any], x: tuple[Any, ...], cast: bool = True
        ) -> list[torch.Tensor]:
            # Copies of the inputs (a model may write to them), in their layouts.
            x = tuple(_fresh(v) for v in x)
            if cast and low != torch.float32:
                x = tuple(
                    v.to(low) if isinstance(v, torch.Tensor) and v.is_floating_point() else v
                    for v in x
                )
            return _train_step(m, fn, x) if train else _inference(fn, x)

        eager = [run(eager_model, eager_model, x) for x in inputs]
        if train:
            eager.append(_buffers(eager_model))
        if not any(eager):
            raise RuntimeError("the model returned no tensor")
        notes = degenerate(eager)
    except Exception as e:
        row.status = "build-failed"
        row.detail, _ = describe_exception(e)
        row.seconds = time.perf_counter() - start
        return row
    torch._dynamo.reset()
    counters.clear()
    torch._dynamo.config.suppress_errors = False
    try:
        kwargs: dict[str, Any] = {"backend": backend}
        if options:
            kwargs["options"] = options
        compiled = torch.compile(model, **kwargs)
        outs: list[list[torch.Tensor]] = []
        t0 = time.perf_counter()
        for k, x in enumerate(inputs):
            outs.append(run(model, compiled, x))
            if k == 0:
                row.compile_s = time.perf_counter() - t0
        if train:
            outs.append(_buffers(model))
    except Exception as e:
        row.status = "error"
        row.detail, row.where = describe_exception(e)
        row.seconds = time.perf_counter() - start
        return row
    finally:
        row.graph_breaks = sum(counters["graph_break"].values())
        row.graphs = int(counters["stats"].get("unique_graphs", 0))

    def float64() -> list[list[torch.Tensor]]:
        m = copy.deepcopy(pristine).double()
        results = [
            run(m, m, tuple(_double(_fresh(v).to(low)) if _is_float(v) else v for v in x), False)
            for x in inputs
        ]
        if train:
            results.append(_buffers(m))
        return results

    def perturbed() -> list[list[list[torch.Tensor]]]:
        """Eager again with every float parameter and input moved by a few roundings:
        how far rounding alone moves each tensor (a near tie, a ReLU input within
        rounding of zero, moves far)."""
        runs = []
        for seed in range(PERTURBED_RUNS):
            gen = torch.Generator().manual_seed(1000 + seed)

            def nudge(t: Any, gen: torch.Generator = gen) -> Any:
                if isinstance(t, torch.Tensor) and t.is_floating_point():
                    noise = torch.randn(t.shape, generator=gen, dtype=torch.float64)
                    return (t.double() * (1 + PERTURBATION[dtype] * noise)).to(t.dtype)
                return t

            m = copy.deepcopy(pristine)
            with torch.no_grad():
                for p in m.parameters():
                    p.copy_(nudge(p))
            try:
                results = [run(m, m, tuple(nudge(v) for v in x)) for x in inputs]
            except Exception:  # a conditioning run is optional
                continue
            if train:
                results.append(_buffers(m))
            runs.append(results)
        return runs

    n_out = len(tensors_names := [f"output {k}" for k in range(len(eager[0]))])
    if train:
        n_out = len(eager[0]) - sum(1 for _ in model.parameters())
        tensors_names = [f"output {k}" for k in range(n_out)] + [
            f"grad {name}" for name, _ in model.named_parameters()
        ]
    names = [tensors_names for _ in inputs]
    if train:
        names.append(
            [f"buffer {name}" for name, b in model.named_buffers() if b.is_floating_point()]
        )
    judge(row, outs, eager, float64, dtype, names=names, perturbed=perturbed)
    if notes:
        row.detail = "; ".join([*notes, row.detail]).strip("; ")
    row.seconds = time.perf_counter() - start
    return row


def degenerate(eager: Sequence[Sequence[torch.Tensor]]) -> list[str]:
    """Why a comparison of these outputs would say little: a constant output tensor, or
    outputs that do not depend on the inputs."""
    notes: list[str] = []
    for k, t in enumerate(eager[0]):
        if t.is_floating_point() and t.numel() > 1 and bool((t == t.flatten()[0]).all()):
            notes.append(f"tensor {k} is constant")
    if len(eager) > 1 and all(
        a.shape == b.shape and torch.equal(a, b) for a, b in zip(eager[0], eager[1], strict=False)
    ):
        notes.append("outputs do not depend on the inputs")
    return notes


def judge(
    row: Row,
    outs: Sequence[Sequence[torch.Tensor]],
    eager: Sequence[Sequence[torch.Tensor]],
    float64: Callable[[], Sequence[Sequence[torch.Tensor]]],
    dtype: str = "float32",
    names: Sequence[Sequence[str]] | None = None,
    perturbed: Callable[[], Sequence[Sequence[Sequence[torch.Tensor]]]] | None = None,
) -> None:
    """Fill ``row.status`` and its errors (``float64()``: the same calls in float64,
    run only when some tensor is over the bound)."""
    errors: list[tuple[float, float, int, int]] = []  # rel, abs, call, tensor
    for call, (out, ref) in enumerate(zip(outs, eager, strict=True)):
        if len(out) != len(ref):
            row.status, row.err_eager = "wrong", math.inf
            row.detail = f"call {call}: {len(out)} output tensors, eager has {len(ref)}"
            return
        for k, (o, r) in enumerate(zip(out, ref, strict=True)):
            rel, absolute = rel_error(o, r)
            errors.append((rel, absolute, call, k))
    worst = max(errors, default=(0.0, 0.0, 0, 0))
    row.err_eager, row.max_abs = worst[0], worst[1]
    if all(e[0] <= BOUND[dtype] for e in errors):
        row.status = "pass"
        return
    # Above the bound: against float64, tensor by tensor.
    try:
        fp64 = float64()
    except Exception as e:
        row.status = "wrong"
        call, k = worst[2], worst[3]
        what = names[call][k] if names and k < len(names[call]) else f"tensor {k}"
        row.detail = (
            f"call {call} {what}: {worst[0]:.2e} vs eager; float64 run "
            f"failed: {describe_exception(e)[0][:120]}"
        )
        return
    runs = perturbed() if perturbed is not None else []
    worst_ratio, detail = -1.0, ""
    for rel, _, call, k in errors:
        if rel <= BOUND[dtype]:
            continue
        err64, _ = rel_error(outs[call][k], fp64[call][k])
        eager64, _ = rel_error(eager[call][k], fp64[call][k])
        spread = max(
            [eager64]
            + [
                rel_error(run[call][k], fp64[call][k])[0]
                for run in runs
                if len(run[call]) == len(fp64[call])
            ]
        )
        limit = FP64_MULTIPLIER * spread + FP64_FLOOR[dtype]
        ratio = err64 / limit if math.isfinite(err64) else math.inf
        if ratio > worst_ratio:
            worst_ratio = ratio
            row.err_fp64, row.eager_err_fp64 = err64, eager64
            what = names[call][k] if names and k < len(names[call]) else f"tensor {k}"
            detail = (
                f"call {call} {what}: {rel:.2e} vs eager, {err64:.2e} vs float64 "
                f"(eager's {eager64:.2e}, perturbed eager's up to {spread:.2e})"
            )
    row.detail = detail
    row.status = "pass" if worst_ratio <= 1.0 else "wrong"


def worker_main(
    name: str,
    backend: str,
    result: Path,
    options_json: str,
    extra_batch: bool = False,
    mode: str = "inference",
    dtype: str = "float32",
) -> None:
    arch = resolve_arch(name)
    options = json.loads(options_json) if options_json else None
    row = check_model(arch, resolve_backend(backend), options, extra_batch, mode, dtype)
    result.write_text(json.dumps(asdict(row)))


# --------------------------------------------------------------------------------------
# The sweep (parent process)


def run_isolated(
    name: str,
    backend: str = "kiln",
    timeout: float = 300.0,
    log_dir: Path | None = None,
    options_json: str = "",
    env: dict[str, str] | None = None,
    extra_batch: bool = False,
    mode: str = "inference",
    dtype: str = "float32",
) -> Row:
    """One model in a subprocess: its row, or a ``timeout`` / ``error`` row when the
    process hung or died."""
    with tempfile.TemporaryDirectory() as tmp:
        result = Path(tmp) / "row.json"
        cmd = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--worker",
            name,
            "--backend",
            backend,
            "--result",
            str(result),
        ]
        if options_json:
            cmd += ["--options", options_json]
        if extra_batch:
            cmd.append("--extra-batch")
        cmd += ["--mode", mode, "--dtype", dtype]
        child_env = dict(os.environ if env is None else env)
        child_env["PYTHONPATH"] = os.pathsep.join(
            [str(REPO), str(BENCHMARKS), child_env.get("PYTHONPATH", "")]
        ).rstrip(os.pathsep)
        start = time.perf_counter()
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=child_env,
            start_new_session=True,
            text=True,
        )
        try:
            output, _ = proc.communicate(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
            timed_out = True
        seconds = time.perf_counter() - start
        if log_dir is not None:
            log_dir.mkdir(parents=True, exist_ok=True)
            (log_dir / f"{name.replace('/', '_').replace(':', '_')}.log").write_text(output)
        if timed_out:
            return Row(name, status="timeout", detail=f"over {timeout:.0f} s", seconds=seconds)
        if result.exists():
            row = Row(**json.loads(result.read_text()))
            row.fallbacks = _fallback_summary(output)
            row.seconds = seconds
            return row
        tail = [line for line in output.strip().splitlines() if line.strip()][-3:]
        return Row(
            name,
            status="error",
            detail=f"worker died (exit {proc.returncode}): {' | '.join(tail)[:300]}",
            seconds=seconds,
        )


def _fmt(x: float | None, spec: str = ".1e") -> str:
    return "" if x is None else format(x, spec)


def render_markdown(rows: Sequence[Row], header: str = "") -> str:
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.status] = counts.get(row.status, 0) + 1
    order = ("wrong", "error", "timeout", "build-failed", "pass")
    lines = [header] if header else []
    lines.append("Counts: " + ", ".join(f"{s} {counts[s]}" for s in order if s in counts) + "\n")
    lines.append(
        "| model | source | status | err vs eager | err vs fp64 (eager's) | max abs | "
        "graphs | breaks | compile s | detail |"
    )
    lines.append("|---|---|---|---|---|---|---|---|---|---|")
    for row in sorted(rows, key=lambda r: (order.index(r.status), r.source, r.name)):
        fp64 = (
            f"{row.err_fp64:.1e} ({row.eager_err_fp64:.1e})"
            if row.err_fp64 is not None and row.eager_err_fp64 is not None
            else ""
        )
        detail = row.detail + (f" at `{row.where}`" if row.where else "")
        detail = detail.replace("|", "\\|").replace("\n", " ")
        lines.append(
            f"| {row.name} | {row.source} | {row.status} | {_fmt(row.err_eager)} | {fp64} | "
            f"{_fmt(row.max_abs)} | {'' if row.graphs is None else row.graphs} | "
            f"{'' if row.graph_breaks is None else row.graph_breaks} | "
            f"{_fmt(row.compile_s, '.1f')} | {detail} |"
        )
    return "\n".join(lines) + "\n"


def select(patterns: str | None) -> list[str]:
    names = list(registry())
    if not patterns:
        return names
    chosen: list[str] = []
    for pattern in patterns.split(","):
        pattern = pattern.strip()
        if not pattern:
            continue
        if ":" in pattern and pattern.split(":")[0].endswith(".py"):
            chosen.append(pattern)
            continue
        hits = [n for n in names if fnmatch.fnmatch(n, pattern)]
        if not hits:
            raise SystemExit(f"no model matches {pattern!r} (see --list)")
        chosen.extend(h for h in hits if h not in chosen)
    return chosen


def _git_commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--models", help="comma-separated names or fnmatch patterns, or file.py:fn")
    p.add_argument("--list", action="store_true", help="print the architectures and exit")
    p.add_argument("--backend", default="kiln", help="backend name or file.py:function")
    p.add_argument("--options", default="", help="backend options as JSON")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per model")
    p.add_argument("--json", type=Path, help="write the rows here (rewritten after each)")
    p.add_argument("--markdown", type=Path, help="write the table here")
    p.add_argument("--log-dir", type=Path, help="each model's output, one file per model")
    p.add_argument("--mode", choices=("inference", "train"), default="inference")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    p.add_argument(
        "--extra-batch",
        action="store_true",
        help="a third call at twice the batch size (Dynamo recompiles, batch symbolic)",
    )
    p.add_argument(
        "--update",
        action="store_true",
        help="keep the rows of --json for the models not run now (a rerun of a few)",
    )
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        worker_main(
            args.worker,
            args.backend,
            args.result,
            args.options,
            args.extra_batch,
            args.mode,
            args.dtype,
        )
        return
    if args.list:
        for name, arch in registry().items():
            print(f"{name:40} {arch.source}")
        return
    names = select(args.models)
    command = "python benchmarks/arch_sweep.py " + " ".join(
        sys.argv[1:] if argv is None else list(argv)
    )
    started = datetime.datetime.now(datetime.UTC)
    rows: list[Row] = []
    kept: list[Row] = []
    if args.update and args.json and args.json.exists():
        old = json.loads(args.json.read_text())
        kept = [Row(**r) for r in old["rows"] if r["name"] not in names]
    meta = {
        "mode": args.mode,
        "dtype": args.dtype,
        "extra_batch": args.extra_batch,
        "command": command,
        "commit": _git_commit(),
        "date": started.strftime("%Y-%m-%d %H:%M UTC"),
        "torch": torch.__version__,
        "backend": args.backend,
    }

    def write() -> None:
        elapsed = (datetime.datetime.now(datetime.UTC) - started).total_seconds()
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            data = {**meta, "seconds": elapsed, "rows": [asdict(r) for r in [*kept, *rows]]}
            args.json.write_text(json.dumps(data, indent=1) + "\n")
        if args.markdown:
            header = (
                f"# Architecture sweep: {args.backend}, {args.dtype} {args.mode}, CPU\n\n"
                f"`{command}`\n\ncommit {meta['commit']}, {meta['date']}, torch "
                f"{meta['torch']}, {len(kept) + len(rows)} models, this run {elapsed / 60:.0f} min\n"
            )
            args.markdown.parent.mkdir(parents=True, exist_ok=True)
            args.markdown.write_text(render_markdown([*kept, *rows], header))

    for k, name in enumerate(names):
        row = run_isolated(
            name,
            args.backend,
            args.timeout,
            args.log_dir,
            args.options,
            extra_batch=args.extra_batch,
            mode=args.mode,
            dtype=args.dtype,
        )
        rows.append(row)
        print(
            f"[{k + 1}/{len(names)}] {name}: {row.status} {_fmt(row.err_eager)} "
            f"{row.detail[:160]} {row.where} ({_fmt(row.seconds, '.0f')} s)",
            flush=True,
        )
        write()
    write()


if __name__ == "__main__":
    main()

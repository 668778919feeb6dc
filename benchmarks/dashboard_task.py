"""One dashboard task, a (model, size, mode, dtype) on a device: eager's reference, then
every backend's row (compile, compare, time, measure), each failure a row with its reason."""

from __future__ import annotations

import contextlib
import copy
import gc
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from dashboard_measure import (
    TaskTimeout,
    TimingLock,
    clone_all,
    compile_with,
    describe,
    flatten,
    fresh_caches,
    inductor_launches,
    interleaved_ms,
    median_ms,
    paired_ms,
    peak_mb,
    profile_kernels,
    raised_at,
    rel_errors,
    sync,
    time_limit,
)
from dashboard_results import Row, failed_rows
from torch import nn
from zoo import ModelSpec

MODES = ("infer", "train")
DTYPES = ("float32", "bfloat16", "float16")

BOUND = {"float32": 2e-3, "bfloat16": 3e-2, "float16": 3e-2}
"""Relative error against eager (same dtype) below which a row passes outright."""
FP64_MULTIPLIER = 3.0
FP64_FLOOR = {"float32": 1e-4, "bfloat16": 1e-2, "float16": 2e-3}
"""Otherwise: error against float64 at most 3x eager's own error plus this floor."""
PERTURBATION = {"float32": 2.0**-21, "bfloat16": 2.0**-6, "float16": 2.0**-8}
"""Relative size of the perturbations of eager's conditioning runs: four units in the last
place of the dtype (one was too few: ResNet-50's near ties did not move)."""
PERTURBED_RUNS = 3
"""Eager steps with perturbed weights and inputs (see :func:`perturbed_references`)."""


@dataclass(frozen=True)
class Settings:
    """What the command line decides about every task (see benchmarks/dashboard.py)."""

    iters: int = 20
    timeout: int = 900
    """Seconds per backend per task (0: none)."""
    check_only: bool = False
    no_warm: bool = False
    dynamic: bool = False
    jobs: int = 1
    """Workers running at once (``--jobs``; recorded in every row)."""
    interleave: bool = False
    """``--interleave``: after a task's backends ran, time the passing ones and eager once
    more in the same rounds (``Row.interleaved_ms``); keeps their compiled steps alive
    until then."""


@dataclass
class Task:
    """One (model, size, mode, dtype) on a device: the inputs and the step to run."""

    spec: ModelSpec
    size: str
    mode: str
    dtype: str
    device: torch.device
    base: nn.Module
    base_inputs: tuple[torch.Tensor, ...]
    grads: dict[tuple[int, ...], torch.Tensor] = field(default_factory=dict)

    @property
    def torch_dtype(self) -> torch.dtype:
        return getattr(torch, self.dtype)

    def instance(
        self, dtype: torch.dtype | None = None, perturb: int | None = None
    ) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
        """A fresh copy of the model and inputs on the device in ``dtype``; ``perturb``: a
        seed, every float parameter multiplied by ``1 + PERTURBATION * N(0, 1)`` first."""
        dtype = dtype or self.torch_dtype
        model = copy.deepcopy(self.base)
        if perturb is not None:
            with torch.no_grad():
                gen = torch.Generator().manual_seed(perturb)
                for p in model.parameters():
                    if p.is_floating_point():
                        noise = torch.randn(p.shape, generator=gen, dtype=p.dtype)
                        p.mul_(1 + PERTURBATION[self.dtype] * noise.to(p.device))
        model = model.to(device=self.device, dtype=dtype)
        model.train(self.mode == "train")
        train_inputs = self.mode == "train" and not any(p.requires_grad for p in model.parameters())
        inputs = []
        for x in self.base_inputs:
            x = x.to(self.device, dtype=dtype) if x.is_floating_point() else x.to(self.device)
            if train_inputs and x.is_floating_point():
                x.requires_grad_(True)  # a model without parameters: train its inputs
            inputs.append(x)
        return model, tuple(inputs)

    def output_grad(self, out: torch.Tensor) -> torch.Tensor:
        """The fixed random gradient of one output (same values in every dtype)."""
        shape = tuple(out.shape)
        if shape not in self.grads:
            gen = torch.Generator().manual_seed(7)
            self.grads[shape] = torch.randn(shape, generator=gen).to(self.device)
        return self.grads[shape].to(out.dtype)

    def step(
        self,
        fn: Callable[..., Any],
        model: nn.Module,
        inputs: tuple[torch.Tensor, ...],
        before: Callable[[], None] | None = None,
    ) -> list[torch.Tensor]:
        """Run one step; return the outputs (and, training, the gradients) to compare."""
        if before is not None:
            before()
        if self.mode == "infer":
            with torch.no_grad():
                return flatten(fn(*inputs))
        model.zero_grad(set_to_none=True)
        for x in inputs:
            x.grad = None
        _updated(model)
        outs = [o for o in flatten(fn(*inputs)) if o.requires_grad]
        torch.autograd.backward(outs, [self.output_grad(o) for o in outs])
        params = [p for p in model.parameters() if p.requires_grad]
        leaves = [x for x in inputs if x.requires_grad]
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params + leaves]
        return [o.detach() for o in outs] + grads


def _updated(model: nn.Module) -> None:
    """Mark every parameter updated in place, as the optimizer step between two training
    steps does (its version counter moves; no kernel runs): a cache keyed on it (kiln's
    channels-last weight copies on the GPU) is refreshed at every timed step, as in a
    training loop, not reused across steps the optimizer would separate."""
    from torch.autograd.graph import increment_version

    with torch.no_grad():
        for p in model.parameters():
            increment_version(p)


def optimizer_step(task: Task) -> Callable[[], Any] | None:
    """One eager AdamW step (foreach) over a fresh model's gradients, to time (None: no
    parameter has a gradient). Built outside the timing lock: only the steps need it."""
    model, inputs = task.instance()
    task.step(model, model, inputs)
    params = [p for p in model.parameters() if p.requires_grad and p.grad is not None]
    if not params:
        return None
    return torch.optim.AdamW(params, lr=1e-4, foreach=True).step


# -- one backend on one task ---------------------------------------------------------------


@dataclass
class Reference:
    eager: list[torch.Tensor]
    eager_first_s: float
    fp64: list[torch.Tensor] | None = None
    fp64_error: str | None = None
    perturbed: list[list[torch.Tensor]] | None = None


def fp64_reference(
    task: Task, ref: Reference, inputs: Sequence[torch.Tensor] | None = None
) -> list[torch.Tensor] | None:
    """The step in float64, at the task's inputs or at ``inputs`` (other sizes)."""
    if ref.fp64 is None and ref.fp64_error is None:
        try:
            model, base = task.instance(torch.float64)
            if inputs is not None:
                base = tuple(
                    x.detach().double().requires_grad_(x.requires_grad)
                    if x.is_floating_point()
                    else x
                    for x in inputs
                )
            ref.fp64 = clone_all(task.step(model, model, base))
        except Exception as e:  # a model that has no float64 path: say so in the row
            ref.fp64_error = f"float64 reference failed: {describe(e)}"
    return ref.fp64


def perturbed_references(
    task: Task, ref: Reference, inputs: Sequence[torch.Tensor] | None = None
) -> list[list[torch.Tensor]]:
    """Eager's step again, :data:`PERTURBED_RUNS` times, with every float parameter and
    input perturbed by a few roundings of the task's dtype (:data:`PERTURBATION`): other
    computations as valid as eager's, to measure how far rounding alone moves each tensor
    from float64.

    Where a result hangs on a near tie (a ReLU input within rounding of zero, batch norm
    over a few values per channel), eager's error against float64 can be small by luck
    while any other rounding order lands far away. ShuffleNet's and ResNet-50's small
    training steps (2x2 maps in the last stage, 8 values per batch-norm channel) are such:
    eager with weights and inputs perturbed by four units in the last place is 2.80e-2 off
    float64 on ResNet-50's ``layer4.1.bn3.bias`` gradient where eager's own error is 6.0e-4
    and kiln's step 2.81e-2; eager channels-last fails the eager-only rule as far as kiln
    does (15x its limit). A backend is held to the spread of these runs, not to eager's luck;
    a wrong result on a well-conditioned tensor still fails (the runs agree there). A run
    that fails is left out.

    A model with 4-D inputs also runs eager in channels-last memory format, the layout
    kiln and Inductor keep activations in around convolutions. On the GPU, cuDNN's NHWC
    kernels use TF32 where the NCHW ones picked for these shapes do not: such a backend
    rounds as eager channels-last does, not as eager. ShuffleNet-v2's small float32 training step: eager channels-last
    is 1.7e-2 off float64 on one gradient where eager is 1.5e-5 and kiln 2.2e-2; with
    TF32 off all three pass (``benchmarks/accuracy_gate.py --no-tf32``)."""
    if ref.perturbed is None:
        ref.perturbed = []
        for seed in range(PERTURBED_RUNS):
            try:
                model, base = task.instance(perturb=seed)
                gen = torch.Generator().manual_seed(1000 + seed)
                scale = PERTURBATION[task.dtype]
                base = tuple(
                    (x.detach() * (1 + scale * torch.randn(x.shape, generator=gen).to(x.device)))
                    .to(x.dtype)
                    .requires_grad_(x.requires_grad)
                    if x.is_floating_point()
                    else x
                    for x in (inputs if inputs is not None else base)
                )
                ref.perturbed.append(clone_all(task.step(model, model, base)))
            except Exception:  # a conditioning run is optional: eager's error still counts
                continue
        if inputs is None and any(x.dim() == 4 for x in task.base_inputs):
            try:
                model, base = channels_last(*task.instance())
                ref.perturbed.append(clone_all(task.step(model, model, base)))
            except Exception:
                pass
    return ref.perturbed


def channels_last(
    model: torch.nn.Module, inputs: Sequence[torch.Tensor]
) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """The model and its 4-D inputs in channels-last memory format: eager as a user who
    sets ``memory_format=torch.channels_last`` runs it."""
    model.to(memory_format=torch.channels_last)  # pyright: ignore[reportCallIssue]
    return model, tuple(
        x.contiguous(memory_format=torch.channels_last) if x.dim() == 4 else x for x in inputs
    )


@dataclass
class Accuracy:
    """Errors of a backend's outputs; ``reason`` says why they fail (None: they pass)."""

    err_eager: float
    err_fp64: float | None = None
    eager_err_fp64: float | None = None
    perturbed_err_fp64: float | None = None
    """The worst error against float64 of eager's perturbed runs, on the same tensor."""
    reason: str | None = None


def accuracy(
    task: Task,
    out: list[torch.Tensor],
    ref: Reference,
    inputs: Sequence[torch.Tensor] | None = None,
) -> Accuracy:
    """The dashboard's rule, tensor by tensor (outputs, then gradients): within the dtype's
    bound of eager, else within 3x eager's own error against float64 plus a floor, both
    errors of that same tensor (``inputs``: the step's, when not the task's).

    Tensor by tensor, because the worst errors of different tensors say nothing about each
    other: a gradient that is rounding noise in exact arithmetic (an attention key bias's)
    has a huge relative error in eager too, and compared worst against worst it excused any
    error of any other tensor (hf_bert's train rows read 1e0 / 5.8e8 / 6.7e8 and passed).
    The row shows the errors of the tensor nearest to (or furthest past) its limit."""
    errors = rel_errors(out, ref.eager)
    acc = Accuracy(max(errors, default=0.0))
    if acc.err_eager <= BOUND[task.dtype]:
        return acc
    if len(out) != len(ref.eager):
        acc.reason = f"{len(out)} outputs and gradients, eager has {len(ref.eager)}"
        return acc
    fp64 = fp64_reference(task, ref, inputs)
    if fp64 is None:
        acc.reason = f"error {acc.err_eager:.1e} vs eager; {ref.fp64_error}"
        return acc
    errors_fp64, eager_errors_fp64 = rel_errors(out, fp64), rel_errors(ref.eager, fp64)
    if len(errors_fp64) != len(errors) or len(eager_errors_fp64) != len(errors):
        acc.reason = f"error {acc.err_eager:.1e} vs eager; float64 has {len(fp64)} tensors"
        return acc
    perturbed_errors = [
        errs
        for run in perturbed_references(task, ref, inputs)
        if len(errs := rel_errors(run, fp64)) == len(errors)
    ]
    spread = [max([e, *(p[k] for p in perturbed_errors)]) for k, e in enumerate(eager_errors_fp64)]
    worst, worst_ratio = -1, -1.0
    for k, err in enumerate(errors):
        if err <= BOUND[task.dtype]:
            continue
        limit = FP64_MULTIPLIER * spread[k] + FP64_FLOOR[task.dtype]
        ratio = errors_fp64[k] / limit if math.isfinite(errors_fp64[k]) else math.inf
        if ratio > worst_ratio:
            worst, worst_ratio = k, ratio
    acc.err_fp64, acc.eager_err_fp64 = errors_fp64[worst], eager_errors_fp64[worst]
    if perturbed_errors:
        acc.perturbed_err_fp64 = max(p[worst] for p in perturbed_errors)
    if worst_ratio <= 1.0:
        return acc
    perturbed = (
        f", perturbed eager's {acc.perturbed_err_fp64:.1e}"
        if acc.perturbed_err_fp64 is not None
        else ""
    )
    acc.reason = (
        f"accuracy: {acc.err_eager:.1e} vs eager; tensor {worst} of {len(out)}: "
        f"{acc.err_fp64:.1e} vs float64 (eager's {acc.eager_err_fp64:.1e}{perturbed})"
    )
    return acc


def judge(row: Row, task: Task, out: list[torch.Tensor], ref: Reference) -> None:
    acc = accuracy(task, out, ref)
    row.err_eager = acc.err_eager
    if acc.err_fp64 is not None:
        row.err_fp64, row.eager_err_fp64 = acc.err_fp64, acc.eager_err_fp64
        row.perturbed_err_fp64 = acc.perturbed_err_fp64
    if acc.reason is not None:
        row.status, row.reason = "fail", acc.reason


class WrongOutputs(AssertionError):
    """``--dynamic``: the compiled step's outputs at another size differ from eager's (the
    row fails, see benchmarks/recompiles.py's :func:`dashboard_recompiles`)."""


def run_backend(
    task: Task,
    backend: str,
    ref: Reference,
    settings: Settings,
    eager_ms: float | None,
    eager_run: Callable[[], Any] | None = None,
    timed: TimingLock | None = None,
    keep: dict[str, Callable[[], Any]] | None = None,
) -> Row:
    """One backend's row. ``eager_run`` (one eager step) is timed alternately with the
    backend's steps (``paired_ms``) when given; every timed measurement runs under
    ``timed`` (``--jobs``: no other worker times meanwhile). ``keep``: where a passing
    row's step is left, by backend, for the task's interleaved timing."""
    spec = task.spec
    row = Row(
        spec.name,
        spec.source,
        spec.family,
        task.size,
        task.mode,
        task.dtype,
        backend,
        str(task.device),
        dynamic=settings.dynamic and backend != "eager",
        jobs=settings.jobs,
    )
    device = task.device
    model, inputs = task.instance()
    from kiln.compiler import compile_history, reset_compile_history

    before = torch.compiler.cudagraph_mark_step_begin if backend == "inductor-ro" else None
    eager_s = (eager_ms or ref.eager_first_s * 1000) / 1000

    lock = timed or TimingLock()

    def first_call(fn: Callable[..., Any]) -> tuple[list[torch.Tensor], float]:
        """The first step (the compile) and its seconds, less those this worker was paused
        while another timed (``--jobs``)."""
        start, wall = time.perf_counter(), time.time()
        out = clone_all(task.step(fn, model, inputs, before))
        sync(device)
        return out, time.perf_counter() - start - lock.paused_s(wall, time.time())

    try:
        with time_limit(settings.timeout, lock.paused_s):
            torch._dynamo.reset()
            fresh_caches(f"{spec.name}-{backend}")
            if backend.startswith("kiln"):
                reset_compile_history()
            fn = compile_with(backend, model, settings.dynamic)
            if backend.startswith("inductor") and device.type == "cpu":
                from torch._inductor.utils import run_and_get_code

                (out, first_s), sources = run_and_get_code(first_call, fn)
                row.launches = sum(inductor_launches(code) for code in sources)
                row.graphs = len(sources)
            else:
                out, first_s = first_call(fn)
            if backend != "eager":
                row.cold_compile_s = max(first_s - eager_s, 0.0)
            if backend.startswith("kiln"):
                history = compile_history()
                row.graphs = len(history)
                row.externs = sum(sum(s.externs.values()) for s in history)
                if device.type == "cpu":
                    row.launches = sum(s.launches for s in history)
            if backend != "eager":
                judge(row, task, out, ref)
            if settings.check_only or row.status == "fail":
                return row
            if backend != "eager" and not settings.no_warm:
                del fn
                torch._dynamo.reset()
                fn = compile_with(backend, model, settings.dynamic)
                _, warm_s = first_call(fn)
                row.warm_compile_s = max(warm_s - eager_s, 0.0)

            def run() -> Any:
                return task.step(fn, model, inputs, before)

            notes = []
            kernel_totals = None
            opt_step = None
            if backend == "eager" and task.mode == "train":
                try:
                    opt_step = optimizer_step(task)
                    row.opt_ms = 0.0 if opt_step is None else None
                except TaskTimeout:
                    raise
                except Exception as e:
                    notes.append(f"optimizer: {describe(e)}")
            with lock():
                row.lock_wait_s = lock.waited_s
                if eager_run is not None and backend != "eager":
                    row.ms, row.eager_paired_ms = paired_ms(run, eager_run, device, settings.iters)
                else:
                    row.ms = median_ms(run, device, settings.iters)
                if keep is not None:
                    keep[backend] = run
                # Secondary measurements: a failure there is a note, the row still passes.
                try:
                    row.peak_mb = peak_mb(run, device)
                except TaskTimeout:
                    raise
                except Exception as e:
                    notes.append(f"peak memory: {describe(e)}")
                if device.type == "cuda":
                    try:
                        kernel_totals = profile_kernels(run)
                    except TaskTimeout:
                        raise
                    except Exception as e:
                        notes.append(f"profiler: {describe(e)}")
                if opt_step is not None:
                    try:
                        row.opt_ms = median_ms(opt_step, device, settings.iters)
                    except TaskTimeout:
                        raise
                    except Exception as e:
                        notes.append(f"optimizer: {describe(e)}")
            if kernel_totals is not None:  # parsed outside the lock
                try:
                    row.kernel_ms, row.launches, row.top_kernels = kernel_totals()
                except TaskTimeout:
                    raise
                except Exception as e:
                    notes.append(f"profiler: {describe(e)}")
            if row.dynamic:
                try:
                    row.recompiles = recompile_count(task, fn, model)
                except TaskTimeout:
                    raise
                except WrongOutputs as e:  # a wrong answer at another size fails the row
                    row.status, row.reason = "fail", f"other sizes: {describe(e)}"
                except Exception as e:
                    notes.append(f"recompiles: {describe(e)}")
            row.notes = "; ".join(notes) or None
    except Exception as e:  # a failure is a row, never a crash of the run
        row.status, row.reason = "fail", describe(e)
        row.notes = "; ".join(filter(None, [row.notes, f"raised at {raised_at(e)}"]))
    return row


def recompile_count(task: Task, fn: Callable[..., Any], model: nn.Module) -> int | None:
    """``--dynamic``: how often ``fn`` recompiles over inputs of other sizes (the hook
    into benchmarks/recompiles.py, issue 21's counter); None while that module or its
    :func:`dashboard_recompiles` does not exist."""
    try:
        import recompiles  # pyright: ignore[reportMissingImports]
    except ImportError:
        return None
    count = getattr(recompiles, "dashboard_recompiles", None)
    result = count(task, fn, model) if callable(count) else None
    return int(result) if isinstance(result, int) else None


def run_task(
    task: Task,
    backends: Sequence[str],
    settings: Settings,
    on_start: Callable[[str], None] | None = None,
    on_row: Callable[[Row], bool] | None = None,
    timed: TimingLock | None = None,
) -> list[Row]:
    """Eager first (the reference and the baseline), then every other backend.
    ``on_start(backend)`` is called before each backend runs, ``on_row(row)`` after; when it
    returns False, the task stops there (the isolation worker: a poisoned CUDA context).
    ``timed``: the lock the timed measurements run under (``--jobs``)."""
    rows: list[Row] = []
    lock = timed or TimingLock()
    try:
        with time_limit(settings.timeout, lock.paused_s):
            model, inputs = task.instance()
            sync(task.device)
            start, wall = time.perf_counter(), time.time()
            eager = clone_all(task.step(model, model, inputs))
            sync(task.device)
            first_s = time.perf_counter() - start - lock.paused_s(wall, time.time())
            ref = Reference(eager, first_s)
            del model, inputs
        if not all(torch.isfinite(t).all() for t in eager):
            raise ValueError(f"eager {task.dtype} output or gradient is not finite")
    except Exception as e:
        spec, reason = task.spec, f"eager reference: {describe(e)}"
        rows = failed_rows(
            spec, task.size, task.mode, task.dtype, backends, str(task.device), reason
        )
        for row in rows:
            if on_row is not None:
                on_row(row)
        return rows
    eager_ms = None
    eager_run: Callable[[], Any] | None = None
    if not settings.check_only and "eager" in backends:
        eager_model, eager_inputs = task.instance()

        def eager_step() -> Any:
            return task.step(eager_model, eager_model, eager_inputs)

        eager_run = eager_step

    keep: dict[str, Callable[[], Any]] | None = (
        {} if settings.interleave and not settings.check_only else None
    )
    for backend in backends:
        if on_start is not None:
            on_start(backend)
        row = run_backend(task, backend, ref, settings, eager_ms, eager_run, timed, keep)
        if keep is not None and row.status != "pass":
            keep.pop(backend, None)  # a step that failed a later check is not timed again
        gc.collect()  # the backend's model copy and compiled code, before the next one
        if task.device.type == "cuda":
            with contextlib.suppress(RuntimeError):  # a poisoned context raises here too
                torch.cuda.empty_cache()
        if backend == "eager":
            eager_ms = row.ms
        rows.append(row)
        if on_row is not None and not on_row(row):
            break
    if keep is not None and len(keep) >= 2:
        interleave(task, rows, keep, settings, lock)
    return rows


def interleave(
    task: Task,
    rows: list[Row],
    steps: dict[str, Callable[[], Any]],
    settings: Settings,
    lock: TimingLock,
) -> None:
    """``--interleave``: every passing backend's step (eager's included) timed once more
    in the same rounds, into ``Row.interleaved_ms``; a failure here is a note on the rows,
    which keep their other figures."""
    try:
        with time_limit(settings.timeout, lock.paused_s), lock():
            times = interleaved_ms(steps, task.device, settings.iters)
    except Exception as e:
        for row in rows:
            if row.backend in steps:
                row.notes = "; ".join(filter(None, [row.notes, f"interleaved: {describe(e)}"]))
        return
    for row in rows:
        row.interleaved_ms = times.get(row.backend, row.interleaved_ms)

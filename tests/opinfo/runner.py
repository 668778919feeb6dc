"""Run PyTorch's OpInfo samples through kiln's real compile path and compare with eager.

The unit of work is a *group*: several ops' samples (of one dtype) traced into ONE
AOTAutograd inference graph and compiled ONCE with :func:`kiln.compiler.compile_graph`
(the path ``torch.compile(backend="kiln")`` takes after Dynamo), so a group costs one
C++ compiler run instead of one per sample. When a group fails as a whole (capture or
compilation), it is split per op, then per sample, to find the culprit; a mismatch is
attributed from the outputs directly (each sample's outputs are its own graph outputs).

Comparison with eager, per output tensor: device, dtype, shape; strides wherever eager's
are defined (dims of size > 1, non-empty, non-overlapping-and-dense outputs); values with
``assert_close(equal_nan=True)`` at the default tolerances of the dtype (those of
PyTorch's own Inductor OpInfo test, ``TestCase.assertEqual``) — and where that fails,
kiln passes if its largest error against a float64 run of the sample is at most twice
eager's (``tests/accuracy.py``: kiln may round less often than eager). Samples that call
a random op (``Tag.nondeterministic_seeded``, Inductor's ``HasRngOp``) or an op whose
values are undefined (``empty``) compare metadata only. A sample on which eager raises is
skipped (kiln is never asked to agree with an error); a sample that AOTAutograd cannot
trace without data-dependent shapes is skipped too (Dynamo would graph-break there and
run it eagerly; Inductor never sees it).

Run ``python tests/opinfo/runner.py --help`` for the per-op report.
"""

from __future__ import annotations

import os
import sys
import traceback
import warnings
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

# tests/ on sys.path (pytest's pythonpath does it for tests; the script does it here),
# and the worktree's kiln before any installed one.
_TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.dirname(_TESTS), _TESTS]

from accuracy import assert_as_accurate_as_eager  # noqa: E402

from kiln.compiler import CompileOptions, compile_graph  # noqa: E402
from kiln.frontends.capture import CaptureError, capture_aot  # noqa: E402

# Ops whose results are not a function of their inputs: compare metadata only (as
# Inductor's OpInfo test does with ``assert_equal=False``).
UNDEFINED_VALUES = frozenset(
    {"empty", "empty_like", "new_empty", "new_empty_strided", "empty_strided", "empty_permuted"}
)


@dataclass
class Sample:
    index: int
    program: Callable[..., list[torch.Tensor]]
    inputs: list[torch.Tensor]
    expected: list[torch.Tensor]
    random: bool
    args: Any  # the sample's (args, kwargs), for a float64 re-run
    float64: Callable[..., list[torch.Tensor]] | None = None  # program with float64 dtype args


@dataclass
class OpCase:
    """One op's samples at one dtype."""

    key: str  # "name" or "name.variant"
    info: Any
    dtype: torch.dtype
    samples: list[Sample]
    eager_errors: int = 0


@dataclass
class Outcome:
    """What happened to one op's samples."""

    passed: int = 0
    skipped: list[str] = field(default_factory=list[str])
    failures: list[str] = field(default_factory=list[str])

    @property
    def failed(self) -> int:
        return len(self.failures)


TALLY: defaultdict[str, Counter[str]] = defaultdict(Counter)
"""Per configuration: ops and samples passed/failed/skipped (printed after the run)."""


def op_key(info: Any) -> str:
    return f"{info.name}.{info.variant_test_name}" if info.variant_test_name else info.name


@cache
def op_db() -> dict[str, Any]:
    """OpInfos by key (``name`` or ``name.variant``), in op_db's order."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torch.testing._internal.common_methods_invocations import op_db as db

    return {op_key(info): info for info in db}


class _SeededOps(TorchDispatchMode):
    """Records whether a random op ran (Inductor's OpInfo test: ``HasRngOp``)."""

    def __init__(self) -> None:
        super().__init__()
        self.random = False

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if torch.Tag.nondeterministic_seeded in func.tags:
            self.random = True
        return func(*args, **(kwargs or {}))


def _tensor_leaves(value: Any) -> list[torch.Tensor]:
    return [v for v in pytree.tree_leaves(value) if isinstance(v, torch.Tensor)]


def _program(
    info: Any, sample: Any, float64: bool = False
) -> tuple[Callable[..., list[torch.Tensor]], list[Any]]:
    """The sample as a function of its tensor leaves returning its tensor outputs.

    ``float64``: floating-point dtype arguments become float64 too (the oracle run), so
    that e.g. ``_softmax_backward_data(..., input_dtype=bfloat16)`` does not round the
    exact result back to the sample's dtype."""
    leaves, spec = pytree.tree_flatten(([sample.input, *sample.args], sample.kwargs))
    if float64:
        leaves = [
            torch.float64 if isinstance(v, torch.dtype) and v.is_floating_point else v
            for v in leaves
        ]
    positions = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]
    op = info.op

    def program(*tensors: torch.Tensor) -> list[torch.Tensor]:
        values = list(leaves)
        for pos, tensor in zip(positions, tensors, strict=True):
            values[pos] = tensor
        args, kwargs = pytree.tree_unflatten(values, spec)
        return _tensor_leaves(op(*args, **kwargs))

    return program, [leaves[p] for p in positions]


def _clone(tensors: Sequence[Any]) -> list[Any]:
    # Not every graph input is a tensor: AOTAutograd's effect tokens (with_effects) are None.
    return [t.clone() if isinstance(t, torch.Tensor) else t for t in tensors]


def _with_gradients(
    programs: tuple[Callable[..., list[torch.Tensor]], ...], inputs: list[Any]
) -> tuple[list[Callable[..., list[torch.Tensor]]], list[Any]] | None:
    """Each program followed by its backward: a function of the inputs and one random
    gradient per differentiable output (fixed from the first program's outputs) returning
    the outputs, then the gradients of the inputs that require grad (autograd's backward
    ops traced into the same graph). None: nothing to differentiate, or eager fails.
    """
    count = len(inputs)
    # The inputs OpInfo made require grad (not, e.g., batch norm's running statistics).
    wrt = [i for i, t in enumerate(inputs) if isinstance(t, torch.Tensor) and t.requires_grad]
    inputs = [t.detach() if isinstance(t, torch.Tensor) else t for t in inputs]
    if not wrt:
        return None

    def leaves(tensors: Sequence[Any]) -> list[Any]:
        return [
            t.detach().requires_grad_(i in wrt) if isinstance(t, torch.Tensor) else t
            for i, t in enumerate(tensors)
        ]

    try:
        with torch.enable_grad():
            outputs = programs[0](*leaves(inputs))
        differentiable = [k for k, out in enumerate(outputs) if out.requires_grad]
        tangents = [torch.randn_like(outputs[k]) for k in differentiable]
    except Exception:  # eager's error (a sparse output has no random tangent either)
        return None
    if not differentiable:
        return None

    def joint(program: Callable[..., list[torch.Tensor]]) -> Callable[..., list[torch.Tensor]]:
        def run(*tensors: Any) -> list[torch.Tensor]:
            with torch.enable_grad():
                values = leaves(tensors[:count])
                outs = program(*values)
                grads = torch.autograd.grad(
                    [outs[k] for k in differentiable],
                    [values[i] for i in wrt],
                    list(tensors[count:]),
                    allow_unused=True,
                )
            return [o.detach() for o in outs] + [g for g in grads if g is not None]

        return run

    return [joint(p) for p in programs], [*inputs, *tangents]


def make_case(
    info: Any, dtype: torch.dtype, device: str, limit: int | None = None, grad: bool = False
) -> OpCase:
    """The op's samples with eager's results (samples eager rejects are counted, dropped).

    ``grad``: each sample's program with its backward (:func:`_with_gradients`); samples
    with nothing to differentiate are counted with eager's rejections."""
    case = OpCase(op_key(info), info, dtype, [])
    undefined = info.name in UNDEFINED_VALUES
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(0)
        try:
            generated = list(info.sample_inputs_func(info, device, dtype, grad))
        except Exception:
            generated = []
            case.eager_errors += 1
        for k, sample in enumerate(generated[:limit]):
            program, inputs = _program(info, sample)
            float64 = _program(info, sample, float64=True)[0]
            if grad:
                joint = _with_gradients((program, float64), inputs)
                if joint is None:
                    case.eager_errors += 1
                    continue
                (program, float64), inputs = joint
            mode = _SeededOps()
            try:
                with mode:
                    expected = program(*_clone(inputs))
            except Exception:
                case.eager_errors += 1
                continue
            if any(t.is_sparse or t.layout != torch.strided for t in [*inputs, *expected]):
                case.eager_errors += 1  # sparse/nested layouts: not kiln's input domain
                continue
            case.samples.append(
                Sample(
                    k,
                    program,
                    inputs,
                    expected,
                    mode.random or undefined,
                    sample,
                    float64,
                )
            )
    return case


# -- one compiled graph for many samples ---------------------------------------------------


def _group_program(
    samples: Sequence[Sample],
) -> tuple[Callable[..., list[torch.Tensor]], list[torch.Tensor]]:
    bounds: list[tuple[int, int]] = []
    flat: list[torch.Tensor] = []
    for s in samples:
        bounds.append((len(flat), len(flat) + len(s.inputs)))
        flat.extend(s.inputs)

    def program(*tensors: torch.Tensor) -> list[torch.Tensor]:
        outs: list[torch.Tensor] = []
        for s, (a, b) in zip(samples, bounds, strict=True):
            outs.extend(s.program(*tensors[a:b]))
        return outs

    return program, flat


class CaptureFailed(Exception):
    """AOTAutograd could not trace (data-dependent shapes, ...): not kiln's to compile."""


def compile_and_run(samples: Sequence[Sample], executor: str) -> list[list[torch.Tensor]]:
    """Compile every sample into one graph, run it once; each sample's outputs."""
    program, flat = _group_program(samples)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            capture = capture_aot(program, *_clone(flat))
        except CaptureError as e:
            raise CaptureFailed(str(e).splitlines()[0][:300]) from e
        compiled = compile_graph(
            capture.gm,
            capture.example_inputs,
            CompileOptions(executor=executor, verbose=False),  # type: ignore[arg-type]
        )
        got = list(compiled(*_clone(capture.example_inputs)))
    wanted = sum(len(s.expected) for s in samples)
    # AOTAutograd returns the inputs the program mutates first.
    got = got[len(got) - wanted :] if wanted else []
    result: list[list[torch.Tensor]] = []
    for s in samples:
        result.append(got[: len(s.expected)])
        got = got[len(s.expected) :]
    return result


# -- comparison ----------------------------------------------------------------------------


def _defined_strides(t: torch.Tensor) -> bool:
    """Eager's strides are a layout (not an accident of overlap or gaps) to match."""
    if t.numel() <= 1:
        return False
    expected = 1
    for size, stride in sorted(zip(t.shape, t.stride(), strict=True), key=lambda p: p[1]):
        if size == 1:
            continue
        if stride != expected:
            return False
        expected *= size
    return True


def _strides_match(got: torch.Tensor, strides: Sequence[int]) -> bool:
    """Equal strides on every dim of more than one element."""
    return all(g == w for g, w, n in zip(got.stride(), strides, got.shape, strict=True) if n > 1)


def _meta_strides(sample: Sample) -> list[tuple[int, ...]] | None:
    """The strides torch's meta kernels give the sample's outputs (None: no fake run)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    try:
        with warnings.catch_warnings(), FakeTensorMode() as mode:
            warnings.simplefilter("ignore")
            fakes = [
                mode.from_tensor(t) if isinstance(t, torch.Tensor) else t for t in sample.inputs
            ]
            return [tuple(t.stride()) for t in sample.program(*fakes)]
    except Exception:
        return None


def _float64_run(sample: Sample) -> list[torch.Tensor] | None:
    """The sample with its floating-point inputs in float64 (None: the op refuses)."""
    up = [t.double() if t.is_floating_point() else t for t in sample.inputs]
    program = sample.program if sample.float64 is None else sample.float64
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return program(*up)
    except Exception:
        return None


def check_sample(sample: Sample, got: Sequence[Any]) -> None:
    """AssertionError naming what differs from eager."""
    assert len(got) == len(sample.expected), (
        f"{len(got)} tensor outputs, eager {len(sample.expected)}"
    )
    reference: list[torch.Tensor] | None = None
    for k, (g, e) in enumerate(zip(got, sample.expected, strict=True)):
        where = f"output {k}"
        assert isinstance(g, torch.Tensor), f"{where}: got {type(g).__name__}, eager a tensor"
        assert g.device == e.device, f"{where}: device {g.device}, eager {e.device}"
        assert g.dtype == e.dtype, f"{where}: dtype {g.dtype}, eager {e.dtype}"
        assert g.shape == e.shape, f"{where}: shape {tuple(g.shape)}, eager {tuple(e.shape)}"
        if _defined_strides(e) and not _strides_match(g, e.stride()):
            meta = _meta_strides(sample)
            # Where torch's meta kernel disagrees with its eager kernel (max_unpool2d of a
            # channels-last input: eager channels-last, meta contiguous), AOTAutograd gives
            # kiln the meta's strides as the graph's contract: kiln is held to those.
            contract = meta[k] if meta is not None and k < len(meta) else e.stride()
            differs = f"{where}: strides {g.stride()}, eager {e.stride()}"
            assert contract != e.stride(), differs
            assert _strides_match(g, contract), f"{differs}, torch's meta {contract}"
        if sample.random:
            continue
        try:
            torch.testing.assert_close(g, e, equal_nan=True, check_stride=False)
        except AssertionError as mismatch:
            if not e.is_floating_point():
                raise AssertionError(f"{where}: {mismatch}") from None
            if reference is None:
                reference = _float64_run(sample)
            if reference is None or len(reference) != len(sample.expected):
                raise AssertionError(f"{where}: {mismatch}") from None
            rtol = torch.testing._comparison.default_tolerances(e)[0]  # pyright: ignore
            have, want, exact = g.cpu(), e.cpu(), reference[k].cpu().to(torch.float64)
            finite = want.isfinite()
            # Where eager overflowed (float16 soft_margin_loss: inf) but the exact value
            # fits the dtype, the exact value is the oracle, as Inductor computes it.
            overflowed = ~finite & exact.to(want.dtype).isfinite()
            try:
                # NaN and infinities where eager has them, exactly; accuracy elsewhere.
                torch.testing.assert_close(
                    have[~finite & ~overflowed], want[~finite & ~overflowed], equal_nan=True
                )
                torch.testing.assert_close(
                    have[overflowed].double(), exact[overflowed], rtol=rtol, atol=1e-5
                )
                assert_as_accurate_as_eager(
                    have[finite], want[finite], exact[finite], relative=rtol, absolute=1e-5
                )
            except AssertionError:
                raise AssertionError(f"{where}: {mismatch}") from None


# -- driving -------------------------------------------------------------------------------


def _describe(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return f"{type(e).__name__}: {lines[0][:300] if lines else ''}"


def run_samples(case: OpCase, samples: Sequence[Sample], executor: str, outcome: Outcome) -> None:
    """Compile the samples together; on a whole-graph failure, one by one."""
    try:
        results = compile_and_run(samples, executor)
    except Exception as e:
        if len(samples) > 1:
            for s in samples:
                run_samples(case, [s], executor, outcome)
            return
        label = f"{case.key} {case.dtype} sample {samples[0].index}"
        if isinstance(e, CaptureFailed):
            outcome.skipped.append(f"{label}: capture: {e}")
        else:
            outcome.failures.append(f"{label}: {_describe(e)}")
            if os.environ.get("KILN_OPINFO_TRACEBACK"):
                traceback.print_exception(e)
        return
    for s, got in zip(samples, results, strict=True):
        try:
            check_sample(s, got)
        except AssertionError as e:
            outcome.failures.append(f"{case.key} {case.dtype} sample {s.index}: {e}"[:600])
        else:
            outcome.passed += 1


def run_group(cases: Sequence[OpCase], executor: str) -> dict[str, Outcome]:
    """Every op's samples in one graph; failing graphs are split per op, then per sample."""
    outcomes = {c.key: Outcome() for c in cases}
    for c in cases:
        outcomes[c.key].skipped.extend(["eager raised"] * c.eager_errors)
    live = [c for c in cases if c.samples]
    if not live:
        return outcomes
    try:
        results = compile_and_run([s for c in live for s in c.samples], executor)
    except Exception:
        for c in live:
            run_samples(c, c.samples, executor, outcomes[c.key])
        return outcomes
    flat = iter(results)
    for c in live:
        outcome = outcomes[c.key]
        for s in c.samples:
            try:
                check_sample(s, next(flat))
            except AssertionError as e:
                outcome.failures.append(f"{c.key} {c.dtype} sample {s.index}: {e}"[:600])
            else:
                outcome.passed += 1
    return outcomes


def main(argv: Sequence[str]) -> None:
    """``runner.py OPS [--dtype float32] [--executor cpp] [--device cpu] [--samples N]``:
    per-op report (``OPS``: comma-separated keys, or ``all``)."""
    import argparse
    import time

    parser = argparse.ArgumentParser()
    parser.add_argument("ops")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--executor", default="cpp")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--samples", type=int, default=None)
    parser.add_argument("--group", type=int, default=1, help="ops per compiled graph")
    parser.add_argument("--every", type=int, default=1, help="every N-th op that supports dtype")
    parser.add_argument("--offset", type=int, default=0, help="... starting at this one")
    parser.add_argument("--grad", action="store_true", help="outputs and input gradients")
    args = parser.parse_args(argv)
    dtype = getattr(torch, args.dtype)
    db = op_db()
    keys = list(db) if args.ops == "all" else args.ops.split(",")
    keys = [k for k in keys if dtype in db[k].supported_dtypes(args.device)]
    if args.grad:
        keys = [k for k in keys if dtype in db[k].supported_backward_dtypes(args.device)]
    keys = [k for i, k in enumerate(keys) if i % args.every == args.offset % args.every]
    for i in range(0, len(keys), args.group):
        start = time.perf_counter()
        cases = [
            make_case(db[k], dtype, args.device, args.samples, args.grad)
            for k in keys[i : i + args.group]
        ]
        made = time.perf_counter()
        outcomes = run_group(cases, args.executor)
        done = time.perf_counter()
        for c in cases:
            o = outcomes[c.key]
            print(
                f"{c.key:40} samples={len(c.samples):3} passed={o.passed:3} failed={o.failed:3}"
                f" skipped={len(o.skipped):3}",
                flush=True,
            )
            for f in o.failures:
                print("   FAIL", f, flush=True)
            for s in sorted(set(o.skipped)):
                print("   SKIP", s, flush=True)
        print(
            f"-- group {i // args.group}: eager {made - start:.1f} s, kiln {done - made:.1f} s",
            flush=True,
        )


if __name__ == "__main__":
    main(sys.argv[1:])

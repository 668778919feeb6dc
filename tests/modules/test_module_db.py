"""PyTorch's ModuleInfo database as a correctness net: every module's first sample, in
training mode (and eval where it differs), forward and backward, through
``torch.compile(backend="kiln")``, equal to eager (``module_runner.py``; the full sweep,
every sample: ``python tests/modules/module_runner.py``)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from module_runner import Run, compare, module_db, run_module_info

_DB = module_db()


@pytest.mark.parametrize("name", sorted(_DB))
def test_module(name: str) -> None:
    info = _DB[name]
    outcome = run_module_info(info, torch.float32, grad=True, limit=1)
    assert not outcome.failures, "\n".join(outcome.failures)
    assert outcome.passed + outcome.eager_errors == outcome.samples


DYNAMIC = (
    "nn.BatchNorm2d",
    "nn.Conv2d",
    "nn.GroupNorm",
    "nn.LayerNorm",
    "nn.MultiheadAttention",
    "nn.ReflectionPad2d",
    "nn.Embedding",
)
"""Modules also compiled with ``dynamic=True`` here (every size symbolic); the whole
database so: ``module_runner.py --dynamic`` (session 47: 354 samples, 0 failures)."""


@pytest.mark.parametrize("name", DYNAMIC)
def test_module_with_symbolic_sizes(name: str) -> None:
    outcome = run_module_info(_DB[name], torch.float32, grad=True, limit=1, dynamic=True)
    assert not outcome.failures, "\n".join(outcome.failures)
    assert outcome.passed + outcome.eager_errors == outcome.samples


def test_a_wrong_gradient_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    """The harness compares what the compiled module computes: a backend whose
    gradients are off by 1 % fails the sample."""
    import module_runner

    real = module_runner.run_module
    compiled_calls: list[int] = []

    def perturbed(*args: Any, **kwargs: Any) -> Run:
        run = real(*args, **kwargs)
        if kwargs.get("call") is not None:
            compiled_calls.append(1)
            if len(compiled_calls) == 1:  # kiln's, not the aot_eager reference's
                run.grads = [None if g is None else g * 1.01 for g in run.grads]
        return run

    monkeypatch.setattr(module_runner, "run_module", perturbed)
    outcome = run_module_info(_DB["nn.Linear"], torch.float32, grad=True, limit=1)
    assert outcome.failures
    assert "gradient" in outcome.failures[0]


def test_compare_names_the_output_that_differs() -> None:
    x = torch.randn(4, 3)
    want = Run([x], [], [])
    with pytest.raises(AssertionError, match="output 0"):
        compare(Run([x + 0.1], [], []), want, lambda: None, random=False)
    compare(Run([x + 0.1], [], []), want, lambda: None, random=True)  # metadata only


def test_a_sample_torch_traces_otherwise_than_eager_is_held_to_the_trace() -> None:
    """``multilabel_margin_loss`` of a 1-d input with ``reduction="none"``: eager returns a
    0-dim loss, AOTAutograd's traced program (``aot_eager``, Inductor) a ``[1]`` one; kiln
    computes the traced program, counted apart from a pass."""
    from module_runner import run_sample, samples_of

    info = _DB["nn.MultiLabelMarginLoss"]
    samples = samples_of(info, torch.float32, training=True, grad=True)
    (sample,) = [s for s in samples if s.desc == "1d_reduction_none"]
    torch._dynamo.reset()
    assert run_sample(info, sample, True, True, {}) == "traced"


def _instance_norm_tracking_stats_bf16() -> tuple[Any, Any]:
    """``InstanceNorm3d(3, track_running_stats=True)``, float32 buffers, on a bfloat16
    input for which eager's CPU kernel and kiln round the running mean an ulp apart."""
    from module_runner import samples_of

    info = _DB["nn.InstanceNorm3d"]
    torch.manual_seed(0)
    samples = samples_of(info, torch.bfloat16, training=True, grad=True)
    (sample,) = [s for s in samples if s.desc == "tracking_stats"]
    return info, sample


def test_running_statistics_of_bf16_inputs_are_judged_at_bf16() -> None:
    """The running mean is a bfloat16 value in a float32 buffer; kiln's is nearer to
    float64 than eager's CPU kernel's over many inputs, but on this one eager's rounding
    is the luckier: judged at float32's tolerance the sample failed."""
    from module_runner import run_sample

    info, sample = _instance_norm_tracking_stats_bf16()
    assert run_sample(info, sample, True, True, {}) == "passed"


def test_a_wrong_running_statistic_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    """bfloat16's tolerance still fails a running statistic 8 bfloat16 ulps off."""
    import module_runner
    from module_runner import run_sample

    real = module_runner.run_module
    compiled_calls: list[int] = []
    eps = torch.finfo(torch.bfloat16).eps

    def perturbed(*args: Any, **kwargs: Any) -> Run:
        run = real(*args, **kwargs)
        if kwargs.get("call") is not None:
            compiled_calls.append(1)
            if len(compiled_calls) == 1:  # kiln's, not the aot_eager reference's
                run.buffers = [b * (1 + 8 * eps) for b in run.buffers]
        return run

    monkeypatch.setattr(module_runner, "run_module", perturbed)
    info, sample = _instance_norm_tracking_stats_bf16()
    with pytest.raises(AssertionError, match="buffer 0"):
        run_sample(info, sample, True, True, {})

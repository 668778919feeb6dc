"""The dashboard's accuracy rule (benchmarks/dashboard_task.py): errors against eager,
against float64 tensor by tensor, and eager's spread under perturbation. Pure logic on
tiny modules: no bench extra needed, so CI runs it."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from dashboard_measure import rel_error
from dashboard_task import Accuracy, Reference, Task, accuracy
from zoo import registry


def test_error_of_a_zero_gradient_is_floored_by_the_largest_tensor() -> None:
    big = torch.tensor([1.0, -2.0])
    noise, other_noise = torch.tensor([1e-9]), torch.tensor([-1e-9])
    # Alone, two roundings of a zero differ by 200%; beside a tensor of magnitude 2, by 1e-6.
    assert rel_error([noise], [other_noise]) == pytest.approx(2.0)
    assert rel_error([big, noise], [big, other_noise]) == pytest.approx(2e-9 / 2e-3)
    assert rel_error([big * 1.01], [big]) == pytest.approx(0.01)
    assert rel_error([torch.tensor([float("nan")])], [big[:1]]) == math.inf


def _accuracy(
    out: list[torch.Tensor], eager: list[torch.Tensor], fp64: list[torch.Tensor]
) -> Accuracy:
    task = Task(
        registry()["softmax"], "small", "train", "float32", torch.device("cpu"), nn.Identity(), ()
    )
    return accuracy(task, out, Reference(eager, 0.0, fp64=fp64))


def test_float64_check_compares_each_tensor_with_eagers_error_on_that_tensor() -> None:
    # Tensor 0 is ill-conditioned: eager itself is 50% off float64 there. Tensor 1 is
    # well-conditioned: eager is exact to 1e-7, the backend 1% off. Compared worst against
    # worst (0.5 vs 3 x 0.5), the 1% error on tensor 1 passed.
    fp64 = [torch.tensor([1.0, -2.0], dtype=torch.float64), torch.tensor([4.0, 3.0]).double()]
    eager = [torch.tensor([2.0, -2.0]), torch.tensor([4.0, 3.0000004])]
    wrong = [torch.tensor([2.0, -2.0]), torch.tensor([4.04, 3.0])]
    acc = _accuracy(wrong, eager, fp64)
    assert acc.reason is not None
    assert "tensor 1 of 2" in acc.reason
    assert acc.err_fp64 == pytest.approx(0.01)
    assert acc.eager_err_fp64 == pytest.approx(1e-7, rel=0.5)
    # The same noise as eager's on the ill-conditioned tensor, tensor 1 right: a pass.
    right = [torch.tensor([0.5, -2.0]), torch.tensor([4.0, 3.0])]
    acc = _accuracy(right, eager, fp64)
    assert acc.reason is None
    assert acc.err_fp64 == pytest.approx(0.25)
    assert acc.eager_err_fp64 == pytest.approx(0.5)


class _NearTie(nn.Module):
    """``relu(p0 x - p1 x) + q x`` at ``p0 == p1``: the ReLU's input is exactly zero in
    eager float32 and in float64, so both give ``p``'s gradient as zero; any other rounding
    of ``p`` (as valid as eager's) puts it at ``(3, -3)``. ``q``'s gradient is 3 however
    one rounds: well-conditioned."""

    def __init__(self) -> None:
        super().__init__()
        self.p = nn.Parameter(torch.tensor([1.0, 1.0]))
        self.q = nn.Parameter(torch.tensor([2.0]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.p[0] * x - self.p[1] * x) + self.q * x


def test_float64_check_holds_a_near_tie_to_eagers_spread_not_to_eagers_luck() -> None:
    # ShuffleNet's and ResNet-50's small training steps failed this way (session 10): a
    # ReLU input within rounding of zero in the last stage, eager on the float64 side of it
    # by luck, kiln (and eager with its input perturbed by 1e-7) on the other.
    model, x = _NearTie(), torch.tensor([3.0])
    task = Task(
        registry()["softmax"], "small", "train", "float32", torch.device("cpu"), model, (x,)
    )
    eager = task.step(model, model, (x,))
    model64 = _NearTie().double()
    fp64 = task.step(model64, model64, (x.double(),))
    q_grad = eager[2]  # 3 x the output's gradient
    assert eager[1].tolist() == [0.0, 0.0]
    other_side = torch.cat([q_grad, -q_grad])
    out = [eager[0], other_side, q_grad]
    assert accuracy(task, out, Reference(eager, 0.0, fp64=fp64, perturbed=[])).reason is not None
    acc = accuracy(task, out, Reference(eager, 0.0, fp64=fp64))
    assert acc.reason is None, acc.reason
    assert acc.perturbed_err_fp64 is not None
    assert acc.perturbed_err_fp64 > 1.0
    # Eager's spread excuses the ill-conditioned tensor only: 1% off on q still fails.
    wrong = [eager[0], other_side, q_grad * 1.01]
    acc = accuracy(task, wrong, Reference(eager, 0.0, fp64=fp64))
    assert acc.reason is not None
    assert "tensor 2 of 3" in acc.reason
    assert "perturbed eager's" in acc.reason


def test_spread_of_a_convolution_model_includes_eager_channels_last() -> None:
    # cuDNN's NHWC convolutions round in TF32 where the NCHW ones did not: a backend that
    # keeps activations channels-last is held to eager channels-last's spread too.
    from dashboard_task import PERTURBED_RUNS, perturbed_references

    torch.manual_seed(0)
    conv = nn.Conv2d(3, 4, 3)
    image = torch.randn(2, 3, 6, 6)
    task = Task(
        registry()["softmax"], "small", "train", "float32", torch.device("cpu"), conv, (image,)
    )
    seen: list[bool] = []
    step = task.step

    def recording_step(fn: object, model: nn.Module, inputs: tuple[torch.Tensor, ...]) -> object:
        seen.append(inputs[0].is_contiguous(memory_format=torch.channels_last))
        return step(fn, model, inputs)  # pyright: ignore[reportArgumentType]

    task.step = recording_step  # pyright: ignore[reportAttributeAccessIssue]
    runs = perturbed_references(task, Reference([], 0.0))
    assert seen == [False] * PERTURBED_RUNS + [True]
    assert len(runs) == PERTURBED_RUNS + 1
    # The channels-last run computes the same step: within float32 rounding of a plain one.
    plain = step(conv, conv, (image.requires_grad_(False),))
    assert len(runs[-1]) == len(plain)
    for got, want in zip(runs[-1], plain, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    # Without 4-D inputs, only the perturbed runs.
    flat = Task(
        registry()["softmax"],
        "small",
        "train",
        "float32",
        torch.device("cpu"),
        nn.Linear(3, 2),
        (torch.randn(4, 3),),
    )
    assert len(perturbed_references(flat, Reference([], 0.0))) == PERTURBED_RUNS

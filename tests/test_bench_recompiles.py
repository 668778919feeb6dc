"""The dashboard's ``--dynamic`` recompile count (benchmarks/dashboard_task.py's hook into
benchmarks/recompiles.py, issue 21): filled, and counting what dynamo compiles. Cheap:
dynamo's ``eager`` backend, a tiny MLP."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from dashboard_task import Task, recompile_count  # noqa: E402
from models import MLP  # noqa: E402
from zoo import ModelSpec  # noqa: E402


def _task(mode: str) -> Task:
    torch.manual_seed(0)
    model = MLP(8, 16)
    spec = ModelSpec("mlp", "kiln", "mlp", lambda size: (model, (torch.randn(4, 8),)))
    base, inputs = spec.build("small")
    return Task(spec, "small", mode, "float32", torch.device("cpu"), base, inputs)


@pytest.mark.parametrize("mode", ["infer", "train"])
def test_recompiles_are_counted_over_other_batch_sizes(mode: str) -> None:
    torch._dynamo.reset()
    task = _task(mode)
    counts = {}
    for dynamic in (True, False):
        model, inputs = task.instance()
        with torch._dynamo.config.patch(automatic_dynamic_shapes=False):
            fn = torch.compile(model, backend="eager", dynamic=dynamic)
            task.step(fn, model, inputs)
            counts[dynamic] = recompile_count(task, fn, model)
        torch._dynamo.reset()
    assert counts[True] == 0
    assert counts[False] is not None and counts[False] >= 2  # one per new batch size

"""The dashboard's ``--dynamic`` recompile count (benchmarks/dashboard_task.py's hook into
benchmarks/recompiles.py, issue 21): filled, and counting what dynamo compiles. Cheap:
dynamo's ``eager`` backend, a tiny MLP."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from dashboard_task import Task, recompile_count  # pyright: ignore[reportMissingImports]
from zoo import ModelSpec  # pyright: ignore[reportMissingImports]


def _task(mode: str) -> Task:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8))
    spec: Any = ModelSpec("mlp", "kiln", "mlp", lambda size: (model, (torch.randn(4, 8),)))
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
    assert counts[False] is not None
    assert counts[False] >= 2  # one per new batch size

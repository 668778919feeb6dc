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


def _wrong_after_first_graph() -> Any:
    """A dynamo backend right on its first graph, off by one on every later one (what a
    compiler that mishandles a new size would return)."""
    graphs = 0

    def backend(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        nonlocal graphs
        graphs += 1
        if graphs == 1:
            return gm.forward

        def wrong(*args: Any) -> Any:
            return [o + 1 if isinstance(o, torch.Tensor) else o for o in gm(*args)]

        return wrong

    return backend


@pytest.mark.parametrize("mode", ["infer", "train"])
def test_recompiles_compare_outputs_with_eager(mode: str) -> None:
    """A compiled step that is wrong at another size is caught (not only counted)."""
    from dashboard_task import WrongOutputs  # pyright: ignore[reportMissingImports]

    torch._dynamo.reset()
    task = _task(mode)
    model, inputs = task.instance()
    fn = torch.compile(model, backend=_wrong_after_first_graph(), dynamic=False)
    task.step(fn, model, inputs)
    with pytest.raises(WrongOutputs, match=r"inputs \[5, 8\]: .*vs eager"):
        recompile_count(task, fn, model)
    torch._dynamo.reset()


def test_dynamic_row_fails_on_wrong_outputs_at_other_sizes(monkeypatch: Any) -> None:
    """The dashboard row itself fails (status and reason), not a note."""
    import dashboard_task  # pyright: ignore[reportMissingImports]

    torch._dynamo.reset()
    task = _task("infer")
    monkeypatch.setattr(
        dashboard_task,
        "compile_with",
        lambda backend, model, dynamic: torch.compile(
            model, backend=_wrong_after_first_graph(), dynamic=False
        ),
    )
    model, inputs = task.instance()
    ref = dashboard_task.Reference(dashboard_task.clone_all(task.step(model, model, inputs)), 0.0)
    settings = dashboard_task.Settings(iters=1, no_warm=True, dynamic=True)
    row = dashboard_task.run_backend(task, "wrong", ref, settings, None)
    assert row.status == "fail"
    assert row.reason is not None
    assert row.reason.startswith("other sizes: ")
    torch._dynamo.reset()

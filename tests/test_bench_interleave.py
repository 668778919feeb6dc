"""The dashboard's ``--interleave`` (benchmarks/dashboard_measure.py ``interleaved_ms``,
benchmarks/dashboard_task.py ``interleave``): a task's passing backends timed once more in
the same rounds, so that two compilers' rows see one machine state. Cheap: a tiny MLP, no
bench extra."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from dashboard_measure import interleaved_ms  # pyright: ignore[reportMissingImports]
from dashboard_render import interleaved_lines  # pyright: ignore[reportMissingImports]
from dashboard_task import Settings, Task, run_task  # pyright: ignore[reportMissingImports]
from zoo import ModelSpec  # pyright: ignore[reportMissingImports]


def test_every_function_is_timed_in_the_same_rounds() -> None:
    calls: list[str] = []

    def step(name: str, seconds: float) -> Any:
        def run() -> None:
            calls.append(name)
            time.sleep(seconds)

        return run

    times = interleaved_ms(
        {"fast": step("fast", 0.001), "slow": step("slow", 0.004)},
        torch.device("cpu"),
        iters=4,
        rounds=3,
        min_burst_s=0.0,
    )
    assert set(times) == {"fast", "slow"}
    assert 1.0 <= times["fast"] < times["slow"]
    assert 2.0 < times["slow"] / times["fast"] < 6.0
    # After the warm-up and the one sizing call each: bursts alternate, round by round.
    timed = calls[6:]
    assert timed == (["fast"] * 2 + ["slow"] * 2) * 3


def _task() -> Task:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8))
    spec: Any = ModelSpec("mlp", "kiln", "mlp", lambda size: (model, (torch.randn(4, 8),)))
    base, inputs = spec.build("small")
    return Task(spec, "small", "infer", "float32", torch.device("cpu"), base, inputs)


def test_interleave_fills_the_rows_of_every_passing_backend() -> None:
    rows = run_task(_task(), ["eager", "kiln"], Settings(iters=4, no_warm=True, interleave=True))
    assert [r.status for r in rows] == ["pass", "pass"]
    assert all(r.interleaved_ms is not None and r.interleaved_ms > 0 for r in rows)
    plain = run_task(_task(), ["eager", "kiln"], Settings(iters=4, no_warm=True))
    assert all(r.interleaved_ms is None for r in plain)


def test_the_page_ranks_kiln_against_inductor_by_the_same_rounds() -> None:
    def row(model: str, backend: str, ms: float) -> dict[str, Any]:
        return {
            "model": model,
            "size": "small",
            "mode": "infer",
            "dtype": "float32",
            "backend": backend,
            "device": "cpu",
            "status": "pass",
            "ms": ms,
            "interleaved_ms": ms,
        }

    rows = [row("a", "kiln", 1.0), row("a", "inductor", 0.9), row("b", "kiln", 1.0)]
    rows.append(row("b", "inductor", 1.2))
    lines = interleaved_lines(rows)
    assert "| small | infer | float32 | kiln/inductor | 2 | 1.04 | 0.90 |" in lines
    assert lines.index(
        "| a | small | infer | float32 | kiln vs inductor | 0.900 | 1.000 | 0.90 |"
    ) < (lines.index("| b | small | infer | float32 | kiln vs inductor | 1.200 | 1.000 | 1.20 |"))
    assert interleaved_lines([{**r, "interleaved_ms": None} for r in rows]) == []

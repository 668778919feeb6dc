"""The architecture sweep's machinery (benchmarks/arch_sweep.py) on hand-made modules: a
pass, a wrong answer (a deliberately broken backend), an error, a build failure and a
timeout each become the right row. No timm or transformers needed."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import arch_sweep  # noqa: E402
from arch_sweep import Row, check_model, render_markdown, run_isolated  # noqa: E402
from arch_sweep_zoo import Arch, Built, randn  # noqa: E402


def _mlp() -> Built:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.LayerNorm(16), nn.GELU(), nn.Linear(16, 4)).eval()
    return model, lambda seed: (randn(3, 8, seed=seed),)


def _off_by_a_little(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
    """A backend with a silent wrong answer: every float output 1% of its scale off."""

    def run(*args: Any) -> Any:
        out = gm(*args)
        return type(out)(t + 0.01 * t.abs().max() if t.is_floating_point() else t for t in out)

    return run


def _fails(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
    raise NotImplementedError("no lowering for aten::frobnicate\nsecond line")


def _build_fails() -> Built:
    raise ImportError("no such architecture offline")


MLP = Arch("mlp", "custom", _mlp)


def test_pass_row_with_kiln() -> None:
    row = check_model(MLP, "kiln", {"verbose": False, "graph_cache": False})
    assert row.status == "pass", row
    assert row.err_eager is not None
    assert row.err_eager < 1e-5
    assert row.graphs == 1
    assert row.graph_breaks == 0
    assert row.compile_s is not None


def test_wrong_row() -> None:
    row = check_model(MLP, _off_by_a_little)
    assert row.status == "wrong", row
    assert row.err_eager == pytest.approx(0.01, rel=1e-3)
    # Judged against float64 too: eager is exact to rounding, the backend is not.
    assert row.err_fp64 is not None
    assert row.err_fp64 > 1e-3
    assert "output 0" in row.detail


def test_error_row() -> None:
    row = check_model(MLP, _fails)
    assert row.status == "error", row
    assert row.detail == "NotImplementedError: no lowering for aten::frobnicate"


def test_build_failed_row() -> None:
    row = check_model(Arch("gone", "custom", _build_fails), "eager")
    assert row.status == "build-failed", row
    assert "no such architecture offline" in row.detail


def test_close_to_float64_passes() -> None:
    """Far from eager but no further from float64 than eager itself: a pass."""
    row = Row("x")
    exact = torch.tensor([1.0, 2.0, 3.0])
    eager = [[exact + torch.tensor([0.0, 0.0, 0.01])]]
    out = [[exact + torch.tensor([0.0, 0.0, -0.01])]]
    arch_sweep.judge(row, out, eager, lambda: [[exact]])
    assert row.status == "pass", row
    out = [[exact + torch.tensor([0.0, 0.0, -0.1])]]
    arch_sweep.judge(row, out, eager, lambda: [[exact]])
    assert row.status == "wrong", row


def test_degenerate_outputs_are_noted() -> None:
    notes = arch_sweep.degenerate([[torch.zeros(4)], [torch.zeros(4)]])
    assert notes == ["tensor 0 is constant", "outputs do not depend on the inputs"]


def test_subprocess_rows(tmp_path: Path) -> None:
    """In its own process: a hang is a timeout row, a backend error an error row."""
    models = tmp_path / "models.py"
    models.write_text(
        textwrap.dedent(
            """
            import time
            import torch

            def hangs():
                time.sleep(60)

            def tiny():
                return torch.nn.Linear(4, 4).eval(), lambda seed: (torch.randn(2, 4),)

            def fails(gm, example_inputs):
                raise RuntimeError("lower-aten: unsupported op aten::foo")
            """
        )
    )
    hung = run_isolated(f"{models}:hangs", "eager", timeout=1.0, log_dir=tmp_path / "logs")
    assert hung.status == "timeout", hung
    failed = run_isolated(f"{models}:tiny", f"{models}:fails", timeout=60.0)
    assert failed.status == "error", failed
    assert failed.detail == "RuntimeError: lower-aten: unsupported op aten::foo"
    table = render_markdown([hung, failed], "# sweep")
    assert "| timeout |" in table
    assert "Counts: error 1, timeout 1" in table


def test_train_mode_compares_gradients() -> None:
    """Train mode: the outputs, every parameter's gradient, then the buffers."""
    row = check_model(MLP, "eager", mode="train")
    assert row.status == "pass", row
    row = check_model(MLP, _off_by_a_little, mode="train")
    assert row.status == "wrong", row
    # The outputs are off by 1% of their scale; the gradients are not (a constant shift).
    assert "output 0" in row.detail

"""The dashboard's page (benchmarks/dashboard_render.py) from rows alone: no zoo, no
``bench`` extra, so these run in CI (tests/test_bench_zoo.py needs the extra)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from dashboard_render import dynamic_against_static, kernel_time_lines, render
from dashboard_results import load_results, transparent_huge_pages


def _row(model: str, backend: str, ms: float | None, status: str = "pass", **extra: object) -> dict:
    row = {
        "model": model,
        "source": "kiln",
        "family": "op",
        "size": "small",
        "mode": "infer",
        "dtype": "float32",
        "backend": backend,
        "device": "cpu",
        "status": status,
        "reason": None if status == "pass" else "boom",
        "ms": ms,
    }
    row.update(extra)
    return row


def test_dynamic_rows_are_a_group_of_their_own_against_static_eager(tmp_path: Path) -> None:
    rows = [
        _row("a", "eager", 4.0),
        _row("a", "kiln", 2.0),
        _row("a", "kiln", 1.0, dynamic=True, recompiles=3),
    ]
    merged = tmp_path / "m.json"
    merged.write_text(json.dumps({"runs": [], "rows": rows}))
    assert len(load_results([merged])["rows"]) == 3  # the dynamic row does not replace the static
    page = tmp_path / "d.md"
    render({"runs": [], "rows": rows}, page, plots=False)
    text = page.read_text()
    static, dynamic = text.split("## small / infer dynamic / float32")
    assert "recompiles" not in static.split("## small / infer / float32")[1]
    assert "recompiles (kiln)" in dynamic
    # kiln's speedup over the static eager row: 4 ms / 1 ms.
    assert "| a | kiln | 4.000 | 1.000 | 4.00 |" in dynamic


def test_a_dynamic_run_renders_no_table_of_eager_rows_alone(tmp_path: Path) -> None:
    # What --dynamic writes: eager rows (static: eager compiles nothing) and the dynamic
    # rows of the compilers. Before, the eager rows made a summary line of 0/0 passes
    # and a table of their own.
    rows = [_row("a", "eager", 4.0), _row("a", "kiln", 1.0, dynamic=True, recompiles=0)]
    page = tmp_path / "d.md"
    render({"runs": [], "rows": rows}, page, plots=False)
    text = page.read_text()
    assert "## small / infer / float32" not in text
    assert "## small / infer dynamic / float32" in text
    assert "| small | infer | float32 |" not in text


def test_dynamic_against_static_table() -> None:
    rows = [
        _row("a", "eager", 4.0),
        _row("a", "kiln", 2.0),
        _row("a", "kiln", 2.5, dynamic=True, recompiles=0),
        _row("a", "inductor", 2.0),
        _row("a", "inductor", 2.0, dynamic=True, recompiles=1),
    ]
    lines = dynamic_against_static(rows)
    # kiln: static speedup 2.0 over dynamic 1.6 = 1.25; Inductor 1.00; kiln/Inductor
    # under dynamic=True 1.6 / 2.0.
    row = "| a | small | infer | float32 | 2.000 | 2.500 | 1.25 | - | - | 1.00 | 0.80 | 0 / 1 |"
    assert row in lines
    assert lines[0] == (
        "Geomean kiln static/dynamic (above 1: dynamic slower): paired speedups 1.25, "
        "within 1.1x on 0 of 1."
    )
    assert dynamic_against_static(rows[:2]) == []


def test_kiln_static_in_a_dynamic_task_gives_the_same_rounds_ratio() -> None:
    """``--shapes dynamic --backends ...,kiln,kiln-static --interleave``: kiln's static
    compile timed in the dynamic task's rounds, beside the dynamic one (issue 21's
    measures: run time within 1.1x, cold compile within 1.5x)."""
    rows = [
        _row("a", "eager", 4.0),
        _row("a", "kiln", 2.2, dynamic=True, interleaved_ms=2.2, cold_compile_s=3.0),
        _row("a", "kiln-static", 2.0, dynamic=True, interleaved_ms=2.0, cold_compile_s=2.0),
    ]
    lines = dynamic_against_static(rows)
    assert (
        "| a | small | infer | float32 | 2.000 | 2.200 | 1.10 | 1.10 | 1.50 | - | - |"
        in (lines[-1])
    )
    assert lines[0] == (
        "Geomean kiln static/dynamic (above 1: dynamic slower): paired speedups 1.10, "
        "within 1.1x on 1 of 1; same rounds 1.10, within 1.1x on 1 of 1. Cold compile "
        "dynamic/static 1.50, within 1.5x on 1 of 1."
    )


def test_the_cpu_machine_names_its_transparent_huge_page_mode(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Rows measured under different THP modes do not compare (session 25: MobileNet-v2
    large a third faster with torch madvising huge pages): the run's machine says which."""
    enabled = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    if not enabled.exists():
        pytest.skip("no transparent huge pages on this kernel")
    text = enabled.read_text()
    mode = text[text.index("[") + 1 : text.index("]")]
    monkeypatch.delenv("THP_MEM_ALLOC_ENABLE", raising=False)
    assert transparent_huge_pages() == f", THP {mode}"
    monkeypatch.setenv("THP_MEM_ALLOC_ENABLE", "1")
    assert transparent_huge_pages() == f", THP {mode} (torch madvises)"


def test_cuda_pages_rank_kernel_time_kiln_against_inductor(tmp_path: Path) -> None:
    """Issue 16 judges summed kernel time (kiln's over Inductor's), not wall time: the page
    gives its geomean per group and the highest rows; CPU rows (no kernel time) add
    nothing."""
    cuda = {"device": "cuda", "dtype": "bfloat16", "size": "large"}
    rows = [
        _row("a", "eager", 4.0, kernel_ms=3.0, **cuda),
        _row("a", "inductor", 2.0, kernel_ms=1.0, **cuda),
        _row("a", "kiln", 1.5, kernel_ms=1.5, **cuda),
        _row("b", "eager", 4.0, kernel_ms=3.0, **cuda),
        _row("b", "inductor", 2.0, kernel_ms=2.0, **cuda),
        _row("b", "kiln", 1.5, kernel_ms=1.0, **cuda),
        _row("c", "inductor", 2.0, kernel_ms=2.0, **cuda),
        _row("c", "kiln", 1.5, "fail", kernel_ms=0.1, **cuda),
    ]
    lines = kernel_time_lines(rows)
    # geomean of 1.5 and 0.5 (c's kiln row failed: not a ratio), worst 1.5
    assert "| large | infer | bfloat16 | kiln/inductor | 2 | 0.87 | 1.50 |" in lines
    assert lines.index(
        "| a | large | infer | bfloat16 | kiln vs inductor | 1.000 | 1.500 | 1.50 |"
    ) < (lines.index("| b | large | infer | bfloat16 | kiln vs inductor | 2.000 | 1.000 | 0.50 |"))
    page = tmp_path / "k.md"
    render({"runs": [], "rows": rows}, page, plots=False)
    assert "## Summed kernel time of a step, kiln against Inductor" in page.read_text()
    assert kernel_time_lines([_row("a", "kiln", 1.0), _row("a", "inductor", 1.0)]) == []

"""benchmarks/train_compile.py: one cold training-step compile, timed and profiled."""

from __future__ import annotations

import json
import sys
from pathlib import Path

_BENCHMARKS = str(Path(__file__).resolve().parents[1] / "benchmarks")


def test_a_training_step_is_timed_and_kilns_graphs_profiled(tmp_path: Path) -> None:
    if _BENCHMARKS not in sys.path:
        sys.path.insert(0, _BENCHMARKS)
    import train_compile  # pyright: ignore[reportMissingImports]

    out = tmp_path / "mlp.json"
    result = train_compile.main(["mlp", "--backend", "kiln", "--json", str(out)])
    assert json.loads(out.read_text()) == result
    assert [g["name"].split("_")[0] for g in result["graphs"]] == ["forward", "backward"]
    assert result["cpu_s"] > 0
    assert result["wall_s"] > 0
    assert len(result["gc_collections"]) == len(result["gc_s"]) == 3
    for graph in result["graphs"]:
        assert {"import", "passes", "lower-to-cpp", "build"} <= set(graph["stages"])
        assert "fuse" in graph["passes"]

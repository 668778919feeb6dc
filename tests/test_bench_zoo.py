"""The benchmark dashboard (benchmarks/dashboard.py): its zoo builders and its renderer.

Needs the ``bench`` extra (torchvision, timm, transformers, matplotlib); skipped without it
(CI does not install it). Cheap: two tiny models, one kiln compile of a softmax.
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
import time
from pathlib import Path

import pytest
import torch

# Found, not imported: torchvision beside a CPU torch must be imported through the zoo's
# workaround (benchmarks/zoo/compat.py), and timm and transformers import torchvision.
_MISSING = [
    name
    for name in ("matplotlib", "torchvision", "timm", "transformers", "tqdm")
    if importlib.util.find_spec(name) is None
]
if _MISSING:
    pytest.skip(
        f"the bench extra is not installed ({', '.join(_MISSING)})", allow_module_level=True
    )

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import dashboard  # noqa: E402
import dashboard_isolate  # noqa: E402
from dashboard_render import geomean, render  # noqa: E402
from dashboard_results import load_results  # noqa: E402
from test_bench_render import _row  # noqa: E402  (rows without the zoo)
from zoo import registry  # noqa: E402


def test_zoo_has_twenty_real_architectures_and_the_hand_written_ones() -> None:
    zoo = registry()
    real = [s for s in zoo.values() if s.source in ("torchvision", "timm", "transformers")]
    assert len(real) >= 20
    assert {"mlp", "gpt2", "llama_block"} <= {s.name for s in zoo.values() if s.source == "kiln"}
    assert {s.source for s in real} == {"torchvision", "timm", "transformers"}


@pytest.mark.parametrize("name", ["hf_llama", "tv_mobilenet_v3_small"])
def test_builders_are_seeded_and_run_offline(name: str) -> None:
    spec = registry()[name]
    model, inputs = spec.build("small")
    again, inputs_again = spec.build("small")
    for a, b in zip(model.state_dict().values(), again.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    for a, b in zip(inputs, inputs_again, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    with torch.no_grad():
        out = model(*inputs)
    assert isinstance(out, torch.Tensor)
    assert torch.isfinite(out).all()


def test_training_steps_are_deterministic() -> None:
    # EfficientNet's stochastic depth (and Swin's DropPath) drew different residual branches
    # on every training step, so eager, kiln and float64 each trained a different network.
    model, (image,) = registry()["tv_efficientnet_b0"].build("small")
    model.train()
    torch.testing.assert_close(model(image), model(image), rtol=0, atol=0)


def test_vision_batch_norm_sees_more_than_one_image() -> None:
    # Training, batch norm over one 64x64 image's 2x2 last maps made eager float32 30% off
    # float64 on ShuffleNet's gradients: the accuracy check could judge nothing there.
    vision = [s for s in registry().values() if s.source == "torchvision"]
    for spec in vision[:1] + [s for s in vision if s.name == "tv_shufflenet_v2_x1_0"]:
        _, (image,) = spec.build("small")
        assert image.shape[0] >= 2


def test_check_only_run_and_render(tmp_path: Path) -> None:
    results = tmp_path / "r.json"
    argv = ["--models", "softmax", "--modes", "infer", "--dtypes", "float32"]
    argv += ["--backends", "eager,kiln", "--check-only", "--json", str(results)]
    assert dashboard.main(argv) == 0
    rows = json.loads(results.read_text())["rows"]
    assert {(r["backend"], r["status"]) for r in rows} == {("eager", "pass"), ("kiln", "pass")}
    kiln = next(r for r in rows if r["backend"] == "kiln")
    assert kiln["err_eager"] < 1e-5
    assert kiln["launches"] >= 1
    page = tmp_path / "dash.md"
    assert dashboard.main(["--render-only", "--json", str(results), "--markdown", str(page)]) == 0
    assert "## Failures (0 of 2 rows)" in page.read_text()
    assert "## small / infer / float32" in page.read_text()


def test_render_geomeans_worst_and_failures(tmp_path: Path) -> None:
    rows = [
        _row("a", "eager", 4.0, peak_mb=8.0),
        _row("a", "inductor", 2.0, peak_mb=4.0, cold_compile_s=2.0),
        _row("a", "kiln", 1.0, peak_mb=2.0, cold_compile_s=1.0),
        _row("b", "eager", 9.0),
        _row("b", "inductor", 3.0),
        _row("b", "kiln", 6.0),
        _row("c", "eager", 1.0),
        _row("c", "inductor", 1.0),
        _row("c", "kiln", None, status="fail"),
    ]
    page = tmp_path / "d.md"
    render(
        {"runs": [], "rows": rows, "scaling": [{"backend": "kiln", "layers": 1, "compile_s": 1.0}]},
        page,
    )
    text = page.read_text()
    # kiln/inductor over a (2.0) and b (0.5): geomean 1.00; kiln speedup over a (4) and b (1.5).
    assert f"| {geomean([2.0, 0.5]):.2f} |" in text
    assert math.isclose(geomean([4.0, 1.5]) or 0, math.sqrt(6.0))
    assert "| b | small | infer | float32 | kiln vs inductor | 3.000 | 6.000 | 0.50 |" in text
    assert "| c | small | infer | float32 | kiln | boom |" in text
    assert (tmp_path / "d" / "speedup-small-infer-float32.png").exists()
    assert (tmp_path / "d" / "scaling.png").exists()


def test_scaling_rows_show_where_a_warm_recompile_spends_its_time() -> None:
    from dashboard_render import scaling_lines

    point = {
        "backend": "kiln",
        "layers": 4,
        "compile_s": 9.0,
        "stages": {"aot": 1.0, "passes": 3.0},
        "warm_compile_s": 5.1,
        "warm_cpu_s": 5.0,
        "warm_kiln_s": 0.31,
        "warm_graph_cache_hits": 1,
        "warm_stages": {"aot": 0.9, "graph-key": 0.12, "graph-cache": 0.01, "load": 0.07},
    }
    lines = scaling_lines([point])
    header = next(line for line in lines if "graph-key" in line)
    assert header.startswith("| backend | layers | wall | cpu | kiln | hits | aot | graph-key")
    assert "| kiln | 4 | 5.1 | 5.0 | 0.31 | 1 | 0.90 | 0.12 | 0.01 | 0.07 | - | - | - |" in lines


def test_ratios_use_the_eager_steps_timed_alternately(tmp_path: Path) -> None:
    """A row's speedup is against the eager steps timed in bursts alternating with it
    (``eager_paired_ms``): equal ms measured while the machine was twice as slow for
    kiln's pairing mean kiln is twice as fast."""
    rows = [
        _row("a", "eager", 4.0),
        {**_row("a", "inductor", 2.0), "eager_paired_ms": 4.0},
        {**_row("a", "kiln", 2.0), "eager_paired_ms": 8.0},
    ]
    page = tmp_path / "d.md"
    render({"runs": [], "rows": rows}, page, plots=False)
    assert (
        "| a | small | infer | float32 | kiln vs inductor | 2.000 | 2.000 | 2.00 |"
        in page.read_text()
    )


def test_paired_timing_alternates_and_reports_both() -> None:
    from dashboard_measure import paired_ms

    calls: list[str] = []
    ms, eager = paired_ms(
        lambda: calls.append("k"),
        lambda: calls.append("e"),
        torch.device("cpu"),
        4,
        rounds=2,
        min_burst_s=0.0,
    )
    assert ms >= 0
    assert eager >= 0
    timed = calls[8:]  # after three warm-up pairs and one sizing pair
    assert timed == ["e", "e", "k", "k", "e", "e", "k", "k"]


def test_paired_timing_bursts_last_long_enough() -> None:
    """Calls of 10 ms at ``iters=4`` over 2 rounds are timed in bursts of 50 ms (4-5 calls,
    not 2): short calls need more of them for a steady median."""
    from dashboard_measure import paired_ms

    calls: list[str] = []

    def run() -> None:
        calls.append("k")
        time.sleep(0.01)

    paired_ms(run, lambda: calls.append("e"), torch.device("cpu"), 4, rounds=2, min_burst_s=0.05)
    timed = calls[8:]
    burst = timed.count("k") // 2
    assert 4 <= burst <= 5
    assert timed == (["e"] * burst + ["k"] * burst) * 2


def test_results_merge_later_files_win(tmp_path: Path) -> None:
    first, second = tmp_path / "1.json", tmp_path / "2.json"
    first.write_text(json.dumps({"runs": [{"commit": "x"}], "rows": [_row("a", "kiln", 2.0)]}))
    second.write_text(
        json.dumps(
            {"runs": [{"commit": "y"}], "rows": [_row("a", "kiln", 1.0), _row("b", "kiln", 3.0)]}
        )
    )
    merged = load_results([first, second])
    assert [r["commit"] for r in merged["runs"]] == ["x", "y"]
    assert sorted((r["model"], r["ms"]) for r in merged["rows"]) == [("a", 1.0), ("b", 3.0)]


def _isolated_run(tmp_path: Path, *extra: str) -> list[dict]:
    results = tmp_path / "r.json"
    argv = ["--models", "softmax", "--modes", "infer", "--dtypes", "float32,bfloat16"]
    argv += ["--backends", "eager,kiln", "--check-only", "--isolate", "model"]
    assert dashboard.main([*argv, *extra, "--json", str(results)]) == 0
    return json.loads(results.read_text())["rows"]


def test_a_crashing_backend_is_a_failure_row_and_the_run_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(dashboard_isolate.FAULT, "kiln:crash")
    rows = _isolated_run(tmp_path)
    got = {(r["dtype"], r["backend"]): (r["status"], r["reason"] or "") for r in rows}
    assert set(got) == {(d, b) for d in ("float32", "bfloat16") for b in ("eager", "kiln")}
    for dtype in ("float32", "bfloat16"):  # each in a fresh worker after the last one died
        assert got[(dtype, "eager")] == ("pass", "")
        status, reason = got[(dtype, "kiln")]
        assert status == "fail"
        assert reason.startswith("worker killed by SIGABRT")


def test_a_hung_backend_is_killed_and_the_run_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(dashboard_isolate.FAULT, "kiln:hang")
    monkeypatch.setattr(dashboard_isolate, "GRACE", 0)
    rows = _isolated_run(tmp_path, "--dtypes", "float32", "--timeout", "30")
    got = {r["backend"]: (r["status"], r["reason"] or "") for r in rows}
    assert got["eager"] == ("pass", "")
    assert got["kiln"][0] == "fail"
    assert "without progress (worker killed)" in got["kiln"][1]


def test_isolated_rows_match_the_in_process_rows(tmp_path: Path) -> None:
    rows = _isolated_run(tmp_path, "--dtypes", "float32")
    assert {(r["backend"], r["status"]) for r in rows} == {("eager", "pass"), ("kiln", "pass")}
    kiln = next(r for r in rows if r["backend"] == "kiln")
    assert kiln["err_eager"] < 1e-5
    assert kiln["launches"] >= 1


def test_static_and_dynamic_in_one_run(tmp_path: Path) -> None:
    """``--shapes static,dynamic``: every task compiled both ways in one command, and
    the page compares each compiler's dynamic rows with its static ones (issue 21's
    "within 1.1x of kiln's own static compile")."""
    results, page = tmp_path / "r.json", tmp_path / "d.md"
    argv = ["--models", "softmax", "--modes", "infer", "--dtypes", "float32"]
    argv += ["--backends", "eager,kiln", "--iters", "2", "--no-warm", "--json", str(results)]
    assert dashboard.main([*argv, "--shapes", "static,dynamic", "--markdown", str(page)]) == 0
    rows = json.loads(results.read_text())["rows"]
    got = {(r["backend"], bool(r.get("dynamic"))): r["status"] for r in rows}
    assert got == {("eager", False): "pass", ("kiln", False): "pass", ("kiln", True): "pass"}
    text = page.read_text()
    assert "## dynamic=True against static" in text
    assert "| softmax | small | infer | float32 |" in text
    assert "within 1.1x on" in text
    # --resume finds both shapes done; --dynamic and --shapes static contradict.
    assert dashboard.main([*argv, "--shapes", "static,dynamic", "--resume"]) == 0
    assert len(json.loads(results.read_text())["rows"]) == 3
    with pytest.raises(SystemExit):
        dashboard.main([*argv, "--shapes", "static", "--dynamic"])

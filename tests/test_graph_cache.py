"""The graph cache (issue 19, warm start): a graph compiled before, by this process or
an earlier one, runs from its stored program without the pipeline; any change that could
change the program misses; a bad entry is ignored with a warning, never trusted."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

import kiln
from kiln import graph_cache
from kiln.compiler import DEFAULT_PIPELINE, GraphStats, compile_history, reset_compile_history

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A cache of its own per test (the libraries too), with the graph cache on."""
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv(graph_cache.ENV, "1")
    torch._dynamo.reset()
    yield tmp_path / "cache"
    torch._dynamo.reset()


def block(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """A matmul (an extern), a layer norm (reductions) and pointwise ops."""
    h = torch.nn.functional.layer_norm(x @ w, (w.shape[1],))
    return torch.nn.functional.gelu(h) * 0.5 + h.sum(-1, keepdim=True)


def compiled_stats(fn: Callable[..., Any], *inputs: Any, **options: Any) -> tuple[Any, GraphStats]:
    torch._dynamo.reset()
    reset_compile_history()
    out = kiln.compile(fn, verbose=False, **options)(*inputs)
    (stats,) = compile_history()
    return out, stats


def entries(cache: Path) -> list[Path]:
    return sorted((cache / "graphs").glob("*.graph"))


def test_hit_runs_the_stored_program_with_identical_numbers(private_cache: Path) -> None:
    x, w = torch.randn(6, 16), torch.randn(16, 32)
    first, cold = compiled_stats(block, x, w)
    assert cold.graph_cache == "stored"
    assert len(entries(private_cache)) == 1
    second, warm = compiled_stats(block, x, w)
    assert warm.graph_cache == "hit"
    assert "passes" not in warm.stage_seconds
    assert (warm.kernels, warm.launches, warm.externs) == (
        cold.kernels,
        cold.launches,
        cold.externs,
    )
    assert torch.equal(first, second)
    torch.testing.assert_close(second, block(x, w), rtol=1e-4, atol=1e-4)
    # Fresh inputs through the stored program, against eager.
    x2, w2 = torch.randn(6, 16), torch.randn(16, 32)
    torch._dynamo.reset()
    torch.testing.assert_close(
        kiln.compile(block, verbose=False)(x2, w2), block(x2, w2), rtol=1e-4, atol=1e-4
    )


def test_the_module_of_a_hit_is_rebuilt_on_request() -> None:
    from kiln.compiler import CompileOptions, compile_graph
    from kiln.frontends.capture import capture_make_fx

    x, w = torch.randn(4, 8), torch.randn(8, 8)
    capture = capture_make_fx(block, x, w)
    cold = compile_graph(capture.gm, capture.example_inputs, CompileOptions(verbose=False))
    warm = compile_graph(capture.gm, capture.example_inputs, CompileOptions(verbose=False))
    assert (cold.stats.graph_cache, warm.stats.graph_cache) == ("stored", "hit")
    assert str(warm.module) == str(cold.module)
    assert torch.equal(warm(x, w)[0], cold(x, w)[0])


@pytest.mark.parametrize(
    ("change", "inputs", "options"),
    [
        ("shape", (torch.randn(5, 16), torch.randn(16, 32)), {}),
        ("dtype", (torch.randn(6, 16, dtype=torch.float64), torch.randn(16, 32).double()), {}),
        (
            "pipeline",
            (torch.randn(6, 16), torch.randn(16, 32)),
            {"pipeline": DEFAULT_PIPELINE.replace(",dedup-kernels", "")},
        ),
    ],
)
def test_any_change_misses(change: str, inputs: tuple[torch.Tensor, ...], options: Any) -> None:
    compiled_stats(block, torch.randn(6, 16), torch.randn(16, 32))
    out, stats = compiled_stats(block, *inputs, **options)
    assert stats.graph_cache == "stored", change
    tolerance = 1e-4 if inputs[0].dtype == torch.float32 else 1e-9
    torch.testing.assert_close(out, block(*inputs), rtol=tolerance, atol=tolerance)


def test_environment_setting_in_the_key_misses(monkeypatch: pytest.MonkeyPatch) -> None:
    x, w = torch.randn(6, 16), torch.randn(16, 32)
    compiled_stats(block, x, w)
    monkeypatch.setenv("KILN_MAX_KERNEL_LINES", "40000")
    assert compiled_stats(block, x, w)[1].graph_cache == "stored"


def test_deterministic_algorithms_are_in_the_key() -> None:
    """Lowering keeps scatters in ATen under ``torch.use_deterministic_algorithms``."""
    x, w = torch.randn(6, 16), torch.randn(16, 32)
    compiled_stats(block, x, w)
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        assert compiled_stats(block, x, w)[1].graph_cache == "stored"
    finally:
        torch.use_deterministic_algorithms(before)


def test_off_by_environment_or_option(private_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    x, w = torch.randn(6, 16), torch.randn(16, 32)
    assert compiled_stats(block, x, w, graph_cache=False)[1].graph_cache == ""
    monkeypatch.setenv(graph_cache.ENV, "0")
    assert compiled_stats(block, x, w)[1].graph_cache == ""
    assert entries(private_cache) == []


@pytest.mark.parametrize("damage", ["flip", "truncate", "other-key", "empty"])
def test_a_bad_entry_is_ignored_with_a_warning(private_cache: Path, damage: str) -> None:
    x, w = torch.randn(6, 16), torch.randn(16, 32)
    expected, _ = compiled_stats(block, x, w)
    (path,) = entries(private_cache)
    data = path.read_bytes()
    if damage == "flip":
        middle = len(data) // 2
        path.write_bytes(data[:middle] + bytes([data[middle] ^ 0x5A]) + data[middle + 1 :])
    elif damage == "truncate":
        path.write_bytes(data[: len(data) // 3])
    elif damage == "empty":
        path.write_bytes(b"")
    else:  # a valid entry filed under another graph's key
        y, v = torch.randn(3, 16), torch.randn(16, 32)
        compiled_stats(block, y, v)
        other = next(p for p in entries(private_cache) if p != path)
        path.write_bytes(other.read_bytes())
    with pytest.warns(RuntimeWarning, match="ignoring the graph cache entry"):
        out, stats = compiled_stats(block, x, w)
    assert stats.graph_cache == "stored"  # compiled again, and the entry rewritten
    assert torch.equal(out, expected)
    assert compiled_stats(block, x, w)[1].graph_cache == "hit"


def test_a_missing_library_is_rebuilt_from_the_saved_source(private_cache: Path) -> None:
    x, w = torch.randn(6, 16), torch.randn(16, 32)
    expected, _ = compiled_stats(block, x, w)
    from kiln.backends.cpp import loader

    for library in private_cache.glob("*.so"):
        library.unlink()
    loader._LOADED.clear()  # pyright: ignore[reportPrivateUsage]
    out, stats = compiled_stats(block, x, w)
    assert stats.graph_cache == "hit"
    assert torch.equal(out, expected)


def test_concurrent_writers_leave_one_whole_entry(private_cache: Path) -> None:
    x, w = torch.randn(6, 16), torch.randn(16, 32)
    compiled_stats(block, x, w)
    (path,) = entries(private_cache)
    key = path.stem
    loaded = graph_cache.load(key)
    assert loaded is not None
    entry = loaded[0]
    errors: list[BaseException] = []

    def write() -> None:
        try:
            for _ in range(20):
                assert graph_cache.store(key, entry) == path
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=write) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert [p.name for p in (private_cache / "graphs").iterdir()] == [path.name]  # no temp left
    assert graph_cache.load(key) is not None


def test_a_program_that_is_not_data_is_not_stored(private_cache: Path) -> None:
    """topk's two results run through an aten call plan (closures): not saveable, so the
    graph compiles every time and still computes eager's numbers."""

    def fn(x: torch.Tensor) -> torch.Tensor:
        values, indices = torch.topk(x, 3)
        return values * 2 + indices

    x = torch.randn(4, 8)
    out, stats = compiled_stats(fn, x)
    assert stats.graph_cache.startswith("not stored"), stats.graph_cache
    assert entries(private_cache) == []
    torch.testing.assert_close(out, fn(x))


def test_save_program_refuses_what_does_not_round_trip() -> None:
    from kiln.backends.cpp.saved import NotSaveable, save_program

    with pytest.raises(NotSaveable):
        save_program("f", "def f(args):\n    return ()\n", {"_g": lambda: 1}, [], {})
    saved = save_program(
        "f",
        "def f(args):\n    return (_t + 1, _nan)\n",
        {"_t": torch.tensor([1.0, -0.0]), "_nan": float("nan"), "_mm": torch.mm},
        [],
        {},
    )
    from kiln.backends.cpp.saved import load_program

    result = load_program(saved)([])
    assert torch.equal(result[0], torch.tensor([2.0, 1.0]))


SECOND_PROCESS = """
import sys, torch
sys.path.insert(0, {root!r})
import kiln
from kiln.compiler import last_compile_stats
torch.manual_seed(0)
x, w = torch.randn(6, 16), torch.randn(16, 32)
sys.path.insert(0, {tests!r})
from test_graph_cache import block
before = set(sys.modules)
out = kiln.compile(block, verbose=False)(x, w)
stats = last_compile_stats()
loaded = sorted(m for m in set(sys.modules) - before if m.startswith("kiln.dialects"))
print(stats.graph_cache, ",".join(loaded) or "-", repr(out.sum().item()))
"""


def test_a_second_process_starts_warm(private_cache: Path) -> None:
    torch.manual_seed(0)
    x, w = torch.randn(6, 16), torch.randn(16, 32)
    expected, stats = compiled_stats(block, x, w)
    assert stats.graph_cache == "stored"
    script = SECOND_PROCESS.format(root=str(ROOT), tests=str(ROOT / "tests"))
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    status, loaded, total = done.stdout.split()
    assert status == "hit", done.stderr[-3000:]
    # Keyed on the FX graph (kiln.fx_key): a hit loads none of kiln's IR modules, which
    # were most of a fresh process's warm start.
    assert loaded == "-"
    assert float(total) == expected.sum().item()


def test_explain_runs_the_pipeline_even_for_a_cached_graph() -> None:
    x, w = torch.randn(6, 16), torch.randn(16, 32)
    for _ in range(2):  # the second explain compiles a graph the first one compiled
        report = kiln.explain(block, x, w, print_report=False)
        assert "passes: decompose" in report
        assert "fusion decisions:" in report

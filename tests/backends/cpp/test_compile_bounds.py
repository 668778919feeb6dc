"""Bounded compile work (issue 20): a kernel whose C++ compile runs past
``KILN_CXX_TIMEOUT`` seconds, or whose source has more than ``KILN_MAX_KERNEL_LINES``
lines, runs in the reference interpreter with a warning instead of hanging the program;
the values still equal eager's."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import torch

from kiln.backends.cpp import compiler as cxx
from kiln.compiler import CompileOptions, compile_graph
from kiln.frontends.capture import capture_make_fx

_SCALES = itertools.count(7)


def _compile_and_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A graph no earlier test built (kiln keeps loaded libraries per process by source:
    a new constant each call), in an empty cache, so that the compiler does run."""
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path / "cache"))
    scale = float(next(_SCALES))

    def fn(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return (x * y).sin() * scale, (x - y).sum(0)

    inputs = [torch.randn(5, 7), torch.randn(5, 7)]
    capture = capture_make_fx(fn, *inputs)
    compiled = compile_graph(
        capture.gm, capture.example_inputs, CompileOptions(executor="cpp", verbose=False)
    )
    assert compiled.stats.executor == "cpp"
    fresh = [torch.randn(5, 7), torch.randn(5, 7)]
    for got, want in zip(compiled(*fresh), fn(*fresh), strict=True):
        torch.testing.assert_close(got, want)


def test_a_compile_past_the_time_limit_falls_back_to_the_interpreter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KILN_CXX_TIMEOUT", "0.01")
    with pytest.warns(RuntimeWarning, match=r"reference interpreter .*KILN_CXX_TIMEOUT"):
        _compile_and_check(tmp_path, monkeypatch)
    # Killed and cleaned up: no library and no temporary source left in the cache.
    assert not [p for p in (tmp_path / "cache").rglob("*") if p.suffix in (".so", ".cpp")]


def test_a_kernel_over_the_source_limit_falls_back_to_the_interpreter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KILN_MAX_KERNEL_LINES", "5")
    with pytest.warns(RuntimeWarning, match=r"lines of C\+\+, more than KILN_MAX_KERNEL_LINES=5"):
        _compile_and_check(tmp_path, monkeypatch)


@pytest.mark.parametrize("value", ["soon", "0", "-3"])
def test_a_bad_limit_is_named(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("KILN_CXX_TIMEOUT", value)
    with pytest.raises(ValueError, match="KILN_CXX_TIMEOUT"):
        cxx.compile_timeout()


def test_the_default_limits_are_generous(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KILN_CXX_TIMEOUT", raising=False)
    monkeypatch.delenv("KILN_MAX_KERNEL_LINES", raising=False)
    assert cxx.compile_timeout() == cxx.DEFAULT_COMPILE_TIMEOUT >= 60
    assert cxx.max_kernel_lines() == cxx.DEFAULT_MAX_KERNEL_LINES >= 10_000

"""The per-stage compile profile (issue 19): ``GraphStats.stage_seconds`` accounts for
kiln's time, and ``KILN_PROFILE_PASSES=1`` prints it per graph."""

from __future__ import annotations

import pytest
import torch

import kiln
from kiln.compiler import last_compile_stats


def test_stages_account_for_the_compile_and_print_on_request(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KILN_PROFILE_PASSES", "1")

    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, -1) * 2

    x = torch.randn(4, 8)
    torch.testing.assert_close(kiln.compile(fn, verbose=False)(x), fn(x))
    stats = last_compile_stats()
    stages = stats.stage_seconds
    for stage in ("aot", "import", "setup", "passes", "lower-to-cpp", "emit", "build", "wrapper"):
        assert stages[stage] >= 0.0, stage
    inside = sum(v for k, v in stages.items() if k != "aot")
    assert inside == pytest.approx(stats.seconds, rel=1e-6, abs=1e-6)
    assert sum(stats.pass_seconds.values()) <= stages["passes"] + 1e-6
    printed = capsys.readouterr().err
    assert f"kiln profile: {stats.name}:" in printed
    assert "lower-to-cpp" in printed
    assert "dedup-kernels" in printed


def test_no_profile_printed_by_default(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("KILN_PROFILE_PASSES", raising=False)
    x = torch.randn(3, 5)
    torch.testing.assert_close(kiln.compile(torch.tanh, verbose=False)(x), torch.tanh(x))
    assert "kiln profile" not in capsys.readouterr().err
    assert "passes" in last_compile_stats().stage_seconds

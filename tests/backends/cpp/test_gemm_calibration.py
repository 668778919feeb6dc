"""The float32 GEMM calibration behind ``prepack-weights``' ``linear=auto``: measured once
per machine and stored in kiln's cache, so every process on the machine decides alike
(the verdict is in the graph cache's key)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kiln.backends.cpp import gemm_calibration
from kiln.backends.cpp.gemm_calibration import (
    MIN_GAIN,
    GemmCalibration,
    calibration,
    forget_calibration,
    linear_available,
    packed_linear_faster,
    stored_path,
)

pytestmark = pytest.mark.skipif(not linear_available(), reason="this torch has no oneDNN linear")

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty cache and no measurement in this process; afterwards the process
    forgets what the test stored or faked."""
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path / "cache"))
    forget_calibration()
    yield tmp_path / "cache"
    forget_calibration()


def test_calibration_measures_both_gemms_once(private_cache: Path) -> None:
    measured = calibration()
    assert measured is not None
    assert measured.mm_ms > 0
    assert measured.packed_ms > 0
    assert calibration() is measured  # once per process
    assert packed_linear_faster() == (measured.mm_ms >= MIN_GAIN * measured.packed_ms)
    assert "1024x768x768, 32x768x3072" in measured.describe()
    stored = json.loads(stored_path().read_text())
    assert stored == {"mm_ms": measured.mm_ms, "packed_ms": measured.packed_ms}


def test_a_stored_measurement_is_read_not_repeated(
    private_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = stored_path()
    path.write_text(json.dumps({"mm_ms": 9.0, "packed_ms": 1.0}))

    def measure() -> GemmCalibration:
        raise AssertionError("measured although this machine's measurement is stored")

    monkeypatch.setattr(gemm_calibration, "_measure", measure)
    assert calibration() == GemmCalibration(9.0, 1.0)
    assert packed_linear_faster()


@pytest.mark.parametrize(
    "text", ["{not json", "[]", '{"mm_ms": 1.0}', '{"mm_ms": -1.0, "packed_ms": 1.0}']
)
def test_a_bad_stored_measurement_is_measured_again_and_rewritten(
    private_cache: Path, text: str
) -> None:
    path = stored_path()
    path.write_text(text)
    measured = calibration()
    assert measured is not None
    assert measured.mm_ms > 0
    assert measured.packed_ms > 0
    assert json.loads(path.read_text()) == {
        "mm_ms": measured.mm_ms,
        "packed_ms": measured.packed_ms,
    }


def test_an_unwritable_cache_still_measures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("KILN_CACHE_DIR", str(blocker))  # a file: the cache moves to /tmp
    monkeypatch.setattr("tempfile.tempdir", str(blocker))  # and /tmp cannot be used either
    forget_calibration()
    try:
        with pytest.warns(RuntimeWarning, match="cannot use the cache directory"):
            measured = calibration()
    finally:
        forget_calibration()
    assert measured is not None
    assert measured.mm_ms > 0


_PROCESS = """
import sys
sys.path.insert(0, {root!r})
from kiln.backends.cpp.gemm_calibration import calibration
measured = calibration()
print(repr(measured.mm_ms), repr(measured.packed_ms))
"""


def test_two_processes_of_one_machine_decide_alike(private_cache: Path) -> None:
    """Regression: each process measured for itself, and where the GEMMs were close two
    processes packed differently, so the second missed the graph cache's entries of the
    first (``tests/test_graph_cache.py::test_a_second_process_starts_warm`` failed in CI)."""
    outputs = [
        subprocess.run(
            [sys.executable, "-c", _PROCESS.format(root=str(ROOT))],
            capture_output=True,
            text=True,
            check=True,
            timeout=300,
        ).stdout
        for _ in range(2)
    ]
    assert outputs[0] == outputs[1]

"""Emitting Triton source needs neither numpy (not a dependency) nor a GPU."""

from __future__ import annotations

import math
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from xdsl.dialects.builtin import f16, f32, f64

from kiln.backends.triton.emit import literal

ROOT = Path(__file__).resolve().parents[2]

PROGRAM = """\
func.func @forward(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = aten.relu.default(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = aten.mul.Scalar(%0, other = 0.1) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %1 : tensor<4x8xf32>
}
"""

NO_NUMPY = """\
import sys
sys.modules["numpy"] = None  # `import numpy` raises ImportError from here on
from kiln.tools.kiln_opt import main
sys.exit(main(sys.argv[1:]))
"""


def test_emit_triton_runs_with_numpy_blocked(tmp_path: Path) -> None:
    source = tmp_path / "relu.mlir"
    source.write_text(PROGRAM)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run(
        [sys.executable, "-c", NO_NUMPY, str(source), "--lower-aten", "--fuse", "--emit-triton"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=ROOT,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "@triton.jit" in proc.stdout
    assert "* 0.1" in proc.stdout


@pytest.mark.parametrize(
    "value", [0.1, 1e-5, 1 / 3, 16777216.0, 3.4028234663852886e38, 1e-45, -7.25, 123456.789]
)
def test_float32_literals_read_back_exactly(value: float) -> None:
    (single,) = struct.unpack("<f", struct.pack("<f", value))
    text = literal(value, f32)
    assert struct.unpack("<f", struct.pack("<f", float(text)))[0] == single
    assert literal(value, f16) == text  # f16 values are computed in f32
    assert literal(value, f64) == repr(value)


def test_float32_literal_is_the_shortest() -> None:
    assert literal(0.1, f32) == "0.1"
    assert literal(1.0, f32) == "1.0"
    assert literal(1e-5, f32) == "1e-05"
    assert literal(1e39, f32) == 'float("inf")'
    assert literal(math.nan, f32) == 'float("nan")'

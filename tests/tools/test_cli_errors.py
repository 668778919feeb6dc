"""kiln-opt's command line: short usage errors, empty and non-UTF-8 input, one output
target, kernel-level passes refusing unfused IR (issue #20 item 11)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kiln.tools.kiln_opt import main

ATEN = """\
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = aten.relu.default(%x) : (tensor<4xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
"""


def run(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    try:
        code = main([str(a) for a in args])
    except SystemExit as e:  # pragma: no cover - main turns SystemExit into a code
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def aten_file(tmp_path: Path) -> Path:
    path = tmp_path / "in.mlir"
    path.write_text(ATEN)
    return path


def test_unknown_flag_is_a_two_line_error(
    capsys: pytest.CaptureFixture[str], aten_file: Path
) -> None:
    code, _, err = run(capsys, aten_file, "--no-such-flag")
    assert code == 2
    assert err.splitlines() == [
        "kiln-opt: error: unrecognized arguments: --no-such-flag",
        "(see kiln-opt --help)",
    ]


def test_empty_input_prints_an_empty_module(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    empty = tmp_path / "empty.mlir"
    empty.write_text("\n  \n")
    code, out, err = run(capsys, empty)
    assert (code, err) == (0, "")
    assert out.split() == ["builtin.module", "{", "}"]


def test_non_utf8_byte_is_reported_at_its_line_and_column(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.mlir"
    bad.write_bytes(ATEN.encode().replace(b"relu", b"re\xfflu"))
    code, _, err = run(capsys, bad)
    assert code == 1
    assert (
        err.splitlines()[0] == f"{bad}:2:15: error: byte 0xff is not valid UTF-8"
    )  # 1-based column
    assert "Traceback" not in err


def test_two_different_targets_are_an_error(
    capsys: pytest.CaptureFixture[str], aten_file: Path
) -> None:
    code, _, err = run(capsys, aten_file, "--emit-cpp", "--emit-triton")
    assert code == 2
    assert "--emit-cpp and --emit-triton both choose the output" in err


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--tile"], "tile: @f holds aten IR; run lower-aten and fuse first"),
        (["--buffer-reuse"], "buffer-reuse: @f holds aten IR; run lower-aten and fuse first"),
        (["--lower-aten", "--tile"], "tile: @f holds loop IR; run fuse first"),
    ],
)
def test_kernel_level_passes_refuse_unfused_ir(
    capsys: pytest.CaptureFixture[str], aten_file: Path, flags: list[str], message: str
) -> None:
    code, _, err = run(capsys, aten_file, *flags)
    assert code == 1
    assert message in err
    if "aten IR" in message:
        assert err.startswith(f"{aten_file}:2:")  # points at the offending op

"""kiln-opt: pass flags and their order, IR dumps, timing, output, and error reporting."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from xdsl.ir import Attribute

from kiln.tools.kiln_opt import main

PLUGIN = Path(__file__).parents[1] / "plugins" / "kiln_test_plugin.py"

IR = """\
func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = aten.neg.default(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = aten.neg.default(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %2 = aten.add.Tensor(%0, %1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %3 = aten.exp.default(%x) : (tensor<4xf32>) -> tensor<4xf32>
  func.return %2 : tensor<4xf32>
}
"""


@pytest.fixture
def ir_file(tmp_path: Path) -> Path:
    path = tmp_path / "in.mlir"
    path.write_text(IR)
    return path


def run(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def op_count(out: str) -> int:
    marker = "kiln_test.op_count = "
    return int(out[out.index(marker) + len(marker) :].split(" ")[0])


def test_no_pass_round_trips(capsys: pytest.CaptureFixture[str], ir_file: Path) -> None:
    code, out, err = run(capsys, ir_file)
    assert (code, err) == (0, "")
    assert out.count("aten.neg.default") == 2


def test_pass_flags_run(capsys: pytest.CaptureFixture[str], ir_file: Path) -> None:
    code, out, _ = run(capsys, ir_file, "--cse", "--dce")
    assert code == 0
    assert out.count("aten.neg.default") == 1
    assert "aten.exp.default" not in out


def test_flags_run_in_command_line_order(capsys: pytest.CaptureFixture[str], ir_file: Path) -> None:
    _, cse_first, _ = run(capsys, ir_file, "--load-plugin", PLUGIN, "--cse", "--test-count-ops")
    _, count_first, _ = run(capsys, ir_file, "--load-plugin", PLUGIN, "--test-count-ops", "--cse")
    assert op_count(cse_first) == 4  # func, neg, add, return (cse also drops the dead exp)
    assert op_count(count_first) == 6


def test_pipeline_runs_before_flags(capsys: pytest.CaptureFixture[str], ir_file: Path) -> None:
    code, out, _ = run(capsys, ir_file, "--load-plugin", PLUGIN, "--cse", "-p", "test-count-ops")
    assert code == 0
    assert op_count(out) == 6
    assert out.count("aten.neg.default") == 1


def test_pass_options_through_pipeline(capsys: pytest.CaptureFixture[str], ir_file: Path) -> None:
    code, out, _ = run(
        capsys, ir_file, "--load-plugin", PLUGIN, "-p", 'test-count-ops{op-name="aten.neg.default"}'
    )
    assert code == 0
    assert op_count(out) == 2


def test_print_ir_after_all(capsys: pytest.CaptureFixture[str], ir_file: Path) -> None:
    code, out, err = run(capsys, ir_file, "--dce", "--cse", "--print-ir-after-all")
    assert code == 0
    assert "IR Dump" not in out
    dce_at = err.index("// -----// IR Dump After dce //----- //")
    cse_at = err.index("// -----// IR Dump After cse //----- //")
    assert dce_at < cse_at
    assert "aten.exp.default" not in err
    assert err[dce_at:cse_at].count("aten.neg.default") == 2
    assert err[cse_at:].count("aten.neg.default") == 1


def test_time_passes_reports_on_stderr(capsys: pytest.CaptureFixture[str], ir_file: Path) -> None:
    code, out, err = run(capsys, ir_file, "--cse", "--canonicalize", "--time-passes")
    assert code == 0
    assert out.startswith("builtin.module")
    assert "Total Execution Time" in err
    for name in ("cse", "canonicalize", "(verify)", "(parse)"):
        assert f"  {name}\n" in err


def test_output_file(capsys: pytest.CaptureFixture[str], ir_file: Path, tmp_path: Path) -> None:
    target = tmp_path / "out.mlir"
    code, out, _ = run(capsys, ir_file, "--cse", "-o", target)
    assert (code, out) == (0, "")
    assert target.read_text().count("aten.neg.default") == 1


def test_help_lists_pass_flags(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--help")
    assert code == 0
    for flag in (
        "--cse",
        "--dce",
        "--canonicalize",
        "--decompose",
        "--print-ir-after-all",
        "--load-plugin",
    ):
        assert flag in out


def test_help_lists_plugin_pass_flags(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--load-plugin", PLUGIN, "--help")
    assert code == 0
    assert "--test-count-ops" in out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--version")
    assert code == 0
    assert out.startswith("kiln-opt ")


def test_disable_verify_leaves_the_process_as_it_was(
    capsys: pytest.CaptureFixture[str], ir_file: Path
) -> None:
    before = Attribute.__post_init__
    code, _, _ = run(capsys, ir_file, "--cse", "--disable-verify")
    assert code == 0
    assert Attribute.__post_init__ is before


def test_console_script_reads_stdin() -> None:
    script = Path(sys.executable).with_name("kiln-opt")
    result = subprocess.run(
        [str(script), "--cse"], input=IR, capture_output=True, text=True, check=False, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("aten.neg.default") == 1


# --- errors: file:line:col, exit code 1, no traceback ---------------------------------------


def error_of(capsys: pytest.CaptureFixture[str], path: Path, *args: str | Path) -> str:
    code, _, err = run(capsys, path, *args)
    assert code == 1
    assert "Traceback" not in err
    return err


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bad.mlir"
    path.write_text(text)
    return path


def test_malformed_ir(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write(tmp_path, IR.replace("neg.default(%x)", "neg.default(%x", 1))
    err = error_of(capsys, path)
    assert err.startswith(f"{path}:2:")
    assert "error: Expected ')'" in err


@pytest.mark.parametrize("generic", [False, True])
def test_a_stray_quote_is_a_located_error_not_a_hang(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, generic: bool
) -> None:
    """xDSL's string-literal regex backtracked exponentially in the rest of the line after
    an unterminated ``"`` (two kiln-opt fuzzer inputs ran for minutes); kiln lexes with
    a linear pattern. The alarm turns a regression into a failure, not a stuck run."""
    long_line = (
        '    %stray"' + "x" * 60 + " = aten.neg.default(%x) : (tensor<2xf32>) -> tensor<2xf32>\n"
    )
    text = (
        ('"builtin.module' + "y" * 60 + "\n") if generic else IR.replace("\n", "\n" + long_line, 1)
    )
    path = write(tmp_path, text)
    signal.signal(signal.SIGALRM, _hang)
    signal.alarm(30)
    try:
        err = error_of(capsys, path)
    finally:
        signal.alarm(0)
    line = 1 if generic else 2
    assert err.startswith(f"{path}:{line}:")
    assert "closing string literal" in err


def test_non_ascii_strings_print_and_parse_back(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """xDSL prints non-ASCII characters as UTF-8 escapes and lexed them back as bytes: a
    string attribute came back as a ``BytesAttr``, which kiln's verifiers reject (found by
    the kiln-opt fuzzer in a kernel's ``provenance``)."""
    from xdsl.dialects.builtin import StringAttr

    from kiln.diagnostics import LocatingParser
    from kiln.registry import make_context

    header = "func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {"
    text = IR.replace(header, header[:-1] + 'attributes {note = "caf\u00e9 \u0080"} {', 1)
    first = tmp_path / "first.mlir"
    first.write_text(text)
    code, printed, err = run(capsys, first)
    assert code == 0, err
    assert "\\C3\\A9" in printed  # escaped as MLIR does
    (func,) = LocatingParser(make_context(), printed).parse_module().ops
    note = func.attributes["note"]
    assert isinstance(note, StringAttr)
    assert note.data == "caf\u00e9 \u0080"


def _hang(signum: int, frame: object) -> None:
    raise TimeoutError("parsing a stray quote took more than 30 s")


def test_unknown_op(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write(tmp_path, IR.replace("aten.exp.default", "foo.bar"))
    err = error_of(capsys, path)
    assert err.startswith(f"{path}:5:8: error: Operation foo.bar is not registered")


def test_operand_type_mismatch(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write(
        tmp_path, IR.replace("func.return %2 : tensor<4xf32>", "func.return %2 : tensor<4xf64>")
    )
    err = error_of(capsys, path)
    assert err.startswith(f"{path}:6:15: error: operand is used with type tensor<4xf64>")


def test_verifier_error_in_aten_op(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write(
        tmp_path,
        IR.replace(
            "%3 = aten.exp.default(%x) : (tensor<4xf32>) -> tensor<4xf32>",
            '%3 = "aten.exp.default"(%x) : (tensor<4xf32>) -> i32',
        ),
    )
    err = error_of(capsys, path, "--cse")
    assert err.startswith(f"{path}:5:8: error: 'aten.exp.default' op result 'result'")
    assert "after pass" not in err  # caught before the first pass


def test_function_result_type_mismatch(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write(tmp_path, IR.replace("-> tensor<4xf32> {", "-> tensor<8xf32> {"))
    err = error_of(capsys, path)
    assert err.startswith(
        f"{path}:6:3: error: 'func.return' op Expected arguments to have the same types"
    )


def test_pass_that_raises(capsys: pytest.CaptureFixture[str], ir_file: Path) -> None:
    err = error_of(capsys, ir_file, "--load-plugin", PLUGIN, "--test-raise")
    assert err.startswith(
        f"{ir_file}:2:8: error: 'aten.neg.default' op pass 'test-raise' failed: "
        "RuntimeError: refusing to rewrite this op"
    )
    assert f"note: raised at {PLUGIN.resolve()}:" in err
    assert "--debug" in err


def test_debug_shows_the_traceback(capsys: pytest.CaptureFixture[str], ir_file: Path) -> None:
    with pytest.raises(RuntimeError, match="refusing"):
        main([str(ir_file), "--load-plugin", str(PLUGIN), "--test-raise", "--debug"])


def test_pass_that_breaks_the_ir(capsys: pytest.CaptureFixture[str], ir_file: Path) -> None:
    err = error_of(capsys, ir_file, "--load-plugin", PLUGIN, "--cse", "--test-break-ir", "--dce")
    assert err.startswith(f"{ir_file}:1:1: error: 'aten.neg.default' op result 'result'")
    assert "created by a pass" in err
    assert "note: the IR does not verify after pass 'test-break-ir'" in err


def test_unknown_pass(capsys: pytest.CaptureFixture[str], ir_file: Path) -> None:
    err = error_of(capsys, ir_file, "-p", "no-such-pass")
    assert err.strip() == "kiln-opt: error: Unrecognized passes: ['no-such-pass']"


def test_malformed_pipeline(capsys: pytest.CaptureFixture[str], ir_file: Path) -> None:
    err = error_of(capsys, ir_file, "-p", "cse{")
    assert err.startswith("kiln-opt: error: Error parsing pass pipeline specification")


def test_missing_input(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    err = error_of(capsys, tmp_path / "missing.mlir")
    assert "error: cannot open" in err
    assert "missing.mlir" in err


def test_abbreviated_load_plugin_is_rejected(
    capsys: pytest.CaptureFixture[str], ir_file: Path
) -> None:
    err = error_of(capsys, ir_file, "--load-plug", PLUGIN)
    assert "write the option in full as --load-plugin" in err

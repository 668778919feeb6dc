"""The README's paths, as a new user runs them: the main job, and kiln-import | kiln-opt."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from xdsl.parser import Parser

from kiln.dialects.aten import AtenOp
from kiln.dialects.aten.interpreter import run_function
from kiln.examples import GPTBlock
from kiln.registry import make_context
from kiln.tools import kiln_import, kiln_opt


def test_main_job_runs_and_matches_eager() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "kiln", "--quiet"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "kiln vs eager" in proc.stdout
    assert "executor cpp" in proc.stdout
    assert proc.stdout.rstrip().endswith("OK")


def test_main_job_says_why_it_cannot_compile(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Triton executor on a machine without a GPU is the user's choice to correct: one
    line saying what to do, exit status 2, no traceback."""
    from kiln.main_job import main

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert main(["--executor", "triton", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "needs GPU tensors" in err
    assert "TRITON_INTERPRET=1" in err
    assert "Traceback" not in err


def test_kiln_import_piped_into_kiln_opt_runs_to_eager_numbers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert kiln_import.main(["kiln.examples:GPTBlock", "--input", "2x16x64xf32"]) == 0
    imported = capsys.readouterr().out
    source = tmp_path / "gpt_block.mlir"
    source.write_text(imported)

    assert kiln_opt.main([str(source), "--decompose", "--cse"]) == 0
    optimised = capsys.readouterr().out
    module = Parser(make_context(), optimised).parse_module()
    module.verify()
    names = {op.overload_name for op in module.walk() if isinstance(op, AtenOp)}
    assert "aten::native_layer_norm.default" not in names  # decompose ran
    assert "aten::_softmax.default" not in names

    model = GPTBlock().eval()
    x = torch.randn(2, 16, 64)
    params = [p.detach() for p in model.parameters()]
    (out,) = run_function(module, [*params, x])
    with torch.no_grad():
        expected = model(x)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)

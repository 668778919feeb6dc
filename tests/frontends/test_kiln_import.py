"""The ``kiln-import`` command, run in-process through ``main``."""

from __future__ import annotations

from pathlib import Path

import pytest
from xdsl.dialects.func import FuncOp
from xdsl.parser import Parser

from kiln.registry import make_context
from kiln.tools.kiln_import import UsageError, main, parse_input

MODEL_SOURCE = """
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)
        self.embed = nn.Embedding(16, 8)

    def forward(self, x, tokens):
        return torch.relu(self.fc(x + self.embed(tokens)))


def make_net():
    return Net()


def gather_rows(x, rows):
    return x[rows].sum(0)
"""


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    path = tmp_path / "tiny_model.py"
    path.write_text(MODEL_SOURCE)
    return path


def parse_functions(text: str) -> list[FuncOp]:
    module = Parser(make_context(), text).parse_module()
    module.verify()
    return [op for op in module.ops if isinstance(op, FuncOp)]


@pytest.mark.parametrize("mode", ["aot", "make_fx", "export"])
def test_module_class(model_file: Path, mode: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [f"{model_file}:Net", "--input", "3x8xf32", "--input", "3xi64", "--mode", mode]
    assert main(argv) == 0
    (function,) = parse_functions(capsys.readouterr().out)
    # Four parameters (fc weight and bias, embedding) then the two inputs.
    assert [str(t) for t in function.function_type.inputs.data][-2:] == [
        "tensor<3x8xf32>",
        "tensor<3xi64>",
    ]
    assert len(function.function_type.inputs.data) == 5


def test_factory_dynamic_training_to_file(
    model_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "net.mlir"
    argv = [
        f"{model_file}:make_net",
        "--input", "3x8xf32",
        "--input", "3xi64",
        "--dynamic",
        "--training",
        "-o", str(out),
        "--debuginfo",
    ]  # fmt: skip
    assert main(argv) == 0
    assert capsys.readouterr().out == ""
    text = out.read_text()
    assert "?x8xf32" in text
    assert "loc(" in text
    assert [f.sym_name.data for f in parse_functions(text)] == ["forward", "backward"]


def test_function_with_params_as_constants(
    model_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        f"{model_file}:gather_rows",
        "--input",
        "6x4xf32",
        "--input",
        "2xi64",
        "--mode",
        "make_fx",
    ]
    assert main([*argv, "--params", "constants"]) == 0
    (function,) = parse_functions(capsys.readouterr().out)
    assert "aten.index.Tensor" in {op.name for op in function.body.walk()}


def test_params_as_constants(model_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [f"{model_file}:Net", "--input", "3x8xf32", "--input", "3xi64", "--params", "constants"]
    assert main(argv) == 0
    (function,) = parse_functions(capsys.readouterr().out)
    assert len(function.function_type.inputs.data) == 2
    assert sum(op.name == "aten.constant" for op in function.body.walk()) == 3


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["missing_file.py:Net", "--input", "4xf32"], "no such file"),
        (["{model}:Nope", "--input", "4xf32"], "has no attribute 'Nope'"),
        (["{model}", "--input", "4xf32"], "not of the form module:callable"),
        (["{model}:Net", "--input", "8xq7"], "bad --input '8xq7'"),
        (["{model}:Net", "--input", "3x5xf32", "--input", "3xi64"], "could not trace"),
        (["{model}:Net", "--mode", "jit"], "invalid choice"),
        (["{model}:Net", "--training", "--mode", "export"], "--training needs --mode aot"),
        (["no_such_package_xyz:f"], "cannot import module"),
    ],
)
def test_errors_are_one_line(
    model_file: Path, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([a.format(model=model_file) for a in argv]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("kiln-import: error: ")
    assert message in lines[0]


def test_debug_shows_the_exception(model_file: Path) -> None:
    with pytest.raises(UsageError, match="no attribute 'Nope'"):
        main([f"{model_file}:Nope", "--input", "4xf32", "--debug"])


def test_help_returns_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "module:callable" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("spec", "expected"),
    [("8x16xf32", ([8, 16], "float32")), ("16xi64", ([16], "int64")), ("bf16", ([], "bfloat16"))],
)
def test_parse_input(spec: str, expected: tuple[list[int], str]) -> None:
    assert parse_input(spec) == expected


@pytest.mark.parametrize("extra", [[], ["--training"], ["--dynamic"]])
def test_integer_inputs_are_traced_fake_not_drawn_out_of_range(
    tmp_path: Path, extra: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """An Embedding(5, 8) fed ``2x16xi64``: random ids would be out of range; tracing
    on fake tensors never looks at them."""
    path = tmp_path / "small_embedding.py"
    path.write_text(
        "import torch\n"
        "class Emb(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.e = torch.nn.Embedding(5, 8)\n"
        "    def forward(self, ids):\n"
        "        return self.e(ids).sum(-1)\n"
        "def pick(x, idx):\n"
        "    return torch.index_select(x, 0, idx)\n"
    )
    assert main([f"{path}:Emb", "--input", "2x16xi64", *extra]) == 0
    functions = parse_functions(capsys.readouterr().out)
    assert len(functions) == (2 if extra == ["--training"] else 1)
    assert main([f"{path}:pick", "--input", "4x3xf32", "--input", "2xi64", *extra[1:]]) == 0
    parse_functions(capsys.readouterr().out)

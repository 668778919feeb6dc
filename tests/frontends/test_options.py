"""Options and the public API: checked when given, pipelines written as mlir-opt accepts them."""

from __future__ import annotations

import pytest
import torch

import kiln
from kiln.compiler import CompileError, CompileOptions
from kiln.registry import normalize_pipeline


def test_pipeline_with_spaces_compiles_and_runs() -> None:
    fn = kiln.compile(
        lambda x: torch.relu(x) * 3, pipeline=" decompose, lower-aten ,fuse ", verbose=False
    )
    x = torch.randn(16)
    torch.testing.assert_close(fn(x), torch.relu(x) * 3)


def test_normalize_pipeline_keeps_spaces_between_pass_options() -> None:
    spec = "decompose , fuse{max-nodes=64 report=true},  tile"
    assert normalize_pipeline(spec) == "decompose,fuse{max-nodes=64 report=true},tile"


def test_malformed_pipeline_is_a_compile_error_not_a_base_exception() -> None:
    # xDSL raises ArgSpecParseError, a BaseException that `except Exception` does not catch.
    fn = kiln.compile(lambda x: x + 2, pipeline="decompose,,{", verbose=False)
    with pytest.raises(Exception, match="bad pipeline") as info:
        fn(torch.randn(4))
    assert isinstance(info.value, Exception)


def test_explain_is_callable_after_first_use() -> None:
    model = torch.nn.Linear(4, 4)
    kiln.explain(model, torch.randn(2, 4), print_report=False)
    assert callable(kiln.explain)  # the submodule used to replace the function
    text = kiln.explain(model, torch.randn(2, 4), print_report=False)
    assert "1 graph(s)" in text


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"verbose": "yes"}, "verbose='yes': expected bool"),
        ({"debug_dir": 123}, "debug_dir=123: expected str or None"),
        ({"executor": "gpu"}, "executor='gpu'"),
        ({"autotune": 1}, "autotune=1: expected bool"),
        ({"partitioner": "greedy"}, "partitioner='greedy'"),
        ({"cuda_graphs": "always"}, "cuda_graphs='always': expected True, False or 'auto'"),
        ({"cuda_graphs": 1}, "cuda_graphs=1: expected bool or str"),
        ({"plugins": [3]}, "plugins"),
        ({"mode": "fastest"}, "unknown mode 'fastest'"),
        ({"no_such_option": True}, "unknown kiln option"),
    ],
)
def test_bad_options_are_rejected_when_given(options: dict[str, object], message: str) -> None:
    with pytest.raises(CompileError, match=message):
        kiln.compile(lambda x: x + 1, **options)  # type: ignore[arg-type]


def test_inductor_modes_map_to_kiln_options_and_fullgraph_is_accepted() -> None:
    fn = kiln.compile(lambda x: x.sin() + 1, fullgraph=True, mode="reduce-overhead", verbose=False)
    x = torch.randn(8)
    torch.testing.assert_close(fn(x), x.sin() + 1)  # CUDA graphs apply to CUDA graphs only


def test_debug_dir_accepts_a_path(tmp_path: object) -> None:
    assert CompileOptions.from_mapping({"debug_dir": tmp_path}).debug_dir == str(tmp_path)


def test_kiln_opt_accepts_spaces_in_a_pipeline(
    tmp_path: object, capsys: pytest.CaptureFixture[str]
) -> None:
    from pathlib import Path

    from kiln.tools.kiln_opt import main

    path = Path(str(tmp_path)) / "in.mlir"
    path.write_text(
        "func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
        "  %0 = aten.neg.default(%x) : (tensor<4xf32>) -> tensor<4xf32>\n"
        "  %1 = aten.neg.default(%x) : (tensor<4xf32>) -> tensor<4xf32>\n"
        "  %2 = aten.add.Tensor(%0, %1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>\n"
        "  func.return %2 : tensor<4xf32>\n}\n"
    )
    assert main([str(path), "-p", "cse, dce"]) == 0
    out = capsys.readouterr().out
    assert out.count("aten.neg.default") == 1

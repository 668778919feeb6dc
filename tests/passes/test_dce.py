"""The ``dce`` pass on aten IR: IR in/IR out, and the same numbers before and after."""

from __future__ import annotations

from pathlib import Path

from pass_checks import assert_pass_output, assert_same_semantics, run_pass

from kiln.passes.dce import DCEPass
from kiln.registry import default_registry

FILECHECK_INPUT = Path(__file__).parents[1] / "filecheck" / "passes" / "dce.mlir"


def test_registered_under_kiln() -> None:
    assert default_registry().get_pass("dce") is DCEPass


def test_removes_dead_chains_and_keeps_effects() -> None:
    assert_pass_output(
        DCEPass(),
        """
        func.func @f(%x: tensor<3xf32>) -> tensor<3xf32> {
          %0 = aten.exp.default(%x) : (tensor<3xf32>) -> tensor<3xf32>
          %1 = aten.neg.default(%0) : (tensor<3xf32>) -> tensor<3xf32>
          %2 = aten.rand_like.default(%x) : (tensor<3xf32>) -> tensor<3xf32>
          func.return %x : tensor<3xf32>
        }
        """,
        """
        func.func @f(%x: tensor<3xf32>) -> tensor<3xf32> {
          %0 = aten.rand_like.default(%x) : (tensor<3xf32>) -> tensor<3xf32>
          func.return %x : tensor<3xf32>
        }
        """,
    )


def test_keeps_used_ops() -> None:
    text = """
    func.func @f(%x: tensor<3xf32>) -> tensor<3xf32> {
      %0 = aten.exp.default(%x) : (tensor<3xf32>) -> tensor<3xf32>
      func.return %0 : tensor<3xf32>
    }
    """
    assert_pass_output(DCEPass(), text, text)


def test_same_semantics_on_filecheck_input() -> None:
    before, after = run_pass(DCEPass(), FILECHECK_INPUT.read_text())
    assert_same_semantics(before, after)

"""The ``cse`` pass on aten IR: IR in/IR out, and the same numbers before and after."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from pass_checks import assert_pass_output, assert_same_semantics, run_pass
from xdsl.traits import Pure

from kiln.dialects.aten import op_class
from kiln.passes.cse import CSEPass
from kiln.registry import default_registry

FILECHECK_INPUT = Path(__file__).parents[1] / "filecheck" / "passes" / "cse.mlir"


def test_registered_under_kiln() -> None:
    assert default_registry().get_pass("cse") is CSEPass


def test_outputs_that_were_distinct_stay_distinct() -> None:
    # The two sums merge; the second output becomes a copy, not the same tensor twice.
    assert_pass_output(
        CSEPass(),
        """
        func.func @f(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) {
          %0 = aten.exp.default(%x) : (tensor<3xf32>) -> tensor<3xf32>
          %1 = aten.exp.default(%x) : (tensor<3xf32>) -> tensor<3xf32>
          func.return %0, %1, %0 : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
        }
        """,
        """
        func.func @f(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) {
          %0 = aten.exp.default(%x) : (tensor<3xf32>) -> tensor<3xf32>
          %1 = aten.clone.default(%0) : (tensor<3xf32>) -> tensor<3xf32>
          func.return %0, %1, %0 : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
        }
        """,
    )


def test_merges_identical_pure_ops() -> None:
    assert_pass_output(
        CSEPass(),
        """
        func.func @f(%x: tensor<3xf32>) -> tensor<3xf32> {
          %0 = aten.exp.default(%x) : (tensor<3xf32>) -> tensor<3xf32>
          %1 = aten.exp.default(%x) : (tensor<3xf32>) -> tensor<3xf32>
          %2 = aten.mul.Tensor(%0, %1) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
          func.return %2 : tensor<3xf32>
        }
        """,
        """
        func.func @f(%x: tensor<3xf32>) -> tensor<3xf32> {
          %0 = aten.exp.default(%x) : (tensor<3xf32>) -> tensor<3xf32>
          %1 = aten.mul.Tensor(%0, %0) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
          func.return %1 : tensor<3xf32>
        }
        """,
    )


def test_keeps_ops_that_differ_in_properties_or_types() -> None:
    text = """
    func.func @f(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf16>, tensor<3xf16>) {
      %0 = aten.add.Tensor(%x, %x) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
      %1 = aten.add.Tensor(%x, %x, alpha = 3) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
      %2 = aten.to.dtype(%x, dtype = f16) : (tensor<3xf32>) -> tensor<3xf16>
      %3 = aten._to_copy.default(%x, dtype = f16) : (tensor<3xf32>) -> tensor<3xf16>
      func.return %0, %1, %2, %3 : tensor<3xf32>, tensor<3xf32>, tensor<3xf16>, tensor<3xf16>
    }
    """
    assert_pass_output(CSEPass(), text, text)


@pytest.mark.parametrize(
    "name", ["rand.default", "randn_like.default", "dropout.default", "native_dropout.default"]
)
def test_random_ops_are_not_pure(name: str) -> None:
    cls = op_class(name)
    assert cls is not None
    assert not cls.has_trait(Pure)


@pytest.mark.parametrize("name", ["add.Tensor", "view.default", "sum.dim_IntList", "clone.default"])
def test_functional_ops_are_pure(name: str) -> None:
    cls = op_class(name)
    assert cls is not None
    assert cls.has_trait(Pure)


def test_same_semantics_on_filecheck_input() -> None:
    before, after = run_pass(CSEPass(), FILECHECK_INPUT.read_text())
    x = torch.randn(4, 8)
    assert_same_semantics(before, after, {"symbolic": lambda: [x, 4, 4]})

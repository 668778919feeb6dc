"""The aten interpreter: hand-written aten IR, run on random inputs, against torch eager."""

from __future__ import annotations

import math

import pytest
import torch
from torch.testing import assert_close
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser
from xdsl.utils.exceptions import DiagnosticException

from kiln.dialects.aten.interpreter import ArgumentError, run_function
from kiln.interpret import run
from kiln.registry import make_context


def parse(text: str) -> ModuleOp:
    module = Parser(make_context(), text).parse_module()
    module.verify()
    return module


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


def test_broadcasting_add_with_alpha() -> None:
    module = parse(
        """
        func.func @forward(%x: tensor<4x8xf32>, %y: tensor<8xf32>) -> tensor<4x8xf32> {
          %0 = aten.add.Tensor(%x, %y, alpha = 2) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
          func.return %0 : tensor<4x8xf32>
        }
        """
    )
    x, y = torch.randn(4, 8), torch.randn(8)
    (out,) = run_function(module, [x, y])
    assert_close(out, torch.add(x, y, alpha=2))


def test_float_scalar_and_int_tensor_add() -> None:
    module = parse(
        """
        func.func @forward(%x: tensor<3x5xi64>) -> tensor<3x5xf32> {
          %0 = aten.add.Scalar(%x, other = 0.5, alpha = 3) : (tensor<3x5xi64>) -> tensor<3x5xf32>
          func.return %0 : tensor<3x5xf32>
        }
        """
    )
    x = torch.randint(-10, 10, (3, 5))
    (out,) = run_function(module, [x])
    assert_close(out, torch.ops.aten.add.Scalar(x, 0.5, 3))


def test_view_with_symbolic_size() -> None:
    module = parse(
        """
        func.func @forward(%x: tensor<?x8xf32>, %s: index) -> tensor<?x4xf32> {
          %0 = aten.view.default(%x, size = [%s, 4]) : (tensor<?x8xf32>, index) -> tensor<?x4xf32>
          func.return %0 : tensor<?x4xf32>
        }
        """
    )
    for rows in (3, 5):
        x = torch.randn(rows, 8)
        (out,) = run_function(module, [x, rows * 2])
        assert_close(out, x.view(rows * 2, 4))


def test_max_dim_has_two_results() -> None:
    module = parse(
        """
        func.func @forward(%x: tensor<5x7xf32>) -> (tensor<5x1xf32>, tensor<5x1xi64>) {
          %0, %1 = aten.max.dim(%x, dim = 1, keepdim = true) : (tensor<5x7xf32>) -> (tensor<5x1xf32>, tensor<5x1xi64>)
          func.return %0, %1 : tensor<5x1xf32>, tensor<5x1xi64>
        }
        """
    )
    x = torch.randn(5, 7)
    values, indices = run_function(module, [x])
    expected = x.max(dim=1, keepdim=True)
    assert_close(values, expected.values)
    assert_close(indices, expected.indices)


LAYER_NORM_AFFINE = """
func.func @forward(%x: tensor<2x3x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) -> (tensor<2x3x8xf32>, tensor<2x3x1xf32>, tensor<2x3x1xf32>) {
  %0, %1, %2 = aten.native_layer_norm.default(%x, normalized_shape = [8], weight = %w, bias = %b, eps = 1.0e-05) : (tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x3x8xf32>, tensor<2x3x1xf32>, tensor<2x3x1xf32>)
  func.return %0, %1, %2 : tensor<2x3x8xf32>, tensor<2x3x1xf32>, tensor<2x3x1xf32>
}
"""

LAYER_NORM_PLAIN = """
func.func @forward(%x: tensor<2x3x8xf32>) -> (tensor<2x3x8xf32>, tensor<2x3x1xf32>, tensor<2x3x1xf32>) {
  %0, %1, %2 = aten.native_layer_norm.default(%x, normalized_shape = [8], eps = 0.001) : (tensor<2x3x8xf32>) -> (tensor<2x3x8xf32>, tensor<2x3x1xf32>, tensor<2x3x1xf32>)
  func.return %0, %1, %2 : tensor<2x3x8xf32>, tensor<2x3x1xf32>, tensor<2x3x1xf32>
}
"""


def test_native_layer_norm_with_weight_and_bias() -> None:
    x, w, b = torch.randn(2, 3, 8), torch.randn(8), torch.randn(8)
    outs = run_function(parse(LAYER_NORM_AFFINE), [x, w, b])
    expected = torch.ops.aten.native_layer_norm.default(x, [8], w, b, 1e-5)
    for out, ref in zip(outs, expected, strict=True):
        assert_close(out, ref)
    assert_close(outs[0], torch.nn.functional.layer_norm(x, [8], w, b, 1e-5))


def test_native_layer_norm_without_weight_and_bias() -> None:
    x = torch.randn(2, 3, 8) * 3 + 1
    outs = run_function(parse(LAYER_NORM_PLAIN), [x])
    expected = torch.ops.aten.native_layer_norm.default(x, [8], None, None, 1e-3)
    for out, ref in zip(outs, expected, strict=True):
        assert_close(out, ref)


def test_cat_of_a_tensor_list() -> None:
    module = parse(
        """
        func.func @forward(%a: tensor<2x3xf32>, %b: tensor<2x5xf32>) -> tensor<2x11xf32> {
          %0 = aten.cat.default(tensors = [%a, %b, %a], dim = 1) : (tensor<2x3xf32>, tensor<2x5xf32>, tensor<2x3xf32>) -> tensor<2x11xf32>
          func.return %0 : tensor<2x11xf32>
        }
        """
    )
    a, b = torch.randn(2, 3), torch.randn(2, 5)
    (out,) = run_function(module, [a, b])
    assert_close(out, torch.cat([a, b, a], dim=1))


def test_index_tensor_with_none_entry() -> None:
    module = parse(
        """
        func.func @forward(%x: tensor<4x6x3xf32>, %i: tensor<5xi64>, %j: tensor<5xi64>) -> tensor<4x5xf32> {
          %0 = aten.index.Tensor(%x, indices = [none, %i, %j]) : (tensor<4x6x3xf32>, tensor<5xi64>, tensor<5xi64>) -> tensor<4x5xf32>
          func.return %0 : tensor<4x5xf32>
        }
        """
    )
    x = torch.randn(4, 6, 3)
    i, j = torch.randint(0, 6, (5,)), torch.randint(0, 3, (5,))
    (out,) = run_function(module, [x, i, j])
    assert_close(out, x[:, i, j])


def test_to_copy_to_float16() -> None:
    module = parse(
        """
        func.func @forward(%x: tensor<3x4xf32>) -> tensor<3x4xf16> {
          %0 = aten._to_copy.default(%x, dtype = f16) : (tensor<3x4xf32>) -> tensor<3x4xf16>
          func.return %0 : tensor<3x4xf16>
        }
        """
    )
    x = torch.randn(3, 4)
    (out,) = run_function(module, [x])
    assert isinstance(out, torch.Tensor)
    assert out.dtype == torch.float16
    assert_close(out, x.to(torch.float16))


def test_omitted_default_makes_later_arguments_keywords() -> None:
    # sort(self, int dim=-1, bool descending=False): dim is omitted, descending is not.
    module = parse(
        """
        func.func @forward(%x: tensor<3x6xf32>) -> (tensor<3x6xf32>, tensor<3x6xi64>) {
          %0, %1 = aten.sort.default(%x, descending = true) : (tensor<3x6xf32>) -> (tensor<3x6xf32>, tensor<3x6xi64>)
          func.return %0, %1 : tensor<3x6xf32>, tensor<3x6xi64>
        }
        """
    )
    x = torch.randn(3, 6)
    values, indices = run_function(module, [x])
    expected = torch.sort(x, descending=True)
    assert_close(values, expected.values)
    assert_close(indices, expected.indices)


def test_tensor_list_result_spreads_over_results() -> None:
    module = parse(
        """
        func.func @forward(%x: tensor<7x2xf32>) -> (tensor<3x2xf32>, tensor<3x2xf32>, tensor<1x2xf32>) {
          %0, %1, %2 = aten.split.Tensor(%x, split_size = 3) : (tensor<7x2xf32>) -> (tensor<3x2xf32>, tensor<3x2xf32>, tensor<1x2xf32>)
          func.return %0, %1, %2 : tensor<3x2xf32>, tensor<3x2xf32>, tensor<1x2xf32>
        }
        """
    )
    x = torch.randn(7, 2)
    outs = run_function(module, [x])
    for out, ref in zip(outs, torch.split(x, 3), strict=True):
        assert_close(out, ref)


def test_generic_op_without_generated_class() -> None:
    module = parse(
        """
        func.func @forward(%x: tensor<4x5xf32>) -> (tensor<4x5xf32>, tensor<5xf32>, tensor<5xf32>) {
          %0 = aten.generic "aten::logit.default"(%x, eps = 0.125) : (tensor<4x5xf32>) -> tensor<4x5xf32>
          %1, %2 = aten.generic "aten::aminmax.default"(%x, dim = 0) : (tensor<4x5xf32>) -> (tensor<5xf32>, tensor<5xf32>)
          func.return %0, %1, %2 : tensor<4x5xf32>, tensor<5xf32>, tensor<5xf32>
        }
        """
    )
    x = torch.rand(4, 5)
    logit, low, high = run_function(module, [x])
    assert_close(logit, torch.logit(x, eps=0.125))
    expected = torch.aminmax(x, dim=0)
    assert_close(low, expected.min)
    assert_close(high, expected.max)


def test_generic_tensor_list_result() -> None:
    module = parse(
        """
        func.func @forward(%x: tensor<3x4xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) {
          %0, %1, %2, %3 = aten.generic "aten::unbind.int"(%x, dim = 1) : (tensor<3x4xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>)
          func.return %0, %1, %2, %3 : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
        }
        """
    )
    x = torch.randn(3, 4)
    outs = run_function(module, [x])
    for out, ref in zip(outs, torch.unbind(x, dim=1), strict=True):
        assert_close(out, ref)


def test_mutating_generic_op_keeps_value_semantics() -> None:
    module = parse(
        """
        func.func @forward(%x: tensor<6xf32>, %y: tensor<6xf32>) -> (tensor<6xf32>, tensor<6xf32>) {
          %0 = aten.generic "aten::add_.Tensor"(%x, %y, alpha = 2) : (tensor<6xf32>, tensor<6xf32>) -> tensor<6xf32>
          %1 = aten.mul.Tensor(%x, %y) : (tensor<6xf32>, tensor<6xf32>) -> tensor<6xf32>
          func.return %0, %1 : tensor<6xf32>, tensor<6xf32>
        }
        """
    )
    x, y = torch.randn(6), torch.randn(6)
    x_before = x.clone()
    added, product = run_function(module, [x, y])
    assert_close(added, x_before + 2 * y)
    assert_close(product, x_before * y)
    assert_close(x, x_before)


@pytest.mark.parametrize(
    ("literal", "mlir_type", "expected"),
    [
        (
            "dense<[[1.5, -2.0, 3.25], [0.5, 7.0, -1.0]]>",
            "tensor<2x3xf32>",
            torch.tensor([[1.5, -2.0, 3.25], [0.5, 7.0, -1.0]]),
        ),
        ("dense<[true, false, true]>", "tensor<3xi1>", torch.tensor([True, False, True])),
        ("dense<[1.5, -0.25]>", "tensor<2xf16>", torch.tensor([1.5, -0.25], dtype=torch.float16)),
        ("dense<[3.0, -1.5]>", "tensor<2xbf16>", torch.tensor([3.0, -1.5], dtype=torch.bfloat16)),
        ("dense<[7, -9000000000]>", "tensor<2xi64>", torch.tensor([7, -9000000000])),
        ("dense<[200, 3]>", "tensor<2xui8>", torch.tensor([200, 3], dtype=torch.uint8)),
        ("dense<2.5>", "tensor<2x2xf64>", torch.full((2, 2), 2.5, dtype=torch.float64)),
        ("dense<4.0>", "tensor<f32>", torch.tensor(4.0)),
    ],
)
def test_constant(literal: str, mlir_type: str, expected: torch.Tensor) -> None:
    module = parse(
        f"""
        func.func @forward() -> {mlir_type} {{
          %0 = aten.constant {literal} : {mlir_type}
          func.return %0 : {mlir_type}
        }}
        """
    )
    (out,) = run_function(module, [])
    assert isinstance(out, torch.Tensor)
    assert out.dtype == expected.dtype
    assert_close(out, expected, rtol=0, atol=0)


def test_constant_feeds_aten_ops() -> None:
    module = parse(
        """
        func.func @forward(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
          %c = aten.constant dense<[0.5, -1.0, 2.0]> : tensor<3xf32>
          %m = aten.constant dense<[[true, false, true], [false, false, true]]> : tensor<2x3xi1>
          %0 = aten.mul.Tensor(%x, %c) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
          %1 = aten.masked_fill.Scalar(%0, %m, value = -inf) : (tensor<2x3xf32>, tensor<2x3xi1>) -> tensor<2x3xf32>
          func.return %1 : tensor<2x3xf32>
        }
        """
    )
    x = torch.randn(2, 3)
    (out,) = run_function(module, [x])
    mask = torch.tensor([[True, False, True], [False, False, True]])
    assert_close(out, (x * torch.tensor([0.5, -1.0, 2.0])).masked_fill(mask, float("-inf")))


def test_a_zero_dim_constant_of_a_wider_dtype_is_a_wrapped_number() -> None:
    """``rsub(x, 0.5)`` of a 0-dim float32 ``x``, as AOTAutograd traces it: ``sub`` of a
    lifted float64 constant. The constant was a Python scalar (a wrapped number, which
    does not promote a float32 result to float64); found by the program fuzzer (session
    46: the interpreter raised that torch computed float64)."""
    module = parse(
        """
        func.func @forward(%x: tensor<f32>) -> tensor<f32> {
          %c = aten.constant dense<5.000000e-01> : tensor<f64>
          %0 = aten.sub.Tensor(%c, %x) : (tensor<f64>, tensor<f32>) -> tensor<f32>
          func.return %0 : tensor<f32>
        }
        """
    )
    x = torch.randn(())
    (out,) = run_function(module, [x])
    assert out.dtype == torch.float32
    assert_close(out, torch.rsub(x, 0.5))


SYM_ARITH = """
func.func @forward(%x: tensor<?x6xf32>, %k: index) -> (tensor<?x3xf32>, tensor<?x?xf32>, index, i64, i1) {
  %n = aten.sym_size.int(%x, dim = 0) : (tensor<?x6xf32>) -> index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c1 = arith.constant 1 : index
  %rows = arith.muli %n, %c2 : index
  %0 = aten.view.default(%x, size = [%rows, 3]) : (tensor<?x6xf32>, index) -> tensor<?x3xf32>
  %q = arith.floordivsi %k, %c3 : index
  %r = arith.remsi %k, %c3 : index
  %d = arith.divsi %k, %c2 : index
  %hi = arith.maxsi %q, %c1 : index
  %lo = arith.minsi %r, %c2 : index
  %sum = arith.addi %hi, %lo : index
  %cols = arith.subi %sum, %d : index
  %up = arith.ceildivsi %k, %c2 : index
  %cols2 = arith.addi %cols, %up : index
  %1 = aten.full.default(size = [%n, %cols2], fill_value = 1.5) : (index, index) -> tensor<?x?xf32>
  %wide = arith.index_cast %cols2 : index to i64
  %lt = arith.cmpi slt, %q, %r : index
  func.return %0, %1, %cols2, %wide, %lt : tensor<?x3xf32>, tensor<?x?xf32>, index, i64, i1
}
"""


@pytest.mark.parametrize(("rows", "k"), [(2, 7), (5, 11), (3, 4)])
def test_symint_arithmetic_on_index(rows: int, k: int) -> None:
    module = parse(SYM_ARITH)
    x = torch.randn(rows, 6)
    view, full, cols, wide, lt = run_function(module, [x, k])
    q, r, d = k // 3, k % 3, int(k / 2)
    expected_cols = max(q, 1) + min(r, 2) - d + -(-k // 2)
    assert_close(view, x.view(rows * 2, 3))
    assert_close(full, torch.full((rows, expected_cols), 1.5))
    assert cols == expected_cols
    assert wide == expected_cols
    assert lt is (q < r)


def test_symbolic_scalar_argument() -> None:
    module = parse(
        """
        func.func @forward(%x: tensor<4xf32>, %s: index) -> tensor<4xf32> {
          %0 = aten.mul.Scalar(%x, other = %s) : (tensor<4xf32>, index) -> tensor<4xf32>
          func.return %0 : tensor<4xf32>
        }
        """
    )
    x = torch.randn(4)
    (out,) = run(module, x, 3)
    assert_close(out, x * 3)


def test_func_call() -> None:
    module = parse(
        """
        func.func @double(%x: tensor<3xf32>) -> tensor<3xf32> {
          %0 = aten.add.Tensor(%x, %x) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
          func.return %0 : tensor<3xf32>
        }
        func.func @forward(%x: tensor<3xf32>) -> tensor<3xf32> {
          %0 = func.call @double(%x) : (tensor<3xf32>) -> tensor<3xf32>
          %1 = aten.relu.default(%0) : (tensor<3xf32>) -> tensor<3xf32>
          func.return %1 : tensor<3xf32>
        }
        """
    )
    x = torch.randn(3)
    (out,) = run_function(module, [x])
    assert_close(out, torch.relu(2 * x))


# --- diagnostics ---------------------------------------------------------------------

SIMPLE = """
func.func @forward(%x: tensor<2x3xf32>, %n: index) -> tensor<2x3xf32> {
  %0 = aten.neg.default(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %0 : tensor<2x3xf32>
}
"""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([torch.randn(2, 3)], "takes 2 arguments, got 1"),
        (
            [torch.randn(2, 3).double(), 1],
            "argument #0 must be tensor<2x3xf32>, got a torch.float64",
        ),
        ([torch.randn(3, 2), 1], "argument #0 must be tensor<2x3xf32>"),
        ([torch.randn(2, 3), torch.tensor(1)], "argument #1 must be index"),
        ([torch.randn(2, 3), 1.5], "argument #1 must be index, got float"),
    ],
)
def test_bad_arguments_are_reported(args: list[object], message: str) -> None:
    with pytest.raises(ArgumentError, match=message):
        run_function(parse(SIMPLE), args)


def test_unknown_function_is_reported() -> None:
    with pytest.raises(ArgumentError, match=r"no function @main \(functions: @forward\)"):
        run_function(parse(SIMPLE), [torch.randn(2, 3), 1], name="main")


def test_wrong_declared_type_is_reported_at_the_op() -> None:
    # The verifier rejects this IR (meta_check); the interpreter checks what it computes
    # on its own, for IR that skipped verification.
    from kiln.dialects.aten.meta_check import shape_checks

    with shape_checks(False):
        module = parse(
            """
            func.func @forward(%x: tensor<2x3xf32>) -> tensor<2x3xf16> {
              %0 = aten.neg.default(%x) : (tensor<2x3xf32>) -> tensor<2x3xf16>
              func.return %0 : tensor<2x3xf16>
            }
            """
        )
    with pytest.raises(
        DiagnosticException, match=r"declared tensor<2x3xf16>, but torch computed torch\.float32"
    ) as info:
        run_function(module, [torch.randn(2, 3)])
    assert "Error while interpreting op" in "".join(info.value.__notes__)


def test_torch_failure_is_reported_at_the_op() -> None:
    module = parse(
        """
        func.func @forward(%x: tensor<2x3xf32>, %s: index) -> tensor<?x4xf32> {
          %0 = aten.view.default(%x, size = [%s, 4]) : (tensor<2x3xf32>, index) -> tensor<?x4xf32>
          func.return %0 : tensor<?x4xf32>
        }
        """
    )
    with pytest.raises(
        DiagnosticException,
        match=r"aten.view.default: torch raised RuntimeError: shape '\[5, 4\]' is invalid for input of size 6",
    ) as info:
        run_function(module, [torch.randn(2, 3), 5])
    assert "Error while interpreting op" in "".join(info.value.__notes__)


SYM_FLOAT_BOOL = """
func.func @forward(%k: index, %f: f64) -> (index, index, f64, i1, i1, i64) {
  %c0 = arith.constant 0 : index
  %true = arith.constant true
  %ki = arith.index_cast %k : index to i64
  %kf = arith.sitofp %ki : i64 to f64
  %q = arith.divf %kf, %f : f64
  %fl = math.floor %q : f64
  %fli = arith.fptosi %fl : f64 to i64
  %floor = arith.index_cast %fli : i64 to index
  %ce = math.ceil %q : f64
  %cei = arith.fptosi %ce : f64 to i64
  %ceil = arith.index_cast %cei : i64 to index
  %neg = arith.negf %q : f64
  %pos = arith.cmpi sgt, %k, %c0 : index
  %not = arith.xori %pos, %true : i1
  %either = arith.ori %not, %pos : i1
  %ext = arith.extui %not : i1 to i64
  func.return %floor, %ceil, %neg, %not, %either, %ext : index, index, f64, i1, i1, i64
}
"""


@pytest.mark.parametrize(("k", "f"), [(7, 2.0), (-7, 2.0), (5, -0.75), (0, 3.5)])
def test_symfloat_and_symbool_arithmetic(k: int, f: float) -> None:
    floor, ceil, neg, not_pos, either, ext = run_function(parse(SYM_FLOAT_BOOL), [k, f])
    assert floor == math.floor(k / f)
    assert ceil == math.ceil(k / f)
    assert neg == -(k / f)
    assert not_pos is (not k > 0)
    assert either is True
    assert ext == int(not k > 0)


def test_generic_tensor_and_tensor_list_results_are_flattened() -> None:
    module = parse(
        """
        func.func @forward(%x: tensor<20x2xf32>) -> (tensor<3x4xf32>, tensor<4xf32>, tensor<5xf32>) {
          %0, %1, %2 = aten.generic "aten::histogramdd.default"(%x, bins = [3, 4]) : (tensor<20x2xf32>) -> (tensor<3x4xf32>, tensor<4xf32>, tensor<5xf32>)
          func.return %0, %1, %2 : tensor<3x4xf32>, tensor<4xf32>, tensor<5xf32>
        }
        """
    )
    x = torch.randn(20, 2)
    hist, edges0, edges1 = run_function(module, [x])
    expected = torch.histogramdd(x, bins=[3, 4])
    assert_close(hist, expected.hist)
    assert_close(edges0, expected.bin_edges[0])
    assert_close(edges1, expected.bin_edges[1])

"""The loop interpreter on hand-written IR: loads (strided, masked, indirect), scalar
semantics, every reduction kind, extern bodies and symbolic sizes, against torch."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser

from kiln.dialects.aten.interpreter import ArgumentError
from kiln.dialects.loop.interpreter import run_function
from kiln.registry import make_context


def parse(text: str) -> ModuleOp:
    module = Parser(make_context(), text).parse_module()
    module.verify()
    return module


def run(text: str, *args: object) -> tuple[object, ...]:
    return run_function(parse(text), list(args))


def test_transposed_masked_and_indirect_loads() -> None:
    text = """
func.func @forward(%x: memref<4x8xf32>, %w: memref<10x8xf32>, %t: memref<4xi64>) -> (memref<8x4xf32>, memref<4x8xf32>) {
  %0 = loop.pointwise [8, 4] (%x) : (memref<4x8xf32>) -> memref<8x4xf32> {
  ^bb0(%d0: index, %d1: index, %in0: memref<4x8xf32>):
    %1 = loop.load %in0["d0 + 8*d1"] : memref<4x8xf32>
    %2 = loop.index "d0 - 1"
    %3 = arith.constant 0 : index
    %4 = arith.cmpi sge, %2, %3 : index
    %5 = loop.load %in0["d0 + 8*d1 - 1"] if %4 else -1.5 : memref<4x8xf32>
    %6 = arith.addf %1, %5 : f32
    loop.yield %6 : f32
  }
  %1 = loop.pointwise [4, 8] (%w, %t) : (memref<10x8xf32>, memref<4xi64>) -> memref<4x8xf32> {
  ^bb0(%d0: index, %d1: index, %in0: memref<10x8xf32>, %in1: memref<4xi64>):
    %2 = loop.load %in1["d0"] : memref<4xi64>
    %3 = arith.index_cast %2 : i64 to index
    %4 = loop.load %in0["d1 + 8*i0"](%3) : memref<10x8xf32>
    loop.yield %4 : f32
  }
  func.return %0, %1 : memref<8x4xf32>, memref<4x8xf32>
}"""
    x, w = torch.randn(4, 8), torch.randn(10, 8)
    t = torch.randint(0, 10, (4,))
    transposed, gathered = run(text, x, w, t)
    shifted = torch.cat([torch.full((1, 4), -1.5), x.t()[:-1]])
    assert_close(transposed, x.t() + shifted)
    assert_close(gathered, w[t])


SCALARS = """
func.func @forward(%a: memref<6xi64>, %b: memref<6xi64>, %f: memref<6xf32>) -> (memref<6xf32>, memref<6xi64>, memref<6xi64>, memref<6xi64>, memref<6xi1>, memref<6xf32>, memref<6xf32>, memref<6xf32>) {
  %0 = loop.pointwise [6] (%a) : (memref<6xi64>) -> memref<6xf32> {
  ^bb0(%d0: index, %in0: memref<6xi64>):
    %1 = loop.load %in0["d0"] : memref<6xi64>
    %2 = arith.constant 0 : i64
    %3 = arith.cmpi sgt, %1, %2 : i64
    %4 = arith.sitofp %3 : i1 to f32
    loop.yield %4 : f32
  }
  %1 = loop.pointwise [6] (%a, %b) : (memref<6xi64>, memref<6xi64>) -> memref<6xi64> {
  ^bb0(%d0: index, %in0: memref<6xi64>, %in1: memref<6xi64>):
    %2 = loop.load %in0["d0"] : memref<6xi64>
    %3 = loop.load %in1["d0"] : memref<6xi64>
    %4 = arith.remsi %2, %3 : i64
    loop.yield %4 : i64
  }
  %2 = loop.pointwise [6] (%a, %b) : (memref<6xi64>, memref<6xi64>) -> memref<6xi64> {
  ^bb0(%d0: index, %in0: memref<6xi64>, %in1: memref<6xi64>):
    %3 = loop.load %in0["d0"] : memref<6xi64>
    %4 = loop.load %in1["d0"] : memref<6xi64>
    %5 = arith.divsi %3, %4 : i64
    loop.yield %5 : i64
  }
  %3 = loop.pointwise [6] (%a, %b) : (memref<6xi64>, memref<6xi64>) -> memref<6xi64> {
  ^bb0(%d0: index, %in0: memref<6xi64>, %in1: memref<6xi64>):
    %4 = loop.load %in0["d0"] : memref<6xi64>
    %5 = loop.load %in1["d0"] : memref<6xi64>
    %6 = arith.floordivsi %4, %5 : i64
    loop.yield %6 : i64
  }
  %4 = loop.pointwise [6] (%f) : (memref<6xf32>) -> memref<6xi1> {
  ^bb0(%d0: index, %in0: memref<6xf32>):
    %5 = loop.load %in0["d0"] : memref<6xf32>
    %6 = arith.cmpf une, %5, %5 : f32
    loop.yield %6 : i1
  }
  %5 = loop.pointwise [6] (%f) : (memref<6xf32>) -> memref<6xf32> {
  ^bb0(%d0: index, %in0: memref<6xf32>):
    %6 = loop.load %in0["d0"] : memref<6xf32>
    %7 = arith.constant 0.0 : f32
    %8 = arith.maximumf %6, %7 : f32
    loop.yield %8 : f32
  }
  %6 = loop.pointwise [6] (%f) : (memref<6xf32>) -> memref<6xf32> {
  ^bb0(%d0: index, %in0: memref<6xf32>):
    %7 = loop.load %in0["d0"] : memref<6xf32>
    %8 = math.round %7 : f32
    loop.yield %8 : f32
  }
  %7 = loop.pointwise [6] (%f) : (memref<6xf32>) -> memref<6xf32> {
  ^bb0(%d0: index, %in0: memref<6xf32>):
    %8 = loop.load %in0["d0"] : memref<6xf32>
    %9 = math.roundeven %8 : f32
    loop.yield %9 : f32
  }
  func.return %0, %1, %2, %3, %4, %5, %6, %7 : memref<6xf32>, memref<6xi64>, memref<6xi64>, memref<6xi64>, memref<6xi1>, memref<6xf32>, memref<6xf32>, memref<6xf32>
}"""


def test_scalar_ops_follow_mlir_semantics() -> None:
    a = torch.tensor([7, -7, 7, -7, 0, 3])
    b = torch.tensor([2, 2, -2, -2, 5, 3])
    f = torch.tensor([0.5, 1.5, -0.5, -2.5, float("nan"), 2.5])
    sign, rem, div, floordiv, nan, relu, rounded, even = run(SCALARS, a, b, f)
    # sitofp reads i1 as a signed 1-bit integer: true is -1.
    assert_close(sign, -(a > 0).float())
    assert_close(rem, torch.fmod(a, b))  # the dividend's sign
    assert_close(div, torch.div(a, b, rounding_mode="trunc"))
    assert_close(floordiv, torch.div(a, b, rounding_mode="floor"))
    assert_close(nan, torch.isnan(f))
    assert_close(relu, torch.maximum(f, torch.tensor(0.0)), equal_nan=True)
    assert_close(rounded, torch.tensor([1.0, 2.0, -1.0, -3.0, float("nan"), 3.0]), equal_nan=True)
    assert_close(even, torch.round(f), equal_nan=True)


def _reduction(kind: str, out_type: str, value_type: str = "f32", results: int = 1) -> str:
    outs = ", ".join([f"memref<4x{out_type}>"] * results)
    names = ", ".join(f"%r{k}" for k in range(results))
    return f"""
func.func @forward(%x: memref<4x3x5x{value_type}>) -> ({outs}) {{
  {names} = loop.reduction {kind} [4] reduce [3, 5] (%x) : (memref<4x3x5x{value_type}>) -> ({outs}) {{
  ^bb0(%d0: index, %r0: index, %r1: index, %in0: memref<4x3x5x{value_type}>):
    %1 = loop.load %in0["15*d0 + 5*r0 + r1"] : memref<4x3x5x{value_type}>
    loop.yield %1 : {value_type}
  }}
  func.return {names} : {outs}
}}"""


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("sum", lambda x: x.sum((1, 2))),
        ("prod", lambda x: x.prod(2).prod(1)),
        ("max", lambda x: x.amax((1, 2))),
        ("min", lambda x: x.amin((1, 2))),
    ],
)
def test_float_reductions(kind: str, expected: object) -> None:
    x = torch.randn(4, 3, 5)
    (out,) = run(_reduction(kind, "f32"), x)
    assert_close(out, expected(x))  # pyright: ignore[reportCallIssue]


@pytest.mark.parametrize("kind", ["argmax", "argmin"])
def test_arg_reductions_index_the_flattened_space(kind: str) -> None:
    x = torch.randn(4, 3, 5)
    (out,) = run(_reduction(kind, "i64"), x)
    assert_close(out, getattr(x.reshape(4, 15), kind)(1))


@pytest.mark.parametrize("kind", ["any", "all"])
def test_bool_reductions(kind: str) -> None:
    x = torch.rand(4, 3, 5) > 0.3
    (out,) = run(_reduction(kind, "i1", "i1"), x)
    assert_close(out, getattr(x.reshape(4, 15), kind)(1))


def test_welford_gives_mean_m2_and_count() -> None:
    x = torch.randn(4, 3, 5)
    mean, m2, count = run(_reduction("welford", "f32", results=3), x)
    flat = x.reshape(4, 15)
    assert_close(mean, flat.mean(1))
    assert_close(m2, flat.var(1, correction=0) * 15)
    assert_close(count, torch.full((4,), 15.0))


def test_extern_runs_aten_on_views_of_buffers() -> None:
    text = """
func.func @forward(%x: memref<4x8xf32>, %w: memref<3x8xf32>) -> memref<4x3xf32> {
  %0 = loop.extern (%x, %w) : (memref<4x8xf32>, memref<3x8xf32>) -> memref<4x3xf32> {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<3x8xf32>):
    %t = aten.as_strided.default(%b, size = [8, 3], stride = [1, 8]) : (tensor<3x8xf32>) -> tensor<8x3xf32>
    %c = aten.mm.default(%a, %t) : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
    loop.yield %c : tensor<4x3xf32>
  }
  func.return %0 : memref<4x3xf32>
}"""
    x, w = torch.randn(4, 8), torch.randn(3, 8)
    (out,) = run(text, x, w)
    assert_close(out, x @ w.t())


def test_symbolic_sizes() -> None:
    text = """
func.func @forward(%x: memref<?x8xf32>) -> memref<?xf32> {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?x8xf32>
  %0 = loop.reduction sum ["s0"] reduce [8] (%x) syms(%n) : (memref<?x8xf32>, index) -> memref<?xf32> {
  ^bb0(%d0: index, %r0: index, %in0: memref<?x8xf32>):
    %1 = loop.load %in0["8*d0 + r0"] : memref<?x8xf32>
    loop.yield %1 : f32
  }
  func.return %0 : memref<?xf32>
}"""
    module = parse(text)
    for rows in (3, 7):
        x = torch.randn(rows, 8)
        (out,) = run_function(module, [x])
        assert_close(out, x.sum(1))


def test_empty_spaces() -> None:
    x = torch.randn(4, 3, 0)
    (total,) = run(_reduction("sum", "f32").replace("3x5", "3x0").replace("[3, 5]", "[3, 0]"), x)
    assert_close(total, torch.zeros(4))
    (top,) = run(_reduction("max", "f32").replace("3x5", "3x0").replace("[3, 5]", "[3, 0]"), x)
    assert_close(top, torch.full((4,), float("-inf")))


def test_arguments_are_checked() -> None:
    text = _reduction("sum", "f32")
    with pytest.raises(ArgumentError, match=r"argument #0 must be memref<4x3x5xf32>"):
        run(text, torch.randn(4, 3, 6))
    with pytest.raises(ArgumentError, match="takes 1 arguments, got 2"):
        run(text, torch.randn(4, 3, 5), torch.randn(1))

"""The kernel interpreter: programs run equal to torch, memory is counted and poisoned."""

from __future__ import annotations

import pytest
import sympy
import torch
from torch.testing import assert_close
from xdsl.dialects.builtin import ArrayAttr, ModuleOp
from xdsl.parser import Parser

from kiln.dialects.aten.interpreter import ArgumentError
from kiln.dialects.kernel import KernelOp
from kiln.dialects.kernel.consistency import kernel_problems
from kiln.dialects.kernel.interpreter import poison, run_program
from kiln.dialects.loop import IndexExprAttr
from kiln.dialects.loop.expr import index_var
from kiln.registry import make_context

SOFTMAX_MM = """
kernel.kernel @softmax reduction [4] x [8] (%x: memref<4x8xf32>) -> (memref<4x8xf32>) {
  %m = loop.reduction max [4] reduce [8] (%x) {kernel.vars = [#loop.expr<"d0">, #loop.expr<"r0">]} : (memref<4x8xf32>) -> memref<4xf32> {
  ^bb0(%d0: index, %r0: index, %in0: memref<4x8xf32>):
    %v = loop.load %in0["8*d0 + r0"] : memref<4x8xf32>
    loop.yield %v : f32
  }
  %e = loop.pointwise [4, 8] (%x, %m) {kernel.vars = [#loop.expr<"d0">, #loop.expr<"r0">]} : (memref<4x8xf32>, memref<4xf32>) -> memref<4x8xf32> {
  ^bb0(%d0: index, %d1: index, %in0: memref<4x8xf32>, %in1: memref<4xf32>):
    %a = loop.load %in0["8*d0 + d1"] : memref<4x8xf32>
    %b = loop.load %in1["d0"] : memref<4xf32>
    %c = arith.subf %a, %b : f32
    %d = math.exp %c : f32
    loop.yield %d : f32
  }
  %s = loop.reduction sum [4] reduce [8] (%e) {kernel.vars = [#loop.expr<"d0">, #loop.expr<"r0">]} : (memref<4x8xf32>) -> memref<4xf32> {
  ^bb0(%d0: index, %r0: index, %in0: memref<4x8xf32>):
    %v = loop.load %in0["8*d0 + r0"] : memref<4x8xf32>
    loop.yield %v : f32
  }
  %y = loop.pointwise [4, 8] (%e, %s) {kernel.vars = [#loop.expr<"d0">, #loop.expr<"r0">]} : (memref<4x8xf32>, memref<4xf32>) -> memref<4x8xf32> {
  ^bb0(%d0: index, %d1: index, %in0: memref<4x8xf32>, %in1: memref<4xf32>):
    %a = loop.load %in0["8*d0 + d1"] : memref<4x8xf32>
    %b = loop.load %in1["d0"] : memref<4xf32>
    %c = arith.divf %a, %b : f32
    loop.yield %c : f32
  }
  kernel.yield %y : memref<4x8xf32>
}
kernel.program @forward(%x: memref<4x8xf32>, %w: memref<8x8xf32>) -> (memref<4x8xf32>, memref<4x8xf32>) {
  %m = kernel.extern (%x, %w) : (memref<4x8xf32>, memref<8x8xf32>) -> memref<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<8x8xf32>):
    %c = aten.mm.default(%a, %b) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    kernel.yield %c : tensor<4x8xf32>
  }
  %first = kernel.alloc : memref<4x8xf32>
  kernel.launch @softmax(%m) outs(%first) : (memref<4x8xf32>) -> (memref<4x8xf32>)
  kernel.launch @softmax(%m) outs(%m) : (memref<4x8xf32>) -> (memref<4x8xf32>)
  kernel.return %first, %m : memref<4x8xf32>, memref<4x8xf32>
}
"""


def parse(text: str) -> ModuleOp:
    module = Parser(make_context(), text).parse_module()
    module.verify()
    return module


def test_program_equals_torch() -> None:
    module = parse(SOFTMAX_MM)
    x, w = torch.randn(4, 8), torch.randn(8, 8)
    (first, in_place), trace = run_program(module, [x, w])
    expected = torch.softmax(x @ w, dim=-1)
    assert_close(first, expected)
    # The second launch writes into its own input: every node reads %m before the
    # last one overwrites it, so the result is the same.
    assert_close(in_place, expected)
    assert (trace.allocations, trace.peak, trace.live) == (2, 2 * 128, 2 * 128)


def test_in_place_hazard_is_visible() -> None:
    # A node that reads the input after another node of the kernel overwrote it gets the
    # new values: the interpreter copies each yielded value as soon as its node ran.
    module = parse(
        """
        kernel.kernel @k pointwise [4] x [1] (%x: memref<4xf32>) -> (memref<4xf32>, memref<4xf32>) {
          %a = loop.pointwise [4] (%x) {kernel.vars = [#loop.expr<"d0">]} : (memref<4xf32>) -> memref<4xf32> {
          ^bb0(%d0: index, %in0: memref<4xf32>):
            %v = loop.load %in0["d0"] : memref<4xf32>
            %c = arith.constant 1.0 : f32
            %w = arith.addf %v, %c : f32
            loop.yield %w : f32
          }
          %b = loop.pointwise [4] (%x) {kernel.vars = [#loop.expr<"d0">]} : (memref<4xf32>) -> memref<4xf32> {
          ^bb0(%d0: index, %in0: memref<4xf32>):
            %v = loop.load %in0["d0"] : memref<4xf32>
            loop.yield %v : f32
          }
          kernel.yield %a, %b : memref<4xf32>, memref<4xf32>
        }
        kernel.program @forward(%x: memref<4xf32>) -> memref<4xf32> {
          %buf = kernel.alloc : memref<4xf32>
          %copy = kernel.alloc : memref<4xf32>
          kernel.launch @k(%x) outs(%buf, %copy) : (memref<4xf32>) -> (memref<4xf32>, memref<4xf32>)
          %out = kernel.alloc : memref<4xf32>
          kernel.launch @k(%buf) outs(%buf, %out) : (memref<4xf32>) -> (memref<4xf32>, memref<4xf32>)
          kernel.free %copy : memref<4xf32>
          kernel.return %out : memref<4xf32>
        }
        """
    )
    x = torch.randn(4)
    (out,), trace = run_program(module, [x])
    assert_close(out, x + 2)  # not x + 1: %b read %buf after %a overwrote it
    assert trace.live == 2 * 16
    assert trace.peak == 3 * 16


def test_freed_and_fresh_memory_is_poisoned() -> None:
    for dtype in (torch.float32, torch.int64, torch.bool, torch.uint8):
        tensor = torch.zeros(3, dtype=dtype)
        poison(tensor)
        assert not torch.equal(tensor, torch.zeros(3, dtype=dtype))


def test_reuse_is_a_view_of_the_old_memory() -> None:
    module = parse(
        """
        kernel.kernel @neg pointwise [4] x [1] (%x: memref<2x2xf32>) -> (memref<4xf32>) {
          %a = loop.pointwise [4] (%x) {kernel.vars = [#loop.expr<"d0">]} : (memref<2x2xf32>) -> memref<4xf32> {
          ^bb0(%d0: index, %in0: memref<2x2xf32>):
            %v = loop.load %in0["d0"] : memref<2x2xf32>
            %n = arith.negf %v : f32
            loop.yield %n : f32
          }
          kernel.yield %a : memref<4xf32>
        }
        kernel.program @forward(%x: memref<2x2xf32>) -> memref<4xf32> {
          %buf = kernel.alloc : memref<4xf32>
          kernel.launch @neg(%x) outs(%buf) : (memref<2x2xf32>) -> (memref<4xf32>)
          %square = kernel.reuse %buf : memref<4xf32> -> memref<2x2xf32>
          %out = kernel.alloc : memref<4xf32>
          kernel.launch @neg(%x) outs(%square) : (memref<2x2xf32>) -> (memref<2x2xf32>)
          kernel.launch @neg(%square) outs(%out) : (memref<2x2xf32>) -> (memref<4xf32>)
          kernel.free %square : memref<2x2xf32>
          kernel.return %out : memref<4xf32>
        }
        """
    )
    x = torch.randn(2, 2)
    (out,), trace = run_program(module, [x])
    assert_close(out, x.reshape(-1))
    assert (trace.allocations, trace.reuses, trace.peak) == (2, 1, 32)


def test_argument_errors() -> None:
    module = parse(SOFTMAX_MM)
    with pytest.raises(ArgumentError, match="takes 2 arguments, got 1"):
        run_program(module, [torch.randn(4, 8)])
    with pytest.raises(ArgumentError, match=r"argument #1 must be memref<8x8xf32>"):
        run_program(module, [torch.randn(4, 8), torch.randn(8, 4)])
    with pytest.raises(ArgumentError, match=r"no kernel\.program @other"):
        run_program(module, [torch.randn(4, 8), torch.randn(8, 8)], "other")


def test_consistency_check_catches_a_misplaced_read() -> None:
    # %t reads %a transposed: right in the interpreter (whole nodes one after the
    # other), wrong for a backend that runs both nodes at each point.
    module = parse(
        """
        kernel.kernel @k pointwise [16] x [1] (%x: memref<4x4xf32>) -> (memref<4x4xf32>) {
          %a = loop.pointwise [4, 4] (%x) {kernel.vars = [#loop.expr<"d0 // 4">, #loop.expr<"d0 % 4">]} : (memref<4x4xf32>) -> memref<4x4xf32> {
          ^bb0(%d0: index, %d1: index, %in0: memref<4x4xf32>):
            %v = loop.load %in0["4*d0 + d1"] : memref<4x4xf32>
            loop.yield %v : f32
          }
          %t = loop.pointwise [4, 4] (%a) {kernel.vars = [#loop.expr<"d0 // 4">, #loop.expr<"d0 % 4">]} : (memref<4x4xf32>) -> memref<4x4xf32> {
          ^bb0(%d0: index, %d1: index, %in0: memref<4x4xf32>):
            %v = loop.load %in0["d0 + 4*d1"] : memref<4x4xf32>
            loop.yield %v : f32
          }
          kernel.yield %t : memref<4x4xf32>
        }
        """
    )
    kernel = next(iter(module.ops))
    assert isinstance(kernel, KernelOp)
    assert kernel_problems(kernel) == [
        '%t reads %a\'s value at "d0 + 4*d1", not where it is computed'
    ]
    vars_ = kernel.nodes()[0].attributes
    vars_["kernel.vars"] = ArrayAttr([IndexExprAttr(sympy.Integer(0)), IndexExprAttr(index_var(0))])
    assert kernel_problems(kernel)[0] == "%a: kernel.vars do not enumerate its space row-major"

"""``dot-kernels`` and what it leads to: marked products lower to ``kiln.dot`` sums, the
scheduler gives them their pointwise epilogue only, and every step computes the same
numbers (kiln's interpreters). The Triton side: tests/backends/triton/test_triton_dot_kernels.py."""

from __future__ import annotations

import pytest
import torch
from pass_checks import parse, run_pass
from xdsl.dialects.builtin import ModuleOp

from kiln.dialects.kernel.interpreter import run_program
from kiln.dialects.kernel.kernel_ops import KernelOp
from kiln.dialects.loop.dot import dot_operands, is_dot
from kiln.dialects.loop.interpreter import run_function as run_loops
from kiln.dialects.loop.ops import ReductionOp
from kiln.interpret import run_function as run_aten
from kiln.passes.dot_kernels import DotKernelsError, DotKernelsPass
from kiln.passes.fuse import FusePass
from kiln.passes.lower_aten import LowerAtenPass
from kiln.passes.tile import TilePass
from kiln.registry import default_registry

PROGRAM = """
builtin.module attributes {kiln.device = "cuda:0"} {
  func.func @f(%b: tensor<24xbf16>, %x: tensor<40x48xbf16>, %w: tensor<24x48xbf16>, %r: tensor<40x24xbf16>) -> (tensor<40x24xbf16>, tensor<40xbf16>) {
    %t = aten.t.default(%w) : (tensor<24x48xbf16>) -> tensor<48x24xbf16>
    %0 = aten.addmm.default(%b, %x, %t) : (tensor<24xbf16>, tensor<40x48xbf16>, tensor<48x24xbf16>) -> tensor<40x24xbf16>
    %1 = aten.relu.default(%0) : (tensor<40x24xbf16>) -> tensor<40x24xbf16>
    %2 = aten.add.Tensor(%1, %r) : (tensor<40x24xbf16>, tensor<40x24xbf16>) -> tensor<40x24xbf16>
    %3 = aten.sum.dim_IntList(%2, dim = [1]) : (tensor<40x24xbf16>) -> tensor<40xbf16>
    func.return %2, %3 : tensor<40x24xbf16>, tensor<40xbf16>
  }
}
"""


def _inputs() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    shapes = [(24,), (40, 48), (24, 48), (40, 24)]
    return [torch.randn(s, generator=generator).bfloat16() for s in shapes]


def _assert_computes_the_aten_numbers(module: ModuleOp, level: str) -> None:
    """``module`` (loop or kernel level) gives the aten program's results: the sum in
    float32 with one rounding, within a bfloat16 unit of eager's (its bias added after
    rounding the product)."""
    inputs = _inputs()
    want = run_aten(parse(PROGRAM), [x.clone() for x in inputs], "f")
    if level == "loop":
        got = run_loops(module, [x.clone() for x in inputs], "f")
    else:
        got, _ = run_program(module, [x.clone() for x in inputs], "f")
    assert len(got) == len(want) == 2
    for g, w in zip(got, want, strict=True):
        assert isinstance(g, torch.Tensor)
        assert isinstance(w, torch.Tensor)
        torch.testing.assert_close(g.float(), w.float(), rtol=2e-2, atol=5e-2)


def test_registered() -> None:
    assert default_registry().get_pass("dot-kernels") is DotKernelsPass


def test_a_bad_mode_is_an_error() -> None:
    with pytest.raises(DotKernelsError, match="mode='fast'"):
        run_pass(DotKernelsPass(mode="fast"), PROGRAM)


def test_marked_product_lowers_to_a_dot_sum_with_the_same_numbers() -> None:
    _, marked = run_pass(DotKernelsPass(mode="half"), PROGRAM)
    assert "kiln.dot_kernel" in str(marked)
    lowered = parse(str(marked))
    LowerAtenPass().apply(default_registry().make_context(), lowered)
    products = [op for op in lowered.walk() if isinstance(op, ReductionOp) and is_dot(op)]
    assert len(products) == 1
    operands = dot_operands(products[0])
    assert operands is not None
    # the left operand is x[d0, r0]; the right one, w transposed, reads w[d1, r0]
    assert str(operands.lhs.index.data) == "48*d0 + r0"
    assert str(operands.rhs.index.data) == "48*d1 + r0"
    assert "extern" not in str(lowered)
    _assert_computes_the_aten_numbers(lowered, "loop")


def test_the_kernel_takes_the_epilogue_but_not_the_row_sum() -> None:
    _, marked = run_pass(DotKernelsPass(mode="half"), PROGRAM)
    module = parse(str(marked))
    ctx = default_registry().make_context()
    for pass_ in (LowerAtenPass(), FusePass(), TilePass()):
        pass_.apply(ctx, module)
    kernels = [k for k in module.ops if isinstance(k, KernelOp)]
    kinds = sorted(str(k.kernel_kind) for k in kernels)
    assert kinds == ["matmul", "persistent"], kinds
    (matmul,) = [k for k in kernels if str(k.kernel_kind) == "matmul"]
    # the product, the bias add with its rounding, ReLU and the residual add
    assert sum(1 for _ in matmul.nodes()) >= 2
    assert matmul.ynumel is not None
    assert str(matmul.ynumel.data) == "40"
    _assert_computes_the_aten_numbers(module, "kernel")


def test_a_sum_of_products_of_the_user_s_is_no_dot() -> None:
    """A matrix-vector sum written out by the user stays a plain reduction: only
    products dot-kernels chose are matrix products to the scheduler."""
    text = """
    func.func @f(%x: tensor<8x16xf32>, %v: tensor<16xf32>) -> tensor<8xf32> {
      %0 = aten.mul.Tensor(%x, %v) : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
      %1 = aten.sum.dim_IntList(%0, dim = [1]) : (tensor<8x16xf32>) -> tensor<8xf32>
      func.return %1 : tensor<8xf32>
    }
    """
    module = parse(text)
    LowerAtenPass().apply(default_registry().make_context(), module)
    assert not any(isinstance(op, ReductionOp) and is_dot(op) for op in module.walk())

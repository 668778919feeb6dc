"""``loop.scatter``: syntax round trip, verifier, and its semantics in the loop and kernel
interpreters (duplicate positions add up, out-of-range indices raise)."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser
from xdsl.utils.exceptions import VerifyException

from kiln.dialects.loop import ScatterOp
from kiln.dialects.loop.body_ops import IndexOutOfBounds
from kiln.dialects.loop.interpreter import run_function
from kiln.registry import make_context

SCATTER = """\
builtin.module {
  func.func @forward(%idx: memref<6xi64>, %src: memref<6x8xf32>) -> memref<10x8xf32> {
    %0 = loop.scatter sum [6, 8] into [10, 8] at "d1 + 8*i0" (%idx, %src) : (memref<6xi64>, memref<6x8xf32>) -> memref<10x8xf32> {
    ^bb0(%d0: index, %d1: index, %in0: memref<6xi64>, %in1: memref<6x8xf32>):
      %1 = loop.load %in0["d0"] : memref<6xi64>
      %2 = arith.index_cast %1 : i64 to index
      %3 = loop.check_index %2 < "10"
      %4 = loop.load %in1["8*d0 + d1"] : memref<6x8xf32>
      loop.yield %4, %3 : f32, index
    }
    func.return %0 : memref<10x8xf32>
  }
}"""


def parse(text: str) -> ModuleOp:
    module = Parser(make_context(), text).parse_module()
    module.verify()
    return module


def test_round_trip() -> None:
    module = parse(SCATTER)
    assert str(module) == SCATTER
    op = next(o for o in module.walk() if isinstance(o, ScatterOp))
    assert op.indices_yielded() == 1
    assert [s.text for s in op.result_sizes_list()] == ["10", "8"]
    assert str(parse(str(module))) == SCATTER


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("sum [6, 8]", "max [6, 8]", "only sum is supported"),
        ('at "d1 + 8*i0"', 'at "d1 + 8*i1"', "uses i1, which is not defined here"),
        ('at "d1 + 8*i0"', 'at "r0 + 8*i0"', "uses r0, which is not defined here"),
        ("loop.yield %4, %3 : f32, index", "loop.yield %4, %1 : f32, i64", "are indices"),
        ("into [10, 8]", "into [10, 9]", "does not match result type"),
    ],
)
def test_verifier_rejects(old: str, new: str, message: str) -> None:
    assert old in SCATTER
    with pytest.raises(VerifyException, match=message):
        parse(SCATTER.replace(old, new))


def test_interpreter_adds_duplicates() -> None:
    idx = torch.tensor([3, 0, 3, 9, 3, 0])
    src = torch.randn(6, 8)
    (out,) = run_function(parse(SCATTER), [idx, src])
    expected = torch.zeros(10, 8).index_add_(0, idx, src)
    assert_close(out, expected)


def test_interpreter_raises_on_an_index_out_of_range() -> None:
    with pytest.raises(IndexOutOfBounds, match="index 10 is out of bounds"):
        run_function(parse(SCATTER), [torch.tensor([0, 1, 10, 2, 3, 4]), torch.randn(6, 8)])


def test_kernel_interpreter_accumulates_after_the_zero_fill() -> None:
    """``fuse`` launches a zero fill, then the scatter kernel adds into the buffer; the
    kernel interpreter (poisoned allocations) gives eager's sums."""
    from kiln.dialects.kernel.interpreter import run_program
    from kiln.dialects.kernel.kernel_ops import KernelOp
    from kiln.registry import default_registry

    module = parse(SCATTER)
    registry = default_registry()
    ctx = registry.make_context()
    for name in ("fuse", "tile", "buffer-reuse"):
        registry.get_pass(name)().apply(ctx, module)
    module.verify()
    kernels = [k for k in module.walk() if isinstance(k, KernelOp)]
    assert len(kernels) == 2  # the zero fill, then the scatter
    idx = torch.tensor([3, 0, 3, 9, 3, 0])
    src = torch.randn(6, 8)
    (out,), _ = run_program(module, [idx, src])
    assert_close(out, torch.zeros(10, 8).index_add_(0, idx, src))

"""fuse on a GPU: tiny independent pointwise kernels of one size run as one kernel
(:mod:`kiln.passes.scheduling.tiny_kernels`).

A training step's ``num_batches_tracked += 1`` is a one-element kernel per batch norm
that shares no buffer with anything; on the GPU they merge (and compute the same), on
the CPU they stay apart, and two that a path connects (here through an extern call)
never merge.
"""

from __future__ import annotations

import pytest
import torch
from fuse_checks import assert_schedule_preserves, launches, parse, schedule

COUNTER = """
  %{name} = loop.pointwise [] (%{arg}) : (memref<i64>) -> memref<i64> {{
  ^bb0(%in0: memref<i64>):
    %0 = loop.load %in0["0"] : memref<i64>
    %1 = arith.constant 1 : i64
    %2 = arith.addi %0, %1 : i64
    loop.yield %2 : i64
  }}"""


def _counters(device: str) -> str:
    bodies = "".join(COUNTER.format(name=f"n{k}", arg=f"c{k}") for k in range(3))
    return f"""
builtin.module attributes {{kiln.device = "{device}"}} {{
  func.func @forward(%c0: memref<i64>, %c1: memref<i64>, %c2: memref<i64>, %x: memref<64x32xf32>) -> (memref<i64>, memref<i64>, memref<i64>, memref<32xf32>) {{
    {bodies}
    %s = loop.reduction sum [32] reduce [64] (%x) : (memref<64x32xf32>) -> memref<32xf32> {{
    ^bb0(%d0: index, %r0: index, %in0: memref<64x32xf32>):
      %0 = loop.load %in0["32*r0 + d0"] : memref<64x32xf32>
      loop.yield %0 : f32
    }}
    func.return %n0, %n1, %n2, %s : memref<i64>, memref<i64>, memref<i64>, memref<32xf32>
  }}
}}
"""


def _inputs() -> list[torch.Tensor]:
    counters = [torch.tensor(k + 3, dtype=torch.int64) for k in range(3)]
    return [*counters, torch.randn(64, 32)]


@pytest.mark.parametrize(("device", "kernels"), [("cuda", 2), ("cpu", 4)])
def test_independent_counters_share_a_kernel_on_the_gpu(device: str, kernels: int) -> None:
    scheduled, _ = assert_schedule_preserves(parse(_counters(device)), "fuse", inputs=_inputs())
    assert len(launches(scheduled)) == kernels


def test_counters_a_path_connects_stay_apart() -> None:
    text = """
builtin.module attributes {kiln.device = "cuda"} {
  func.func @forward(%c: memref<1x4xf32>, %w: memref<4x4xf32>) -> memref<1x4xf32> {
    %a = loop.pointwise [1, 4] (%c) : (memref<1x4xf32>) -> memref<1x4xf32> {
    ^bb0(%d0: index, %d1: index, %in0: memref<1x4xf32>):
      %0 = loop.load %in0["4*d0 + d1"] : memref<1x4xf32>
      %1 = arith.addf %0, %0 : f32
      loop.yield %1 : f32
    }
    %mm = loop.extern (%a, %w) : (memref<1x4xf32>, memref<4x4xf32>) -> memref<1x4xf32> {
    ^bb0(%0: tensor<1x4xf32>, %1: tensor<4x4xf32>):
      %mm_1 = aten.mm.default(%0, %1) : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
      loop.yield %mm_1 : tensor<1x4xf32>
    }
    %b = loop.pointwise [1, 4] (%mm) : (memref<1x4xf32>) -> memref<1x4xf32> {
    ^bb0(%d0: index, %d1: index, %in0: memref<1x4xf32>):
      %0 = loop.load %in0["4*d0 + d1"] : memref<1x4xf32>
      %1 = arith.mulf %0, %0 : f32
      loop.yield %1 : f32
    }
    func.return %b : memref<1x4xf32>
  }
}
"""
    scheduled, _ = assert_schedule_preserves(parse(text), "fuse")
    assert len(launches(scheduled)) == 2


def test_the_report_names_the_merge(capsys: pytest.CaptureFixture[str]) -> None:
    schedule(parse(_counters("cuda")), "fuse{report=true}")
    assert "fused (horizontal, tiny kernels of 1 points)" in capsys.readouterr().err

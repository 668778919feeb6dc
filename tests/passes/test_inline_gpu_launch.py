"""inline-producers on a GPU: a producer whose own kernel costs more than the traffic
that recomputing it adds is recomputed (``GPU_LAUNCH_BYTES``).

ReLU's backward in a CNN's training step: ``x <= 0`` is a bool mask that the batch
norm's per-channel reduction and the input gradient both read. By bytes alone, storing
one byte per element beats re-reading the four-byte activation twice, so the mask was a
kernel of its own per batch norm (ResNet-18: a dozen launches a step); Inductor
recomputes it in both consumers. On the CPU, and on a GPU once the tensor is large,
bytes decide as before.
"""

from __future__ import annotations

import pytest
from fuse_checks import assert_schedule_preserves, launches, parse, schedule
from xdsl.dialects.builtin import IntegerType, MemRefType, ModuleOp

from kiln.dialects.loop.ops import PointwiseOp


def _module(batch: int, side: int, device: str) -> ModuleOp:
    c, hw = 16, side * side
    shape = f"{batch}x{c}x{side}x{side}"
    index = f"{c * hw}*d0 + {hw}*d1 + {side}*d2 + d3"
    reduced = f"{hw}*d0 + {c * hw}*r0 + {side}*r1 + r2"
    return parse(f"""
builtin.module attributes {{kiln.device = "{device}"}} {{
  func.func @forward(%x: memref<{shape}xf32>, %g: memref<{shape}xf32>, %m: memref<{c}xf32>) -> (memref<{c}xf32>, memref<{shape}xf32>) {{
    %le = loop.pointwise [{batch}, {c}, {side}, {side}] (%x) : (memref<{shape}xf32>) -> memref<{shape}xi1> {{
    ^bb0(%d0: index, %d1: index, %d2: index, %d3: index, %in0: memref<{shape}xf32>):
      %0 = loop.load %in0["{index}"] : memref<{shape}xf32>
      %1 = arith.constant 0.000000e+00 : f32
      %2 = arith.cmpf ole, %0, %1 : f32
      loop.yield %2 : i1
    }}
    %s = loop.reduction sum [{c}] reduce [{batch}, {side}, {side}] (%le, %g) : (memref<{shape}xi1>, memref<{shape}xf32>) -> memref<{c}xf32> {{
    ^bb0(%d0: index, %r0: index, %r1: index, %r2: index, %in0: memref<{shape}xi1>, %in1: memref<{shape}xf32>):
      %0 = loop.load %in0["{reduced}"] : memref<{shape}xi1>
      %1 = loop.load %in1["{reduced}"] : memref<{shape}xf32>
      %2 = arith.constant 0.000000e+00 : f32
      %3 = arith.select %0, %2, %1 : f32
      loop.yield %3 : f32
    }}
    %dx = loop.pointwise [{batch}, {c}, {side}, {side}] (%le, %g, %s, %m) : (memref<{shape}xi1>, memref<{shape}xf32>, memref<{c}xf32>, memref<{c}xf32>) -> memref<{shape}xf32> {{
    ^bb0(%d0: index, %d1: index, %d2: index, %d3: index, %in0: memref<{shape}xi1>, %in1: memref<{shape}xf32>, %in2: memref<{c}xf32>, %in3: memref<{c}xf32>):
      %0 = loop.load %in0["{index}"] : memref<{shape}xi1>
      %1 = loop.load %in1["{index}"] : memref<{shape}xf32>
      %2 = loop.load %in2["d1"] : memref<{c}xf32>
      %3 = loop.load %in3["d1"] : memref<{c}xf32>
      %4 = arith.constant 0.000000e+00 : f32
      %5 = arith.select %0, %4, %1 : f32
      %6 = arith.mulf %2, %3 : f32
      %7 = arith.subf %5, %6 : f32
      loop.yield %7 : f32
    }}
    func.return %s, %dx : memref<{c}xf32>, memref<{shape}xf32>
  }}
}}
""")


def _mask_kept(module: ModuleOp) -> bool:
    return any(
        isinstance(op, PointwiseOp)
        and isinstance(t := op.result.type, MemRefType)
        and t.element_type == IntegerType(1)
        for op in module.walk()
    )


@pytest.mark.parametrize(
    ("batch", "side", "device", "recomputed"),
    [
        (2, 16, "cuda", True),  # 8192 elements: 64 KB more to read than to store
        (2, 16, "cpu", False),  # bytes alone decide on the CPU
        (32, 112, "cuda", False),  # 6.4M elements: 45 MB more, worth a launch no longer
    ],
)
def test_relu_mask_recomputed_where_its_kernel_costs_more(
    batch: int, side: int, device: str, recomputed: bool
) -> None:
    module = schedule(_module(batch, side, device), "inline-producers")
    assert _mask_kept(module) != recomputed


def test_recomputed_mask_computes_the_same_in_fewer_kernels() -> None:
    kept, _ = assert_schedule_preserves(_module(2, 16, "cpu"), "inline-producers,fuse,tile")
    recomputed, _ = assert_schedule_preserves(_module(2, 16, "cuda"), "inline-producers,fuse,tile")
    assert len(launches(recomputed)) < len(launches(kept))

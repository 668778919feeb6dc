"""inline-producers: a producer recomputed in a reduction whose sibling reads its inputs.

Batch norm's backward reduces ``g`` and ``g * (x - m)`` per channel over one space. The
product is recomputed in the second reduction where the first already reads ``g`` (the
two fuse, sharing the reads; see tests/filecheck/loop/inline-producers.mlir), on the CPU
and on the GPU, where ``tile`` splits the fused pair like a single reduction (it once
split kernels of one reduction only, and the GPU kept the product stored).
"""

from __future__ import annotations

import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser

from kiln.dialects.loop.ops import PointwiseOp
from kiln.passes.inline_producers import InlineProducersPass
from kiln.registry import default_registry


def _module(batch: int, side: int, device: str) -> ModuleOp:
    c, hw = 32, side * side
    shape = f"{batch}x{c}x{side}x{side}xf32"
    index = f"{c * hw}*d0 + {hw}*d1 + {side}*d2 + d3"
    reduced = f"{hw}*d0 + {c * hw}*r0 + {side}*r1 + r2"
    text = f"""
builtin.module attributes {{kiln.device = "{device}"}} {{
  func.func @f(%g: memref<{shape}>, %x: memref<{shape}>, %m: memref<{c}xf32>) -> (memref<{c}xf32>, memref<{c}xf32>) {{
    %p = loop.pointwise [{batch}, {c}, {side}, {side}] (%g, %x, %m) : (memref<{shape}>, memref<{shape}>, memref<{c}xf32>) -> memref<{shape}> {{
    ^bb0(%d0: index, %d1: index, %d2: index, %d3: index, %in0: memref<{shape}>, %in1: memref<{shape}>, %in2: memref<{c}xf32>):
      %0 = loop.load %in0["{index}"] : memref<{shape}>
      %1 = loop.load %in1["{index}"] : memref<{shape}>
      %2 = loop.load %in2["d1"] : memref<{c}xf32>
      %3 = arith.subf %1, %2 : f32
      %4 = arith.mulf %0, %3 : f32
      loop.yield %4 : f32
    }}
    %s1 = loop.reduction sum [{c}] reduce [{batch}, {side}, {side}] (%g) : (memref<{shape}>) -> memref<{c}xf32> {{
    ^bb0(%d0: index, %r0: index, %r1: index, %r2: index, %in0: memref<{shape}>):
      %0 = loop.load %in0["{reduced}"] : memref<{shape}>
      loop.yield %0 : f32
    }}
    %s2 = loop.reduction sum [{c}] reduce [{batch}, {side}, {side}] (%p) : (memref<{shape}>) -> memref<{c}xf32> {{
    ^bb0(%d0: index, %r0: index, %r1: index, %r2: index, %in0: memref<{shape}>):
      %0 = loop.load %in0["{reduced}"] : memref<{shape}>
      loop.yield %0 : f32
    }}
    func.return %s1, %s2 : memref<{c}xf32>, memref<{c}xf32>
  }}
}}
"""
    return Parser(default_registry().make_context(), text).parse_module()


@pytest.mark.parametrize(
    ("batch", "side", "device", "recomputed"),
    [
        (8, 8, "cpu", True),
        (8, 8, "cuda", True),  # 512 per channel: never split
        (32, 112, "cpu", True),
        (32, 112, "cuda", True),  # 401408 per channel, 32 channels: split, both sums
    ],
)
def test_sibling_reads_count_on_either_device(
    batch: int, side: int, device: str, recomputed: bool
) -> None:
    module = _module(batch, side, device)
    InlineProducersPass().apply(default_registry().make_context(), module)
    module.verify()
    kept = any(isinstance(op, PointwiseOp) for op in module.walk())
    assert kept != recomputed

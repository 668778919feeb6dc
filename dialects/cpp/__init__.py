"""The cpp dialect: C++ with OpenMP as IR.

A ``cpp.func`` is one ``extern "C"`` kernel function; its body is ``cpp.for`` loop nests
(serial, OpenMP-parallel or SIMD), loads and stores at index expressions, local arrays
(``cpp.alloca``: vector accumulators, per-chunk partials, transposed tiles filled by
``cpp.transpose_tile``) and scalar ``arith``/``math`` ops, one C statement each. ``lower-to-cpp`` produces it from ``kernel.kernel``;
:mod:`kiln.backends.cpp.emit` prints it as C++.

```mlir
cpp.func @kernel0(%in_ptr0: memref<64xf32>) outs(%out_ptr0: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  cpp.for simd (%x0) = (%c0) to (%c64) {
    %0 = cpp.load %in_ptr0["i0"](%x0) : memref<64xf32>
    %1 = math.exp %0 : f32
    cpp.store %1, %out_ptr0["i0"](%x0) : memref<64xf32>
  }
  cpp.return
}
```
"""

from kiln.dialects.cpp.attributes import LoopKind, LoopKindAttr
from kiln.dialects.cpp.dialect import Cpp
from kiln.dialects.cpp.func_ops import FuncOp, ReturnOp
from kiln.dialects.cpp.loop_ops import ForOp, YieldOp
from kiln.dialects.cpp.memory_ops import (
    AllocaOp,
    AtomicAddOp,
    CheckIndexOp,
    IndexOp,
    LoadOp,
    StoreOp,
)
from kiln.dialects.cpp.tile_ops import TransposeTileOp

__all__ = [
    "AllocaOp",
    "AtomicAddOp",
    "CheckIndexOp",
    "Cpp",
    "ForOp",
    "FuncOp",
    "IndexOp",
    "LoadOp",
    "LoopKind",
    "LoopKindAttr",
    "ReturnOp",
    "StoreOp",
    "TransposeTileOp",
    "YieldOp",
]

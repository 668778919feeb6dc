// RUN: kiln-opt %s --fuse | filecheck %s

// fuse schedules loop-level IR into kernels: each func.func becomes a kernel.program that
// allocates buffers and launches kernel.kernels, calls ATen through kernel.extern, and
// returns its results. The input is loop IR (what lower-aten produces).

// A pointwise chain feeding a row reduction: one reduction kernel; the intermediate
// buffers disappear (the add and relu are computed where the sum reads them).
// CHECK:       kernel.kernel @kernel0 reduction [4] x [8] (%x: memref<4x8xf32>, %b: memref<8xf32>) -> (memref<4xf32>)
// CHECK:         loop.reduction sum [4] reduce [8]
// CHECK:           arith.addf
// CHECK:           arith.maximumf
// CHECK:         kernel.yield %sum : memref<4xf32>
// CHECK-LABEL: kernel.program @vertical(%x: memref<4x8xf32>, %b: memref<8xf32>) -> memref<4xf32>
// CHECK-NEXT:    %sum = kernel.alloc : memref<4xf32>
// CHECK-NEXT:    kernel.launch @kernel0(%x, %b) outs(%sum) : (memref<4x8xf32>, memref<8xf32>) -> (memref<4xf32>)
// CHECK-NEXT:    kernel.return %sum : memref<4xf32>

// An ATen call is never fused: the relu before it and the exp after it are kernels of
// their own, and the matrix product a kernel.extern between them.
// CHECK:       kernel.kernel @kernel1 pointwise [32] x [1] (%x: memref<4x8xf32>) -> (memref<4x8xf32>)
// CHECK:       kernel.kernel @kernel2 pointwise [32] x [1] (%mm: memref<4x8xf32>) -> (memref<4x8xf32>)
// CHECK-LABEL: kernel.program @extern(%x: memref<4x8xf32>, %w: memref<8x8xf32>) -> memref<4x8xf32>
// CHECK-NEXT:    %relu = kernel.alloc : memref<4x8xf32>
// CHECK-NEXT:    kernel.launch @kernel1(%x) outs(%relu)
// CHECK-NEXT:    %mm = kernel.extern (%relu, %w) : (memref<4x8xf32>, memref<8x8xf32>) -> memref<4x8xf32> {
// CHECK-NEXT:    ^bb0(%0: tensor<4x8xf32>, %1: tensor<8x8xf32>):
// CHECK-NEXT:      %mm_1 = aten.mm.default(%0, %1) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:      kernel.yield %mm_1 : tensor<4x8xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    %e = kernel.alloc : memref<4x8xf32>
// CHECK-NEXT:    kernel.launch @kernel2(%mm) outs(%e)
// CHECK-NEXT:    kernel.return %e : memref<4x8xf32>

func.func @vertical(%x: memref<4x8xf32>, %b: memref<8xf32>) -> memref<4xf32> {
  %add = loop.pointwise [4, 8] (%x, %b) : (memref<4x8xf32>, memref<8xf32>) -> memref<4x8xf32> {
  ^bb0(%d0: index, %d1: index, %in0: memref<4x8xf32>, %in1: memref<8xf32>):
    %0 = loop.load %in0["8*d0 + d1"] : memref<4x8xf32>
    %1 = loop.load %in1["d1"] : memref<8xf32>
    %2 = arith.addf %0, %1 : f32
    loop.yield %2 : f32
  }
  %relu = loop.pointwise [4, 8] (%add) : (memref<4x8xf32>) -> memref<4x8xf32> {
  ^bb0(%d0: index, %d1: index, %in0: memref<4x8xf32>):
    %0 = loop.load %in0["8*d0 + d1"] : memref<4x8xf32>
    %1 = arith.constant 0.000000e+00 : f32
    %2 = arith.maximumf %0, %1 : f32
    loop.yield %2 : f32
  }
  %sum = loop.reduction sum [4] reduce [8] (%relu) : (memref<4x8xf32>) -> memref<4xf32> {
  ^bb0(%d0: index, %r0: index, %in0: memref<4x8xf32>):
    %0 = loop.load %in0["8*d0 + r0"] : memref<4x8xf32>
    loop.yield %0 : f32
  }
  func.return %sum : memref<4xf32>
}
func.func @extern(%x: memref<4x8xf32>, %w: memref<8x8xf32>) -> memref<4x8xf32> {
  %relu = loop.pointwise [4, 8] (%x) : (memref<4x8xf32>) -> memref<4x8xf32> {
  ^bb0(%d0: index, %d1: index, %in0: memref<4x8xf32>):
    %0 = loop.load %in0["8*d0 + d1"] : memref<4x8xf32>
    %1 = arith.constant 0.000000e+00 : f32
    %2 = arith.maximumf %0, %1 : f32
    loop.yield %2 : f32
  }
  %mm = loop.extern (%relu, %w) : (memref<4x8xf32>, memref<8x8xf32>) -> memref<4x8xf32> {
  ^bb0(%0: tensor<4x8xf32>, %1: tensor<8x8xf32>):
    %mm_1 = aten.mm.default(%0, %1) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    loop.yield %mm_1 : tensor<4x8xf32>
  }
  %e = loop.pointwise [4, 8] (%mm) : (memref<4x8xf32>) -> memref<4x8xf32> {
  ^bb0(%d0: index, %d1: index, %in0: memref<4x8xf32>):
    %0 = loop.load %in0["8*d0 + d1"] : memref<4x8xf32>
    %1 = math.exp %0 : f32
    loop.yield %1 : f32
  }
  func.return %e : memref<4x8xf32>
}

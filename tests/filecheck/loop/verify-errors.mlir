// RUN: kiln-opt %s --split-input-file --verify-diagnostics | filecheck %s

// An index variable the op does not have.
func.func @unknown_variable(%x: memref<4xf32>) -> memref<4xf32> {
  %0 = loop.pointwise [4] (%x) : (memref<4xf32>) -> memref<4xf32> {
  ^bb0(%d0: index, %in0: memref<4xf32>):
    %1 = loop.load %in0["d1"] : memref<4xf32>
    loop.yield %1 : f32
  }
  func.return %0 : memref<4xf32>
}
// CHECK: {{.*}}verify-errors.mlir:[[# @LINE - 5]]:10: error: 'loop.load' op index 'd1' uses d1, but only 1 index variable(s) exist here
// CHECK-NEXT: %1 = loop.load %in0["d1"] : memref<4xf32>

// -----

// The body yields a value the buffer cannot hold.
func.func @yield_type(%x: memref<4xf32>) -> memref<4xi64> {
  %0 = loop.pointwise [4] (%x) : (memref<4xf32>) -> memref<4xi64> {
  ^bb0(%d0: index, %in0: memref<4xf32>):
    %1 = loop.load %in0["d0"] : memref<4xf32>
    loop.yield %1 : f32
  }
  func.return %0 : memref<4xi64>
}
// CHECK: {{.*}}verify-errors.mlir:[[# @LINE - 7]]:8: error: 'loop.pointwise' op body yields f32 but the buffer holds i64

// -----

// argmax produces i64 positions.
func.func @argmax_type(%x: memref<4x8xf32>) -> memref<4xf32> {
  %0 = loop.reduction argmax [4] reduce [8] (%x) : (memref<4x8xf32>) -> memref<4xf32> {
  ^bb0(%d0: index, %r0: index, %in0: memref<4x8xf32>):
    %1 = loop.load %in0["8*d0 + r0"] : memref<4x8xf32>
    loop.yield %1 : f32
  }
  func.return %0 : memref<4xf32>
}
// CHECK: {{.*}}verify-errors.mlir:[[# @LINE - 7]]:8: error: 'loop.reduction' op argmax produces i64, not f32

// -----

// A dimension's size cannot depend on the position.
func.func @check_index_position(%x: memref<4xf32>, %t: memref<4xi64>) -> memref<4xf32> {
  %0 = loop.pointwise [4] (%x, %t) : (memref<4xf32>, memref<4xi64>) -> memref<4xf32> {
  ^bb0(%d0: index, %in0: memref<4xf32>, %in1: memref<4xi64>):
    %1 = loop.load %in1["d0"] : memref<4xi64>
    %2 = arith.index_cast %1 : i64 to index
    %3 = loop.check_index %2 < "d0 + 1"
    %4 = loop.load %in0["i0"](%3) : memref<4xf32>
    loop.yield %4 : f32
  }
  func.return %0 : memref<4xf32>
}
// CHECK: {{.*}}verify-errors.mlir:[[# @LINE - 6]]:10: error: 'loop.check_index' op the size 'd0 + 1' may only use size variables (s<k>), not d0

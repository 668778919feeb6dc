// RUN: kiln-opt %s | kiln-opt | filecheck %s
// RUN: kiln-opt %s --print-op-generic | kiln-opt | filecheck %s

// CHECK-LABEL: func.func @forward
// CHECK-NEXT:    %0 = loop.pointwise [8, 4] (%x) : (memref<4x8xf32>) -> memref<8x4xf32> {
// CHECK-NEXT:    ^bb0(%d0: index, %d1: index, %in0: memref<4x8xf32>):
// CHECK-NEXT:      %1 = loop.load %in0["d0 + 8*d1"] : memref<4x8xf32>
// CHECK-NEXT:      %2 = loop.index "d0 - 1"
// CHECK-NEXT:      %3 = arith.constant 0 : index
// CHECK-NEXT:      %4 = arith.cmpi sge, %2, %3 : index
// CHECK-NEXT:      %5 = loop.load %in0["d0 + 8*d1 - 1"] if %4 else -inf : memref<4x8xf32>
// CHECK-NEXT:      %6 = arith.maximumf %1, %5 : f32
// CHECK-NEXT:      loop.yield %6 : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    %1, %2, %3 = loop.reduction welford [4] reduce [8] (%x) : (memref<4x8xf32>) -> (memref<4xf32>, memref<4xf32>, memref<4xf32>) {
// CHECK-NEXT:    ^bb0(%d0: index, %r0: index, %in0: memref<4x8xf32>):
// CHECK-NEXT:      %4 = loop.load %in0["8*d0 + r0"] : memref<4x8xf32>
// CHECK-NEXT:      loop.yield %4 : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    %4 = loop.pointwise ["s0", 8] (%w, %t) syms(%n) : (memref<10x8xf32>, memref<?xi64>, index) -> memref<?x8xf32> {
// CHECK-NEXT:    ^bb0(%d0: index, %d1: index, %in0: memref<10x8xf32>, %in1: memref<?xi64>):
// CHECK-NEXT:      %5 = loop.load %in1["d0"] : memref<?xi64>
// CHECK-NEXT:      %6 = arith.index_cast %5 : i64 to index
// CHECK-NEXT:      %7 = loop.check_index %6 < "10"
// CHECK-NEXT:      %8 = loop.load %in0["d1 + 8*i0"](%7) : memref<10x8xf32>
// CHECK-NEXT:      loop.yield %8 : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    %5 = loop.extern (%x) : (memref<4x8xf32>) -> memref<4xf32> {
// CHECK-NEXT:    ^bb0(%6: tensor<4x8xf32>):
// CHECK-NEXT:      %7 = aten.sum.dim_IntList(%6, dim = [1]) : (tensor<4x8xf32>) -> tensor<4xf32>
// CHECK-NEXT:      loop.yield %7 : tensor<4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %0, %2, %4, %5 : memref<8x4xf32>, memref<4xf32>, memref<?x8xf32>, memref<4xf32>
func.func @forward(%x: memref<4x8xf32>, %w: memref<10x8xf32>, %t: memref<?xi64>, %n: index) -> (memref<8x4xf32>, memref<4xf32>, memref<?x8xf32>, memref<4xf32>) {
  %0 = loop.pointwise [8, 4] (%x) : (memref<4x8xf32>) -> memref<8x4xf32> {
  ^bb0(%d0: index, %d1: index, %in0: memref<4x8xf32>):
    %1 = loop.load %in0["8*d1 + d0"] : memref<4x8xf32>
    %2 = loop.index "d0 - 1"
    %3 = arith.constant 0 : index
    %4 = arith.cmpi sge, %2, %3 : index
    %5 = loop.load %in0["d0 + 8*d1 - 1"] if %4 else -inf : memref<4x8xf32>
    %6 = arith.maximumf %1, %5 : f32
    loop.yield %6 : f32
  }
  %1, %2, %3 = loop.reduction welford [4] reduce [8] (%x) : (memref<4x8xf32>) -> (memref<4xf32>, memref<4xf32>, memref<4xf32>) {
  ^bb0(%d0: index, %r0: index, %in0: memref<4x8xf32>):
    %4 = loop.load %in0["8*d0 + r0"] : memref<4x8xf32>
    loop.yield %4 : f32
  }
  %4 = loop.pointwise ["s0", 8] (%w, %t) syms(%n) : (memref<10x8xf32>, memref<?xi64>, index) -> memref<?x8xf32> {
  ^bb0(%d0: index, %d1: index, %in0: memref<10x8xf32>, %in1: memref<?xi64>):
    %5 = loop.load %in1["d0"] : memref<?xi64>
    %6 = arith.index_cast %5 : i64 to index
    %7 = loop.check_index %6 < "10"
    %8 = loop.load %in0["d1 + 8*i0"](%7) : memref<10x8xf32>
    loop.yield %8 : f32
  }
  %5 = loop.extern (%x) : (memref<4x8xf32>) -> memref<4xf32> {
  ^bb0(%6: tensor<4x8xf32>):
    %7 = aten.sum.dim_IntList(%6, dim = [1]) : (tensor<4x8xf32>) -> tensor<4xf32>
    loop.yield %7 : tensor<4xf32>
  }
  func.return %0, %2, %4, %5 : memref<8x4xf32>, memref<4xf32>, memref<?x8xf32>, memref<4xf32>
}

// A scatter: the position uses the index the body yields after the value (i0).
// CHECK-LABEL: func.func @scatter
// CHECK-NEXT:    %0 = loop.scatter sum ["s0", 8] into [10, 8] at "d1 + 8*i0" (%t, %v) syms(%n) : (memref<?xi64>, memref<?x8xf32>, index) -> memref<10x8xf32> {
// CHECK-NEXT:    ^bb0(%d0: index, %d1: index, %in0: memref<?xi64>, %in1: memref<?x8xf32>):
// CHECK-NEXT:      %1 = loop.load %in0["d0"] : memref<?xi64>
// CHECK-NEXT:      %2 = arith.index_cast %1 : i64 to index
// CHECK-NEXT:      %3 = loop.check_index %2 < "10"
// CHECK-NEXT:      %4 = loop.load %in1["8*d0 + d1"] : memref<?x8xf32>
// CHECK-NEXT:      loop.yield %4, %3 : f32, index
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %0 : memref<10x8xf32>
func.func @scatter(%t: memref<?xi64>, %v: memref<?x8xf32>, %n: index) -> memref<10x8xf32> {
  %0 = loop.scatter sum ["s0", 8] into [10, 8] at "8*i0 + d1" (%t, %v) syms(%n) : (memref<?xi64>, memref<?x8xf32>, index) -> memref<10x8xf32> {
  ^bb0(%d0: index, %d1: index, %in0: memref<?xi64>, %in1: memref<?x8xf32>):
    %1 = loop.load %in0["d0"] : memref<?xi64>
    %2 = arith.index_cast %1 : i64 to index
    %3 = loop.check_index %2 < "10"
    %4 = loop.load %in1["8*d0 + d1"] : memref<?x8xf32>
    loop.yield %4, %3 : f32, index
  }
  func.return %0 : memref<10x8xf32>
}

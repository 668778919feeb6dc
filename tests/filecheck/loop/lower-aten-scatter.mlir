// RUN: kiln-opt %s --lower-aten | filecheck %s

// index_put(accumulate=True), scatter_add: a loop.scatter over the source's points
// (indices wrapped when negative where eager wraps them, then checked), adding into a
// zero buffer; then self + that buffer, unless self is zeros (the embedding gradient).

// CHECK-LABEL: func.func @index_put(%x: memref<5x3xf32>, %i: memref<4xi64>, %v: memref<4x3xf32>) -> memref<5x3xf32> {
// CHECK-NEXT:    %0 = loop.scatter sum [4, 3] into [5, 3] at "d1 + 3*i0" (%i, %v) : (memref<4xi64>, memref<4x3xf32>) -> memref<5x3xf32> {
// CHECK-NEXT:    ^bb0(%d0: index, %d1: index, %in0: memref<4xi64>, %in1: memref<4x3xf32>):
// CHECK-NEXT:      %1 = loop.load %in0["d0"] : memref<4xi64>
// CHECK-NEXT:      %2 = arith.constant 0 : i64
// CHECK-NEXT:      %3 = loop.index "5"
// CHECK-NEXT:      %4 = arith.index_cast %3 : index to i64
// CHECK-NEXT:      %5 = arith.addi %1, %4 : i64
// CHECK-NEXT:      %6 = arith.cmpi slt, %1, %2 : i64
// CHECK-NEXT:      %7 = arith.select %6, %5, %1 : i64
// CHECK-NEXT:      %8 = arith.index_cast %7 : i64 to index
// CHECK-NEXT:      %9 = loop.check_index %8 < "5"
// CHECK-NEXT:      %10 = loop.load %in1["3*d0 + d1"] : memref<4x3xf32>
// CHECK-NEXT:      loop.yield %10, %9 : f32, index
// CHECK-NEXT:    }
// CHECK-NEXT:    %r = loop.pointwise [5, 3] (%x, %0) : (memref<5x3xf32>, memref<5x3xf32>) -> memref<5x3xf32> {
// CHECK-NEXT:    ^bb0(%d0: index, %d1: index, %in0: memref<5x3xf32>, %in1: memref<5x3xf32>):
// CHECK-NEXT:      %1 = loop.load %in0["3*d0 + d1"] : memref<5x3xf32>
// CHECK-NEXT:      %2 = loop.load %in1["3*d0 + d1"] : memref<5x3xf32>
// CHECK-NEXT:      %3 = arith.addf %1, %2 : f32
// CHECK-NEXT:      loop.yield %3 : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %r : memref<5x3xf32>
// CHECK-NEXT:  }
// CHECK-LABEL: func.func @into_zeros(%i: memref<4xi64>, %v: memref<4x3xf32>) -> memref<5x3xf32> {
// CHECK-NEXT:    %zeros = loop.pointwise [5, 3] () : () -> memref<5x3xf32> {
// CHECK-NEXT:    ^bb0(%d0: index, %d1: index):
// CHECK-NEXT:      %0 = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      loop.yield %0 : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    %r = loop.scatter sum [4, 3] into [5, 3] at "d1 + 3*i0" (%i, %v) : (memref<4xi64>, memref<4x3xf32>) -> memref<5x3xf32> {
// CHECK-NEXT:    ^bb0(%d0: index, %d1: index, %in0: memref<4xi64>, %in1: memref<4x3xf32>):
// CHECK-NEXT:      %0 = loop.load %in0["d0"] : memref<4xi64>
// CHECK-NEXT:      %1 = arith.constant 0 : i64
// CHECK-NEXT:      %2 = loop.index "5"
// CHECK-NEXT:      %3 = arith.index_cast %2 : index to i64
// CHECK-NEXT:      %4 = arith.addi %0, %3 : i64
// CHECK-NEXT:      %5 = arith.cmpi slt, %0, %1 : i64
// CHECK-NEXT:      %6 = arith.select %5, %4, %0 : i64
// CHECK-NEXT:      %7 = arith.index_cast %6 : i64 to index
// CHECK-NEXT:      %8 = loop.check_index %7 < "5"
// CHECK-NEXT:      %9 = loop.load %in1["3*d0 + d1"] : memref<4x3xf32>
// CHECK-NEXT:      loop.yield %9, %8 : f32, index
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %r : memref<5x3xf32>
// CHECK-NEXT:  }
// CHECK-LABEL: func.func @scatter_add(%x: memref<3x6xf32>, %i: memref<3x2xi64>, %s: memref<3x4xf32>) -> memref<3x6xf32> {
// CHECK-NEXT:    %0 = loop.scatter sum [3, 2] into [3, 6] at "6*d0 + i0" (%i, %s) : (memref<3x2xi64>, memref<3x4xf32>) -> memref<3x6xf32> {
// CHECK-NEXT:    ^bb0(%d0: index, %d1: index, %in0: memref<3x2xi64>, %in1: memref<3x4xf32>):
// CHECK-NEXT:      %1 = loop.load %in0["2*d0 + d1"] : memref<3x2xi64>
// CHECK-NEXT:      %2 = arith.index_cast %1 : i64 to index
// CHECK-NEXT:      %3 = loop.check_index %2 < "6"
// CHECK-NEXT:      %4 = loop.load %in1["4*d0 + d1"] : memref<3x4xf32>
// CHECK-NEXT:      loop.yield %4, %3 : f32, index
// CHECK-NEXT:    }
// CHECK-NEXT:    %r = loop.pointwise [3, 6] (%x, %0) : (memref<3x6xf32>, memref<3x6xf32>) -> memref<3x6xf32> {
// CHECK-NEXT:    ^bb0(%d0: index, %d1: index, %in0: memref<3x6xf32>, %in1: memref<3x6xf32>):
// CHECK-NEXT:      %1 = loop.load %in0["6*d0 + d1"] : memref<3x6xf32>
// CHECK-NEXT:      %2 = loop.load %in1["6*d0 + d1"] : memref<3x6xf32>
// CHECK-NEXT:      %3 = arith.addf %1, %2 : f32
// CHECK-NEXT:      loop.yield %3 : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %r : memref<3x6xf32>
// CHECK-NEXT:  }

// Non-accumulating scatters, lowered where exact: one index per row (nll_loss_backward's
// one-hot) is a pointwise select, no scatter; one value written at repeated positions is
// an i32 hit count (loop.scatter), then where(count != 0, value, self).
// CHECK-LABEL: func.func @one_hot(%t: memref<4x1xi64>) -> memref<4x5xf32> {
// CHECK-NEXT:    %zeros = loop.pointwise [4, 5] () : () -> memref<4x5xf32> {
// CHECK-NEXT:    ^bb0(%d0: index, %d1: index):
// CHECK-NEXT:      %0 = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      loop.yield %0 : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    %r = loop.pointwise [4, 5] (%t, %zeros) : (memref<4x1xi64>, memref<4x5xf32>) -> memref<4x5xf32> {
// CHECK-NEXT:    ^bb0(%d0: index, %d1: index, %in0: memref<4x1xi64>, %in1: memref<4x5xf32>):
// CHECK-NEXT:      %0 = loop.load %in0["d0"] : memref<4x1xi64>
// CHECK-NEXT:      %1 = arith.index_cast %0 : i64 to index
// CHECK-NEXT:      %2 = loop.check_index %1 < "5"
// CHECK-NEXT:      %3 = loop.index "d1"
// CHECK-NEXT:      %4 = arith.cmpi eq, %3, %2 : index
// CHECK-NEXT:      %5 = loop.load %in1["5*d0 + d1"] : memref<4x5xf32>
// CHECK-NEXT:      %6 = arith.constant -1.000000e+00 : f32
// CHECK-NEXT:      %7 = arith.select %4, %6, %5 : f32
// CHECK-NEXT:      loop.yield %7 : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %r : memref<4x5xf32>
// CHECK-NEXT:  }
// CHECK-LABEL: func.func @index_put_one_value(%x: memref<5x3xf32>, %i: memref<4xi64>, %v: memref<f32>) -> memref<5x3xf32> {
// CHECK-NEXT:    %0 = loop.scatter sum [4, 3] into [5, 3] at "d1 + 3*i0" (%i) : (memref<4xi64>) -> memref<5x3xi32> {
// CHECK-NEXT:    ^bb0(%d0: index, %d1: index, %in0: memref<4xi64>):
// CHECK-NEXT:      %1 = loop.load %in0["d0"] : memref<4xi64>
// CHECK-NEXT:      %2 = arith.constant 0 : i64
// CHECK-NEXT:      %3 = loop.index "5"
// CHECK-NEXT:      %4 = arith.index_cast %3 : index to i64
// CHECK-NEXT:      %5 = arith.addi %1, %4 : i64
// CHECK-NEXT:      %6 = arith.cmpi slt, %1, %2 : i64
// CHECK-NEXT:      %7 = arith.select %6, %5, %1 : i64
// CHECK-NEXT:      %8 = arith.index_cast %7 : i64 to index
// CHECK-NEXT:      %9 = loop.check_index %8 < "5"
// CHECK-NEXT:      %10 = arith.constant 1 : i32
// CHECK-NEXT:      loop.yield %10, %9 : i32, index
// CHECK-NEXT:    }
// CHECK-NEXT:    %r = loop.pointwise [5, 3] (%0, %x, %v) : (memref<5x3xi32>, memref<5x3xf32>, memref<f32>) -> memref<5x3xf32> {
// CHECK-NEXT:    ^bb0(%d0: index, %d1: index, %in0: memref<5x3xi32>, %in1: memref<5x3xf32>, %in2: memref<f32>):
// CHECK-NEXT:      %1 = loop.load %in0["3*d0 + d1"] : memref<5x3xi32>
// CHECK-NEXT:      %2 = arith.constant 0 : i32
// CHECK-NEXT:      %3 = arith.cmpi ne, %1, %2 : i32
// CHECK-NEXT:      %4 = loop.load %in1["3*d0 + d1"] : memref<5x3xf32>
// CHECK-NEXT:      %5 = loop.load %in2["0"] : memref<f32>
// CHECK-NEXT:      %6 = arith.select %3, %5, %4 : f32
// CHECK-NEXT:      loop.yield %6 : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %r : memref<5x3xf32>
// CHECK-NEXT:  }

func.func @index_put(%x: tensor<5x3xf32>, %i: tensor<4xi64>, %v: tensor<4x3xf32>) -> tensor<5x3xf32> {
  %r = aten.index_put.default(%x, %v, indices = [%i], accumulate = true) : (tensor<5x3xf32>, tensor<4xi64>, tensor<4x3xf32>) -> tensor<5x3xf32>
  func.return %r : tensor<5x3xf32>
}
func.func @into_zeros(%i: tensor<4xi64>, %v: tensor<4x3xf32>) -> tensor<5x3xf32> {
  %zeros = aten.generic "aten::zeros.default"(size = [5, 3], device = "cpu", pin_memory = false) : () -> tensor<5x3xf32>
  %r = aten.index_put.default(%zeros, %v, indices = [%i], accumulate = true) : (tensor<5x3xf32>, tensor<4xi64>, tensor<4x3xf32>) -> tensor<5x3xf32>
  func.return %r : tensor<5x3xf32>
}
func.func @scatter_add(%x: tensor<3x6xf32>, %i: tensor<3x2xi64>, %s: tensor<3x4xf32>) -> tensor<3x6xf32> {
  %r = aten.scatter_add.default(%x, %i, %s, dim = 1) : (tensor<3x6xf32>, tensor<3x2xi64>, tensor<3x4xf32>) -> tensor<3x6xf32>
  func.return %r : tensor<3x6xf32>
}
func.func @one_hot(%t: tensor<4x1xi64>) -> tensor<4x5xf32> {
  %zeros = aten.generic "aten::zeros.default"(size = [4, 5], device = "cpu", pin_memory = false) : () -> tensor<4x5xf32>
  %r = aten.scatter.value(%zeros, %t, dim = 1, value = -1.0) : (tensor<4x5xf32>, tensor<4x1xi64>) -> tensor<4x5xf32>
  func.return %r : tensor<4x5xf32>
}
func.func @index_put_one_value(%x: tensor<5x3xf32>, %i: tensor<4xi64>, %v: tensor<f32>) -> tensor<5x3xf32> {
  %r = aten.index_put.default(%x, %v, indices = [%i]) : (tensor<5x3xf32>, tensor<4xi64>, tensor<f32>) -> tensor<5x3xf32>
  func.return %r : tensor<5x3xf32>
}

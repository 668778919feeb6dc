// RUN: kiln-opt %s --lower-aten | filecheck %s

// A permute is no op of its own: its consumer loads through the transposed index.
// CHECK-LABEL: func.func @permute(%x: memref<4x8xf32>) -> memref<8x4xf32>
// CHECK-NEXT:    %neg = loop.pointwise [8, 4] (%x) : (memref<4x8xf32>) -> memref<8x4xf32> {
// CHECK-NEXT:    ^bb0(%d0: index, %d1: index, %in0: memref<4x8xf32>):
// CHECK-NEXT:      %0 = loop.load %in0["d0 + 8*d1"] : memref<4x8xf32>
// CHECK-NEXT:      %1 = arith.negf %0 : f32
// CHECK-NEXT:      loop.yield %1 : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %neg : memref<8x4xf32>
func.func @permute(%x: tensor<4x8xf32>) -> tensor<8x4xf32> {
  %t = aten.permute.default(%x, dims = [1, 0]) : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %neg = aten.neg.default(%t) : (tensor<8x4xf32>) -> tensor<8x4xf32>
  func.return %neg : tensor<8x4xf32>
}

// A slice with a step, then a broadcast against a row: offsets and strides in the
// loads, no copies.
// CHECK-LABEL: func.func @slice(%x: memref<4x8xf32>, %y: memref<3xf32>) -> memref<4x3xf32>
// CHECK-NEXT:    %add = loop.pointwise [4, 3] (%x, %y) : (memref<4x8xf32>, memref<3xf32>) -> memref<4x3xf32> {
// CHECK-NEXT:    ^bb0(%d0: index, %d1: index, %in0: memref<4x8xf32>, %in1: memref<3xf32>):
// CHECK-NEXT:      %0 = loop.load %in0["8*d0 + 2*d1 + 1"] : memref<4x8xf32>
// CHECK-NEXT:      %1 = loop.load %in1["d1"] : memref<3xf32>
// CHECK-NEXT:      %2 = arith.addf %0, %1 : f32
// CHECK-NEXT:      loop.yield %2 : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %add : memref<4x3xf32>
func.func @slice(%x: tensor<4x8xf32>, %y: tensor<3xf32>) -> tensor<4x3xf32> {
  %s = aten.slice.Tensor(%x, dim = 1, start = 1, end = 7, step = 2) : (tensor<4x8xf32>) -> tensor<4x3xf32>
  %add = aten.add.Tensor(%s, %y) : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  func.return %add : tensor<4x3xf32>
}

// Views feeding an ATen kernel stay views: aten.as_strided inside the extern body.
// CHECK-LABEL: func.func @matmul(%x: memref<4x8xf32>, %w: memref<3x8xf32>) -> memref<4x3xf32>
// CHECK-NEXT:    %mm = loop.extern (%x, %w) : (memref<4x8xf32>, memref<3x8xf32>) -> memref<4x3xf32> {
// CHECK-NEXT:    ^bb0(%0: tensor<4x8xf32>, %1: tensor<3x8xf32>):
// CHECK-NEXT:      %2 = aten.as_strided.default(%1, size = [8, 3], stride = [1, 8]) : (tensor<3x8xf32>) -> tensor<8x3xf32>
// CHECK-NEXT:      %mm_1 = aten.mm.default(%0, %2) : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT:      loop.yield %mm_1 : tensor<4x3xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %mm : memref<4x3xf32>
func.func @matmul(%x: tensor<4x8xf32>, %w: tensor<3x8xf32>) -> tensor<4x3xf32> {
  %t = aten.t.default(%w) : (tensor<3x8xf32>) -> tensor<8x3xf32>
  %mm = aten.mm.default(%x, %t) : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
  func.return %mm : tensor<4x3xf32>
}

// A reduction over the middle dim of a 3-D tensor, keepdim.
// CHECK-LABEL: func.func @sum
// CHECK-NEXT:    %sum = loop.reduction sum [2, 1, 4] reduce [3] (%x) : (memref<2x3x4xf32>) -> memref<2x1x4xf32> {
// CHECK-NEXT:    ^bb0(%d0: index, %d1: index, %d2: index, %r0: index, %in0: memref<2x3x4xf32>):
// CHECK-NEXT:      %0 = loop.load %in0["12*d0 + d2 + 4*r0"] : memref<2x3x4xf32>
// CHECK-NEXT:      loop.yield %0 : f32
// CHECK-NEXT:    }
func.func @sum(%x: tensor<2x3x4xf32>) -> tensor<2x1x4xf32> {
  %sum = aten.sum.dim_IntList(%x, dim = [1], keepdim = true) : (tensor<2x3x4xf32>) -> tensor<2x1x4xf32>
  func.return %sum : tensor<2x1x4xf32>
}

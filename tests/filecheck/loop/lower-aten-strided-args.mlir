// RUN: kiln-opt %s --lower-aten | filecheck %s

// A strided argument (kiln.arg_strides: a saved activation such as t(x)) is read where
// it lies: loads and extern views go through its strides, and no copy is made.
// CHECK-LABEL: func.func @strided(%t: memref<8x4xf32> {kiln.name = "t", kiln.arg_strides = [1 : i64, 8 : i64]}, %w: memref<4x3xf32>) -> (memref<8x4xf32>, memref<8x3xf32>)
// CHECK-NEXT:    %neg = loop.pointwise [8, 4] (%t) : (memref<8x4xf32>) -> memref<8x4xf32> {
// CHECK-NEXT:    ^bb0(%d0: index, %d1: index, %in0: memref<8x4xf32>):
// CHECK-NEXT:      %0 = loop.load %in0["d0 + 8*d1"] : memref<8x4xf32>
// CHECK:         %mm = loop.extern (%w, %t)
// CHECK-NEXT:    ^bb0(%0: tensor<4x3xf32>, %1: tensor<8x4xf32>):
// CHECK-NEXT:      %2 = aten.as_strided.default(%1, size = [8, 4], stride = [1, 8])
// CHECK-NEXT:      %mm_1 = aten.mm.default(%2, %0)
func.func @strided(%t: tensor<8x4xf32> {kiln.name = "t", kiln.arg_strides = [1 : i64, 8 : i64]}, %w: tensor<4x3xf32>) -> (tensor<8x4xf32>, tensor<8x3xf32>) {
  %neg = aten.neg.default(%t) : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %mm = aten.mm.default(%t, %w) : (tensor<8x4xf32>, tensor<4x3xf32>) -> tensor<8x3xf32>
  func.return %neg, %mm : tensor<8x4xf32>, tensor<8x3xf32>
}

// An argument that an op writes keeps a contiguous buffer: its recorded strides are
// dropped (the wrappers then copy it to a contiguous buffer, as the IR reads it), and
// the extern gets the buffer itself.
// CHECK-LABEL: func.func @written(%x: memref<2x3xf32> {kiln.name = "x"}, %y: memref<2x3xf32>)
// CHECK-NEXT:    %c = loop.extern (%x, %y)
// CHECK-NEXT:    ^bb0(%0: tensor<2x3xf32>, %1: tensor<2x3xf32>):
// CHECK-NEXT:      %c_1 = aten.generic "aten::add_.Tensor"(%0, %1)
func.func @written(%x: tensor<2x3xf32> {kiln.name = "x", kiln.arg_strides = [1 : i64, 2 : i64]}, %y: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %c = aten.generic "aten::add_.Tensor"(%x, %y) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %c : tensor<2x3xf32>
}

// The transpose of a square strided argument has row-major strides, but is not the
// tensor the wrapper holds (whose strides are [1, 4]): the extern gets an explicit view.
// CHECK-LABEL: func.func @square
// CHECK:         %mm = loop.extern (%w, %s)
// CHECK-NEXT:    ^bb0(%0: tensor<4x3xf32>, %1: tensor<4x4xf32>):
// CHECK-NEXT:      %2 = aten.as_strided.default(%1, size = [4, 4], stride = [4, 1])
// CHECK-NEXT:      %mm_1 = aten.mm.default(%2, %0)
func.func @square(%s: tensor<4x4xf32> {kiln.name = "s", kiln.arg_strides = [1 : i64, 4 : i64]}, %w: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %p = aten.permute.default(%s, dims = [1, 0]) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %mm = aten.mm.default(%p, %w) : (tensor<4x4xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  func.return %mm : tensor<4x3xf32>
}

// RUN: kiln-opt %s --split-input-file -p unfuse-addmm | filecheck %s

// Aten IR in, aten IR out. Every use of the addmm is pointwise, or a view whose uses
// are (a view, or a functional view such as permute_copy): it becomes mm + add, and the
// add fuses into the kernels of relu and neg.
// CHECK-LABEL: func.func @pointwise_uses
// CHECK-NEXT:    %mm = aten.mm.default(%x, %w) : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %0 = aten.add.Tensor(%mm, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %1 = aten.view.default(%0, size = [2, 2, 8])
// CHECK-NEXT:    %2 = aten.relu.default(%1)
// CHECK-NEXT:    %3 = aten.generic "aten::permute_copy.default"(%0, dims = [1, 0])
// CHECK-NEXT:    %4 = aten.neg.default(%3)
func.func @pointwise_uses(%b: tensor<8xf32>, %x: tensor<4x16xf32>, %w: tensor<16x8xf32>) -> (tensor<2x2x8xf32>, tensor<8x4xf32>) {
  %0 = aten.addmm.default(%b, %x, %w) : (tensor<8xf32>, tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %1 = aten.view.default(%0, size = [2, 2, 8]) : (tensor<4x8xf32>) -> tensor<2x2x8xf32>
  %2 = aten.relu.default(%1) : (tensor<2x2x8xf32>) -> tensor<2x2x8xf32>
  %3 = aten.generic "aten::permute_copy.default"(%0, dims = [1, 0]) : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %4 = aten.neg.default(%3) : (tensor<8x4xf32>) -> tensor<8x4xf32>
  func.return %2, %4 : tensor<2x2x8xf32>, tensor<8x4xf32>
}

// -----

// Kept: a result returned as it is, one a matrix product reads, and beta != 1.
// CHECK-LABEL: func.func @kept
// CHECK-NEXT:    %0 = aten.addmm.default(%b, %x, %w)
// CHECK-NEXT:    %1 = aten.addmm.default(%b, %x, %w)
// CHECK-NEXT:    %2 = aten.mm.default(%1, %v)
// CHECK-NEXT:    %3 = aten.addmm.default(%b, %x, %w, beta = 2)
// CHECK-NEXT:    %4 = aten.relu.default(%3)
func.func @kept(%b: tensor<8xf32>, %x: tensor<4x16xf32>, %w: tensor<16x8xf32>, %v: tensor<8x3xf32>) -> (tensor<4x8xf32>, tensor<4x3xf32>, tensor<4x8xf32>) {
  %0 = aten.addmm.default(%b, %x, %w) : (tensor<8xf32>, tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %1 = aten.addmm.default(%b, %x, %w) : (tensor<8xf32>, tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %2 = aten.mm.default(%1, %v) : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
  %3 = aten.addmm.default(%b, %x, %w, beta = 2) : (tensor<8xf32>, tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %4 = aten.relu.default(%3) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %0, %2, %4 : tensor<4x8xf32>, tensor<4x3xf32>, tensor<4x8xf32>
}

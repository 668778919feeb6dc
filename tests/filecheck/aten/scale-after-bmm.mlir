// RUN: kiln-opt %s --scale-after-bmm | filecheck %s

// scale-after-bmm: the attention decomposition scales the queries and the keys by
// sqrt(scale) each; the product is scaled once instead, so that both operands stay
// views of their projections (no copy kernel each).
// CHECK-LABEL: func.func @attention_scores
// CHECK-NEXT:    %0 = aten.expand.default(%q, size = [1, 4, 8, 16])
// CHECK-NEXT:    %1 = aten.view.default(%0, size = [4, 8, 16])
// CHECK-NEXT:    %2 = aten.view.default(%k, size = [4, 16, 8])
// CHECK-NEXT:    %3 = aten.bmm.default(%1, %2) : (tensor<4x8x16xf32>, tensor<4x16x8xf32>) -> tensor<4x8x8xf32>
// CHECK-NEXT:    %4 = aten.mul.Scalar(%3, other = 0.125) : (tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
// CHECK-NEXT:    func.return %4 : tensor<4x8x8xf32>
func.func @attention_scores(%q: tensor<1x4x8x16xf32>, %k: tensor<1x4x16x8xf32>) -> tensor<4x8x8xf32> {
  %0 = aten.mul.Scalar(%q, other = 0.5) : (tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  %1 = aten.mul.Scalar(%k, other = 0.25) : (tensor<1x4x16x8xf32>) -> tensor<1x4x16x8xf32>
  %2 = aten.expand.default(%0, size = [1, 4, 8, 16]) : (tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  %3 = aten.view.default(%2, size = [4, 8, 16]) : (tensor<1x4x8x16xf32>) -> tensor<4x8x16xf32>
  %4 = aten.view.default(%1, size = [4, 16, 8]) : (tensor<1x4x16x8xf32>) -> tensor<4x16x8xf32>
  %5 = aten.bmm.default(%3, %4) : (tensor<4x8x16xf32>, tensor<4x16x8xf32>) -> tensor<4x8x8xf32>
  func.return %5 : tensor<4x8x8xf32>
}

// float16: the unscaled product could overflow where the scaled one does not: kept.
// CHECK-LABEL: func.func @half
// CHECK-NEXT:    %0 = aten.mul.Scalar(%q, other = 0.5)
// CHECK-NEXT:    %1 = aten.mul.Scalar(%k, other = 0.25)
// CHECK-NEXT:    %2 = aten.bmm.default(%0, %1)
// CHECK-NEXT:    func.return %2
func.func @half(%q: tensor<4x8x16xf16>, %k: tensor<4x16x8xf16>) -> tensor<4x8x8xf16> {
  %0 = aten.mul.Scalar(%q, other = 0.5) : (tensor<4x8x16xf16>) -> tensor<4x8x16xf16>
  %1 = aten.mul.Scalar(%k, other = 0.25) : (tensor<4x16x8xf16>) -> tensor<4x16x8xf16>
  %2 = aten.bmm.default(%0, %1) : (tensor<4x8x16xf16>, tensor<4x16x8xf16>) -> tensor<4x8x8xf16>
  func.return %2 : tensor<4x8x8xf16>
}

// RUN: kiln-opt %s --dce | filecheck %s

// Unused pure ops go, including chains that only feed each other.
// CHECK-LABEL: func.func @pure
// CHECK-NEXT:    %0 = aten.mul.Tensor(%x, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    func.return %0 : tensor<4xf32>
func.func @pure(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = aten.neg.default(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = aten.exp.default(%0) : (tensor<4xf32>) -> tensor<4xf32>
  %2 = aten.mul.Tensor(%x, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %3 = aten.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  func.return %2 : tensor<4xf32>
}

// Random ops advance the generator and aten.generic is opaque: both stay.
// CHECK-LABEL: func.func @effects
// CHECK-NEXT:    %0 = aten.rand.default(size = [4]) : () -> tensor<4xf32>
// CHECK-NEXT:    %1 = aten.randn_like.default(%x) : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    %2 = aten.generic "aten::relu.default"(%x) : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    func.return %x : tensor<4xf32>
func.func @effects(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = aten.rand.default(size = [4]) : () -> tensor<4xf32>
  %1 = aten.randn_like.default(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %2 = aten.generic "aten::relu.default"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %3 = aten.abs.default(%x) : (tensor<4xf32>) -> tensor<4xf32>
  func.return %x : tensor<4xf32>
}

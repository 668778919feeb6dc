// RUN: kiln-opt %s --cse | filecheck %s

// Identical pure aten ops are merged; operands, properties and types must all agree.
// CHECK-LABEL: func.func @pure
// CHECK-NEXT:    %0 = aten.neg.default(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %1 = aten.add.Tensor(%0, %0, alpha = 2) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %2 = aten.add.Tensor(%0, %0) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %3 = aten.sum.dim_IntList(%1, dim = [1]) : (tensor<4x8xf32>) -> tensor<4xf32>
// CHECK-NEXT:    %4 = aten.sum.dim_IntList(%2, dim = [0]) : (tensor<4x8xf32>) -> tensor<8xf32>
// CHECK-NEXT:    func.return %1, %2, %3, %4
func.func @pure(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xf32>, tensor<8xf32>) {
  %0 = aten.neg.default(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = aten.neg.default(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = aten.add.Tensor(%0, %1, alpha = 2) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %3 = aten.add.Tensor(%0, %1, alpha = 2) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %4 = aten.add.Tensor(%1, %0) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %5 = aten.sum.dim_IntList(%3, dim = [1]) : (tensor<4x8xf32>) -> tensor<4xf32>
  %6 = aten.sum.dim_IntList(%4, dim = [0]) : (tensor<4x8xf32>) -> tensor<8xf32>
  func.return %2, %4, %5, %6 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xf32>, tensor<8xf32>
}

// Random ops draw from the generator: two draws are two different tensors.
// CHECK-LABEL: func.func @random
// CHECK-NEXT:    %0 = aten.rand.default(size = [4]) : () -> tensor<4xf32>
// CHECK-NEXT:    %1 = aten.rand.default(size = [4]) : () -> tensor<4xf32>
// CHECK-NEXT:    %2 = aten.dropout.default(%x, p = 0.5, train = true)
// CHECK-NEXT:    %3 = aten.dropout.default(%x, p = 0.5, train = true)
func.func @random(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %0 = aten.rand.default(size = [4]) : () -> tensor<4xf32>
  %1 = aten.rand.default(size = [4]) : () -> tensor<4xf32>
  %2 = aten.dropout.default(%x, p = 0.5, train = true) : (tensor<4xf32>) -> tensor<4xf32>
  %3 = aten.dropout.default(%x, p = 0.5, train = true) : (tensor<4xf32>) -> tensor<4xf32>
  func.return %0, %1, %2, %3 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// aten.generic is opaque (it may have effects): never merged.
// CHECK-LABEL: func.func @generic
// CHECK-NEXT:    %0 = aten.generic "aten::relu.default"(%x)
// CHECK-NEXT:    %1 = aten.generic "aten::relu.default"(%x)
func.func @generic(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = aten.generic "aten::relu.default"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = aten.generic "aten::relu.default"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  func.return %0, %1 : tensor<4xf32>, tensor<4xf32>
}

// Symbolic sizes: views with the same SSA size operand merge, different ones do not.
// CHECK-LABEL: func.func @symbolic
// CHECK-NEXT:    %0 = aten.view.default(%x, size = [%s, 8])
// CHECK-NEXT:    %1 = aten.view.default(%x, size = [%t, 8])
// CHECK-NEXT:    func.return %0, %0, %1
func.func @symbolic(%x: tensor<4x8xf32>, %s: index, %t: index) -> (tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>) {
  %0 = aten.view.default(%x, size = [%s, 8]) : (tensor<4x8xf32>, index) -> tensor<?x8xf32>
  %1 = aten.view.default(%x, size = [%s, 8]) : (tensor<4x8xf32>, index) -> tensor<?x8xf32>
  %2 = aten.view.default(%x, size = [%t, 8]) : (tensor<4x8xf32>, index) -> tensor<?x8xf32>
  func.return %0, %1, %2 : tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>
}

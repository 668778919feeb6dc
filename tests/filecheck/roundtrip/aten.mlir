// RUN: kiln-opt %s | kiln-opt | filecheck %s
// RUN: kiln-opt %s --print-op-generic | kiln-opt | filecheck %s

// CHECK-LABEL: func.func @forward(%x: tensor<4x8xf32>, %y: tensor<8xf32>, %s: index) -> (tensor<?x8xf32>, tensor<4x?xf32>, tensor<2xf32>, tensor<4xf32>)
// CHECK-NEXT:    %0 = aten.add.Tensor(%x, %y, alpha = 2) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %1 = aten.view.default(%0, size = [%s, 8]) : (tensor<4x8xf32>, index) -> tensor<?x8xf32>
// CHECK-NEXT:    %2, %3 = aten.max.dim(%1, dim = 1) : (tensor<?x8xf32>) -> (tensor<?xf32>, tensor<?xi64>)
// CHECK-NEXT:    %4 = aten.index.Tensor(%x, indices = [none, %3]) : (tensor<4x8xf32>, tensor<?xi64>) -> tensor<4x?xf32>
// CHECK-NEXT:    %5 = aten.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
// CHECK-NEXT:    %6 = aten.generic "aten::relu.default"(%5) : (tensor<2xf32>) -> tensor<2xf32>
// CHECK-NEXT:    %7 = aten.sum.dim_IntList(%x, dim = [1], dtype = f32) : (tensor<4x8xf32>) -> tensor<4xf32>
// CHECK-NEXT:    func.return %1, %4, %6, %7 : tensor<?x8xf32>, tensor<4x?xf32>, tensor<2xf32>, tensor<4xf32>
func.func @forward(%x: tensor<4x8xf32>, %y: tensor<8xf32>, %s: index) -> (tensor<?x8xf32>, tensor<4x?xf32>, tensor<2xf32>, tensor<4xf32>) {
  %0 = aten.add.Tensor(%x, %y, alpha = 2) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %1 = aten.view.default(%0, size = [%s, 8]) : (tensor<4x8xf32>, index) -> tensor<?x8xf32>
  %2, %3 = aten.max.dim(%1, dim = 1) : (tensor<?x8xf32>) -> (tensor<?xf32>, tensor<?xi64>)
  %4 = aten.index.Tensor(%x, indices = [none, %3]) : (tensor<4x8xf32>, tensor<?xi64>) -> tensor<4x?xf32>
  %5 = aten.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %6 = aten.generic "aten::relu.default"(%5) : (tensor<2xf32>) -> tensor<2xf32>
  %7 = aten.sum.dim_IntList(%x, dim = [1], keepdim = false, dtype = f32) : (tensor<4x8xf32>) -> tensor<4xf32>
  func.return %1, %4, %6, %7 : tensor<?x8xf32>, tensor<4x?xf32>, tensor<2xf32>, tensor<4xf32>
}

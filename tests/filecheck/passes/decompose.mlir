// RUN: kiln-opt %s --decompose | filecheck %s

// softmax becomes max-subtract, exp, sum and divide, through PyTorch's own decomposition.
// CHECK-LABEL: func.func @softmax
// CHECK-NEXT:    %{{.*}} = aten.amax.default(%x, dim = [1], keepdim = true) : (tensor<4x8xf32>) -> tensor<4x1xf32>
// CHECK-NEXT:    %{{.*}} = aten.sub.Tensor
// CHECK-NEXT:    %{{.*}} = aten.exp.default
// CHECK-NEXT:    %{{.*}} = aten.sum.dim_IntList(%{{.*}}, dim = [1], keepdim = true)
// CHECK-NEXT:    %{{.*}} = aten.div.Tensor
// CHECK-NEXT:    func.return
func.func @softmax(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = aten._softmax.default(%x, dim = 1, half_to_float = false) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// Ops without a decomposition, and core ops, are left alone.
// CHECK-LABEL: func.func @untouched
// CHECK-NEXT:    %0 = aten.relu.default(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %1 = aten.mm.default(%0, %y) : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x2xf32>
// CHECK-NEXT:    func.return %1
func.func @untouched(%x: tensor<4x8xf32>, %y: tensor<8x2xf32>) -> tensor<4x2xf32> {
  %0 = aten.relu.default(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = aten.mm.default(%0, %y) : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x2xf32>
  func.return %1 : tensor<4x2xf32>
}

// A symbolic size is traced as a size symbol: the body holds for every size.
// CHECK-LABEL: func.func @dynamic
// CHECK-NEXT:    %amax = aten.amax.default(%x, dim = [1], keepdim = true) : (tensor<?x8xf32>) -> tensor<?x1xf32>
// CHECK-NEXT:    %sub = aten.sub.Tensor(%x, %amax)
// CHECK-NEXT:    %exp = aten.exp.default(%sub)
// CHECK-NEXT:    %sum1 = aten.sum.dim_IntList(%exp, dim = [1], keepdim = true)
// CHECK-NEXT:    %div = aten.div.Tensor(%exp, %sum1)
// CHECK-NEXT:    func.return %div
func.func @dynamic(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %0 = aten._softmax.default(%x, dim = 1, half_to_float = false) : (tensor<?x8xf32>) -> tensor<?x8xf32>
  func.return %0 : tensor<?x8xf32>
}

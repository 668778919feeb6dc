// RUN: kiln-opt %s --unfuse-addmm | filecheck %s

// unfuse-addmm splits an addmm whose result only feeds pointwise ops (through views)
// into mm + add, so that the bias add fuses into the consumer kernel.
// CHECK-LABEL: func.func @pointwise_use
// CHECK-NEXT:    %mm = aten.mm.default(%x, %w) : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %0 = aten.add.Tensor(%mm, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %1 = aten.view.default(%0, size = [2, 2, 8]) : (tensor<4x8xf32>) -> tensor<2x2x8xf32>
// CHECK-NEXT:    %2 = aten.relu.default(%1) : (tensor<2x2x8xf32>) -> tensor<2x2x8xf32>
// CHECK-NEXT:    func.return %2 : tensor<2x2x8xf32>
func.func @pointwise_use(%b: tensor<8xf32>, %x: tensor<4x16xf32>, %w: tensor<16x8xf32>) -> tensor<2x2x8xf32> {
  %0 = aten.addmm.default(%b, %x, %w) : (tensor<8xf32>, tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %1 = aten.view.default(%0, size = [2, 2, 8]) : (tensor<4x8xf32>) -> tensor<2x2x8xf32>
  %2 = aten.relu.default(%1) : (tensor<2x2x8xf32>) -> tensor<2x2x8xf32>
  func.return %2 : tensor<2x2x8xf32>
}

// Several uses, each pointwise or a view whose uses are (a functional view such as
// permute_copy counts): one mm + add feeds them all.
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

// A returned addmm has no consumer kernel to take the add: kept.
// CHECK-LABEL: func.func @returned
// CHECK-NEXT:    %0 = aten.addmm.default(%b, %x, %w) : (tensor<8xf32>, tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    func.return %0 : tensor<4x8xf32>
func.func @returned(%b: tensor<8xf32>, %x: tensor<4x16xf32>, %w: tensor<16x8xf32>) -> tensor<4x8xf32> {
  %0 = aten.addmm.default(%b, %x, %w) : (tensor<8xf32>, tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// Nor when the consumer is another ATen kernel.
// CHECK-LABEL: func.func @into_mm
// CHECK-NEXT:    %0 = aten.addmm.default(%b, %x, %w) : (tensor<8xf32>, tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %1 = aten.mm.default(%0, %v)
func.func @into_mm(%b: tensor<8xf32>, %x: tensor<4x16xf32>, %w: tensor<16x8xf32>, %v: tensor<8x3xf32>) -> tensor<4x3xf32> {
  %0 = aten.addmm.default(%b, %x, %w) : (tensor<8xf32>, tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %1 = aten.mm.default(%0, %v) : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
  func.return %1 : tensor<4x3xf32>
}

// A scaled bias (beta != 1) is left to ATen.
// CHECK-LABEL: func.func @scaled
// CHECK-NEXT:    %0 = aten.addmm.default(%b, %x, %w, beta = 2) : (tensor<8xf32>, tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %1 = aten.relu.default(%0)
func.func @scaled(%b: tensor<8xf32>, %x: tensor<4x16xf32>, %w: tensor<16x8xf32>) -> tensor<4x8xf32> {
  %0 = aten.addmm.default(%b, %x, %w, beta = 2) : (tensor<8xf32>, tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %1 = aten.relu.default(%0) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %1 : tensor<4x8xf32>
}

// Under dynamic shapes the traced graph reads sizes with sym_size.int: a read of the
// sizes (the same for mm + add) does not keep the addmm (DistilBERT's projections).
// CHECK-LABEL: func.func @size_read
// CHECK-NEXT:    %mm = aten.mm.default(%x, %w)
// CHECK-NEXT:    %0 = aten.add.Tensor(%mm, %b)
// CHECK-NEXT:    %n = aten.sym_size.int(%0, dim = 0)
// CHECK-NEXT:    %1 = aten.relu.default(%0)
func.func @size_read(%b: tensor<8xf32>, %x: tensor<?x16xf32>, %w: tensor<16x8xf32>) -> tensor<?x2x4xf32> {
  %0 = aten.addmm.default(%b, %x, %w) : (tensor<8xf32>, tensor<?x16xf32>, tensor<16x8xf32>) -> tensor<?x8xf32>
  %n = aten.sym_size.int(%0, dim = 0) : (tensor<?x8xf32>) -> index
  %1 = aten.relu.default(%0) : (tensor<?x8xf32>) -> tensor<?x8xf32>
  %2 = aten.view.default(%1, size = [%n, 2, 4]) : (tensor<?x8xf32>, index) -> tensor<?x2x4xf32>
  func.return %2 : tensor<?x2x4xf32>
}

// Read only for its sizes, the product has no pointwise consumer to take the bias.
// CHECK-LABEL: func.func @only_size_read
// CHECK-NEXT:    %0 = aten.addmm.default(%b, %x, %w)
func.func @only_size_read(%b: tensor<8xf32>, %x: tensor<?x16xf32>, %w: tensor<16x8xf32>) -> tensor<?x16xf32> {
  %0 = aten.addmm.default(%b, %x, %w) : (tensor<8xf32>, tensor<?x16xf32>, tensor<16x8xf32>) -> tensor<?x8xf32>
  %n = aten.sym_size.int(%0, dim = 0) : (tensor<?x8xf32>) -> index
  %1 = aten.view.default(%x, size = [%n, 16]) : (tensor<?x16xf32>, index) -> tensor<?x16xf32>
  func.return %1 : tensor<?x16xf32>
}

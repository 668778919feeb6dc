// RUN: kiln-opt %s --canonicalize | filecheck %s

// CHECK-LABEL: func.func @views
// CHECK-NEXT:    %0 = aten.view.default(%x, size = [32]) : (tensor<4x8xf32>) -> tensor<32xf32>
// CHECK-NEXT:    %1 = aten._unsafe_view.default(%x, size = [2, 16]) : (tensor<4x8xf32>) -> tensor<2x16xf32>
// CHECK-NEXT:    func.return %0, %1, %x, %x, %x
func.func @views(%x: tensor<4x8xf32>) -> (tensor<32xf32>, tensor<2x16xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %0 = aten.view.default(%x, size = [8, 4]) : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %1 = aten.view.default(%0, size = [32]) : (tensor<8x4xf32>) -> tensor<32xf32>
  %2 = aten._unsafe_view.default(%0, size = [2, 16]) : (tensor<8x4xf32>) -> tensor<2x16xf32>
  %3 = aten.view.default(%x, size = [4, 8]) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %4 = aten.reshape.default(%x, shape = [4, -1]) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %5 = aten.expand.default(%x, size = [4, 8]) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %1, %2, %3, %4, %5 : tensor<32xf32>, tensor<2x16xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// view(reshape(x)) is kept: reshape may have copied a tensor that view could not view.
// CHECK-LABEL: func.func @view_of_reshape
// CHECK-NEXT:    %0 = aten.reshape.default(%x, shape = [8, 4])
// CHECK-NEXT:    %1 = aten.view.default(%0, size = [32])
func.func @view_of_reshape(%x: tensor<4x8xf32>) -> tensor<32xf32> {
  %0 = aten.reshape.default(%x, shape = [8, 4]) : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %1 = aten.view.default(%0, size = [32]) : (tensor<8x4xf32>) -> tensor<32xf32>
  func.return %1 : tensor<32xf32>
}

// CHECK-LABEL: func.func @aliases
// CHECK-NEXT:    func.return %x, %x, %x, %x, %x, %x
func.func @aliases(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %0 = aten.alias.default(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = aten.detach.default(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = aten.transpose.int(%x, dim0 = 1, dim1 = -1) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %3 = aten.slice.Tensor(%x, dim = 1, start = 0, end = 9223372036854775807) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %4 = aten.to.dtype(%x, dtype = f32) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %5 = aten.dropout.default(%x, p = 0.5, train = false) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %0, %1, %2, %3, %4, %5 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// CHECK-LABEL: func.func @not_aliases
// CHECK-NEXT:    %0 = aten.slice.Tensor(%x, dim = 1, start = 1)
// CHECK-NEXT:    %1 = aten.to.dtype(%x, dtype = f32, copy = true)
// CHECK-NEXT:    %2 = aten.dropout.default(%x, p = 0.5, train = true)
// CHECK-NEXT:    %3 = aten.to.dtype(%x, dtype = f16)
func.func @not_aliases(%x: tensor<4x8xf32>) -> (tensor<4x7xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf16>) {
  %0 = aten.slice.Tensor(%x, dim = 1, start = 1) : (tensor<4x8xf32>) -> tensor<4x7xf32>
  %1 = aten.to.dtype(%x, dtype = f32, copy = true) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = aten.dropout.default(%x, p = 0.5, train = true) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %3 = aten.to.dtype(%x, dtype = f16) : (tensor<4x8xf32>) -> tensor<4x8xf16>
  func.return %0, %1, %2, %3 : tensor<4x7xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf16>
}

// CHECK-LABEL: func.func @permutes
// CHECK-NEXT:    %0 = aten.permute.default(%x, dims = [2, 0, 1]) : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
// CHECK-NEXT:    func.return %x, %0, %x
func.func @permutes(%x: tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<4x2x3xf32>, tensor<2x3x4xf32>) {
  %0 = aten.permute.default(%x, dims = [0, 1, -1]) : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %1 = aten.permute.default(%x, dims = [1, 0, 2]) : (tensor<2x3x4xf32>) -> tensor<3x2x4xf32>
  %2 = aten.permute.default(%1, dims = [2, 1, 0]) : (tensor<3x2x4xf32>) -> tensor<4x2x3xf32>
  %3 = aten.permute.default(%1, dims = [1, 0, 2]) : (tensor<3x2x4xf32>) -> tensor<2x3x4xf32>
  func.return %0, %2, %3 : tensor<2x3x4xf32>, tensor<4x2x3xf32>, tensor<2x3x4xf32>
}

// CHECK-LABEL: func.func @transposes_and_squeezes
// CHECK-NEXT:    func.return %x, %v, %x, %y, %x
func.func @transposes_and_squeezes(%x: tensor<4x8xf32>, %v: tensor<8xf32>, %y: tensor<4x1xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x8xf32>) {
  %0 = aten.t.default(%x) : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %1 = aten.t.default(%0) : (tensor<8x4xf32>) -> tensor<4x8xf32>
  %2 = aten.t.default(%v) : (tensor<8xf32>) -> tensor<8xf32>
  %3 = aten.unsqueeze.default(%x, dim = -1) : (tensor<4x8xf32>) -> tensor<4x8x1xf32>
  %4 = aten.squeeze.dim(%3, dim = 2) : (tensor<4x8x1xf32>) -> tensor<4x8xf32>
  %5 = aten.squeeze.dim(%y, dim = 1) : (tensor<4x1xf32>) -> tensor<4xf32>
  %6 = aten.unsqueeze.default(%5, dim = 1) : (tensor<4xf32>) -> tensor<4x1xf32>
  %7 = aten.squeeze.dim(%x, dim = 0) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %1, %2, %4, %6, %7 : tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x8xf32>
}

// A clone of a fresh, single-use result is that result; other clones stay.
// CHECK-LABEL: func.func @copies
// CHECK-NEXT:    %0 = aten.neg.default(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %1 = aten.clone.default(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %2 = aten.exp.default(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %3 = aten.clone.default(%2) : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %4 = aten.abs.default(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %5 = aten.clone.default(%x, memory_format = "contiguous_format")
// CHECK-NEXT:    %6 = aten.contiguous.default(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    func.return %0, %1, %2, %3, %4, %5, %6
func.func @copies(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %0 = aten.neg.default(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = aten.clone.default(%0) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = aten.clone.default(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %3 = aten.clone.default(%2) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %4 = aten.exp.default(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %5 = aten.clone.default(%4) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %6 = aten.abs.default(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %7 = aten._to_copy.default(%6, dtype = f32) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %8 = aten.clone.default(%x, memory_format = "contiguous_format") : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %9 = aten.contiguous.default(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %10 = aten.contiguous.default(%9) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %1, %3, %4, %5, %7, %8, %10 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// Unused pure ops are erased; random ones are not.
// CHECK-LABEL: func.func @dead
// CHECK-NEXT:    %0 = aten.rand.default(size = [4]) : () -> tensor<4xf32>
// CHECK-NEXT:    func.return %x
func.func @dead(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = aten.rand.default(size = [4]) : () -> tensor<4xf32>
  %1 = aten.neg.default(%x) : (tensor<4xf32>) -> tensor<4xf32>
  func.return %x : tensor<4xf32>
}

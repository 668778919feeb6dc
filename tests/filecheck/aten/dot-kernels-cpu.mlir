// RUN: kiln-opt %s -p 'dot-kernels{mode=all}' | filecheck %s

// A program for the CPU keeps its products as ATen calls (oneDNN/MKL).
// CHECK-NOT: kiln.dot_kernel
func.func @cpu(%x: tensor<32x64xf32>, %w: tensor<64x16xf32>) -> tensor<32x16xf32> {
  %0 = aten.mm.default(%x, %w) : (tensor<32x64xf32>, tensor<64x16xf32>) -> tensor<32x16xf32>
  %1 = aten.relu.default(%0) : (tensor<32x16xf32>) -> tensor<32x16xf32>
  func.return %1 : tensor<32x16xf32>
}

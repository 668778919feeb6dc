// RUN: kiln-opt %s -p 'lower-aten,fuse{report=true}' -o %t 2>&1 | filecheck %s
// RUN: kiln-opt %s -p 'lower-aten,fuse' | filecheck %s --check-prefix=IR
// RUN: sed -e 's/cuda:0/cpu/' %s | kiln-opt -p 'lower-aten,fuse{report=true}' -o %t 2>&1 | filecheck %s --check-prefix=CPU

// A bias gradient: the column sum of a pointwise [M, N] gradient that is also returned.
// In the sum's kernel (x = the column n, r = the row m) the gradient's element (m, n)
// is computed at (x = n, r = m): its points run column-major (kernel.column_major), so
// the gradient and its sum are one launch on a GPU. On the CPU, where the inner loop
// runs along r, they stay two kernels.

// CHECK: fuse: round 1: [%mul] + [%sum]: fused (vertical, pointwise prologue, column-major)
// CPU:   fuse: round 1: [%mul] + [%sum]: not fused: %sum reads %mul at "d0 + 32*r0", not where it is computed in the fused kernel

// IR:      kernel.kernel @kernel0 reduction [32] x [16] (%g: memref<16x32xf32>, %h: memref<16x32xf32>) -> (memref<16x32xf32>, memref<32xf32>) {
// IR-NEXT:   %mul = loop.pointwise [16, 32] (%g, %h) {kernel.vars = [#loop.expr<"r0">, #loop.expr<"d0">], kernel.column_major}
// IR:        %sum = loop.reduction sum [32] reduce [16] (%mul) {kernel.vars = [#loop.expr<"d0">, #loop.expr<"r0">]}
// IR-NOT:  kernel.kernel
module attributes {kiln.device = "cuda:0"} {
  func.func @bias_grad(%g: tensor<16x32xf32>, %h: tensor<16x32xf32>) -> (tensor<16x32xf32>, tensor<32xf32>) {
    %mul = aten.mul.Tensor(%g, %h) : (tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
    %sum = aten.sum.dim_IntList(%mul, dim = [0]) : (tensor<16x32xf32>) -> tensor<32xf32>
    func.return %mul, %sum : tensor<16x32xf32>, tensor<32xf32>
  }
}

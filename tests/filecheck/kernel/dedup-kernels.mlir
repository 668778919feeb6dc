// RUN: kiln-opt %s -p dedup-kernels | filecheck %s

// Three layers of relu(x @ w): @kernel0 and @kernel2 differ only in their symbol and SSA
// names, so @kernel2 goes and its launch calls @kernel0. @kernel1 reads its input
// transposed and @kernel3 compares with -0.0 instead of 0.0 (maximumf(-0.0, -0.0) vs
// maximumf(-0.0, 0.0) differ): both stay.
// CHECK:       kernel.kernel @kernel0
// CHECK:       kernel.kernel @kernel1
// CHECK-NOT:   kernel.kernel @kernel2
// CHECK:       kernel.kernel @kernel3
// CHECK-LABEL: kernel.program @chain
// CHECK:         kernel.launch @kernel0(%m0) outs(%r0)
// CHECK:         kernel.launch @kernel1(%m1) outs(%e1)
// CHECK:         kernel.launch @kernel0(%m2) outs(%r2)
// CHECK:         kernel.launch @kernel3(%m3) outs(%r3)
kernel.kernel @kernel0 pointwise [64] x [1] (%m0: memref<8x8xf32>) -> (memref<8x8xf32>) {
  %r0 = loop.pointwise [8, 8] (%m0) {kernel.vars = [#loop.expr<"d0 // 8">, #loop.expr<"d0 % 8">]} : (memref<8x8xf32>) -> memref<8x8xf32> {
  ^bb0(%d0: index, %d1: index, %in0: memref<8x8xf32>):
    %0 = loop.load %in0["8*d0 + d1"] : memref<8x8xf32>
    %1 = arith.constant 0.000000e+00 : f32
    %2 = arith.maximumf %0, %1 : f32
    loop.yield %2 : f32
  }
  kernel.yield %r0 : memref<8x8xf32>
}
kernel.kernel @kernel1 pointwise [64] x [1] (%m1: memref<8x8xf32>) -> (memref<8x8xf32>) {
  %e1 = loop.pointwise [8, 8] (%m1) {kernel.vars = [#loop.expr<"d0 // 8">, #loop.expr<"d0 % 8">]} : (memref<8x8xf32>) -> memref<8x8xf32> {
  ^bb0(%d0: index, %d1: index, %0: memref<8x8xf32>):
    %1 = loop.load %0["d0 + 8*d1"] : memref<8x8xf32>
    %2 = arith.constant 0.000000e+00 : f32
    %3 = arith.maximumf %1, %2 : f32
    loop.yield %3 : f32
  }
  kernel.yield %e1 : memref<8x8xf32>
}
kernel.kernel @kernel2 pointwise [64] x [1] (%m2: memref<8x8xf32>) -> (memref<8x8xf32>) {
  %r2 = loop.pointwise [8, 8] (%m2) {kernel.vars = [#loop.expr<"d0 // 8">, #loop.expr<"d0 % 8">]} : (memref<8x8xf32>) -> memref<8x8xf32> {
  ^bb0(%i: index, %j: index, %src: memref<8x8xf32>):
    %v = loop.load %src["8*d0 + d1"] : memref<8x8xf32>
    %zero = arith.constant 0.000000e+00 : f32
    %max = arith.maximumf %v, %zero : f32
    loop.yield %max : f32
  }
  kernel.yield %r2 : memref<8x8xf32>
}
kernel.kernel @kernel3 pointwise [64] x [1] (%m3: memref<8x8xf32>) -> (memref<8x8xf32>) {
  %r3 = loop.pointwise [8, 8] (%m3) {kernel.vars = [#loop.expr<"d0 // 8">, #loop.expr<"d0 % 8">]} : (memref<8x8xf32>) -> memref<8x8xf32> {
  ^bb0(%d0: index, %d1: index, %in0: memref<8x8xf32>):
    %0 = loop.load %in0["8*d0 + d1"] : memref<8x8xf32>
    %1 = arith.constant -0.000000e+00 : f32
    %2 = arith.maximumf %0, %1 : f32
    loop.yield %2 : f32
  }
  kernel.yield %r3 : memref<8x8xf32>
}
kernel.program @chain(%x: memref<8x8xf32>, %w: memref<8x8xf32>) -> memref<8x8xf32> {
  %m0 = kernel.extern (%x, %w) : (memref<8x8xf32>, memref<8x8xf32>) -> memref<8x8xf32> {
  ^bb0(%0: tensor<8x8xf32>, %1: tensor<8x8xf32>):
    %m0_1 = aten.mm.default(%0, %1) : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    kernel.yield %m0_1 : tensor<8x8xf32>
  }
  %r0 = kernel.alloc : memref<8x8xf32>
  kernel.launch @kernel0(%m0) outs(%r0) : (memref<8x8xf32>) -> (memref<8x8xf32>)
  %m1 = kernel.extern (%r0, %w) : (memref<8x8xf32>, memref<8x8xf32>) -> memref<8x8xf32> {
  ^bb0(%0: tensor<8x8xf32>, %1: tensor<8x8xf32>):
    %m1_1 = aten.mm.default(%0, %1) : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    kernel.yield %m1_1 : tensor<8x8xf32>
  }
  %e1 = kernel.alloc : memref<8x8xf32>
  kernel.launch @kernel1(%m1) outs(%e1) : (memref<8x8xf32>) -> (memref<8x8xf32>)
  %m2 = kernel.extern (%e1, %w) : (memref<8x8xf32>, memref<8x8xf32>) -> memref<8x8xf32> {
  ^bb0(%0: tensor<8x8xf32>, %1: tensor<8x8xf32>):
    %m2_1 = aten.mm.default(%0, %1) : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    kernel.yield %m2_1 : tensor<8x8xf32>
  }
  %r2 = kernel.alloc : memref<8x8xf32>
  kernel.launch @kernel2(%m2) outs(%r2) : (memref<8x8xf32>) -> (memref<8x8xf32>)
  %m3 = kernel.extern (%r2, %w) : (memref<8x8xf32>, memref<8x8xf32>) -> memref<8x8xf32> {
  ^bb0(%0: tensor<8x8xf32>, %1: tensor<8x8xf32>):
    %m3_1 = aten.mm.default(%0, %1) : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    kernel.yield %m3_1 : tensor<8x8xf32>
  }
  %r3 = kernel.alloc : memref<8x8xf32>
  kernel.launch @kernel3(%m3) outs(%r3) : (memref<8x8xf32>) -> (memref<8x8xf32>)
  kernel.return %r3 : memref<8x8xf32>
}

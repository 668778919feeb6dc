// RUN: kiln-opt %s --split-input-file -p elide-extern-copies | filecheck %s

// Kernel IR in, kernel IR out. @kernel0 only copies the product, in order, into a buffer
// of another shape: the extern returns ATen's result reshaped instead, and the kernel,
// launched no more, is erased.
// CHECK-NOT:   kernel.kernel @kernel0
// CHECK-LABEL: kernel.program @reshaped
// CHECK-NEXT:    %v = kernel.extern (%a, %w) : (memref<8x16xf32>, memref<16x4xf32>) -> memref<2x4x4xf32> {
// CHECK-NEXT:    ^bb0(%0: tensor<8x16xf32>, %1: tensor<16x4xf32>):
// CHECK-NEXT:      %mm = aten.mm.default(%0, %1)
// CHECK-NEXT:      %2 = aten.reshape.default(%mm, shape = [2, 4, 4]) : (tensor<8x4xf32>) -> tensor<2x4x4xf32>
// CHECK-NEXT:      kernel.yield %2 : tensor<2x4x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    kernel.return %v : memref<2x4x4xf32>
kernel.kernel @kernel0 pointwise [32] x [1] (%mm: memref<8x4xf32>) -> (memref<2x4x4xf32>) {
  %v = loop.pointwise [2, 4, 4] (%mm) {kernel.vars = [#loop.expr<"d0 // 16">, #loop.expr<"d0 // 4 % 4">, #loop.expr<"d0 % 4">]} : (memref<8x4xf32>) -> memref<2x4x4xf32> {
  ^bb0(%d0: index, %d1: index, %d2: index, %in0: memref<8x4xf32>):
    %0 = loop.load %in0["16*d0 + 4*d1 + d2"] : memref<8x4xf32>
    loop.yield %0 : f32
  }
  kernel.yield %v : memref<2x4x4xf32>
}
kernel.program @reshaped(%a: memref<8x16xf32>, %w: memref<16x4xf32>) -> memref<2x4x4xf32> {
  %mm = kernel.extern (%a, %w) : (memref<8x16xf32>, memref<16x4xf32>) -> memref<8x4xf32> {
  ^bb0(%0: tensor<8x16xf32>, %1: tensor<16x4xf32>):
    %mm_1 = aten.mm.default(%0, %1) : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
    kernel.yield %mm_1 : tensor<8x4xf32>
  }
  %v = kernel.alloc : memref<2x4x4xf32>
  kernel.launch @kernel0(%mm) outs(%v) : (memref<8x4xf32>) -> (memref<2x4x4xf32>)
  kernel.return %v : memref<2x4x4xf32>
}

// -----

// The product is also returned: the copy stays (the program needs both buffers).
// CHECK-LABEL: kernel.kernel @kernel0
// CHECK-LABEL: kernel.program @both
// CHECK:         %v = kernel.alloc : memref<2x4x4xf32>
// CHECK-NEXT:    kernel.launch @kernel0(%mm) outs(%v)
// CHECK-NEXT:    kernel.return %mm, %v
kernel.kernel @kernel0 pointwise [32] x [1] (%mm: memref<8x4xf32>) -> (memref<2x4x4xf32>) {
  %v = loop.pointwise [2, 4, 4] (%mm) {kernel.vars = [#loop.expr<"d0 // 16">, #loop.expr<"d0 // 4 % 4">, #loop.expr<"d0 % 4">]} : (memref<8x4xf32>) -> memref<2x4x4xf32> {
  ^bb0(%d0: index, %d1: index, %d2: index, %in0: memref<8x4xf32>):
    %0 = loop.load %in0["16*d0 + 4*d1 + d2"] : memref<8x4xf32>
    loop.yield %0 : f32
  }
  kernel.yield %v : memref<2x4x4xf32>
}
kernel.program @both(%a: memref<8x16xf32>, %w: memref<16x4xf32>) -> (memref<8x4xf32>, memref<2x4x4xf32>) {
  %mm = kernel.extern (%a, %w) : (memref<8x16xf32>, memref<16x4xf32>) -> memref<8x4xf32> {
  ^bb0(%0: tensor<8x16xf32>, %1: tensor<16x4xf32>):
    %mm_1 = aten.mm.default(%0, %1) : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
    kernel.yield %mm_1 : tensor<8x4xf32>
  }
  %v = kernel.alloc : memref<2x4x4xf32>
  kernel.launch @kernel0(%mm) outs(%v) : (memref<8x4xf32>) -> (memref<2x4x4xf32>)
  kernel.return %mm, %v : memref<8x4xf32>, memref<2x4x4xf32>
}

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

// -----

// Dynamic sizes: the product has %n rows and the copy's buffer [1, %n, 4], the same
// element count (BufferSizes reads the extern's body), so the copy folds and the
// reshape takes the allocation's size operand.
// CHECK-NOT:   kernel.kernel @kernel0
// CHECK-LABEL: kernel.program @dynamic
// CHECK-NEXT:    %v = kernel.extern (%a, %w) syms(%n) : (memref<?x16xf32>, memref<16x4xf32>, index) -> memref<1x?x4xf32> {
// CHECK-NEXT:    ^bb0(%0: tensor<?x16xf32>, %1: tensor<16x4xf32>, %2: index):
// CHECK-NEXT:      %3 = aten.as_strided.default(%0, size = [%2, 16], stride = [16, 1])
// CHECK-NEXT:      %mm = aten.mm.default(%3, %1)
// CHECK-NEXT:      %4 = aten.reshape.default(%mm, shape = [1, %2, 4]) : (tensor<?x4xf32>, index) -> tensor<1x?x4xf32>
// CHECK-NEXT:      kernel.yield %4 : tensor<1x?x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    kernel.return %v : memref<1x?x4xf32>
kernel.kernel @kernel0 pointwise ["4*s0"] x [1] (%mm: memref<?x4xf32>, %n: index) -> (memref<1x?x4xf32>) {
  %v = loop.pointwise [1, "s0", 4] (%mm) syms(%n) {kernel.vars = [#loop.expr<"0">, #loop.expr<"d0 // 4">, #loop.expr<"d0 % 4">]} : (memref<?x4xf32>, index) -> memref<1x?x4xf32> {
  ^bb0(%d0: index, %d1: index, %d2: index, %in0: memref<?x4xf32>):
    %0 = loop.load %in0["4*d0*s0 + 4*d1 + d2"] : memref<?x4xf32>
    loop.yield %0 : f32
  }
  kernel.yield %v : memref<1x?x4xf32>
}
kernel.program @dynamic(%n: index, %a: memref<?x16xf32>, %w: memref<16x4xf32>) -> memref<1x?x4xf32> {
  %mm = kernel.extern (%a, %w) syms(%n) : (memref<?x16xf32>, memref<16x4xf32>, index) -> memref<?x4xf32> {
  ^bb0(%0: tensor<?x16xf32>, %1: tensor<16x4xf32>, %2: index):
    %3 = aten.as_strided.default(%0, size = [%2, 16], stride = [16, 1]) : (tensor<?x16xf32>, index) -> tensor<?x16xf32>
    %mm_1 = aten.mm.default(%3, %1) : (tensor<?x16xf32>, tensor<16x4xf32>) -> tensor<?x4xf32>
    kernel.yield %mm_1 : tensor<?x4xf32>
  }
  %v = kernel.alloc(%n) : memref<1x?x4xf32>
  kernel.launch @kernel0(%mm, %n) outs(%v) : (memref<?x4xf32>, index) -> (memref<1x?x4xf32>)
  kernel.return %v : memref<1x?x4xf32>
}

// -----

// An in-order copy of the first %k rows of a product of %n rows: nothing proves the
// counts equal (it may be a prefix), so the copy stays.
// CHECK-LABEL: kernel.kernel @kernel0
// CHECK-LABEL: kernel.program @prefix
// CHECK:         %v = kernel.alloc(%k) : memref<1x?x4xf32>
// CHECK-NEXT:    kernel.launch @kernel0(%mm, %k) outs(%v)
kernel.kernel @kernel0 pointwise ["4*s0"] x [1] (%mm: memref<?x4xf32>, %k: index) -> (memref<1x?x4xf32>) {
  %v = loop.pointwise [1, "s0", 4] (%mm) syms(%k) {kernel.vars = [#loop.expr<"0">, #loop.expr<"d0 // 4">, #loop.expr<"d0 % 4">]} : (memref<?x4xf32>, index) -> memref<1x?x4xf32> {
  ^bb0(%d0: index, %d1: index, %d2: index, %in0: memref<?x4xf32>):
    %0 = loop.load %in0["4*d0*s0 + 4*d1 + d2"] : memref<?x4xf32>
    loop.yield %0 : f32
  }
  kernel.yield %v : memref<1x?x4xf32>
}
kernel.program @prefix(%n: index, %k: index, %a: memref<?x16xf32>, %w: memref<16x4xf32>) -> memref<1x?x4xf32> {
  %mm = kernel.extern (%a, %w) syms(%n) : (memref<?x16xf32>, memref<16x4xf32>, index) -> memref<?x4xf32> {
  ^bb0(%0: tensor<?x16xf32>, %1: tensor<16x4xf32>, %2: index):
    %3 = aten.as_strided.default(%0, size = [%2, 16], stride = [16, 1]) : (tensor<?x16xf32>, index) -> tensor<?x16xf32>
    %mm_1 = aten.mm.default(%3, %1) : (tensor<?x16xf32>, tensor<16x4xf32>) -> tensor<?x4xf32>
    kernel.yield %mm_1 : tensor<?x4xf32>
  }
  %v = kernel.alloc(%k) : memref<1x?x4xf32>
  kernel.launch @kernel0(%mm, %k) outs(%v) : (memref<?x4xf32>, index) -> (memref<1x?x4xf32>)
  kernel.return %v : memref<1x?x4xf32>
}

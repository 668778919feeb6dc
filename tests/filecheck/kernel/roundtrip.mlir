// RUN: kiln-opt %s | kiln-opt | filecheck %s

// The kernel dialect prints and parses back: kernels with their iteration space, nodes
// and tiling attributes; the program with allocations, launches, extern calls, reuse
// and frees.

// CHECK-LABEL: kernel.kernel @kernel0 persistent [4] x [8] (%x: memref<4x8xf32>, %s0: index) -> (memref<4x8xf32>) attributes {tiling = #kernel.config<XBLOCK = 1, RBLOCK = 8, num_warps = 1, num_stages = 1>, configs = [#kernel.config<XBLOCK = 1, RBLOCK = 8, num_warps = 1, num_stages = 1>, #kernel.config<XBLOCK = 4, RBLOCK = 8, num_warps = 1, num_stages = 1>], reduction_hint = "inner"} {
// CHECK-NEXT:    %m = loop.reduction max [4] reduce [8] (%x) {kernel.vars = [#loop.expr<"d0">, #loop.expr<"r0">]} : (memref<4x8xf32>) -> memref<4xf32> {
// CHECK:         %e = loop.pointwise [4, 8] (%x, %m) {kernel.vars = [#loop.expr<"d0">, #loop.expr<"r0">]} : (memref<4x8xf32>, memref<4xf32>) -> memref<4x8xf32> {
// CHECK:         kernel.yield %e : memref<4x8xf32>
// CHECK-NEXT:  }
kernel.kernel @kernel0 persistent [4] x [8] (%x: memref<4x8xf32>, %s0: index) -> (memref<4x8xf32>) attributes {tiling = #kernel.config<XBLOCK = 1, RBLOCK = 8, num_warps = 1, num_stages = 1>, configs = [#kernel.config<XBLOCK = 1, RBLOCK = 8, num_warps = 1, num_stages = 1>, #kernel.config<XBLOCK = 4, RBLOCK = 8, num_warps = 1, num_stages = 1>], reduction_hint = "inner"} {
  %m = loop.reduction max [4] reduce [8] (%x) {kernel.vars = [#loop.expr<"d0">, #loop.expr<"r0">]} : (memref<4x8xf32>) -> memref<4xf32> {
  ^bb0(%d0: index, %r0: index, %in0: memref<4x8xf32>):
    %v = loop.load %in0["8*d0 + r0"] : memref<4x8xf32>
    loop.yield %v : f32
  }
  %e = loop.pointwise [4, 8] (%x, %m) {kernel.vars = [#loop.expr<"d0">, #loop.expr<"r0">]} : (memref<4x8xf32>, memref<4xf32>) -> memref<4x8xf32> {
  ^bb0(%d0: index, %d1: index, %in0: memref<4x8xf32>, %in1: memref<4xf32>):
    %a = loop.load %in0["8*d0 + d1"] : memref<4x8xf32>
    %b = loop.load %in1["d0"] : memref<4xf32>
    %c = arith.subf %a, %b : f32
    loop.yield %c : f32
  }
  kernel.yield %e : memref<4x8xf32>
}

// A pointwise kernel over a symbolic size, with a 2-D tile.
// CHECK-LABEL: kernel.kernel @kernel1 pointwise ["8*s0"] x [1] (%y: memref<?x8xf32>, %s0: index) -> (memref<8x?xf32>) attributes {ynumel = #loop.expr<"8">} {
kernel.kernel @kernel1 pointwise ["8*s0"] x [1] (%y: memref<?x8xf32>, %s0: index) -> (memref<8x?xf32>) attributes {ynumel = #loop.expr<"8">} {
  %t = loop.pointwise [8, "s0"] (%y) syms(%s0) {kernel.vars = [#loop.expr<"d0 // s0">, #loop.expr<"d0 % s0">]} : (memref<?x8xf32>, index) -> memref<8x?xf32> {
  ^bb0(%d0: index, %d1: index, %in0: memref<?x8xf32>):
    %v = loop.load %in0["d0 + 8*d1"] : memref<?x8xf32>
    loop.yield %v : f32
  }
  kernel.yield %t : memref<8x?xf32>
}

// CHECK-LABEL: kernel.program @forward(%x: memref<4x8xf32> {kiln.name = "x"}, %w: memref<8x3xf32>, %n: index) -> memref<4x3xf32> attributes {kiln.outputs = "0"} {
// CHECK-NEXT:    %0 = kernel.alloc : memref<4x8xf32>
// CHECK-NEXT:    kernel.launch @kernel0(%x, %n) outs(%0) : (memref<4x8xf32>, index) -> (memref<4x8xf32>)
// CHECK-NEXT:    %1 = kernel.extern (%0, %w) : (memref<4x8xf32>, memref<8x3xf32>) -> memref<4x3xf32> {
// CHECK-NEXT:    ^bb0(%a: tensor<4x8xf32>, %b: tensor<8x3xf32>):
// CHECK-NEXT:      %c = aten.mm.default(%a, %b) : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT:      kernel.yield %c : tensor<4x3xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    %2 = kernel.reuse %0 : memref<4x8xf32> -> memref<32xf32>
// CHECK-NEXT:    %3 = kernel.alloc(%n) : memref<8x?xf32>
// CHECK-NEXT:    kernel.free %3 : memref<8x?xf32>
// CHECK-NEXT:    kernel.free %2 : memref<32xf32>
// CHECK-NEXT:    kernel.return %1 : memref<4x3xf32>
kernel.program @forward(%x: memref<4x8xf32> {kiln.name = "x"}, %w: memref<8x3xf32>, %n: index) -> memref<4x3xf32> attributes {kiln.outputs = "0"} {
  %0 = kernel.alloc : memref<4x8xf32>
  kernel.launch @kernel0(%x, %n) outs(%0) : (memref<4x8xf32>, index) -> (memref<4x8xf32>)
  %1 = kernel.extern (%0, %w) : (memref<4x8xf32>, memref<8x3xf32>) -> memref<4x3xf32> {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<8x3xf32>):
    %c = aten.mm.default(%a, %b) : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
    kernel.yield %c : tensor<4x3xf32>
  }
  %2 = kernel.reuse %0 : memref<4x8xf32> -> memref<32xf32>
  %3 = kernel.alloc(%n) : memref<8x?xf32>
  kernel.free %3 : memref<8x?xf32>
  kernel.free %2 : memref<32xf32>
  kernel.return %1 : memref<4x3xf32>
}

// RUN: kiln-opt %s --split-input-file -p 'buffer-reuse{report=true}' 2>&1 | filecheck %s

// The inputs are kernel-level programs (what `decompose,lower-aten,fuse` produce from
// small aten functions), so that this pass runs alone.

// A chain of matrix products and activations. Buffers are freed after their last use;
// an activation writes into the product it consumes (in place, same positions); the
// transposed activation cannot, and reuses a dead buffer of the same size instead.
// CHECK:      buffer-reuse: @chain: peak 1536 B as written, 512 B with frees, 512 B after reuse and in-place; allocations 6 -> 3, 1 reused, 2 in place
// CHECK-LABEL: kernel.program @chain
// CHECK-NEXT:    %m0 = kernel.extern (%x, %w)
// CHECK:         kernel.launch @kernel0(%m0) outs(%m0)
// CHECK-NEXT:    %m1 = kernel.extern (%m0, %w)
// CHECK:         %e1 = kernel.reuse %m0 : memref<8x8xf32> -> memref<8x8xf32>
// CHECK-NEXT:    kernel.launch @kernel1(%m1) outs(%e1)
// CHECK-NEXT:    kernel.free %m1 : memref<8x8xf32>
// CHECK-NEXT:    %m2 = kernel.extern (%e1, %w)
// CHECK:         kernel.free %e1 : memref<8x8xf32>
// CHECK-NEXT:    kernel.launch @kernel2(%m2) outs(%m2)
// CHECK-NEXT:    kernel.return %m2
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
    %4 = math.exp %3 : f32
    loop.yield %4 : f32
  }
  kernel.yield %e1 : memref<8x8xf32>
}
kernel.kernel @kernel2 pointwise [64] x [1] (%m2: memref<8x8xf32>) -> (memref<8x8xf32>) {
  %r2 = loop.pointwise [8, 8] (%m2) {kernel.vars = [#loop.expr<"d0 // 8">, #loop.expr<"d0 % 8">]} : (memref<8x8xf32>) -> memref<8x8xf32> {
  ^bb0(%d0: index, %d1: index, %in0: memref<8x8xf32>):
    %0 = loop.load %in0["8*d0 + d1"] : memref<8x8xf32>
    %1 = arith.constant 0.000000e+00 : f32
    %2 = arith.maximumf %0, %1 : f32
    loop.yield %2 : f32
  }
  kernel.yield %r2 : memref<8x8xf32>
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
  kernel.return %r2 : memref<8x8xf32>
}

// -----

// softmax reads each element of the product only at the point that overwrites it (the
// reductions run first): the result goes in place and the peak halves.
// CHECK:      buffer-reuse: @softmax_mm: peak 1024 B as written, 1024 B with frees, 512 B after reuse and in-place; allocations 2 -> 1, 0 reused, 1 in place
// CHECK-LABEL: kernel.program @softmax_mm
// CHECK-NEXT:    %m = kernel.extern (%x, %w)
// CHECK:         kernel.launch @kernel0(%m) outs(%m)
// CHECK-NEXT:    kernel.return %m
kernel.kernel @kernel0 reduction [8] x [16] (%m: memref<8x16xf32>) -> (memref<8x16xf32>) {
  %amax = loop.reduction max [8, 1] reduce [16] (%m) {kernel.vars = [#loop.expr<"d0">, #loop.expr<"0">, #loop.expr<"r0">]} : (memref<8x16xf32>) -> memref<8x1xf32> {
  ^bb0(%d0: index, %d1: index, %r0: index, %in0: memref<8x16xf32>):
    %0 = loop.load %in0["16*d0 + r0"] : memref<8x16xf32>
    loop.yield %0 : f32
  }
  %exp = loop.pointwise [8, 16] (%m, %amax) {kernel.vars = [#loop.expr<"d0">, #loop.expr<"r0">]} : (memref<8x16xf32>, memref<8x1xf32>) -> memref<8x16xf32> {
  ^bb0(%d0: index, %d1: index, %0: memref<8x16xf32>, %1: memref<8x1xf32>):
    %2 = loop.load %0["16*d0 + d1"] : memref<8x16xf32>
    %3 = loop.load %1["d0"] : memref<8x1xf32>
    %4 = arith.subf %2, %3 : f32
    %5 = math.exp %4 : f32
    loop.yield %5 : f32
  }
  %sum1 = loop.reduction sum [8, 1] reduce [16] (%exp) {kernel.vars = [#loop.expr<"d0">, #loop.expr<"0">, #loop.expr<"r0">]} : (memref<8x16xf32>) -> memref<8x1xf32> {
  ^bb0(%d0: index, %d1: index, %r0: index, %in0: memref<8x16xf32>):
    %0 = loop.load %in0["16*d0 + r0"] : memref<8x16xf32>
    loop.yield %0 : f32
  }
  %div = loop.pointwise [8, 16] (%exp, %sum1) {kernel.vars = [#loop.expr<"d0">, #loop.expr<"r0">]} : (memref<8x16xf32>, memref<8x1xf32>) -> memref<8x16xf32> {
  ^bb0(%d0: index, %d1: index, %in0: memref<8x16xf32>, %in1: memref<8x1xf32>):
    %0 = loop.load %in0["16*d0 + d1"] : memref<8x16xf32>
    %1 = loop.load %in1["d0"] : memref<8x1xf32>
    %2 = arith.divf %0, %1 : f32
    loop.yield %2 : f32
  }
  kernel.yield %div : memref<8x16xf32>
}
kernel.program @softmax_mm(%x: memref<8x16xf32>, %w: memref<16x16xf32>) -> memref<8x16xf32> {
  %m = kernel.extern (%x, %w) : (memref<8x16xf32>, memref<16x16xf32>) -> memref<8x16xf32> {
  ^bb0(%0: tensor<8x16xf32>, %1: tensor<16x16xf32>):
    %m_1 = aten.mm.default(%0, %1) : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
    kernel.yield %m_1 : tensor<8x16xf32>
  }
  %div = kernel.alloc : memref<8x16xf32>
  kernel.launch @kernel0(%m) outs(%div) : (memref<8x16xf32>) -> (memref<8x16xf32>)
  kernel.return %div : memref<8x16xf32>
}

// -----

// A kernel reading its input transposed must not overwrite it: a new buffer.
// CHECK:      buffer-reuse: @transposed: {{.*}} 0 in place
// CHECK-LABEL: kernel.program @transposed
// CHECK:         %[[T:.*]] = kernel.alloc : memref<8x8xf32>
// CHECK-NEXT:    kernel.launch @kernel0(%m) outs(%[[T]])
// CHECK-NEXT:    kernel.free %m
kernel.kernel @kernel0 pointwise [64] x [1] (%m: memref<8x8xf32>) -> (memref<8x8xf32>) {
  %e = loop.pointwise [8, 8] (%m) {kernel.vars = [#loop.expr<"d0 // 8">, #loop.expr<"d0 % 8">]} : (memref<8x8xf32>) -> memref<8x8xf32> {
  ^bb0(%d0: index, %d1: index, %in0: memref<8x8xf32>):
    %0 = loop.load %in0["d0 + 8*d1"] : memref<8x8xf32>
    %1 = math.exp %0 : f32
    loop.yield %1 : f32
  }
  kernel.yield %e : memref<8x8xf32>
}
kernel.program @transposed(%x: memref<8x8xf32>, %w: memref<8x8xf32>) -> memref<8x8xf32> {
  %m = kernel.extern (%x, %w) : (memref<8x8xf32>, memref<8x8xf32>) -> memref<8x8xf32> {
  ^bb0(%0: tensor<8x8xf32>, %1: tensor<8x8xf32>):
    %m_1 = aten.mm.default(%0, %1) : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    kernel.yield %m_1 : tensor<8x8xf32>
  }
  %e = kernel.alloc : memref<8x8xf32>
  kernel.launch @kernel0(%m) outs(%e) : (memref<8x8xf32>) -> (memref<8x8xf32>)
  kernel.return %e : memref<8x8xf32>
}

// -----

// Attention scores: the softmax reads the product of a batched matmul through a view of
// another shape. The reshape moves into the extern (its result takes the softmax's type)
// and the softmax then runs in place, as for equal types.
// CHECK:      buffer-reuse: @scores_softmax: peak 2048 B as written, 2048 B with frees, 1024 B after reuse and in-place; allocations 2 -> 1, 0 reused, 1 in place
// CHECK:      kernel.kernel @kernel0 reduction [32] x [8] (%b: memref<2x2x8x8xf32>) -> (memref<2x2x8x8xf32>)
// CHECK-LABEL: kernel.program @scores_softmax
// CHECK-NEXT:    %b = kernel.extern (%q, %k) : (memref<4x8x16xf32>, memref<4x16x8xf32>) -> memref<2x2x8x8xf32> {
// CHECK:           aten.bmm.default
// CHECK-NEXT:      %{{.*}} = aten.reshape.default(%{{.*}}, shape = [2, 2, 8, 8]) : (tensor<4x8x8xf32>) -> tensor<2x2x8x8xf32>
// CHECK:         kernel.launch @kernel0(%b) outs(%b) : (memref<2x2x8x8xf32>) -> (memref<2x2x8x8xf32>)
// CHECK-NEXT:    kernel.return %b
kernel.kernel @kernel0 reduction [32] x [8] (%b: memref<4x8x8xf32>) -> (memref<2x2x8x8xf32>) {
  %amax = loop.reduction max [2, 2, 8, 1] reduce [8] (%b) {kernel.vars = [#loop.expr<"d0 // 16">, #loop.expr<"d0 // 8 % 2">, #loop.expr<"d0 % 8">, #loop.expr<"0">, #loop.expr<"r0">]} : (memref<4x8x8xf32>) -> memref<2x2x8x1xf32> {
  ^bb0(%d0: index, %d1: index, %d2: index, %d3: index, %r0: index, %in0: memref<4x8x8xf32>):
    %0 = loop.load %in0["128*d0 + 64*d1 + 8*d2 + r0"] : memref<4x8x8xf32>
    loop.yield %0 : f32
  }
  %exp = loop.pointwise [2, 2, 8, 8] (%b, %amax) {kernel.vars = [#loop.expr<"d0 // 16">, #loop.expr<"d0 // 8 % 2">, #loop.expr<"d0 % 8">, #loop.expr<"r0">]} : (memref<4x8x8xf32>, memref<2x2x8x1xf32>) -> memref<2x2x8x8xf32> {
  ^bb0(%d0: index, %d1: index, %d2: index, %d3: index, %0: memref<4x8x8xf32>, %1: memref<2x2x8x1xf32>):
    %2 = loop.load %0["128*d0 + 64*d1 + 8*d2 + d3"] : memref<4x8x8xf32>
    %3 = loop.load %1["16*d0 + 8*d1 + d2"] : memref<2x2x8x1xf32>
    %4 = arith.subf %2, %3 : f32
    %5 = math.exp %4 : f32
    loop.yield %5 : f32
  }
  %sum1 = loop.reduction sum [2, 2, 8, 1] reduce [8] (%exp) {kernel.vars = [#loop.expr<"d0 // 16">, #loop.expr<"d0 // 8 % 2">, #loop.expr<"d0 % 8">, #loop.expr<"0">, #loop.expr<"r0">]} : (memref<2x2x8x8xf32>) -> memref<2x2x8x1xf32> {
  ^bb0(%d0: index, %d1: index, %d2: index, %d3: index, %r0: index, %in0: memref<2x2x8x8xf32>):
    %0 = loop.load %in0["128*d0 + 64*d1 + 8*d2 + r0"] : memref<2x2x8x8xf32>
    loop.yield %0 : f32
  }
  %div = loop.pointwise [2, 2, 8, 8] (%exp, %sum1) {kernel.vars = [#loop.expr<"d0 // 16">, #loop.expr<"d0 // 8 % 2">, #loop.expr<"d0 % 8">, #loop.expr<"r0">]} : (memref<2x2x8x8xf32>, memref<2x2x8x1xf32>) -> memref<2x2x8x8xf32> {
  ^bb0(%d0: index, %d1: index, %d2: index, %d3: index, %in0: memref<2x2x8x8xf32>, %in1: memref<2x2x8x1xf32>):
    %0 = loop.load %in0["128*d0 + 64*d1 + 8*d2 + d3"] : memref<2x2x8x8xf32>
    %1 = loop.load %in1["16*d0 + 8*d1 + d2"] : memref<2x2x8x1xf32>
    %2 = arith.divf %0, %1 : f32
    loop.yield %2 : f32
  }
  kernel.yield %div : memref<2x2x8x8xf32>
}
kernel.program @scores_softmax(%q: memref<4x8x16xf32>, %k: memref<4x16x8xf32>) -> memref<2x2x8x8xf32> {
  %b = kernel.extern (%q, %k) : (memref<4x8x16xf32>, memref<4x16x8xf32>) -> memref<4x8x8xf32> {
  ^bb0(%0: tensor<4x8x16xf32>, %1: tensor<4x16x8xf32>):
    %b_1 = aten.bmm.default(%0, %1) : (tensor<4x8x16xf32>, tensor<4x16x8xf32>) -> tensor<4x8x8xf32>
    kernel.yield %b_1 : tensor<4x8x8xf32>
  }
  %div = kernel.alloc : memref<2x2x8x8xf32>
  kernel.launch @kernel0(%b) outs(%div) : (memref<4x8x8xf32>) -> (memref<2x2x8x8xf32>)
  kernel.return %div : memref<2x2x8x8xf32>
}

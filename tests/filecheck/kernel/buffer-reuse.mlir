// RUN: kiln-opt %s --split-input-file -p 'decompose,lower-aten,fuse,buffer-reuse{report=true}' 2>&1 | filecheck %s

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
func.func @chain(%x: tensor<8x8xf32>, %w: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %m0 = aten.mm.default(%x, %w) : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %r0 = aten.relu.default(%m0) : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %m1 = aten.mm.default(%r0, %w) : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %r1 = aten.relu.default(%m1) : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %t1 = aten.t.default(%r1) : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %e1 = aten.exp.default(%t1) : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %m2 = aten.mm.default(%e1, %w) : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %r2 = aten.relu.default(%m2) : (tensor<8x8xf32>) -> tensor<8x8xf32>
  func.return %r2 : tensor<8x8xf32>
}

// -----

// softmax reads each element of the product only at the point that overwrites it (the
// reductions run first): the result goes in place and the peak halves.
// CHECK:      buffer-reuse: @softmax_mm: peak 1024 B as written, 1024 B with frees, 512 B after reuse and in-place; allocations 2 -> 1, 0 reused, 1 in place
// CHECK-LABEL: kernel.program @softmax_mm
// CHECK-NEXT:    %m = kernel.extern (%x, %w)
// CHECK:         kernel.launch @kernel0(%m) outs(%m)
// CHECK-NEXT:    kernel.return %m
func.func @softmax_mm(%x: tensor<8x16xf32>, %w: tensor<16x16xf32>) -> tensor<8x16xf32> {
  %m = aten.mm.default(%x, %w) : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %s = aten._softmax.default(%m, dim = -1, half_to_float = false) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  func.return %s : tensor<8x16xf32>
}

// -----

// A kernel reading its input transposed must not overwrite it: a new buffer.
// CHECK:      buffer-reuse: @transposed: {{.*}} 0 in place
// CHECK-LABEL: kernel.program @transposed
// CHECK:         %[[T:.*]] = kernel.alloc : memref<8x8xf32>
// CHECK-NEXT:    kernel.launch @kernel0(%m) outs(%[[T]])
// CHECK-NEXT:    kernel.free %m
func.func @transposed(%x: tensor<8x8xf32>, %w: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %m = aten.mm.default(%x, %w) : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %t = aten.t.default(%m) : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %e = aten.exp.default(%t) : (tensor<8x8xf32>) -> tensor<8x8xf32>
  func.return %e : tensor<8x8xf32>
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
func.func @scores_softmax(%q: tensor<4x8x16xf32>, %k: tensor<4x16x8xf32>) -> tensor<2x2x8x8xf32> {
  %b = aten.bmm.default(%q, %k) : (tensor<4x8x16xf32>, tensor<4x16x8xf32>) -> tensor<4x8x8xf32>
  %v = aten.view.default(%b, size = [2, 2, 8, 8]) : (tensor<4x8x8xf32>) -> tensor<2x2x8x8xf32>
  %s = aten._softmax.default(%v, dim = -1, half_to_float = false) : (tensor<2x2x8x8xf32>) -> tensor<2x2x8x8xf32>
  func.return %s : tensor<2x2x8x8xf32>
}

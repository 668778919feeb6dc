// RUN: kiln-opt %s --split-input-file --verify-diagnostics | filecheck %s

// An address symbol with no index operand behind it.
cpp.func @unknown_operand(%in_ptr0: memref<4xf32>) outs(%out_ptr0: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %0 = cpp.load %in_ptr0["i1"](%c0) : memref<4xf32>
  cpp.return
}
// CHECK: {{.*}}verify-errors.mlir:[[# @LINE - 3]]:8: error: 'cpp.load' op index 'i1' uses i1; only i0..i0 (its 1 index operand(s)) exist here

// -----

// Sizes come after the buffers.
cpp.func @order(%s0: index, %in_ptr0: memref<4xf32>) outs(%out_ptr0: memref<4xf32>) {
  cpp.return
}
// CHECK: error: 'cpp.func' op @order: parameters must be buffers (memref) followed by sizes (index), got memref<4xf32>

// -----

// A stored value must have the buffer's element type.
cpp.func @store_type(%in_ptr0: memref<4xf32>) outs(%out_ptr0: memref<4xi64>) {
  %c0 = arith.constant 0 : index
  %0 = cpp.load %in_ptr0["i0"](%c0) : memref<4xf32>
  "cpp.store"(%0, %out_ptr0, %c0) <{index = #loop.expr<"i0">}> : (f32, memref<4xi64>, index) -> ()
  cpp.return
}
// CHECK: error: 'cpp.store' op cannot store a f32 into memref<4xi64>

// -----

// Only a parallel loop takes an 'if' condition.
cpp.func @simd_if(%in_ptr0: memref<4xf32>) outs(%out_ptr0: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %t = arith.constant true
  cpp.for simd (%x0) = (%c0) to (%c4) if %t {
  }
  cpp.return
}
// CHECK: error: 'cpp.for' op only a parallel loop takes an 'if' condition

// -----

// One bound per induction variable.
cpp.func @bounds(%in_ptr0: memref<4xf32>) outs(%out_ptr0: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  cpp.for serial (%x0, %x1) = (%c0) to (%c4, %c4) {
  }
  cpp.return
}
// CHECK: error: 'cpp.for' op 1 lower bounds, 2 upper bounds and 2 steps; they must match

// -----

// A transposed tile moves 4-byte elements, 16 x 16 of them.
cpp.func @tile_elements(%in_ptr0: memref<64x64xf64>) outs(%out_ptr0: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %tile = cpp.alloca : memref<256xf64>
  cpp.transpose_tile %in_ptr0["i0"](%c0) stride 64 into %tile : memref<64x64xf64>, memref<256xf64>
  cpp.return
}
// CHECK: error: 'cpp.transpose_tile' op only 4-byte elements are supported, not f64

// -----

cpp.func @tile_shape(%in_ptr0: memref<64x64xf32>) outs(%out_ptr0: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %tile = cpp.alloca : memref<64xf32>
  cpp.transpose_tile %in_ptr0["i0"](%c0) stride 64 into %tile : memref<64x64xf32>, memref<64xf32>
  cpp.return
}
// CHECK: error: 'cpp.transpose_tile' op the tile must be a memref<256x...>, not memref<64xf32>

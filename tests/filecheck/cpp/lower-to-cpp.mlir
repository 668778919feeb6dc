// RUN: kiln-opt %s --split-input-file -p 'lower-to-cpp{threads=2}' | filecheck %s

// The inputs are kernel-level programs (what `lower-aten,fuse` produce from small aten
// functions), so that this pass runs alone.

// A pointwise kernel: the rows shared out among threads, each row one vector loop; the
// program's launch now calls the cpp.func. (The bias broadcast keeps two dims; the
// loop-invariant constant moves out of the vector loop.)

// CHECK-LABEL: cpp.func @kernel0(%in_ptr0: memref<64x32xf32>, %in_ptr1: memref<32xf32>) outs(%out_ptr0: memref<64x32xf32>)
// CHECK-SAME:    provenance = ["kernel0: pointwise kernel over [2048] x [1]", "%relu: pointwise [64, 32]"]
// CHECK:         cpp.for parallel (%x0) = (%c0) to (%c64) {
// CHECK-NEXT:      %0 = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      cpp.for simd (%x1) = (%c0) to (%c32) {
// CHECK-NEXT:        %1 = cpp.load %in_ptr0["32*i0 + i1"](%x0, %x1) : memref<64x32xf32>
// CHECK-NEXT:        %2 = cpp.load %in_ptr1["i0"](%x1) : memref<32xf32>
// CHECK-NEXT:        %3 = arith.addf %1, %2 : f32
// CHECK-NEXT:        %4 = arith.maximumf %3, %0 : f32
// CHECK-NEXT:        cpp.store %4, %out_ptr0["32*i0 + i1"](%x0, %x1) : memref<64x32xf32>
// CHECK:       kernel.program @bias_relu
// CHECK:         kernel.launch @kernel0(%x, %b) outs(%relu)
kernel.kernel @kernel0 pointwise [2048] x [1] (%x: memref<64x32xf32>, %b: memref<32xf32>) -> (memref<64x32xf32>) {
  %relu = loop.pointwise [64, 32] (%x, %b) {kernel.vars = [#loop.expr<"d0 // 32">, #loop.expr<"d0 % 32">]} : (memref<64x32xf32>, memref<32xf32>) -> memref<64x32xf32> {
  ^bb0(%d0: index, %d1: index, %0: memref<64x32xf32>, %1: memref<32xf32>):
    %2 = loop.load %0["32*d0 + d1"] : memref<64x32xf32>
    %3 = loop.load %1["d1"] : memref<32xf32>
    %4 = arith.addf %2, %3 : f32
    %5 = arith.constant 0.000000e+00 : f32
    %6 = arith.maximumf %4, %5 : f32
    loop.yield %6 : f32
  }
  kernel.yield %relu : memref<64x32xf32>
}
kernel.program @bias_relu(%x: memref<64x32xf32>, %b: memref<32xf32>) -> memref<64x32xf32> {
  %relu = kernel.alloc : memref<64x32xf32>
  kernel.launch @kernel0(%x, %b) outs(%relu) : (memref<64x32xf32>, memref<32xf32>) -> (memref<64x32xf32>)
  kernel.return %relu : memref<64x32xf32>
}

// -----

// An elementwise kernel over [8, 256]: one flat dim, parallel and vectorized at once.

// CHECK-LABEL: cpp.func @kernel0
// CHECK:         cpp.for parallel_simd (%x0) = (%c0) to (%c2048) {
// CHECK-NEXT:      %0 = cpp.load %in_ptr0["i0"](%x0) : memref<8x256xf32>
kernel.kernel @kernel0 pointwise [2048] x [1] (%x: memref<8x256xf32>) -> (memref<8x256xf32>) {
  %e = loop.pointwise [8, 256] (%x) {kernel.vars = [#loop.expr<"d0 // 256">, #loop.expr<"d0 % 256">]} : (memref<8x256xf32>) -> memref<8x256xf32> {
  ^bb0(%d0: index, %d1: index, %in0: memref<8x256xf32>):
    %0 = loop.load %in0["256*d0 + d1"] : memref<8x256xf32>
    %1 = math.exp %0 : f32
    loop.yield %1 : f32
  }
  kernel.yield %e : memref<8x256xf32>
}
kernel.program @flat(%x: memref<8x256xf32>) -> memref<8x256xf32> {
  %e = kernel.alloc : memref<8x256xf32>
  kernel.launch @kernel0(%x) outs(%e) : (memref<8x256xf32>) -> (memref<8x256xf32>)
  kernel.return %e : memref<8x256xf32>
}

// -----

// A transpose: 16 x 16 tiles; a full tile reads the transposed input from a local tile
// transposed in registers (cpp.transpose_tile), a partial one with strided loads.

// CHECK-LABEL: cpp.func @kernel0(%in_ptr0: memref<64x48xf32>) outs(%out_ptr0: memref<48x64xf32>)
// CHECK:         cpp.for parallel (%x0_block, %x1_block) = (%c0, %c0) to (%c3, %c4) {
// CHECK-NEXT:      %0 = cpp.index "16*i0"(%x0_block)
// CHECK:           %3 = cpp.index "16*i0"(%x1_block)
// CHECK:           %full_tile = arith.select
// CHECK-NEXT:      cpp.for serial (%{{.*}}) = (%{{.*}}) to (%full_tile) {
// CHECK-NEXT:        %tile_end = cpp.index "i0 + 16"(%0)
// CHECK-NEXT:        %tile = cpp.alloca : memref<256xf32>
// CHECK-NEXT:        cpp.transpose_tile %in_ptr0["i0 + 48*i1"](%0, %3) stride 48 into %tile : memref<64x48xf32>, memref<256xf32>
// CHECK-NEXT:        cpp.for serial (%x0) = (%0) to (%tile_end) {
// CHECK:               cpp.for simd (%x1) = (%3) to (%tile_end_1) {
// CHECK-NEXT:            %{{.*}} = cpp.load %tile["16*i0 - 16*i1 + i2 - i3"](%x0, %0, %x1, %3) : memref<256xf32>
// CHECK:           cpp.for serial (%{{.*}}) = (%full_tile) to (%{{.*}}) {
// CHECK-NEXT:        cpp.for serial (%x0_1) = (%0) to (%2) {
// CHECK:               cpp.for simd (%x1_1) = (%3) to (%5) {
// CHECK-NEXT:            %{{.*}} = cpp.load %in_ptr0["i0 + 48*i1"](%x0_1, %x1_1) : memref<64x48xf32>
kernel.kernel @kernel0 pointwise [3072] x [1] (%x: memref<64x48xf32>) -> (memref<48x64xf32>) {
  %r = loop.pointwise [48, 64] (%x) {kernel.vars = [#loop.expr<"d0 // 64">, #loop.expr<"d0 % 64">]} : (memref<64x48xf32>) -> memref<48x64xf32> {
  ^bb0(%d0: index, %d1: index, %in0: memref<64x48xf32>):
    %0 = loop.load %in0["d0 + 48*d1"] : memref<64x48xf32>
    %1 = arith.constant 0.000000e+00 : f32
    %2 = arith.maximumf %0, %1 : f32
    loop.yield %2 : f32
  }
  kernel.yield %r : memref<48x64xf32>
}
kernel.program @transpose(%x: memref<64x48xf32>) -> memref<48x64xf32> {
  %r = kernel.alloc : memref<48x64xf32>
  kernel.launch @kernel0(%x) outs(%r) : (memref<64x48xf32>) -> (memref<48x64xf32>)
  kernel.return %r : memref<48x64xf32>
}

// -----

// A row reduction: each row scalar code, the reduction in blocks of 32 lanes (the
// largest power of two in the row, at most 64) with per-lane accumulators, a
// vectorized tail, then a tree over the lanes.

// CHECK-LABEL: cpp.func @kernel0(%in_ptr0: memref<8x40xf32>) outs(%out_ptr0: memref<8xf32>)
// CHECK:         cpp.for serial (%x0) = (%c0) to (%c8) {
// CHECK-NEXT:      %acc0 = cpp.alloca : memref<32xf32>
// CHECK:           cpp.for serial (%r0_block) = (%c0) to (%c32) step (32) {
// CHECK-NEXT:        cpp.for simd (%l_1) = (%c0) to (%c32) {
// CHECK-NEXT:          %r0 = cpp.index "i0 + i1"(%r0_block, %l_1)
// CHECK-NEXT:          %{{.*}} = cpp.load %in_ptr0["i0 + 40*i1"](%r0, %x0) : memref<8x40xf32>
// CHECK:           cpp.for simd (%l_2) = (%c0) to (%c8) {
// CHECK:           cpp.for simd (%l_3) = (%c0) to (%c16) {
// CHECK:             %{{.*}} = cpp.index "i0 + 16"(%l_3)
// CHECK:           cpp.store %{{.*}}, %out_ptr0["i0"](%x0) : memref<8xf32>
kernel.kernel @kernel0 reduction [8] x [40] (%x: memref<8x40xf32>) -> (memref<8xf32>) {
  %m = loop.reduction max [8] reduce [40] (%x) {kernel.vars = [#loop.expr<"d0">, #loop.expr<"r0">]} : (memref<8x40xf32>) -> memref<8xf32> {
  ^bb0(%d0: index, %r0: index, %in0: memref<8x40xf32>):
    %0 = loop.load %in0["40*d0 + r0"] : memref<8x40xf32>
    loop.yield %0 : f32
  }
  kernel.yield %m : memref<8xf32>
}
kernel.program @row_max(%x: memref<8x40xf32>) -> memref<8xf32> {
  %m = kernel.alloc : memref<8xf32>
  kernel.launch @kernel0(%x) outs(%m) : (memref<8x40xf32>) -> (memref<8xf32>)
  kernel.return %m : memref<8xf32>
}

// -----

// A column reduction: vectorized across 64 outputs per block instead, the reduction
// serial around the lane loop, in cascaded blocks for precision.

// CHECK-LABEL: cpp.func @kernel0(%in_ptr0: memref<40x96xf32>) outs(%out_ptr0: memref<96xf32>)
// CHECK:         cpp.for parallel (%x_block) = (%c0) to (%c2) {
// CHECK-NEXT:      %x_start = cpp.index "64*i0"(%x_block)
// CHECK:           %acc0 = cpp.alloca : memref<64xf32>
// CHECK:           cpp.for serial (%r0_block) = (%c0) to (%c40) step (64) {
// CHECK-NEXT:        %acc0_0_part = cpp.alloca : memref<64xf32>
// CHECK:             cpp.for serial (%r0) = (%r0_block) to (%{{.*}}) {
// CHECK-NEXT:          cpp.for simd (%l_2) = (%c0) to (%1) {
// CHECK-NEXT:            %x0 = cpp.index "i0 + i1"(%x_start, %l_2)
// CHECK-NEXT:            %{{.*}} = cpp.load %in_ptr0["96*i0 + i1"](%r0, %x0) : memref<40x96xf32>
kernel.kernel @kernel0 reduction [96] x [40] (%x: memref<40x96xf32>) -> (memref<96xf32>) {
  %s = loop.reduction sum [96] reduce [40] (%x) {kernel.vars = [#loop.expr<"d0">, #loop.expr<"r0">]} : (memref<40x96xf32>) -> memref<96xf32> {
  ^bb0(%d0: index, %r0: index, %in0: memref<40x96xf32>):
    %0 = loop.load %in0["d0 + 96*r0"] : memref<40x96xf32>
    loop.yield %0 : f32
  }
  kernel.yield %s : memref<96xf32>
}
kernel.program @column_sum(%x: memref<40x96xf32>) -> memref<96xf32> {
  %s = kernel.alloc : memref<96xf32>
  kernel.launch @kernel0(%x) outs(%s) : (memref<40x96xf32>) -> (memref<96xf32>)
  kernel.return %s : memref<96xf32>
}

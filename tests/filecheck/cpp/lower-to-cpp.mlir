// RUN: kiln-opt %s --split-input-file -p 'lower-aten,fuse,lower-to-cpp{threads=2}' | filecheck %s

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
func.func @bias_relu(%x: tensor<64x32xf32>, %b: tensor<32xf32>) -> tensor<64x32xf32> {
  %add = aten.add.Tensor(%x, %b) : (tensor<64x32xf32>, tensor<32xf32>) -> tensor<64x32xf32>
  %relu = aten.relu.default(%add) : (tensor<64x32xf32>) -> tensor<64x32xf32>
  func.return %relu : tensor<64x32xf32>
}

// -----

// An elementwise kernel over [8, 256]: one flat dim, parallel and vectorized at once.

// CHECK-LABEL: cpp.func @kernel0
// CHECK:         cpp.for parallel_simd (%x0) = (%c0) to (%c2048) {
// CHECK-NEXT:      %0 = cpp.load %in_ptr0["i0"](%x0) : memref<8x256xf32>
func.func @flat(%x: tensor<8x256xf32>) -> tensor<8x256xf32> {
  %e = aten.exp.default(%x) : (tensor<8x256xf32>) -> tensor<8x256xf32>
  func.return %e : tensor<8x256xf32>
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
func.func @transpose(%x: tensor<64x48xf32>) -> tensor<48x64xf32> {
  %t = aten.t.default(%x) : (tensor<64x48xf32>) -> tensor<48x64xf32>
  %r = aten.relu.default(%t) : (tensor<48x64xf32>) -> tensor<48x64xf32>
  func.return %r : tensor<48x64xf32>
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
func.func @row_max(%x: tensor<8x40xf32>) -> tensor<8xf32> {
  %m = aten.amax.default(%x, dim = [1]) : (tensor<8x40xf32>) -> tensor<8xf32>
  func.return %m : tensor<8xf32>
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
func.func @column_sum(%x: tensor<40x96xf32>) -> tensor<96xf32> {
  %s = aten.sum.dim_IntList(%x, dim = [0]) : (tensor<40x96xf32>) -> tensor<96xf32>
  func.return %s : tensor<96xf32>
}

// RUN: kiln-opt %s -p cpp-uniform-masks | filecheck %s
// RUN: kiln-opt %s -p cpp-uniform-masks,cpp-uniform-masks | filecheck %s

// Cpp IR in, cpp IR out. A 3-tap max over rows, padded by one row on each side, over
// 8 channels: each tap's load is masked by a bound of its row, the same for every lane
// of the simd loop. The loop is versioned: plain loads when both bounds hold (every
// interior row), the masked original otherwise. Running the pass again changes nothing.
// CHECK-LABEL: cpp.func @kernel0
// CHECK:           %[[BOTH:.*]] = arith.andi %up, %down : i1
// CHECK:           %in_bounds = arith.select %[[BOTH]], %{{.*}}, %{{.*}} : index
// CHECK-NEXT:      cpp.for serial (%{{.*}}) = (%{{.*}}) to (%in_bounds) {
// CHECK:             cpp.for simd (%x1) = (%c0) to (%c8) {
// CHECK-NEXT:          %[[A:.*]] = cpp.load %in_ptr0["8*i0 + i1 - 8"](%x0, %x1) : memref<6x8xf32>
// CHECK-NEXT:          %[[B:.*]] = cpp.load %in_ptr0["8*i0 + i1"](%x0, %x1) : memref<6x8xf32>
// CHECK-NEXT:          %{{.*}} = arith.maximumf %[[A]], %[[B]] : f32
// CHECK-NEXT:          %{{.*}} = cpp.load %in_ptr0["8*i0 + i1 + 8"](%x0, %x1) : memref<6x8xf32>
// CHECK:           cpp.for serial (%{{.*}}) = (%in_bounds) to (%{{.*}}) {
// CHECK-NEXT:        cpp.for simd (%x1_1) = (%c0) to (%c8) attributes {kiln.masks_versioned} {
// CHECK-NEXT:          %{{.*}} = cpp.load %in_ptr0["8*i0 + i1 - 8"](%x0, %x1_1) if %up else 0.0
// CHECK-NOT:     in_bounds
// CHECK:         cpp.return
cpp.func @kernel0(%in_ptr0: memref<6x8xf32>) outs(%out_ptr0: memref<6x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c5 = arith.constant 5 : index
  %c6 = arith.constant 6 : index
  %c8 = arith.constant 8 : index
  cpp.for serial (%x0) = (%c0) to (%c6) {
    %up = arith.cmpi sge, %x0, %c1 : index
    %down = arith.cmpi slt, %x0, %c5 : index
    cpp.for simd (%x1) = (%c0) to (%c8) {
      %a = cpp.load %in_ptr0["8*i0 + i1 - 8"](%x0, %x1) if %up else 0.0 : memref<6x8xf32>
      %b = cpp.load %in_ptr0["8*i0 + i1"](%x0, %x1) : memref<6x8xf32>
      %m = arith.maximumf %a, %b : f32
      %c = cpp.load %in_ptr0["8*i0 + i1 + 8"](%x0, %x1) if %down else 0.0 : memref<6x8xf32>
      %n = arith.maximumf %m, %c : f32
      cpp.store %n, %out_ptr0["8*i0 + i1"](%x0, %x1) : memref<6x8xf32>
    }
  }
  cpp.return
}

// A cat of two inputs along the vectorized dim's outer block (x0 < 1: the first input,
// x0 >= 1: the second). The masks never both hold, so the loop is versioned on the
// first comparison: a copy for each value, reading its input with plain loads and the
// other's fill.
// CHECK-LABEL: cpp.func @kernel1
// CHECK:           %selected = arith.select %first, %{{.*}}, %{{.*}} : index
// CHECK-NEXT:      cpp.for serial (%{{.*}}) = (%{{.*}}) to (%selected) {
// CHECK:             cpp.for simd (%x1) = (%c0) to (%c8) {
// CHECK-NEXT:          %[[A:.*]] = cpp.load %in_ptr0["8*i0 + i1"](%x0, %x1) : memref<1x8xf32>
// CHECK-NEXT:          %[[B:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:          %{{.*}} = arith.select %mask_true, %[[A]], %[[B]] : f32
// CHECK:           cpp.for serial (%{{.*}}) = (%selected) to (%{{.*}}) {
// CHECK:             cpp.for simd (%x1_1) = (%c0) to (%c8) {
// CHECK-NEXT:          %[[C:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:          %[[D:.*]] = cpp.load %in_ptr1["8*i0 + i1 - 8"](%x0, %x1_1) : memref<1x8xf32>
// CHECK-NEXT:          %{{.*}} = arith.select %mask_false{{.*}}, %[[C]], %[[D]] : f32
// CHECK-NOT:     in_bounds
// CHECK:         cpp.return
cpp.func @kernel1(%in_ptr0: memref<1x8xf32>, %in_ptr1: memref<1x8xf32>) outs(%out_ptr0: memref<2x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  cpp.for serial (%x0) = (%c0) to (%c2) {
    %first = arith.cmpi slt, %x0, %c1 : index
    %second = arith.cmpi sge, %x0, %c1 : index
    cpp.for simd (%x1) = (%c0) to (%c8) {
      %a = cpp.load %in_ptr0["8*i0 + i1"](%x0, %x1) if %first else 0.0 : memref<1x8xf32>
      %b = cpp.load %in_ptr1["8*i0 + i1 - 8"](%x0, %x1) if %second else 0.0 : memref<1x8xf32>
      %v = arith.select %first, %a, %b : f32
      cpp.store %v, %out_ptr0["8*i0 + i1"](%x0, %x1) : memref<2x8xf32>
    }
  }
  cpp.return
}
kernel.program @f(%x: memref<6x8xf32>, %p: memref<1x8xf32>, %q: memref<1x8xf32>) -> (memref<6x8xf32>, memref<2x8xf32>) {
  %d = kernel.alloc : memref<6x8xf32>
  kernel.launch @kernel0(%x) outs(%d) : (memref<6x8xf32>) -> (memref<6x8xf32>)
  %e = kernel.alloc : memref<2x8xf32>
  kernel.launch @kernel1(%p, %q) outs(%e) : (memref<1x8xf32>, memref<1x8xf32>) -> (memref<2x8xf32>)
  kernel.return %d, %e : memref<6x8xf32>, memref<2x8xf32>
}

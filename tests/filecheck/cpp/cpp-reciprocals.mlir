// RUN: kiln-opt %s -p cpp-reciprocals | filecheck %s
// RUN: kiln-opt %s -p cpp-reciprocals,cpp-reciprocals | filecheck %s

// Cpp IR in, cpp IR out. x / (y + 1) per row: the divisor is computed outside the simd
// loop, so the loop is versioned: it multiplies by the reciprocal when that is a normal
// number, and divides exactly otherwise. Running the pass again changes nothing (the
// exact version keeps its division).
// CHECK-LABEL: cpp.func @kernel0
// CHECK:           %s = arith.addf %y, %one : f32
// CHECK-NEXT:      %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:      %reciprocal = arith.divf %[[ONE]], %s : f32
// CHECK-NEXT:      %[[ABS:.*]] = math.absf %s : f32
// CHECK:           %[[OK:.*]] = arith.andi
// CHECK:           %use_reciprocal = arith.select %[[OK]], %{{.*}}, %{{.*}} : index
// CHECK-NEXT:      cpp.for serial (%{{.*}}) = (%{{.*}}) to (%use_reciprocal) {
// CHECK-NEXT:        cpp.for simd (%x1) = (%c0) to (%c8) {
// CHECK-NEXT:          %[[X:.*]] = cpp.load %in_ptr0["8*i0 + i1"](%x0, %x1) : memref<6x8xf32>
// CHECK-NEXT:          %[[Q:.*]] = arith.mulf %[[X]], %reciprocal : f32
// CHECK-NEXT:          cpp.store %[[Q]], %out_ptr0
// CHECK:           cpp.for serial (%{{.*}}) = (%use_reciprocal) to (%{{.*}}) {
// CHECK-NEXT:        cpp.for simd (%x1_1) = (%c0) to (%c8) {
// CHECK-NEXT:          %[[X2:.*]] = cpp.load %in_ptr0["8*i0 + i1"](%x0, %x1_1) : memref<6x8xf32>
// CHECK-NEXT:          %[[Q2:.*]] = arith.divf %[[X2]], %s : f32
// CHECK-NOT:     use_reciprocal
// CHECK:         cpp.return
cpp.func @kernel0(%in_ptr0: memref<6x8xf32>, %in_ptr1: memref<6xf32>) outs(%out_ptr0: memref<6x8xf32>) {
  %c0 = arith.constant 0 : index
  %c6 = arith.constant 6 : index
  %c8 = arith.constant 8 : index
  %one = arith.constant 1.000000e+00 : f32
  cpp.for serial (%x0) = (%c0) to (%c6) {
    %y = cpp.load %in_ptr1["i0"](%x0) : memref<6xf32>
    %s = arith.addf %y, %one : f32
    cpp.for simd (%x1) = (%c0) to (%c8) {
      %x = cpp.load %in_ptr0["8*i0 + i1"](%x0, %x1) : memref<6x8xf32>
      %q = arith.divf %x, %s : f32
      cpp.store %q, %out_ptr0["8*i0 + i1"](%x0, %x1) : memref<6x8xf32>
    }
  }
  cpp.return
}
kernel.program @f(%x: memref<6x8xf32>, %y: memref<6xf32>) -> memref<6x8xf32> {
  %d = kernel.alloc : memref<6x8xf32>
  kernel.launch @kernel0(%x, %y) outs(%d) : (memref<6x8xf32>, memref<6xf32>) -> (memref<6x8xf32>)
  kernel.return %d : memref<6x8xf32>
}

// RUN: kiln-opt %s -p cpp-drop-proven-checks | filecheck %s
// RUN: kiln-opt %s -p cpp-drop-proven-checks,cpp-drop-proven-checks | filecheck %s

// Cpp IR in, cpp IR out (as lower-to-cpp makes it before its rewrites). Indices computed
// from loop variables are bounded by interval arithmetic: torch.roll's (x0 + 3) % 8 and
// (x0 * x0) % 9 lie inside their dims, so their checks go and their loads are no longer
// checked. An index read from a buffer (an embedding id) has no bounds: its check and its
// checked load stay. Running the pass again changes nothing.
// CHECK-LABEL: cpp.func @kernel0
// CHECK:         cpp.for parallel (%x0) = (%c0) to (%c8) {
// CHECK:           %4 = arith.remsi %2, %3 : i64
// CHECK-NEXT:      %5 = arith.index_cast %4 : i64 to index
// CHECK-NEXT:      %6 = cpp.load %in_ptr0["16*i0 + i1"](%5, %x1) : memref<8x16xf32>
// CHECK:         cpp.for serial (%x0_1) = (%c0) to (%c9) {
// CHECK:           cpp.check_index %8, %c8
// CHECK-NEXT:      %9 = cpp.load %in_ptr0["16*i0 + i1"](%8, %x1_1) checked : memref<8x16xf32>
// CHECK:           %14 = arith.index_cast %13 : i64 to index
// CHECK-NEXT:      %15 = cpp.load %in_ptr1["i0"](%14) : memref<9xi64>
// CHECK-NOT:     cpp.check_index
cpp.func @kernel0(%in_ptr0: memref<8x16xf32>, %in_ptr1: memref<9xi64>) outs(%out_ptr0: memref<8x16xf32>, %out_ptr1: memref<9x16xf32>) {
  %c0 = arith.constant 0 : index
  %c8 = arith.constant 8 : index
  %c9 = arith.constant 9 : index
  %c16 = arith.constant 16 : index
  cpp.for parallel (%x0) = (%c0) to (%c8) {
    cpp.for simd (%x1) = (%c0) to (%c16) {
      %0 = arith.index_cast %x0 : index to i64
      %1 = arith.constant 3 : i64
      %2 = arith.addi %0, %1 : i64
      %3 = arith.constant 8 : i64
      %4 = arith.remsi %2, %3 : i64
      %5 = arith.index_cast %4 : i64 to index
      cpp.check_index %5, %c8
      %6 = cpp.load %in_ptr0["16*i0 + i1"](%5, %x1) checked : memref<8x16xf32>
      cpp.store %6, %out_ptr0["16*i0 + i1"](%x0, %x1) : memref<8x16xf32>
    }
  }
  cpp.for serial (%x0) = (%c0) to (%c9) {
    cpp.for simd (%x1) = (%c0) to (%c16) {
      %7 = cpp.load %in_ptr1["i0"](%x0) : memref<9xi64>
      %8 = arith.index_cast %7 : i64 to index
      cpp.check_index %8, %c8
      %9 = cpp.load %in_ptr0["16*i0 + i1"](%8, %x1) checked : memref<8x16xf32>
      %10 = arith.index_cast %x0 : index to i64
      %11 = arith.muli %10, %10 : i64
      %17 = arith.constant 9 : i64
      %12 = arith.remsi %11, %17 : i64
      %13 = arith.index_cast %12 : i64 to index
      cpp.check_index %13, %c9
      %14 = cpp.load %in_ptr1["i0"](%13) checked : memref<9xi64>
      %15 = arith.sitofp %14 : i64 to f32
      %16 = arith.addf %9, %15 : f32
      cpp.store %16, %out_ptr1["16*i0 + i1"](%x0, %x1) : memref<9x16xf32>
    }
  }
  cpp.return
}
kernel.program @f(%x: memref<8x16xf32>, %i: memref<9xi64>) -> (memref<8x16xf32>, memref<9x16xf32>) {
  %r = kernel.alloc : memref<8x16xf32>
  %g = kernel.alloc : memref<9x16xf32>
  kernel.launch @kernel0(%x, %i) outs(%r, %g) : (memref<8x16xf32>, memref<9xi64>) -> (memref<8x16xf32>, memref<9x16xf32>)
  kernel.return %r, %g : memref<8x16xf32>, memref<9x16xf32>
}

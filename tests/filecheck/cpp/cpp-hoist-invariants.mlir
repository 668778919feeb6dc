// RUN: kiln-opt %s -p cpp-hoist-invariants | filecheck %s
// RUN: kiln-opt %s -p cpp-hoist-invariants,cpp-hoist-invariants | filecheck %s

// Cpp IR in, cpp IR out (as lower-to-cpp makes it before its rewrites). An embedding
// gather times 2: the id load, its cast and its bounds check, and the constant do not
// depend on %x1 and move out of the simd loop (once per row); the row's checked load
// stays, now affine in %x1. Running the pass again changes nothing.
// CHECK-LABEL: cpp.func @kernel0
// CHECK:         cpp.for serial (%x0) = (%c0) to (%c9) {
// CHECK-NEXT:      %0 = cpp.load %in_ptr0["i0"](%x0) : memref<9xi64>
// CHECK-NEXT:      %1 = arith.index_cast %0 : i64 to index
// CHECK-NEXT:      cpp.check_index %1, %c20
// CHECK-NEXT:      %2 = arith.constant 2.000000e+00 : f32
// CHECK-NEXT:      cpp.for simd (%x1) = (%c0) to (%c64) {
// CHECK-NEXT:        %3 = cpp.load %in_ptr1["i0 + 64*i1"](%x1, %1) checked : memref<20x64xf32>
// CHECK-NEXT:        %4 = arith.mulf %3, %2 : f32
// CHECK-NEXT:        cpp.store %4, %out_ptr0["64*i0 + i1"](%x0, %x1) : memref<9x64xf32>
// CHECK-NEXT:      }
// CHECK-NEXT:    }
cpp.func @kernel0(%in_ptr0: memref<9xi64>, %in_ptr1: memref<20x64xf32>) outs(%out_ptr0: memref<9x64xf32>) {
  %c20 = arith.constant 20 : index
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %c9 = arith.constant 9 : index
  cpp.for serial (%x0) = (%c0) to (%c9) {
    cpp.for simd (%x1) = (%c0) to (%c64) {
      %0 = cpp.load %in_ptr0["i0"](%x0) : memref<9xi64>
      %1 = arith.index_cast %0 : i64 to index
      cpp.check_index %1, %c20
      %2 = cpp.load %in_ptr1["i0 + 64*i1"](%x1, %1) checked : memref<20x64xf32>
      %3 = arith.constant 2.000000e+00 : f32
      %4 = arith.mulf %2, %3 : f32
      cpp.store %4, %out_ptr0["64*i0 + i1"](%x0, %x1) : memref<9x64xf32>
    }
  }
  cpp.return
}
// Symbolic sizes (%s0, a size argument, at least 1): the part of an address that does
// not depend on %x1 and divides by sizes moves out as a cpp.index the address adds (a
// dynamic=True view divided per element before); not a division by a size that may be
// zero (%s0 - 1), and not one of the loop variable itself.
// CHECK-LABEL: cpp.func @symbolic
// CHECK:         cpp.for serial (%x0) = (%c0) to (%s0) {
// CHECK-NEXT:      %0 = cpp.index "116*(i0 // (i1 + 1)) + 116*((i0 + 3) % (2*i1 + 1))"(%x0, %s0)
// CHECK-NEXT:      cpp.for simd (%x1) = (%c0) to (%c116) {
// CHECK-NEXT:        %1 = cpp.load %in_ptr0["i0 + i1"](%x1, %0) : memref<?xf32>
// CHECK-NEXT:        %2 = cpp.load %in_ptr0["i0 + 116*(i1 // i2) + i1 // (i2 - 1)"](%x1, %x0, %s0) : memref<?xf32>
// CHECK-NEXT:        %3 = arith.addf %1, %2 : f32
// CHECK-NEXT:        cpp.store %3, %out_ptr0["116*i0 + i1 // 8 + i1 // (i2 + 1)"](%x0, %x1, %s0) : memref<?xf32>
cpp.func @symbolic(%in_ptr0: memref<?xf32>, %s0: index) outs(%out_ptr0: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %c116 = arith.constant 116 : index
  cpp.for serial (%x0) = (%c0) to (%s0) {
    cpp.for simd (%x1) = (%c0) to (%c116) {
      %0 = cpp.load %in_ptr0["i0 + 116*(i1 // (i2 + 1)) + 116*((i1 + 3) % (2*i2 + 1))"](%x1, %x0, %s0) : memref<?xf32>
      %1 = cpp.load %in_ptr0["i0 + 116*(i1 // i2) + i1 // (i2 - 1)"](%x1, %x0, %s0) : memref<?xf32>
      %2 = arith.addf %0, %1 : f32
      cpp.store %2, %out_ptr0["116*i0 + i1 // (i2 + 1) + i1 // 8"](%x0, %x1, %s0) : memref<?xf32>
    }
  }
  cpp.return
}
kernel.program @f(%w: memref<20x64xf32>, %i: memref<9xi64>) -> memref<9x64xf32> {
  %m = kernel.alloc : memref<9x64xf32>
  kernel.launch @kernel0(%i, %w) outs(%m) : (memref<9xi64>, memref<20x64xf32>) -> (memref<9x64xf32>)
  kernel.return %m : memref<9x64xf32>
}

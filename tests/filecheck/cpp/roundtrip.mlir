// RUN: kiln-opt %s | kiln-opt | filecheck %s
// RUN: kiln-opt %s --print-op-generic | kiln-opt | filecheck %s

// CHECK-LABEL: cpp.func @kernel0(%in_ptr0: memref<4x16xf32>, %in_ptr1: memref<20x8xf32>, %s0: index) outs(%out_ptr0: memref<4x16xf32>) attributes {provenance = ["kernel0: pointwise"]} {
// CHECK-NEXT:    %c0 = arith.constant 0 : index
// CHECK-NEXT:    %c4 = arith.constant 4 : index
// CHECK-NEXT:    %c16 = arith.constant 16 : index
// CHECK-NEXT:    %acc = cpp.alloca : memref<16xf32>
// CHECK-NEXT:    %tile = cpp.alloca : memref<256xf32>
// CHECK-NEXT:    cpp.transpose_tile %in_ptr0["i0"](%c0) stride 16 into %tile : memref<4x16xf32>, memref<256xf32>
// CHECK-NEXT:    %big = arith.cmpi sge, %s0, %c16 : index
// CHECK-NEXT:    cpp.for parallel (%x0) = (%c0) to (%c4) if %big {
// CHECK-NEXT:      cpp.for simd (%x1) = (%c0) to (%c16) step (2) {
// CHECK-NEXT:        %0 = cpp.load %in_ptr0["16*i0 + i1"](%x0, %x1) : memref<4x16xf32>
// CHECK-NEXT:        %true = arith.constant true
// CHECK-NEXT:        %1 = cpp.load %in_ptr0["i0 - 1"](%x1) if %true else -inf : memref<4x16xf32>
// CHECK-NEXT:        cpp.check_index %x0, %c4
// CHECK-NEXT:        %2 = cpp.load %in_ptr1["8*i0 + i1"](%x0, %x1) checked : memref<20x8xf32>
// CHECK-NEXT:        %i = cpp.index "i0 + 16*i1"(%x1, %x0)
// CHECK-NEXT:        %3 = math.exp %0 : f32
// CHECK-NEXT:        cpp.store %3, %out_ptr0["i0"](%i) : memref<4x16xf32>
// CHECK-NEXT:        cpp.atomic_add %3, %out_ptr0["i0"](%i) : memref<4x16xf32>
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// CHECK-NEXT:    cpp.for serial (%a, %b) = (%c0, %c0) to (%c4, %s0) {
// CHECK-NEXT:    }
// CHECK-NEXT:    cpp.return
// CHECK-NEXT:  }
cpp.func @kernel0(%in_ptr0: memref<4x16xf32>, %in_ptr1: memref<20x8xf32>, %s0: index) outs(%out_ptr0: memref<4x16xf32>) attributes {provenance = ["kernel0: pointwise"]} {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c16 = arith.constant 16 : index
  %acc = cpp.alloca : memref<16xf32>
  %tile = cpp.alloca : memref<256xf32>
  cpp.transpose_tile %in_ptr0["i0"](%c0) stride 16 into %tile : memref<4x16xf32>, memref<256xf32>
  %big = arith.cmpi sge, %s0, %c16 : index
  cpp.for parallel (%x0) = (%c0) to (%c4) if %big {
    cpp.for simd (%x1) = (%c0) to (%c16) step (2) {
      %0 = cpp.load %in_ptr0["16*i0 + i1"](%x0, %x1) : memref<4x16xf32>
      %true = arith.constant true
      %1 = cpp.load %in_ptr0["i0 - 1"](%x1) if %true else -inf : memref<4x16xf32>
      cpp.check_index %x0, %c4
      %2 = cpp.load %in_ptr1["8*i0 + i1"](%x0, %x1) checked : memref<20x8xf32>
      %i = cpp.index "i0 + 16*i1"(%x1, %x0)
      %3 = math.exp %0 : f32
      cpp.store %3, %out_ptr0["i0"](%i) : memref<4x16xf32>
      cpp.atomic_add %3, %out_ptr0["i0"](%i) : memref<4x16xf32>
    }
  }
  cpp.for serial (%a, %b) = (%c0, %c0) to (%c4, %s0) {
  }
  cpp.return
}

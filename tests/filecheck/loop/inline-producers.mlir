// RUN: kiln-opt %s --split-input-file -p inline-producers | filecheck %s

// Loop IR in, loop IR out. The add and the exp are only read by the reduction: both are
// recomputed inside it (one round each), and their buffers are gone.
// CHECK-LABEL: func.func @inlined
// CHECK-NEXT:    %s = loop.reduction sum [8] reduce [16] (%x, %y) : (memref<8x16xf32>, memref<8x16xf32>) -> memref<8xf32> {
// CHECK-NEXT:    ^bb0(%d0: index, %r0: index, %0: memref<8x16xf32>, %1: memref<8x16xf32>):
// CHECK-NEXT:      %2 = loop.load %0["16*d0 + r0"] : memref<8x16xf32>
// CHECK-NEXT:      %3 = loop.load %1["16*d0 + r0"] : memref<8x16xf32>
// CHECK-NEXT:      %4 = arith.addf %2, %3 : f32
// CHECK-NEXT:      %5 = math.exp %4 : f32
// CHECK-NEXT:      loop.yield %5 : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %s : memref<8xf32>
func.func @inlined(%x: memref<8x16xf32>, %y: memref<8x16xf32>) -> memref<8xf32> {
  %a = loop.pointwise [8, 16] (%x, %y) : (memref<8x16xf32>, memref<8x16xf32>) -> memref<8x16xf32> {
  ^bb0(%d0: index, %d1: index, %in0: memref<8x16xf32>, %in1: memref<8x16xf32>):
    %0 = loop.load %in0["16*d0 + d1"] : memref<8x16xf32>
    %1 = loop.load %in1["16*d0 + d1"] : memref<8x16xf32>
    %2 = arith.addf %0, %1 : f32
    loop.yield %2 : f32
  }
  %e = loop.pointwise [8, 16] (%a) : (memref<8x16xf32>) -> memref<8x16xf32> {
  ^bb0(%d0: index, %d1: index, %in0: memref<8x16xf32>):
    %0 = loop.load %in0["16*d0 + d1"] : memref<8x16xf32>
    %1 = math.exp %0 : f32
    loop.yield %1 : f32
  }
  %s = loop.reduction sum [8] reduce [16] (%e) : (memref<8x16xf32>) -> memref<8xf32> {
  ^bb0(%d0: index, %r0: index, %in0: memref<8x16xf32>):
    %0 = loop.load %in0["16*d0 + r0"] : memref<8x16xf32>
    loop.yield %0 : f32
  }
  func.return %s : memref<8xf32>
}

// -----

// A returned buffer is kept (it must be written anyway); its producer, read only by it,
// is still inlined.
// CHECK-LABEL: func.func @returned
// CHECK-NEXT:    %e = loop.pointwise [8, 16] (%x, %y)
// CHECK:           math.exp
// CHECK:         %s = loop.reduction sum [8] reduce [16] (%e)
// CHECK:         func.return %e, %s
func.func @returned(%x: memref<8x16xf32>, %y: memref<8x16xf32>) -> (memref<8x16xf32>, memref<8xf32>) {
  %a = loop.pointwise [8, 16] (%x, %y) : (memref<8x16xf32>, memref<8x16xf32>) -> memref<8x16xf32> {
  ^bb0(%d0: index, %d1: index, %in0: memref<8x16xf32>, %in1: memref<8x16xf32>):
    %0 = loop.load %in0["16*d0 + d1"] : memref<8x16xf32>
    %1 = loop.load %in1["16*d0 + d1"] : memref<8x16xf32>
    %2 = arith.addf %0, %1 : f32
    loop.yield %2 : f32
  }
  %e = loop.pointwise [8, 16] (%a) : (memref<8x16xf32>) -> memref<8x16xf32> {
  ^bb0(%d0: index, %d1: index, %in0: memref<8x16xf32>):
    %0 = loop.load %in0["16*d0 + d1"] : memref<8x16xf32>
    %1 = math.exp %0 : f32
    loop.yield %1 : f32
  }
  %s = loop.reduction sum [8] reduce [16] (%e) : (memref<8x16xf32>) -> memref<8xf32> {
  ^bb0(%d0: index, %r0: index, %in0: memref<8x16xf32>):
    %0 = loop.load %in0["16*d0 + r0"] : memref<8x16xf32>
    loop.yield %0 : f32
  }
  func.return %e, %s : memref<8x16xf32>, memref<8xf32>
}

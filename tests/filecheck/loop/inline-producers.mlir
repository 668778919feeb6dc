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

// -----

// torch.roll over dims 0 and 1: two gathers, the second reading the first at
// [d0, i0, d2]. The first uses only its d0, which the read keeps (d0), so it inlines:
// one nest, two checked indices, the load at both.
// CHECK-LABEL: func.func @rolled
// CHECK-NEXT:    %b = loop.pointwise [6, 8, 4] (%x) : (memref<6x8x4xf32>) -> memref<6x8x4xf32> {
// CHECK:           %8 = loop.check_index %7 < "8"
// CHECK-NEXT:      %9 = loop.index "d0"
// CHECK:           %16 = loop.check_index %15 < "6"
// CHECK-NEXT:      %17 = loop.load %0["d2 + 32*i0 + 4*i1"](%16, %8) : memref<6x8x4xf32>
// CHECK:         func.return %b : memref<6x8x4xf32>
func.func @rolled(%x: memref<6x8x4xf32>) -> memref<6x8x4xf32> {
  %a = loop.pointwise [6, 8, 4] (%x) : (memref<6x8x4xf32>) -> memref<6x8x4xf32> {
  ^bb0(%d0: index, %d1: index, %d2: index, %in0: memref<6x8x4xf32>):
    %0 = loop.index "d0"
    %1 = arith.index_cast %0 : index to i64
    %2 = arith.constant 2 : i64
    %3 = arith.addi %1, %2 : i64
    %4 = arith.constant 6 : i64
    %5 = arith.remsi %3, %4 : i64
    %6 = arith.index_cast %5 : i64 to index
    %7 = loop.check_index %6 < "6"
    %8 = loop.load %in0["4*d1 + d2 + 32*i0"](%7) : memref<6x8x4xf32>
    loop.yield %8 : f32
  }
  %b = loop.pointwise [6, 8, 4] (%a) : (memref<6x8x4xf32>) -> memref<6x8x4xf32> {
  ^bb0(%d0: index, %d1: index, %d2: index, %in0: memref<6x8x4xf32>):
    %0 = loop.index "d1"
    %1 = arith.index_cast %0 : index to i64
    %2 = arith.constant 5 : i64
    %3 = arith.addi %1, %2 : i64
    %4 = arith.constant 8 : i64
    %5 = arith.remsi %3, %4 : i64
    %6 = arith.index_cast %5 : i64 to index
    %7 = loop.check_index %6 < "8"
    %8 = loop.load %in0["32*d0 + d2 + 4*i0"](%7) : memref<6x8x4xf32>
    %9 = arith.constant 2.000000e+00 : f32
    %10 = arith.mulf %8, %9 : f32
    loop.yield %10 : f32
  }
  func.return %b : memref<6x8x4xf32>
}

// -----

// Batch norm's backward: per channel, sum(g) and sum(g * (x - m)). Alone, the product
// is stored (recomputing it reads g and x, more than it saves), but sum(g) reads g at
// the same points, and the two reductions run in one kernel: the product is recomputed
// in sum(g * (x - m)), which then reads g where its sibling does, and x.
// CHECK-LABEL: func.func @batch_norm_grad
// CHECK-NOT:     loop.pointwise
// CHECK:         %s1 = loop.reduction sum [32] reduce [8, 8, 8] (%g)
// CHECK:         %s2 = loop.reduction sum [32] reduce [8, 8, 8] (%g, %x, %m)
// CHECK:           loop.load {{%[0-9]+}}["64*d0 + 2048*r0 + 8*r1 + r2"]
// CHECK:           loop.load {{%[0-9]+}}["64*d0 + 2048*r0 + 8*r1 + r2"]
// CHECK:           loop.load {{%[0-9]+}}["d0"]
func.func @batch_norm_grad(%g: memref<8x32x8x8xf32>, %x: memref<8x32x8x8xf32>, %m: memref<32xf32>) -> (memref<32xf32>, memref<32xf32>) {
  %p = loop.pointwise [8, 32, 8, 8] (%g, %x, %m) : (memref<8x32x8x8xf32>, memref<8x32x8x8xf32>, memref<32xf32>) -> memref<8x32x8x8xf32> {
  ^bb0(%d0: index, %d1: index, %d2: index, %d3: index, %in0: memref<8x32x8x8xf32>, %in1: memref<8x32x8x8xf32>, %in2: memref<32xf32>):
    %0 = loop.load %in0["2048*d0 + 64*d1 + 8*d2 + d3"] : memref<8x32x8x8xf32>
    %1 = loop.load %in1["2048*d0 + 64*d1 + 8*d2 + d3"] : memref<8x32x8x8xf32>
    %2 = loop.load %in2["d1"] : memref<32xf32>
    %3 = arith.subf %1, %2 : f32
    %4 = arith.mulf %0, %3 : f32
    loop.yield %4 : f32
  }
  %s1 = loop.reduction sum [32] reduce [8, 8, 8] (%g) : (memref<8x32x8x8xf32>) -> memref<32xf32> {
  ^bb0(%d0: index, %r0: index, %r1: index, %r2: index, %in0: memref<8x32x8x8xf32>):
    %0 = loop.load %in0["64*d0 + 2048*r0 + 8*r1 + r2"] : memref<8x32x8x8xf32>
    loop.yield %0 : f32
  }
  %s2 = loop.reduction sum [32] reduce [8, 8, 8] (%p) : (memref<8x32x8x8xf32>) -> memref<32xf32> {
  ^bb0(%d0: index, %r0: index, %r1: index, %r2: index, %in0: memref<8x32x8x8xf32>):
    %0 = loop.load %in0["64*d0 + 2048*r0 + 8*r1 + r2"] : memref<8x32x8x8xf32>
    loop.yield %0 : f32
  }
  func.return %s1, %s2 : memref<32xf32>, memref<32xf32>
}

// -----

// The same product without the sibling reduction: recomputing it would read g and x
// for one read of the product, so it stays a buffer.
// CHECK-LABEL: func.func @product_alone
// CHECK:         %p = loop.pointwise [8, 32, 8, 8]
// CHECK:         %s2 = loop.reduction sum [32] reduce [8, 8, 8] (%p)
func.func @product_alone(%g: memref<8x32x8x8xf32>, %x: memref<8x32x8x8xf32>, %m: memref<32xf32>) -> memref<32xf32> {
  %p = loop.pointwise [8, 32, 8, 8] (%g, %x, %m) : (memref<8x32x8x8xf32>, memref<8x32x8x8xf32>, memref<32xf32>) -> memref<8x32x8x8xf32> {
  ^bb0(%d0: index, %d1: index, %d2: index, %d3: index, %in0: memref<8x32x8x8xf32>, %in1: memref<8x32x8x8xf32>, %in2: memref<32xf32>):
    %0 = loop.load %in0["2048*d0 + 64*d1 + 8*d2 + d3"] : memref<8x32x8x8xf32>
    %1 = loop.load %in1["2048*d0 + 64*d1 + 8*d2 + d3"] : memref<8x32x8x8xf32>
    %2 = loop.load %in2["d1"] : memref<32xf32>
    %3 = arith.subf %1, %2 : f32
    %4 = arith.mulf %0, %3 : f32
    loop.yield %4 : f32
  }
  %s2 = loop.reduction sum [32] reduce [8, 8, 8] (%p) : (memref<8x32x8x8xf32>) -> memref<32xf32> {
  ^bb0(%d0: index, %r0: index, %r1: index, %r2: index, %in0: memref<8x32x8x8xf32>):
    %0 = loop.load %in0["64*d0 + 2048*r0 + 8*r1 + r2"] : memref<8x32x8x8xf32>
    loop.yield %0 : f32
  }
  func.return %s2 : memref<32xf32>
}

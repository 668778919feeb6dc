// RUN: kiln-opt %s --split-input-file --tile | filecheck %s

// The inputs are kernel-level programs (what `decompose,lower-aten,fuse` produce from
// small aten functions), so that this pass runs alone.

// tile records how each kernel is cut into blocks: kind, chosen config, candidates.

// A small pointwise kernel: one block of the next power of two.
// CHECK: kernel.kernel @kernel0 pointwise [32] x [1] ({{.*}}) -> ({{.*}}) attributes {tiling = #kernel.config<XBLOCK = 32, num_warps = 1, num_stages = 1>, configs = [#kernel.config<XBLOCK = 32, num_warps = 1, num_stages = 1>, #kernel.config<XBLOCK = 16, num_warps = 1, num_stages = 1>]}
kernel.kernel @kernel0 pointwise [32] x [1] (%x: memref<4x8xf32>) -> (memref<4x8xf32>) {
  %0 = loop.pointwise [4, 8] (%x) {kernel.vars = [#loop.expr<"d0 // 8">, #loop.expr<"d0 % 8">]} : (memref<4x8xf32>) -> memref<4x8xf32> {
  ^bb0(%d0: index, %d1: index, %in0: memref<4x8xf32>):
    %1 = loop.load %in0["8*d0 + d1"] : memref<4x8xf32>
    %2 = arith.constant 0.000000e+00 : f32
    %3 = arith.maximumf %1, %2 : f32
    loop.yield %3 : f32
  }
  kernel.yield %0 : memref<4x8xf32>
}
kernel.program @pointwise(%x: memref<4x8xf32>) -> memref<4x8xf32> {
  %0 = kernel.alloc : memref<4x8xf32>
  kernel.launch @kernel0(%x) outs(%0) : (memref<4x8xf32>) -> (memref<4x8xf32>)
  kernel.return %0 : memref<4x8xf32>
}

// -----

// softmax over rows of 8: a persistent inner reduction, one row per block (blocks of
// more rows would exceed the 4 rows there are).
// CHECK: kernel.kernel @kernel0 persistent [4] x [8] ({{.*}}) -> ({{.*}}) attributes {tiling = #kernel.config<XBLOCK = 1, RBLOCK = 8, num_warps = 1, num_stages = 1>, configs = [#kernel.config<XBLOCK = 1, RBLOCK = 8, num_warps = 1, num_stages = 1>], reduction_hint = "inner"}
kernel.kernel @kernel0 reduction [4] x [8] (%x: memref<4x8xf32>) -> (memref<4x8xf32>) {
  %amax = loop.reduction max [4, 1] reduce [8] (%x) {kernel.vars = [#loop.expr<"d0">, #loop.expr<"0">, #loop.expr<"r0">]} : (memref<4x8xf32>) -> memref<4x1xf32> {
  ^bb0(%d0: index, %d1: index, %r0: index, %in0: memref<4x8xf32>):
    %0 = loop.load %in0["8*d0 + r0"] : memref<4x8xf32>
    loop.yield %0 : f32
  }
  %exp = loop.pointwise [4, 8] (%x, %amax) {kernel.vars = [#loop.expr<"d0">, #loop.expr<"r0">]} : (memref<4x8xf32>, memref<4x1xf32>) -> memref<4x8xf32> {
  ^bb0(%d0: index, %d1: index, %0: memref<4x8xf32>, %1: memref<4x1xf32>):
    %2 = loop.load %0["8*d0 + d1"] : memref<4x8xf32>
    %3 = loop.load %1["d0"] : memref<4x1xf32>
    %4 = arith.subf %2, %3 : f32
    %5 = math.exp %4 : f32
    loop.yield %5 : f32
  }
  %sum1 = loop.reduction sum [4, 1] reduce [8] (%exp) {kernel.vars = [#loop.expr<"d0">, #loop.expr<"0">, #loop.expr<"r0">]} : (memref<4x8xf32>) -> memref<4x1xf32> {
  ^bb0(%d0: index, %d1: index, %r0: index, %in0: memref<4x8xf32>):
    %0 = loop.load %in0["8*d0 + r0"] : memref<4x8xf32>
    loop.yield %0 : f32
  }
  %div = loop.pointwise [4, 8] (%exp, %sum1) {kernel.vars = [#loop.expr<"d0">, #loop.expr<"r0">]} : (memref<4x8xf32>, memref<4x1xf32>) -> memref<4x8xf32> {
  ^bb0(%d0: index, %d1: index, %in0: memref<4x8xf32>, %in1: memref<4x1xf32>):
    %0 = loop.load %in0["8*d0 + d1"] : memref<4x8xf32>
    %1 = loop.load %in1["d0"] : memref<4x1xf32>
    %2 = arith.divf %0, %1 : f32
    loop.yield %2 : f32
  }
  kernel.yield %div : memref<4x8xf32>
}
kernel.program @softmax(%x: memref<4x8xf32>) -> memref<4x8xf32> {
  %div = kernel.alloc : memref<4x8xf32>
  kernel.launch @kernel0(%x) outs(%div) : (memref<4x8xf32>) -> (memref<4x8xf32>)
  kernel.return %div : memref<4x8xf32>
}

// -----

// Rows of 2048 are over the persistent limit (1024): a looped reduction.
// CHECK: kernel.kernel @kernel0 looped [8] x [2048] ({{.*}}) -> ({{.*}}) attributes {tiling = #kernel.config<XBLOCK = 1, RBLOCK = 2048, num_warps = 4, num_stages = 1>, configs = [{{.*}}], reduction_hint = "inner"}
kernel.kernel @kernel0 reduction [8] x [2048] (%x: memref<8x2048xf32>) -> (memref<8xf32>) {
  %0 = loop.reduction sum [8] reduce [2048] (%x) {kernel.vars = [#loop.expr<"d0">, #loop.expr<"r0">]} : (memref<8x2048xf32>) -> memref<8xf32> {
  ^bb0(%d0: index, %r0: index, %in0: memref<8x2048xf32>):
    %1 = loop.load %in0["2048*d0 + r0"] : memref<8x2048xf32>
    loop.yield %1 : f32
  }
  kernel.yield %0 : memref<8xf32>
}
kernel.program @looped(%x: memref<8x2048xf32>) -> memref<8xf32> {
  %0 = kernel.alloc : memref<8xf32>
  kernel.launch @kernel0(%x) outs(%0) : (memref<8x2048xf32>) -> (memref<8xf32>)
  kernel.return %0 : memref<8xf32>
}

// -----

// Reducing over the outer dimension reads with a stride: an outer reduction. 8 outputs:
// one program of 8 (never fewer per program), over 64 rows a step (a 512-element block).
// CHECK: kernel.kernel @kernel0 looped [8] x [1024] ({{.*}}) -> ({{.*}}) attributes {tiling = #kernel.config<XBLOCK = 8, RBLOCK = 64, num_warps = 2, num_stages = 1>, configs = [{{.*}}], reduction_hint = "outer"}
kernel.kernel @kernel0 reduction [8] x [1024] (%x: memref<1024x8xf32>) -> (memref<8xf32>) {
  %0 = loop.reduction sum [8] reduce [1024] (%x) {kernel.vars = [#loop.expr<"d0">, #loop.expr<"r0">]} : (memref<1024x8xf32>) -> memref<8xf32> {
  ^bb0(%d0: index, %r0: index, %in0: memref<1024x8xf32>):
    %1 = loop.load %in0["d0 + 8*r0"] : memref<1024x8xf32>
    loop.yield %1 : f32
  }
  kernel.yield %0 : memref<8xf32>
}
kernel.program @outer(%x: memref<1024x8xf32>) -> memref<8xf32> {
  %0 = kernel.alloc : memref<8xf32>
  kernel.launch @kernel0(%x) outs(%0) : (memref<1024x8xf32>) -> (memref<8xf32>)
  kernel.return %0 : memref<8xf32>
}

// -----

// Longer outer reductions split sooner than inner ones (one program covers 64 outputs):
// 8 chunks of 256 rows, partials chunk-outermost, then a persistent combine.
// CHECK:      kernel.kernel @kernel0_split split [64] x [256] ({{.*}}) -> ({{.*}}memref<8x8xf32>) attributes {tiling = #kernel.config<XBLOCK = 32, RBLOCK = 32, num_warps = 4, num_stages = 1>
// CHECK:        loop.reduction sum [8, 8] reduce [256]
// CHECK:      kernel.kernel @kernel0_combine persistent [8] x [8]
kernel.kernel @kernel0 reduction [8] x [2048] (%x: memref<2048x8xf32>) -> (memref<8xf32>) {
  %0 = loop.reduction sum [8] reduce [2048] (%x) {kernel.vars = [#loop.expr<"d0">, #loop.expr<"r0">]} : (memref<2048x8xf32>) -> memref<8xf32> {
  ^bb0(%d0: index, %r0: index, %in0: memref<2048x8xf32>):
    %1 = loop.load %in0["d0 + 8*r0"] : memref<2048x8xf32>
    loop.yield %1 : f32
  }
  kernel.yield %0 : memref<8xf32>
}
kernel.program @outer_split(%x: memref<2048x8xf32>) -> memref<8xf32> {
  %0 = kernel.alloc : memref<8xf32>
  kernel.launch @kernel0(%x) outs(%0) : (memref<2048x8xf32>) -> (memref<8xf32>)
  kernel.return %0 : memref<8xf32>
}

// -----

// A large reduction with one output is split: 16 partial sums of 1024, then a
// persistent kernel sums the partials and takes the square root.
// CHECK:      kernel.kernel @kernel0_split split [16] x [1024]
// CHECK:        loop.reduction sum [16] reduce [1024]
// CHECK:          loop.load %{{.*}}["1024*d0 + r0"]
// CHECK:      kernel.kernel @kernel0_combine persistent [1] x [16]
// CHECK:        loop.reduction sum [] reduce [16]
// CHECK:        math.sqrt
// CHECK-LABEL: kernel.program @split
// CHECK-NEXT:   %[[OUT:.*]] = kernel.alloc : memref<f32>
// CHECK-NEXT:   %partials = kernel.alloc : memref<16xf32>
// CHECK-NEXT:   kernel.launch @kernel0_split(%x) outs(%partials)
// CHECK-NEXT:   kernel.launch @kernel0_combine(%partials) outs(%[[OUT]])
kernel.kernel @kernel0 reduction [1] x [16384] (%x: memref<64x256xf32>) -> (memref<f32>) {
  %sum1 = loop.reduction sum [] reduce [64, 256] (%x) {kernel.vars = [#loop.expr<"r0 // 256">, #loop.expr<"r0 % 256">]} : (memref<64x256xf32>) -> memref<f32> {
  ^bb0(%r0: index, %r1: index, %0: memref<64x256xf32>):
    %1 = loop.load %0["256*r0 + r1"] : memref<64x256xf32>
    %2 = loop.load %0["256*r0 + r1"] : memref<64x256xf32>
    %3 = arith.mulf %1, %2 : f32
    loop.yield %3 : f32
  }
  %0 = loop.pointwise [] (%sum1) {kernel.vars = []} : (memref<f32>) -> memref<f32> {
  ^bb0(%in0: memref<f32>):
    %1 = loop.load %in0["0"] : memref<f32>
    %2 = math.sqrt %1 : f32
    loop.yield %2 : f32
  }
  kernel.yield %0 : memref<f32>
}
kernel.program @split(%x: memref<64x256xf32>) -> memref<f32> {
  %0 = kernel.alloc : memref<f32>
  kernel.launch @kernel0(%x) outs(%0) : (memref<64x256xf32>) -> (memref<f32>)
  kernel.return %0 : memref<f32>
}

// -----

// A transpose reads along the columns and writes along the rows: a 2-D tile.
// CHECK: kernel.kernel @kernel0 pointwise [512] x [1] ({{.*}}) -> ({{.*}}) attributes {tiling = #kernel.config<YBLOCK = 32, XBLOCK = 16, num_warps = 4, num_stages = 1>, configs = [{{.*}}], ynumel = #loop.expr<"32">}
kernel.kernel @kernel0 pointwise [512] x [1] (%x: memref<16x32xf32>) -> (memref<32x16xf32>) {
  %0 = loop.pointwise [32, 16] (%x) {kernel.vars = [#loop.expr<"d0 // 16">, #loop.expr<"d0 % 16">]} : (memref<16x32xf32>) -> memref<32x16xf32> {
  ^bb0(%d0: index, %d1: index, %in0: memref<16x32xf32>):
    %1 = loop.load %in0["d0 + 32*d1"] : memref<16x32xf32>
    %2 = arith.constant 2.000000e+00 : f32
    %3 = arith.mulf %1, %2 : f32
    loop.yield %3 : f32
  }
  kernel.yield %0 : memref<32x16xf32>
}
kernel.program @transpose(%x: memref<16x32xf32>) -> memref<32x16xf32> {
  %0 = kernel.alloc : memref<32x16xf32>
  kernel.launch @kernel0(%x) outs(%0) : (memref<16x32xf32>) -> (memref<32x16xf32>)
  kernel.return %0 : memref<32x16xf32>
}

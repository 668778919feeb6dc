// RUN: kiln-opt %s --split-input-file -p 'decompose,lower-aten,fuse,tile' | filecheck %s

// tile records how each kernel is cut into blocks: kind, chosen config, candidates.

// A small pointwise kernel: one block of the next power of two.
// CHECK: kernel.kernel @kernel0 pointwise [32] x [1] ({{.*}}) -> ({{.*}}) attributes {tiling = #kernel.config<XBLOCK = 32, num_warps = 1, num_stages = 1>, configs = [#kernel.config<XBLOCK = 32, num_warps = 1, num_stages = 1>, #kernel.config<XBLOCK = 16, num_warps = 1, num_stages = 1>]}
func.func @pointwise(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = aten.relu.default(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// -----

// softmax over rows of 8: a persistent inner reduction, one row per block (blocks of
// more rows would exceed the 4 rows there are).
// CHECK: kernel.kernel @kernel0 persistent [4] x [8] ({{.*}}) -> ({{.*}}) attributes {tiling = #kernel.config<XBLOCK = 1, RBLOCK = 8, num_warps = 1, num_stages = 1>, configs = [#kernel.config<XBLOCK = 1, RBLOCK = 8, num_warps = 1, num_stages = 1>], reduction_hint = "inner"}
func.func @softmax(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = aten._softmax.default(%x, dim = -1, half_to_float = false) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// -----

// Rows of 2048 are over the persistent limit (1024): a looped reduction.
// CHECK: kernel.kernel @kernel0 looped [8] x [2048] ({{.*}}) -> ({{.*}}) attributes {tiling = #kernel.config<XBLOCK = 1, RBLOCK = 2048, num_warps = 4, num_stages = 1>, configs = [{{.*}}], reduction_hint = "inner"}
func.func @looped(%x: tensor<8x2048xf32>) -> tensor<8xf32> {
  %0 = aten.sum.dim_IntList(%x, dim = [1]) : (tensor<8x2048xf32>) -> tensor<8xf32>
  func.return %0 : tensor<8xf32>
}

// -----

// Reducing over the outer dimension reads with a stride: an outer reduction.
// CHECK: kernel.kernel @kernel0 looped [8] x [1024] ({{.*}}) -> ({{.*}}) attributes {tiling = #kernel.config<XBLOCK = 8, RBLOCK = 8, num_warps = 1, num_stages = 1>, configs = [{{.*}}], reduction_hint = "outer"}
func.func @outer(%x: tensor<1024x8xf32>) -> tensor<8xf32> {
  %0 = aten.sum.dim_IntList(%x, dim = [0]) : (tensor<1024x8xf32>) -> tensor<8xf32>
  func.return %0 : tensor<8xf32>
}

// -----

// Longer outer reductions split sooner than inner ones (one program covers 64 outputs):
// 8 chunks of 256 rows, partials chunk-outermost, then a persistent combine.
// CHECK:      kernel.kernel @kernel0_split split [64] x [256] ({{.*}}) -> ({{.*}}memref<8x8xf32>) attributes {tiling = #kernel.config<XBLOCK = 32, RBLOCK = 32, num_warps = 4, num_stages = 1>
// CHECK:        loop.reduction sum [8, 8] reduce [256]
// CHECK:      kernel.kernel @kernel0_combine persistent [8] x [8]
func.func @outer_split(%x: tensor<2048x8xf32>) -> tensor<8xf32> {
  %0 = aten.sum.dim_IntList(%x, dim = [0]) : (tensor<2048x8xf32>) -> tensor<8xf32>
  func.return %0 : tensor<8xf32>
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
func.func @split(%x: tensor<64x256xf32>) -> tensor<f32> {
  %0 = aten.mul.Tensor(%x, %x) : (tensor<64x256xf32>, tensor<64x256xf32>) -> tensor<64x256xf32>
  %1 = aten.sum.default(%0) : (tensor<64x256xf32>) -> tensor<f32>
  %2 = aten.sqrt.default(%1) : (tensor<f32>) -> tensor<f32>
  func.return %2 : tensor<f32>
}

// -----

// A transpose reads along the columns and writes along the rows: a 2-D tile.
// CHECK: kernel.kernel @kernel0 pointwise [512] x [1] ({{.*}}) -> ({{.*}}) attributes {tiling = #kernel.config<YBLOCK = 32, XBLOCK = 16, num_warps = 4, num_stages = 1>, configs = [{{.*}}], ynumel = #loop.expr<"32">}
func.func @transpose(%x: tensor<16x32xf32>) -> tensor<32x16xf32> {
  %0 = aten.t.default(%x) : (tensor<16x32xf32>) -> tensor<32x16xf32>
  %1 = aten.mul.Scalar(%0, other = 2) : (tensor<32x16xf32>) -> tensor<32x16xf32>
  func.return %1 : tensor<32x16xf32>
}

// RUN: kiln-opt %s --split-input-file --decompose --lower-aten --fuse | filecheck %s --check-prefixes=CHECK,INLINE
// RUN: kiln-opt %s --split-input-file -p 'decompose,lower-aten,fuse{inline=false}' | filecheck %s --check-prefixes=CHECK,FUSION

// Expected kernel counts after fusion for the patterns of the scheduler issue, with
// cheap producers inlined into their consumers (prefix INLINE, the default) and by
// fusion alone (prefix FUSION, where the nodes stay separate inside the kernel). Every
// intermediate of a fused kernel stays kernel-local: the program allocates only the
// buffers that cross kernels or are returned.

// (x.relu() + 1) * 2: one pointwise kernel, one allocation (the result).
// CHECK:       kernel.kernel @kernel0 pointwise [32] x [1]
// INLINE-COUNT-1: loop.pointwise
// FUSION-COUNT-3: loop.pointwise
// CHECK:         kernel.yield
// CHECK-NOT:   kernel.kernel
// CHECK:       kernel.program @relu_chain
// CHECK-NEXT:    %{{.*}} = kernel.alloc : memref<4x8xf32>
// CHECK-NEXT:    kernel.launch @kernel0(%x) outs(%{{.*}})
// CHECK-NEXT:    kernel.return
func.func @relu_chain(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %relu = aten.relu.default(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %add = aten.add.Scalar(%relu, other = 1) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %mul = aten.mul.Scalar(%add, other = 2) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %mul : tensor<4x8xf32>
}

// -----

// x.sum(-1) + bias: the add is the reduction's epilogue.
// CHECK:       kernel.kernel @kernel0 reduction [4] x [8]
// CHECK:         loop.reduction sum [4] reduce [8]
// CHECK:         loop.pointwise [4]
// CHECK-NOT:   kernel.kernel
// CHECK:       kernel.program @sum_bias
// CHECK-COUNT-1: kernel.launch
// CHECK-NOT:   kernel.launch
func.func @sum_bias(%x: tensor<4x8xf32>, %bias: tensor<4xf32>) -> tensor<4xf32> {
  %sum = aten.sum.dim_IntList(%x, dim = [-1]) : (tensor<4x8xf32>) -> tensor<4xf32>
  %add = aten.add.Tensor(%sum, %bias) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %add : tensor<4xf32>
}

// -----

// softmax: max, exp-subtract, sum and divide in one kernel over [4] x [8].
// CHECK:       kernel.kernel @kernel0 reduction [4] x [8]
// CHECK:         loop.reduction max
// CHECK:         loop.reduction sum
// CHECK-NOT:   kernel.kernel
// CHECK:       kernel.program @softmax
// CHECK-COUNT-1: kernel.launch
// CHECK-NOT:   kernel.launch
func.func @softmax(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = aten._softmax.default(%x, dim = -1, half_to_float = false) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// -----

// layer norm: the statistics (two reductions over one input), the normalisation and
// the affine epilogue in one kernel.
// CHECK:       kernel.kernel @kernel0 reduction [4] x [8]
// CHECK-NOT:   kernel.kernel
// CHECK:       kernel.program @layer_norm
// CHECK-COUNT-1: kernel.launch
// CHECK-NOT:   kernel.launch
func.func @layer_norm(%x: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %y, %mean, %rstd = aten.native_layer_norm.default(%x, normalized_shape = [8], weight = %w, bias = %b, eps = 1.0e-05) : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32>)
  func.return %y : tensor<4x8xf32>
}

// -----

// GELU MLP with a residual, linear layers as mm + bias: each epilogue (bias and GELU;
// bias and residual) is one kernel between the matrix products (ATen calls).
// CHECK:       kernel.kernel @kernel0 pointwise [64] x [1]
// FUSION-COUNT-2: loop.pointwise
// CHECK:         math.erf
// CHECK:       kernel.kernel @kernel1 pointwise [32] x [1]
// FUSION-COUNT-2: loop.pointwise
// CHECK-NOT:   kernel.kernel
// CHECK:       kernel.program @gelu_mlp
// CHECK:         kernel.extern
// CHECK:           aten.mm.default
// CHECK:         kernel.launch @kernel0
// CHECK:         kernel.extern
// CHECK:           aten.mm.default
// CHECK:         kernel.launch @kernel1
// CHECK-NOT:     kernel.launch
func.func @gelu_mlp(%x: tensor<4x8xf32>, %w1: tensor<8x16xf32>, %b1: tensor<16xf32>, %w2: tensor<16x8xf32>, %b2: tensor<8xf32>) -> tensor<4x8xf32> {
  %0 = aten.mm.default(%x, %w1) : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %1 = aten.add.Tensor(%0, %b1) : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %2 = aten.gelu.default(%1) : (tensor<4x16xf32>) -> tensor<4x16xf32>
  %3 = aten.mm.default(%2, %w2) : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %4 = aten.add.Tensor(%3, %b2) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %5 = aten.add.Tensor(%4, %x) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %5 : tensor<4x8xf32>
}

// -----

// relu feeds both a matrix product and the add that consumes the product: fusing the
// relu with the add would put the ATen call inside a cycle, so they stay split.
// CHECK:       kernel.kernel @kernel0 pointwise [32] x [1]
// CHECK:       kernel.kernel @kernel1 pointwise [32] x [1]
// CHECK-NOT:   kernel.kernel
// CHECK:       kernel.program @cycle
// CHECK:         kernel.launch @kernel0
// CHECK:         kernel.extern
// CHECK:         kernel.launch @kernel1
func.func @cycle(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %relu = aten.relu.default(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %mm = aten.mm.default(%relu, %w) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %add = aten.add.Tensor(%relu, %mm) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %add : tensor<4x8xf32>
}

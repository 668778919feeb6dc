// RUN: kiln-opt %s --lower-aten --fuse --emit-triton | filecheck %s
// RUN: kiln-opt %s -p 'lower-aten,fuse,tile,lower-to-triton' -t triton | filecheck %s --check-prefix=TILED

// The issue's command prints a Python module a person can read: a kernel named for
// what it fuses, under a comment block naming the kernel.kernel and its nodes, then the
// wrapper that allocates, launches and returns. A kernel's stores come after all of its
// loads and arithmetic (a store would otherwise serialise the loads after it).

func.func @forward(%x: tensor<4x8xf32>, %y: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>) {
  %add = aten.add.Tensor(%x, %y) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %relu = aten.relu.default(%add) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %sum = aten.sum.dim_IntList(%relu, dim = [1]) : (tensor<4x8xf32>) -> tensor<4xf32>
  func.return %relu, %sum : tensor<4x8xf32>, tensor<4xf32>
}

// CHECK:       import triton
// CHECK:       import triton.language as tl
// CHECK:       # kernel.kernel @kernel0: persistent, 4 x 8 points
// CHECK-NEXT:  # fused nodes (FX names):
// CHECK-NEXT:  #   %relu = pointwise over [4, 8]
// CHECK-NEXT:  #   %sum = sum over [4] reduce [8]
// CHECK-NEXT:  # config: XBLOCK=1, RBLOCK=8, num_warps=1, num_stages=1
// CHECK-NEXT:  @triton.jit
// CHECK-NEXT:  def kiln_per_fused_relu_sum_0(in_ptr0, in_ptr1, out_ptr0, out_ptr1, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
// CHECK-NEXT:      xoffset = tl.program_id(0) * XBLOCK
// CHECK-NEXT:      xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
// CHECK-NEXT:      xmask = xindex < 4
// CHECK-NEXT:      rindex = tl.arange(0, RBLOCK)[None, :]
// CHECK-NEXT:      rmask = rindex < 8
// CHECK-NEXT:      [[OFF:tmp[0-9]+]] = 8 * xindex + rindex
// CHECK-NEXT:      [[MASK:tmp[0-9]+]] = xmask & rmask
// CHECK-NEXT:      [[X:tmp[0-9]+]] = tl.load(in_ptr0 + [[OFF]], [[MASK]], other=0.0)
// CHECK-NEXT:      [[Y:tmp[0-9]+]] = tl.load(in_ptr1 + rindex, rmask, other=0.0)
// CHECK-NEXT:      [[ADD:tmp[0-9]+]] = [[X]] + [[Y]]
// CHECK-NEXT:      [[RELU:tmp[0-9]+]] = tl.maximum([[ADD]], 0.0, tl.PropagateNan.ALL)
// CHECK-NEXT:      [[MASKED:tmp[0-9]+]] = tl.where(rmask, [[RELU]], 0.0)
// CHECK-NEXT:      [[SUM:tmp[0-9]+]] = tl.sum([[MASKED]], 1)
// CHECK-NEXT:      tl.store(out_ptr0 + [[OFF]], [[RELU]], [[MASK]])
// CHECK-NEXT:      tl.store(out_ptr1 + xindex, [[SUM]][:, None], xmask)
// CHECK:       def call(args):
// CHECK-NEXT:      x, y = args
// CHECK-NEXT:      args.clear()
// CHECK:           run_kiln_per_fused_relu_sum_0(stream, x, y, relu, sum)
// CHECK-NEXT:      del x, y
// CHECK-NEXT:      return (relu, sum)

// TILED: def kiln_per_fused_relu_sum_0(
// TILED: def call(args):

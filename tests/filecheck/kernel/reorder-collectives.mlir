// RUN: kiln-opt %s --split-input-file -p 'reorder-collectives{report=true}' 2>&1 | filecheck %s

// The inputs are kernel-level programs as `lower-aten,fuse,tile` leave them: each wait
// right after its collective, as traced graphs have it. (test_collectives_ir.py runs
// them before and after the pass in a one-rank gloo world, group "GROUP" replaced.)

// An all-reduce whose result is used at once, and independent work after that use:
// the wait sinks to its use, and the independent exp moves above it, so that it runs
// while the all-reduce communicates. The wait keeps the all-reduce's input %h alive.
// CHECK:      reorder-collectives: @overlap: 1 collectives, 1 waits; compute ops overlapping communication 0 -> 1
// CHECK-LABEL: kernel.program @overlap
// CHECK-NEXT:    %h = kernel.alloc
// CHECK-NEXT:    kernel.launch @tanh(%x) outs(%h)
// CHECK-NEXT:    %ar = kernel.extern (%h)
// CHECK:           aten._c10d_functional.all_reduce.default
// CHECK:         %r = kernel.alloc
// CHECK-NEXT:    %e = kernel.alloc
// CHECK-NEXT:    kernel.launch @exp(%b) outs(%e)
// CHECK-NEXT:    %w = kernel.extern (%ar, %h)
// CHECK:           aten._c10d_functional.wait_tensor.default
// CHECK:         kernel.launch @relu(%w) outs(%r)
// CHECK-NEXT:    kernel.return %r, %e
kernel.kernel @tanh pointwise [32] x [1] (%in: memref<4x8xf32>) -> (memref<4x8xf32>) {
  %out = loop.pointwise [4, 8] (%in) {kernel.vars = [#loop.expr<"d0 // 8">, #loop.expr<"d0 % 8">]} : (memref<4x8xf32>) -> memref<4x8xf32> {
  ^bb0(%d0: index, %d1: index, %a: memref<4x8xf32>):
    %0 = loop.load %a["8*d0 + d1"] : memref<4x8xf32>
    %1 = math.tanh %0 : f32
    loop.yield %1 : f32
  }
  kernel.yield %out : memref<4x8xf32>
}
kernel.kernel @exp pointwise [32] x [1] (%in: memref<4x8xf32>) -> (memref<4x8xf32>) {
  %out = loop.pointwise [4, 8] (%in) {kernel.vars = [#loop.expr<"d0 // 8">, #loop.expr<"d0 % 8">]} : (memref<4x8xf32>) -> memref<4x8xf32> {
  ^bb0(%d0: index, %d1: index, %a: memref<4x8xf32>):
    %0 = loop.load %a["8*d0 + d1"] : memref<4x8xf32>
    %1 = math.exp %0 : f32
    loop.yield %1 : f32
  }
  kernel.yield %out : memref<4x8xf32>
}
kernel.kernel @relu pointwise [32] x [1] (%in: memref<4x8xf32>) -> (memref<4x8xf32>) {
  %out = loop.pointwise [4, 8] (%in) {kernel.vars = [#loop.expr<"d0 // 8">, #loop.expr<"d0 % 8">]} : (memref<4x8xf32>) -> memref<4x8xf32> {
  ^bb0(%d0: index, %d1: index, %a: memref<4x8xf32>):
    %0 = loop.load %a["8*d0 + d1"] : memref<4x8xf32>
    %1 = math.absf %0 : f32
    loop.yield %1 : f32
  }
  kernel.yield %out : memref<4x8xf32>
}
kernel.program @overlap(%x: memref<4x8xf32>, %b: memref<4x8xf32>) -> (memref<4x8xf32>, memref<4x8xf32>) {
  %h = kernel.alloc : memref<4x8xf32>
  kernel.launch @tanh(%x) outs(%h) : (memref<4x8xf32>) -> (memref<4x8xf32>)
  %ar = kernel.extern (%h) : (memref<4x8xf32>) -> memref<4x8xf32> {
  ^bb0(%0: tensor<4x8xf32>):
    %1 = aten._c10d_functional.all_reduce.default(%0, reduce_op = "sum", group_name = "GROUP") : (tensor<4x8xf32>) -> tensor<4x8xf32>
    kernel.yield %1 : tensor<4x8xf32>
  }
  %w = kernel.extern (%ar, %h) : (memref<4x8xf32>, memref<4x8xf32>) -> memref<4x8xf32> {
  ^bb0(%0: tensor<4x8xf32>, %1: tensor<4x8xf32>):
    %2 = aten._c10d_functional.wait_tensor.default(%0) : (tensor<4x8xf32>) -> tensor<4x8xf32>
    kernel.yield %2 : tensor<4x8xf32>
  }
  %r = kernel.alloc : memref<4x8xf32>
  kernel.launch @relu(%w) outs(%r) : (memref<4x8xf32>) -> (memref<4x8xf32>)
  %e = kernel.alloc : memref<4x8xf32>
  kernel.launch @exp(%b) outs(%e) : (memref<4x8xf32>) -> (memref<4x8xf32>)
  kernel.return %r, %e : memref<4x8xf32>, memref<4x8xf32>
}

// -----

// Two all-reduces: the second reads an argument, so it starts right after the first
// (never before it: every rank issues them in the same order), before the first wait.
// Each wait sinks to its use; waits keep their order.
// CHECK:      reorder-collectives: @two: 2 collectives, 2 waits; compute ops overlapping communication 0 -> 1
// CHECK-LABEL: kernel.program @two
// CHECK-NEXT:    %a1 = kernel.alloc
// CHECK-NEXT:    kernel.launch @tanh(%x) outs(%a1)
// CHECK-NEXT:    %c1 = kernel.extern (%a1)
// CHECK:         %c2 = kernel.extern (%b)
// CHECK:         %a2 = kernel.alloc
// CHECK-NEXT:    %w1 = kernel.extern (%c1, %a1)
// CHECK:         kernel.launch @relu(%w1) outs(%a2)
// CHECK-NEXT:    %a3 = kernel.alloc
// CHECK-NEXT:    %w2 = kernel.extern (%c2, %b)
// CHECK:         kernel.launch @exp(%w2) outs(%a3)
// CHECK-NEXT:    kernel.return %a2, %a3
kernel.kernel @tanh pointwise [32] x [1] (%in: memref<4x8xf32>) -> (memref<4x8xf32>) {
  %out = loop.pointwise [4, 8] (%in) {kernel.vars = [#loop.expr<"d0 // 8">, #loop.expr<"d0 % 8">]} : (memref<4x8xf32>) -> memref<4x8xf32> {
  ^bb0(%d0: index, %d1: index, %a: memref<4x8xf32>):
    %0 = loop.load %a["8*d0 + d1"] : memref<4x8xf32>
    %1 = math.tanh %0 : f32
    loop.yield %1 : f32
  }
  kernel.yield %out : memref<4x8xf32>
}
kernel.kernel @exp pointwise [32] x [1] (%in: memref<4x8xf32>) -> (memref<4x8xf32>) {
  %out = loop.pointwise [4, 8] (%in) {kernel.vars = [#loop.expr<"d0 // 8">, #loop.expr<"d0 % 8">]} : (memref<4x8xf32>) -> memref<4x8xf32> {
  ^bb0(%d0: index, %d1: index, %a: memref<4x8xf32>):
    %0 = loop.load %a["8*d0 + d1"] : memref<4x8xf32>
    %1 = math.exp %0 : f32
    loop.yield %1 : f32
  }
  kernel.yield %out : memref<4x8xf32>
}
kernel.kernel @relu pointwise [32] x [1] (%in: memref<4x8xf32>) -> (memref<4x8xf32>) {
  %out = loop.pointwise [4, 8] (%in) {kernel.vars = [#loop.expr<"d0 // 8">, #loop.expr<"d0 % 8">]} : (memref<4x8xf32>) -> memref<4x8xf32> {
  ^bb0(%d0: index, %d1: index, %a: memref<4x8xf32>):
    %0 = loop.load %a["8*d0 + d1"] : memref<4x8xf32>
    %1 = math.absf %0 : f32
    loop.yield %1 : f32
  }
  kernel.yield %out : memref<4x8xf32>
}
kernel.program @two(%x: memref<4x8xf32>, %b: memref<4x8xf32>) -> (memref<4x8xf32>, memref<4x8xf32>) {
  %a1 = kernel.alloc : memref<4x8xf32>
  kernel.launch @tanh(%x) outs(%a1) : (memref<4x8xf32>) -> (memref<4x8xf32>)
  %c1 = kernel.extern (%a1) : (memref<4x8xf32>) -> memref<4x8xf32> {
  ^bb0(%0: tensor<4x8xf32>):
    %1 = aten._c10d_functional.all_reduce.default(%0, reduce_op = "sum", group_name = "GROUP") : (tensor<4x8xf32>) -> tensor<4x8xf32>
    kernel.yield %1 : tensor<4x8xf32>
  }
  %w1 = kernel.extern (%c1, %a1) : (memref<4x8xf32>, memref<4x8xf32>) -> memref<4x8xf32> {
  ^bb0(%0: tensor<4x8xf32>, %1: tensor<4x8xf32>):
    %2 = aten._c10d_functional.wait_tensor.default(%0) : (tensor<4x8xf32>) -> tensor<4x8xf32>
    kernel.yield %2 : tensor<4x8xf32>
  }
  %a2 = kernel.alloc : memref<4x8xf32>
  kernel.launch @relu(%w1) outs(%a2) : (memref<4x8xf32>) -> (memref<4x8xf32>)
  %c2 = kernel.extern (%b) : (memref<4x8xf32>) -> memref<4x8xf32> {
  ^bb0(%0: tensor<4x8xf32>):
    %1 = aten._c10d_functional.all_reduce.default(%0, reduce_op = "sum", group_name = "GROUP") : (tensor<4x8xf32>) -> tensor<4x8xf32>
    kernel.yield %1 : tensor<4x8xf32>
  }
  %w2 = kernel.extern (%c2, %b) : (memref<4x8xf32>, memref<4x8xf32>) -> memref<4x8xf32> {
  ^bb0(%0: tensor<4x8xf32>, %1: tensor<4x8xf32>):
    %2 = aten._c10d_functional.wait_tensor.default(%0) : (tensor<4x8xf32>) -> tensor<4x8xf32>
    kernel.yield %2 : tensor<4x8xf32>
  }
  %a3 = kernel.alloc : memref<4x8xf32>
  kernel.launch @exp(%w2) outs(%a3) : (memref<4x8xf32>) -> (memref<4x8xf32>)
  kernel.return %a2, %a3 : memref<4x8xf32>, memref<4x8xf32>
}

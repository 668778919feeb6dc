// RUN: kiln-opt %s -p 'lower-aten,fuse{report=true}' -o %t 2>&1 | filecheck %s
// RUN: kiln-opt %s -p 'lower-aten,fuse' | filecheck %s --check-prefix=IR

// fuse{report=true} prints every candidate pair, on stderr, with the reason it was or
// was not fused, best score first.

// CHECK:      fuse: @report: 5 nodes
// CHECK-DAG:  fuse: round 1: [%add] + [%sum]: fused (vertical, pointwise prologue), score 128 bytes
// CHECK-DAG:  fuse: round 1: [%relu] + [%mm]: not fused: %mm is an extern call (ATen), which is never fused
// CHECK-DAG:  fuse: round 1: [%relu] + [%add, %sum]: not fused: would create a cycle (through [%mm])
// CHECK-DAG:  fuse: round 1: [%add, %sum] + [%z]: not fused: %z reads %add at "d0 + 8*d1", not where it is computed in the fused kernel
func.func @report(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %y: tensor<8x4xf32>) -> (tensor<4x8xf32>, tensor<4xf32>, tensor<8x4xf32>) {
  %relu = aten.relu.default(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %mm = aten.mm.default(%relu, %w) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %add = aten.add.Tensor(%relu, %mm) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %sum = aten.sum.dim_IntList(%add, dim = [1]) : (tensor<4x8xf32>) -> tensor<4xf32>
  %t = aten.t.default(%add) : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %e = aten.exp.default(%t) : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %z = aten.add.Tensor(%e, %y) : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  func.return %add, %sum, %z : tensor<4x8xf32>, tensor<4xf32>, tensor<8x4xf32>
}

// The schedule: relu; the matrix product; add and sum in one kernel (the add is
// returned, so it still gets a buffer); the transposed consumer on its own.
// IR:       kernel.kernel @kernel0 pointwise [32] x [1]
// IR:       kernel.kernel @kernel1 reduction [4] x [8]
// IR:       kernel.kernel @kernel2 pointwise [32] x [1]
// IR-LABEL: kernel.program @report
// IR-NEXT:    %relu = kernel.alloc : memref<4x8xf32>
// IR-NEXT:    kernel.launch @kernel0(%x) outs(%relu)
// IR-NEXT:    %mm = kernel.extern (%relu, %w)
// IR:         %add = kernel.alloc : memref<4x8xf32>
// IR-NEXT:    %sum = kernel.alloc : memref<4xf32>
// IR-NEXT:    kernel.launch @kernel1(%relu, %mm) outs(%add, %sum)
// IR-NEXT:    %z = kernel.alloc : memref<8x4xf32>
// IR-NEXT:    kernel.launch @kernel2(%y, %add) outs(%z)
// IR-NEXT:    kernel.return %add, %sum, %z

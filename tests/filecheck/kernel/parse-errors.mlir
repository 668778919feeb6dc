// RUN: kiln-opt %s --split-input-file --parsing-diagnostics | filecheck %s

// Kernel syntax errors are reported where they occur.

kernel.kernel @bad_config pointwise [4] x [1] (%in: memref<4xf32>) -> (memref<4xf32>) attributes {tiling = #kernel.config<ZBLOCK = 4>} {
  kernel.yield %in : memref<4xf32>
}
// CHECK: parse-errors.mlir:[[# @LINE - 3]]:{{[0-9]+}}: error: unknown config key 'ZBLOCK' (one of YBLOCK, XBLOCK, RBLOCK, num_warps, num_stages)

// -----

kernel.kernel @bad_kind blocked [4] x [1] (%in: memref<4xf32>) -> (memref<4xf32>) {
  kernel.yield %in : memref<4xf32>
}
// CHECK: parse-errors.mlir:[[# @LINE - 3]]:25: error: unknown kernel kind 'blocked' (one of pointwise, reduction, persistent, looped, split, matmul)

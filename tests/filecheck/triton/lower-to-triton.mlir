// RUN: kiln-opt %s --lower-to-triton | filecheck %s

// A looped reduction: accumulators carried through an scf.for over RBLOCK chunks,
// reduced across lanes after the loop; the kernel.kernel stays, implemented by the
// triton.kernel next to it.

kernel.kernel @kernel0 looped [4] x [300] (%x: memref<4x300xf32>) -> (memref<4xf32>) attributes {tiling = #kernel.config<XBLOCK = 2, RBLOCK = 64, num_warps = 2, num_stages = 1>} {
  %m = loop.reduction max [4] reduce [300] (%x) {kernel.vars = [#loop.expr<"d0">, #loop.expr<"r0">]} : (memref<4x300xf32>) -> memref<4xf32> {
  ^bb0(%d0: index, %r0: index, %in0: memref<4x300xf32>):
    %v = loop.load %in0["300*d0 + r0"] : memref<4x300xf32>
    loop.yield %v : f32
  }
  kernel.yield %m : memref<4xf32>
}

// CHECK:      kernel.kernel @kernel0 looped [4] x [300]
// CHECK:      triton.kernel @kiln_red_fused_m_0 looped [4] x [300] params [in_ptr0, out_ptr0] constexprs [XBLOCK, RBLOCK] attributes {implements = @kernel0, config = #kernel.config<XBLOCK = 2, RBLOCK = 64, num_warps = 2, num_stages = 1>
// CHECK-NEXT: ^bb0(%in_ptr0: !triton.ptr<f32>, %out_ptr0: !triton.ptr<f32>):
// CHECK:        %xindex = triton.add %xoffset, {{%.*}} : i32, !triton.block<[XBLOCK, 1], i32> -> !triton.block<[XBLOCK, 1], i32>
// CHECK:        %rbase = triton.expand_dims {{%.*}}, 0 : !triton.block<[RBLOCK], i32> -> !triton.block<[1, RBLOCK], i32>
// CHECK:        [[INIT:%.*]] = triton.full -inf : !triton.block<[XBLOCK, RBLOCK], f32>
// CHECK:        %acc_m = scf.for %roffset = {{%.*}} to {{%.*}} step {{%.*}} iter_args(%acc_m_1 = [[INIT]]) -> (!triton.block<[XBLOCK, RBLOCK], f32>) : i32 {
// CHECK:          %rindex = triton.add %roffset, %rbase
// CHECK:          %rmask = triton.cmp lt %rindex, {{%.*}}
// CHECK:          [[V:%.*]] = triton.load {{%.*}} mask {{%.*}} other 0.0
// CHECK:          [[NEW:%.*]] = triton.maximum %acc_m_1, [[V]]
// CHECK:          [[KEEP:%.*]] = triton.where %rmask, [[NEW]], %acc_m_1
// CHECK:          scf.yield [[KEEP]] : !triton.block<[XBLOCK, RBLOCK], f32>
// CHECK:        [[R:%.*]] = triton.reduce max %acc_m axis 1 : (!triton.block<[XBLOCK, RBLOCK], f32>) -> !triton.block<[XBLOCK], f32>
// CHECK:        triton.expand_dims [[R]], 1
// CHECK:        triton.store
// CHECK:        triton.return

// RUN: kiln-opt %s | kiln-opt | filecheck %s
// RUN: kiln-opt %s --print-op-generic | kiln-opt | filecheck %s

// A matmul kernel's inner loop: tl.dot of a [YBLOCK, RBLOCK] and a [RBLOCK, XBLOCK]
// block into a float32 accumulator prints and parses back.
// CHECK: triton.kernel @kiln_mm_fused_mm_0 matmul
// CHECK: triton.dot %{{.*}}, %{{.*}}, %{{.*}} precision "ieee" : !triton.block<[YBLOCK, RBLOCK], f32>, !triton.block<[RBLOCK, XBLOCK], f32>, !triton.block<[YBLOCK, XBLOCK], f32> -> !triton.block<[YBLOCK, XBLOCK], f32>
// CHECK: triton.dot %{{.*}}, %{{.*}}, %{{.*}} : !triton.block<[YBLOCK, RBLOCK], bf16>, !triton.block<[RBLOCK, XBLOCK], bf16>, !triton.block<[YBLOCK, XBLOCK], f32> -> !triton.block<[YBLOCK, XBLOCK], f32>
triton.kernel @kiln_mm_fused_mm_0 matmul [8] x [4] params [] constexprs [YBLOCK, XBLOCK, RBLOCK] {
  %a = triton.full 1.0 : !triton.block<[YBLOCK, RBLOCK], f32>
  %b = triton.full 2.0 : !triton.block<[RBLOCK, XBLOCK], f32>
  %acc = triton.full 0.0 : !triton.block<[YBLOCK, XBLOCK], f32>
  %d = triton.dot %a, %b, %acc precision "ieee" : !triton.block<[YBLOCK, RBLOCK], f32>, !triton.block<[RBLOCK, XBLOCK], f32>, !triton.block<[YBLOCK, XBLOCK], f32> -> !triton.block<[YBLOCK, XBLOCK], f32>
  %ha = triton.full 1.0 : !triton.block<[YBLOCK, RBLOCK], bf16>
  %hb = triton.full 2.0 : !triton.block<[RBLOCK, XBLOCK], bf16>
  %e = triton.dot %ha, %hb, %d : !triton.block<[YBLOCK, RBLOCK], bf16>, !triton.block<[RBLOCK, XBLOCK], bf16>, !triton.block<[YBLOCK, XBLOCK], f32> -> !triton.block<[YBLOCK, XBLOCK], f32>
  triton.return
}

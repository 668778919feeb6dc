// RUN: kiln-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Operands that do not broadcast.
triton.kernel @k pointwise [8] x [1] params [] constexprs [XBLOCK, RBLOCK] {
  %a = triton.arange XBLOCK : !triton.block<[XBLOCK], i32>
  %b = triton.arange RBLOCK : !triton.block<[RBLOCK], i32>
  %c = triton.add %a, %b : !triton.block<[XBLOCK], i32>, !triton.block<[RBLOCK], i32> -> !triton.block<[XBLOCK], i32>
  triton.return
}
// CHECK: error: 'triton.add' op operands do not broadcast

// -----

// Elementwise ops take one element type.
triton.kernel @k pointwise [8] x [1] params [] constexprs [XBLOCK] {
  %a = triton.arange XBLOCK : !triton.block<[XBLOCK], i32>
  %f = triton.constant 1.0 : f32
  %c = triton.mul %a, %f : !triton.block<[XBLOCK], i32>, f32 -> !triton.block<[XBLOCK], i32>
  triton.return
}
// CHECK: error: 'triton.mul' op element types differ

// -----

// A masked load needs the value of the masked-off lanes.
triton.kernel @k pointwise [8] x [1] params [in_ptr0] constexprs [XBLOCK] {
^bb0(%in_ptr0: !triton.ptr<f32>):
  %a = triton.arange XBLOCK : !triton.block<[XBLOCK], i32>
  %p = triton.addptr %in_ptr0, %a : !triton.ptr<f32>, !triton.block<[XBLOCK], i32> -> !triton.block<[XBLOCK], !triton.ptr<f32>>
  %n = triton.constant 8 : i32
  %m = triton.cmp lt %a, %n : !triton.block<[XBLOCK], i32>, i32 -> !triton.block<[XBLOCK], i1>
  %v = "triton.load"(%p, %m) <{operandSegmentSizes = array<i32: 1, 1>}> : (!triton.block<[XBLOCK], !triton.ptr<f32>>, !triton.block<[XBLOCK], i1>) -> !triton.block<[XBLOCK], f32>
  triton.return
}
// CHECK: error: 'triton.load' op a mask needs an 'other' value and vice versa

// -----

// Math functions are Triton's.
triton.kernel @k pointwise [8] x [1] params [] constexprs [XBLOCK] {
  %f = triton.constant 1.0 : f32
  %g = "triton.math"(%f) <{fn = "gamma"}> : (f32) -> f32
  triton.return
}
// CHECK: error: 'triton.math' op unknown function 'gamma'

// -----

// A block size must be one of the kernel's constexprs.
triton.kernel @k pointwise [8] x [1] params [] constexprs [XBLOCK] {
  %b = triton.constexpr YBLOCK : i32
  triton.return
}
// CHECK: error: 'triton.constexpr' op 'YBLOCK' is not a constexpr of the kernel

// -----

// A pointwise kernel has no reduction space.
triton.kernel @k pointwise [8] x [4] params [] constexprs [XBLOCK] {
  triton.return
}
// CHECK: error: 'triton.kernel' op triton.kernel @k: a pointwise kernel has rnumel 1, not 4

// -----

// tl.dot's inner dimensions must agree.
triton.kernel @k matmul [8] x [4] params [] constexprs [YBLOCK, XBLOCK, RBLOCK] {
  %a = triton.full 1.0 : !triton.block<[YBLOCK, RBLOCK], f32>
  %b = triton.full 2.0 : !triton.block<[XBLOCK, XBLOCK], f32>
  %acc = triton.full 0.0 : !triton.block<[YBLOCK, XBLOCK], f32>
  %d = triton.dot %a, %b, %acc : !triton.block<[YBLOCK, RBLOCK], f32>, !triton.block<[XBLOCK, XBLOCK], f32>, !triton.block<[YBLOCK, XBLOCK], f32> -> !triton.block<[YBLOCK, XBLOCK], f32>
  triton.return
}
// CHECK: error: 'triton.dot' op cannot multiply ['YBLOCK', 'RBLOCK'] by ['XBLOCK', 'XBLOCK'] into ['YBLOCK', 'XBLOCK']

// -----

// A precision applies to float32 operands only.
triton.kernel @k matmul [8] x [4] params [] constexprs [YBLOCK, XBLOCK, RBLOCK] {
  %a = triton.full 1.0 : !triton.block<[YBLOCK, RBLOCK], bf16>
  %b = triton.full 2.0 : !triton.block<[RBLOCK, XBLOCK], bf16>
  %acc = triton.full 0.0 : !triton.block<[YBLOCK, XBLOCK], f32>
  %d = triton.dot %a, %b, %acc precision "ieee" : !triton.block<[YBLOCK, RBLOCK], bf16>, !triton.block<[RBLOCK, XBLOCK], bf16>, !triton.block<[YBLOCK, XBLOCK], f32> -> !triton.block<[YBLOCK, XBLOCK], f32>
  triton.return
}
// CHECK: error: 'triton.dot' op a precision applies to f32 operands only

// RUN: kiln-opt %s | kiln-opt | filecheck %s
// RUN: kiln-opt %s --print-op-generic | kiln-opt | filecheck %s

// Every triton op prints and parses back.

triton.kernel @kiln_red_fused_argmax_0 looped [8] x ["s0"] params [in_ptr0, out_ptr0, ks0] constexprs [XBLOCK, RBLOCK] attributes {implements = @kernel0} {
^bb0(%in_ptr0: !triton.ptr<f16>, %out_ptr0: !triton.ptr<i64>, %ks0: i64):
  %c0 = triton.constant 0 : i64
  %c8 = triton.constant 8 : i64
  %half = triton.constant 5.000000e-01 : f32
  %t = triton.constant true
  %pid = triton.program_id 0
  %xblock = triton.constexpr XBLOCK : i32
  %rblock = triton.constexpr RBLOCK : i64
  %off = triton.mul %pid, %xblock : i32, i32 -> i32
  %off64 = triton.cast %off : i32 -> i64
  %lanes = triton.arange XBLOCK : !triton.block<[XBLOCK], i32>
  %lanes64 = triton.cast %lanes : !triton.block<[XBLOCK], i32> -> !triton.block<[XBLOCK], i64>
  %col = triton.expand_dims %lanes64, 1 : !triton.block<[XBLOCK], i64> -> !triton.block<[XBLOCK, 1], i64>
  %x = triton.add %off64, %col : i64, !triton.block<[XBLOCK, 1], i64> -> !triton.block<[XBLOCK, 1], i64>
  %xmask = triton.cmp lt %x, %c8 : !triton.block<[XBLOCK, 1], i64>, i64 -> !triton.block<[XBLOCK, 1], i1>
  %r = triton.arange RBLOCK : !triton.block<[RBLOCK], i32>
  %r64 = triton.cast %r : !triton.block<[RBLOCK], i32> -> !triton.block<[RBLOCK], i64>
  %rbase = triton.expand_dims %r64, 0 : !triton.block<[RBLOCK], i64> -> !triton.block<[1, RBLOCK], i64>
  %init_v = triton.full -inf : !triton.block<[XBLOCK, RBLOCK], f32>
  %init_i = triton.full 9223372036854775807 : !triton.block<[XBLOCK, RBLOCK], i64>
  %row = triton.mul %x, %ks0 : !triton.block<[XBLOCK, 1], i64>, i64 -> !triton.block<[XBLOCK, 1], i64>
  %acc:2 = scf.for %ro = %c0 to %ks0 step %rblock iter_args(%v = %init_v, %i = %init_i) -> (!triton.block<[XBLOCK, RBLOCK], f32>, !triton.block<[XBLOCK, RBLOCK], i64>) : i64 {
    %ridx = triton.add %ro, %rbase : i64, !triton.block<[1, RBLOCK], i64> -> !triton.block<[1, RBLOCK], i64>
    %rmask = triton.cmp lt %ridx, %ks0 : !triton.block<[1, RBLOCK], i64>, i64 -> !triton.block<[1, RBLOCK], i1>
    %mask = triton.and %xmask, %rmask : !triton.block<[XBLOCK, 1], i1>, !triton.block<[1, RBLOCK], i1> -> !triton.block<[XBLOCK, RBLOCK], i1>
    %offs = triton.add %row, %ridx : !triton.block<[XBLOCK, 1], i64>, !triton.block<[1, RBLOCK], i64> -> !triton.block<[XBLOCK, RBLOCK], i64>
    %ptrs = triton.addptr %in_ptr0, %offs : !triton.ptr<f16>, !triton.block<[XBLOCK, RBLOCK], i64> -> !triton.block<[XBLOCK, RBLOCK], !triton.ptr<f16>>
    %h = triton.load %ptrs mask %mask other 0.0 evict_first : !triton.block<[XBLOCK, RBLOCK], !triton.ptr<f16>>, !triton.block<[XBLOCK, RBLOCK], i1> -> !triton.block<[XBLOCK, RBLOCK], f16>
    %f = triton.cast %h : !triton.block<[XBLOCK, RBLOCK], f16> -> !triton.block<[XBLOCK, RBLOCK], f32>
    %g = triton.math tanh %f : !triton.block<[XBLOCK, RBLOCK], f32> -> !triton.block<[XBLOCK, RBLOCK], f32>
    %s = triton.mul %g, %half : !triton.block<[XBLOCK, RBLOCK], f32>, f32 -> !triton.block<[XBLOCK, RBLOCK], f32>
    %idx = triton.broadcast_to %ridx : !triton.block<[1, RBLOCK], i64> -> !triton.block<[XBLOCK, RBLOCK], i64>
    %nv, %ni = triton.combine argmax %v, %i, %s, %idx : (!triton.block<[XBLOCK, RBLOCK], f32>, !triton.block<[XBLOCK, RBLOCK], i64>, !triton.block<[XBLOCK, RBLOCK], f32>, !triton.block<[XBLOCK, RBLOCK], i64>) -> (!triton.block<[XBLOCK, RBLOCK], f32>, !triton.block<[XBLOCK, RBLOCK], i64>)
    %kv = triton.where %rmask, %nv, %v : !triton.block<[1, RBLOCK], i1>, !triton.block<[XBLOCK, RBLOCK], f32>, !triton.block<[XBLOCK, RBLOCK], f32> -> !triton.block<[XBLOCK, RBLOCK], f32>
    %ki = triton.where %rmask, %ni, %i : !triton.block<[1, RBLOCK], i1>, !triton.block<[XBLOCK, RBLOCK], i64>, !triton.block<[XBLOCK, RBLOCK], i64> -> !triton.block<[XBLOCK, RBLOCK], i64>
    scf.yield %kv, %ki : !triton.block<[XBLOCK, RBLOCK], f32>, !triton.block<[XBLOCK, RBLOCK], i64>
  }
  %best, %where = triton.reduce argmax %acc#0, %acc#1 axis 1 : (!triton.block<[XBLOCK, RBLOCK], f32>, !triton.block<[XBLOCK, RBLOCK], i64>) -> (!triton.block<[XBLOCK], f32>, !triton.block<[XBLOCK], i64>)
  %col_i = triton.expand_dims %where, 1 : !triton.block<[XBLOCK], i64> -> !triton.block<[XBLOCK, 1], i64>
  %out = triton.addptr %out_ptr0, %x : !triton.ptr<i64>, !triton.block<[XBLOCK, 1], i64> -> !triton.block<[XBLOCK, 1], !triton.ptr<i64>>
  triton.device_assert %xmask, "index out of bounds: 0 <= index < 8" : !triton.block<[XBLOCK, 1], i1>
  triton.store %out, %col_i mask %xmask : !triton.block<[XBLOCK, 1], !triton.ptr<i64>>, !triton.block<[XBLOCK, 1], i64>, !triton.block<[XBLOCK, 1], i1>
  triton.atomic_add %out, %col_i mask %xmask : !triton.block<[XBLOCK, 1], !triton.ptr<i64>>, !triton.block<[XBLOCK, 1], i64>, !triton.block<[XBLOCK, 1], i1>
  triton.return
}

// CHECK:      triton.kernel @kiln_red_fused_argmax_0 looped [8] x ["s0"] params [in_ptr0, out_ptr0, ks0] constexprs [XBLOCK, RBLOCK] attributes {implements = @kernel0} {
// CHECK-NEXT: ^bb0(%in_ptr0: !triton.ptr<f16>, %out_ptr0: !triton.ptr<i64>, %ks0: i64):
// CHECK:        %t = triton.constant true
// CHECK:        %pid = triton.program_id 0
// CHECK:        %xblock = triton.constexpr XBLOCK : i32
// CHECK:        %lanes = triton.arange XBLOCK : !triton.block<[XBLOCK], i32>
// CHECK:        %col = triton.expand_dims %lanes64, 1 : !triton.block<[XBLOCK], i64> -> !triton.block<[XBLOCK, 1], i64>
// CHECK:        %xmask = triton.cmp lt %x, %c8 : !triton.block<[XBLOCK, 1], i64>, i64 -> !triton.block<[XBLOCK, 1], i1>
// CHECK:        %init_v = triton.full -inf : !triton.block<[XBLOCK, RBLOCK], f32>
// CHECK:        %h = triton.load %ptrs mask %mask other 0.0 evict_first : !triton.block<[XBLOCK, RBLOCK], !triton.ptr<f16>>, !triton.block<[XBLOCK, RBLOCK], i1> -> !triton.block<[XBLOCK, RBLOCK], f16>
// CHECK:        %g = triton.math tanh %f : !triton.block<[XBLOCK, RBLOCK], f32> -> !triton.block<[XBLOCK, RBLOCK], f32>
// CHECK:        %nv, %ni = triton.combine argmax %v, %i, %s, %idx
// CHECK:        %best, %where = triton.reduce argmax {{%.*}}, {{%.*}} axis 1
// CHECK:        triton.device_assert %xmask, "index out of bounds: 0 <= index < 8" : !triton.block<[XBLOCK, 1], i1>
// CHECK-NEXT:   triton.store %out, %col_i mask %xmask
// CHECK-NEXT:   triton.atomic_add %out, %col_i mask %xmask : !triton.block<[XBLOCK, 1], !triton.ptr<i64>>, !triton.block<[XBLOCK, 1], i64>, !triton.block<[XBLOCK, 1], i1>
// CHECK-NEXT:   triton.return

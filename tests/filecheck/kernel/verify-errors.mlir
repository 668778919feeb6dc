// RUN: kiln-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Buffer lifetimes: every error is reported at the program, naming the op and buffer.

kernel.program @use_after_free() -> memref<4xf32> {
  %buf = kernel.alloc : memref<4xf32>
  kernel.free %buf : memref<4xf32>
  kernel.return %buf : memref<4xf32>
}
// CHECK: error: 'kernel.program' op kernel.return uses %buf after its kernel.free

// -----

kernel.program @double_free() {
  %buf = kernel.alloc : memref<4xf32>
  kernel.free %buf : memref<4xf32>
  kernel.free %buf : memref<4xf32>
  kernel.return
}
// CHECK: error: 'kernel.program' op kernel.free: %buf is freed twice

// -----

kernel.program @free_argument(%x: memref<4xf32>) {
  kernel.free %x : memref<4xf32>
  kernel.return
}
// CHECK: error: 'kernel.program' op kernel.free: %x is a program argument; only buffers the program allocated can be freed or reused

// -----

kernel.kernel @copy pointwise [4] x [1] (%in: memref<4xf32>) -> (memref<4xf32>) {
  %0 = loop.pointwise [4] (%in) {kernel.vars = [#loop.expr<"d0">]} : (memref<4xf32>) -> memref<4xf32> {
  ^bb0(%d0: index, %a: memref<4xf32>):
    %v = loop.load %a["d0"] : memref<4xf32>
    loop.yield %v : f32
  }
  kernel.yield %0 : memref<4xf32>
}
kernel.program @read_before_write() -> memref<4xf32> {
  %buf = kernel.alloc : memref<4xf32>
  %out = kernel.alloc : memref<4xf32>
  kernel.launch @copy(%buf) outs(%out) : (memref<4xf32>) -> (memref<4xf32>)
  kernel.return %out : memref<4xf32>
}
// CHECK: error: 'kernel.program' op kernel.launch reads %buf before anything writes it

// -----

kernel.program @use_after_reuse() -> memref<4xf32> {
  %buf = kernel.alloc : memref<4xf32>
  %other = kernel.reuse %buf : memref<4xf32> -> memref<2x2xf32>
  kernel.free %other : memref<2x2xf32>
  kernel.return %buf : memref<4xf32>
}
// CHECK: error: 'kernel.program' op kernel.return uses %buf after kernel.reuse gave its memory away

// -----

kernel.program @write_argument(%x: memref<4xf32>, %y: memref<4xf32>) {
  kernel.launch @copy(%x) outs(%y) : (memref<4xf32>) -> (memref<4xf32>)
  kernel.return
}
kernel.kernel @copy pointwise [4] x [1] (%in: memref<4xf32>) -> (memref<4xf32>) {
  %0 = loop.pointwise [4] (%in) {kernel.vars = [#loop.expr<"d0">]} : (memref<4xf32>) -> memref<4xf32> {
  ^bb0(%d0: index, %a: memref<4xf32>):
    %v = loop.load %a["d0"] : memref<4xf32>
    loop.yield %v : f32
  }
  kernel.yield %0 : memref<4xf32>
}
// CHECK: error: 'kernel.program' op kernel.launch writes program argument %y; arguments are read-only

// -----

// Buffers and types.

kernel.program @reuse_size() {
  %buf = kernel.alloc : memref<4xf32>
  %other = kernel.reuse %buf : memref<4xf32> -> memref<8xf32>
  kernel.return
}
// CHECK: error: 'kernel.reuse' op memref<8xf32> cannot reuse memref<4xf32> (dtype, memory space and size must match)

// -----

kernel.program @alloc_sizes(%n: index) {
  %buf = kernel.alloc : memref<?x4xf32>
  kernel.return
}
// CHECK: error: 'kernel.alloc' op memref<?x4xf32> has 1 dynamic dimension(s) but 0 size operand(s) were given

// -----

kernel.program @unknown_kernel(%x: memref<4xf32>) -> memref<4xf32> {
  %buf = kernel.alloc : memref<4xf32>
  kernel.launch @nowhere(%x) outs(%buf) : (memref<4xf32>) -> (memref<4xf32>)
  kernel.return %buf : memref<4xf32>
}
// CHECK: error: 'kernel.launch' op '@nowhere' is not a kernel.kernel

// -----

kernel.kernel @copy pointwise [4] x [1] (%in: memref<4xf32>) -> (memref<4xf32>) {
  %0 = loop.pointwise [4] (%in) {kernel.vars = [#loop.expr<"d0">]} : (memref<4xf32>) -> memref<4xf32> {
  ^bb0(%d0: index, %a: memref<4xf32>):
    %v = loop.load %a["d0"] : memref<4xf32>
    loop.yield %v : f32
  }
  kernel.yield %0 : memref<4xf32>
}
kernel.program @launch_types(%x: memref<8xf32>) -> memref<4xf32> {
  %buf = kernel.alloc : memref<4xf32>
  kernel.launch @copy(%x) outs(%buf) : (memref<8xf32>) -> (memref<4xf32>)
  kernel.return %buf : memref<4xf32>
}
// CHECK: error: 'kernel.launch' op @copy: arguments (memref<8xf32>) do not match the kernel's (memref<4xf32>)

// -----

// Kernels.

kernel.kernel @no_vars pointwise [4] x [1] (%in: memref<4xf32>) -> (memref<4xf32>) {
  %0 = loop.pointwise [4] (%in) : (memref<4xf32>) -> memref<4xf32> {
  ^bb0(%d0: index, %a: memref<4xf32>):
    %v = loop.load %a["d0"] : memref<4xf32>
    loop.yield %v : f32
  }
  kernel.yield %0 : memref<4xf32>
}
// CHECK: error: 'kernel.kernel' op loop.pointwise inside a kernel needs a 'kernel.vars' attribute

// -----

kernel.kernel @pointwise_rnumel pointwise [4] x [2] (%in: memref<4xf32>) -> (memref<4xf32>) {
  %0 = loop.pointwise [4] (%in) {kernel.vars = [#loop.expr<"d0">]} : (memref<4xf32>) -> memref<4xf32> {
  ^bb0(%d0: index, %a: memref<4xf32>):
    %v = loop.load %a["d0"] : memref<4xf32>
    loop.yield %v : f32
  }
  kernel.yield %0 : memref<4xf32>
}
// CHECK: error: 'kernel.kernel' op @pointwise_rnumel: a pointwise kernel has rnumel 1, not 2

// -----

kernel.kernel @vars_use_r pointwise [4] x [1] (%in: memref<4xf32>) -> (memref<4xf32>) {
  %0 = loop.pointwise [4] (%in) {kernel.vars = [#loop.expr<"r0">]} : (memref<4xf32>) -> memref<4xf32> {
  ^bb0(%d0: index, %a: memref<4xf32>):
    %v = loop.load %a["d0"] : memref<4xf32>
    loop.yield %v : f32
  }
  kernel.yield %0 : memref<4xf32>
}
// CHECK: error: 'kernel.kernel' op kernel.vars 'r0' uses r0, which is not defined here

// -----

kernel.kernel @yield_argument pointwise [4] x [1] (%in: memref<4xf32>) -> (memref<4xf32>) {
  kernel.yield %in : memref<4xf32>
}
// CHECK: error: 'kernel.kernel' op @yield_argument: a yielded buffer must be computed by a node of the kernel


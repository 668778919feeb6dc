// RUN: kiln-opt %s --fuse | filecheck %s
// RUN: kiln-opt %s -p 'fuse{stamp=false}' | filecheck %s --check-prefix=REAL

// Eight layers of loop IR (an ATen mm by the layer's weight, relu, add of a shared bias;
// what lower-aten gives). The first layer reads an argument where the others read the
// previous layer: the loop ops repeat in periods of three from the second layer on (7
// periods). fuse schedules a window of five periods (layers 2-6) and the ops around it
// for real, with the window's last period standing in for the function's last (layer
// 8); layers 5-7 get the window's middle period (layer 4) cloned: its kernel (relu
// inlined into the add), the extern, the alloc and the launch, reading their own
// weights and the previous layer's buffer, named after their own values, the kernels
// numbered in order. The output is the full schedule's (REAL), but for the note.
// CHECK:       kernel.kernel @kernel5 pointwise [32] x [1] (%b: memref<8xf32>, %mm6: memref<4x8xf32>) -> (memref<4x8xf32>)
// CHECK-NEXT:    %add6 = loop.pointwise [4, 8] (%b, %mm6)
// CHECK:       kernel.kernel @kernel6 pointwise [32] x [1] (%b: memref<8xf32>, %mm7: memref<4x8xf32>) -> (memref<4x8xf32>)
// CHECK-NEXT:    %add7 = loop.pointwise [4, 8] (%b, %mm7)
// CHECK:           arith.maximumf
// CHECK:           arith.addf
// CHECK:       kernel.kernel @kernel7 pointwise [32] x [1] (%b: memref<8xf32>, %mm8: memref<4x8xf32>) -> (memref<4x8xf32>)
// CHECK-LABEL: kernel.program @layers
// CHECK-SAME:    attributes {kiln.stamped_fuse = "2 of 7 periods of 3 loop ops"}
// CHECK:         %mm6 = kernel.extern (%add5, %w6)
// CHECK:           %mm6_1 = aten.mm.default
// CHECK:         %add6 = kernel.alloc : memref<4x8xf32>
// CHECK-NEXT:    kernel.launch @kernel5(%b, %mm6) outs(%add6)
// CHECK-NEXT:    %mm7 = kernel.extern (%add6, %w7)
// CHECK:         %add7 = kernel.alloc : memref<4x8xf32>
// CHECK-NEXT:    kernel.launch @kernel6(%b, %mm7) outs(%add7)
// CHECK-NEXT:    %mm8 = kernel.extern (%add7, %w8)
// CHECK:         %add8 = kernel.alloc : memref<4x8xf32>
// CHECK-NEXT:    kernel.launch @kernel7(%b, %mm8) outs(%add8)
// CHECK-NEXT:    kernel.return %add8
// REAL:        kernel.kernel @kernel6 pointwise [32] x [1] (%b: memref<8xf32>, %mm7: memref<4x8xf32>) -> (memref<4x8xf32>)
// REAL-NEXT:     %add7 = loop.pointwise [4, 8] (%b, %mm7)
// REAL-LABEL:  kernel.program @layers
// REAL-NOT:      kiln.stamped_fuse
// REAL:          %mm7 = kernel.extern (%add6, %w7)
// REAL:          %add7 = kernel.alloc : memref<4x8xf32>
// REAL-NEXT:     kernel.launch @kernel6(%b, %mm7) outs(%add7)
// REAL-NEXT:     %mm8 = kernel.extern (%add7, %w8)
// REAL:          kernel.launch @kernel7(%b, %mm8) outs(%add8)
func.func @layers(%x: memref<4x8xf32>, %w1: memref<8x8xf32>, %w2: memref<8x8xf32>, %w3: memref<8x8xf32>, %w4: memref<8x8xf32>, %w5: memref<8x8xf32>, %w6: memref<8x8xf32>, %w7: memref<8x8xf32>, %w8: memref<8x8xf32>, %b: memref<8xf32>) -> memref<4x8xf32> {
  %mm1 = loop.extern (%x, %w1) : (memref<4x8xf32>, memref<8x8xf32>) -> memref<4x8xf32> {
  ^bb0(%0: tensor<4x8xf32>, %1: tensor<8x8xf32>):
    %mm1_1 = aten.mm.default(%0, %1) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    loop.yield %mm1_1 : tensor<4x8xf32>
  }
  %relu1 = loop.pointwise [4, 8] (%mm1) : (memref<4x8xf32>) -> memref<4x8xf32> {
  ^bb0(%d0: index, %d1: index, %in0: memref<4x8xf32>):
    %0 = loop.load %in0["8*d0 + d1"] : memref<4x8xf32>
    %1 = arith.constant 0.000000e+00 : f32
    %2 = arith.maximumf %0, %1 : f32
    loop.yield %2 : f32
  }
  %add1 = loop.pointwise [4, 8] (%relu1, %b) : (memref<4x8xf32>, memref<8xf32>) -> memref<4x8xf32> {
  ^bb0(%d0: index, %d1: index, %in0: memref<4x8xf32>, %in1: memref<8xf32>):
    %0 = loop.load %in0["8*d0 + d1"] : memref<4x8xf32>
    %1 = loop.load %in1["d1"] : memref<8xf32>
    %2 = arith.addf %0, %1 : f32
    loop.yield %2 : f32
  }
  %mm2 = loop.extern (%add1, %w2) : (memref<4x8xf32>, memref<8x8xf32>) -> memref<4x8xf32> {
  ^bb0(%0: tensor<4x8xf32>, %1: tensor<8x8xf32>):
    %mm2_1 = aten.mm.default(%0, %1) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    loop.yield %mm2_1 : tensor<4x8xf32>
  }
  %relu2 = loop.pointwise [4, 8] (%mm2) : (memref<4x8xf32>) -> memref<4x8xf32> {
  ^bb0(%d0: index, %d1: index, %in0: memref<4x8xf32>):
    %0 = loop.load %in0["8*d0 + d1"] : memref<4x8xf32>
    %1 = arith.constant 0.000000e+00 : f32
    %2 = arith.maximumf %0, %1 : f32
    loop.yield %2 : f32
  }
  %add2 = loop.pointwise [4, 8] (%relu2, %b) : (memref<4x8xf32>, memref<8xf32>) -> memref<4x8xf32> {
  ^bb0(%d0: index, %d1: index, %in0: memref<4x8xf32>, %in1: memref<8xf32>):
    %0 = loop.load %in0["8*d0 + d1"] : memref<4x8xf32>
    %1 = loop.load %in1["d1"] : memref<8xf32>
    %2 = arith.addf %0, %1 : f32
    loop.yield %2 : f32
  }
  %mm3 = loop.extern (%add2, %w3) : (memref<4x8xf32>, memref<8x8xf32>) -> memref<4x8xf32> {
  ^bb0(%0: tensor<4x8xf32>, %1: tensor<8x8xf32>):
    %mm3_1 = aten.mm.default(%0, %1) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    loop.yield %mm3_1 : tensor<4x8xf32>
  }
  %relu3 = loop.pointwise [4, 8] (%mm3) : (memref<4x8xf32>) -> memref<4x8xf32> {
  ^bb0(%d0: index, %d1: index, %in0: memref<4x8xf32>):
    %0 = loop.load %in0["8*d0 + d1"] : memref<4x8xf32>
    %1 = arith.constant 0.000000e+00 : f32
    %2 = arith.maximumf %0, %1 : f32
    loop.yield %2 : f32
  }
  %add3 = loop.pointwise [4, 8] (%relu3, %b) : (memref<4x8xf32>, memref<8xf32>) -> memref<4x8xf32> {
  ^bb0(%d0: index, %d1: index, %in0: memref<4x8xf32>, %in1: memref<8xf32>):
    %0 = loop.load %in0["8*d0 + d1"] : memref<4x8xf32>
    %1 = loop.load %in1["d1"] : memref<8xf32>
    %2 = arith.addf %0, %1 : f32
    loop.yield %2 : f32
  }
  %mm4 = loop.extern (%add3, %w4) : (memref<4x8xf32>, memref<8x8xf32>) -> memref<4x8xf32> {
  ^bb0(%0: tensor<4x8xf32>, %1: tensor<8x8xf32>):
    %mm4_1 = aten.mm.default(%0, %1) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    loop.yield %mm4_1 : tensor<4x8xf32>
  }
  %relu4 = loop.pointwise [4, 8] (%mm4) : (memref<4x8xf32>) -> memref<4x8xf32> {
  ^bb0(%d0: index, %d1: index, %in0: memref<4x8xf32>):
    %0 = loop.load %in0["8*d0 + d1"] : memref<4x8xf32>
    %1 = arith.constant 0.000000e+00 : f32
    %2 = arith.maximumf %0, %1 : f32
    loop.yield %2 : f32
  }
  %add4 = loop.pointwise [4, 8] (%relu4, %b) : (memref<4x8xf32>, memref<8xf32>) -> memref<4x8xf32> {
  ^bb0(%d0: index, %d1: index, %in0: memref<4x8xf32>, %in1: memref<8xf32>):
    %0 = loop.load %in0["8*d0 + d1"] : memref<4x8xf32>
    %1 = loop.load %in1["d1"] : memref<8xf32>
    %2 = arith.addf %0, %1 : f32
    loop.yield %2 : f32
  }
  %mm5 = loop.extern (%add4, %w5) : (memref<4x8xf32>, memref<8x8xf32>) -> memref<4x8xf32> {
  ^bb0(%0: tensor<4x8xf32>, %1: tensor<8x8xf32>):
    %mm5_1 = aten.mm.default(%0, %1) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    loop.yield %mm5_1 : tensor<4x8xf32>
  }
  %relu5 = loop.pointwise [4, 8] (%mm5) : (memref<4x8xf32>) -> memref<4x8xf32> {
  ^bb0(%d0: index, %d1: index, %in0: memref<4x8xf32>):
    %0 = loop.load %in0["8*d0 + d1"] : memref<4x8xf32>
    %1 = arith.constant 0.000000e+00 : f32
    %2 = arith.maximumf %0, %1 : f32
    loop.yield %2 : f32
  }
  %add5 = loop.pointwise [4, 8] (%relu5, %b) : (memref<4x8xf32>, memref<8xf32>) -> memref<4x8xf32> {
  ^bb0(%d0: index, %d1: index, %in0: memref<4x8xf32>, %in1: memref<8xf32>):
    %0 = loop.load %in0["8*d0 + d1"] : memref<4x8xf32>
    %1 = loop.load %in1["d1"] : memref<8xf32>
    %2 = arith.addf %0, %1 : f32
    loop.yield %2 : f32
  }
  %mm6 = loop.extern (%add5, %w6) : (memref<4x8xf32>, memref<8x8xf32>) -> memref<4x8xf32> {
  ^bb0(%0: tensor<4x8xf32>, %1: tensor<8x8xf32>):
    %mm6_1 = aten.mm.default(%0, %1) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    loop.yield %mm6_1 : tensor<4x8xf32>
  }
  %relu6 = loop.pointwise [4, 8] (%mm6) : (memref<4x8xf32>) -> memref<4x8xf32> {
  ^bb0(%d0: index, %d1: index, %in0: memref<4x8xf32>):
    %0 = loop.load %in0["8*d0 + d1"] : memref<4x8xf32>
    %1 = arith.constant 0.000000e+00 : f32
    %2 = arith.maximumf %0, %1 : f32
    loop.yield %2 : f32
  }
  %add6 = loop.pointwise [4, 8] (%relu6, %b) : (memref<4x8xf32>, memref<8xf32>) -> memref<4x8xf32> {
  ^bb0(%d0: index, %d1: index, %in0: memref<4x8xf32>, %in1: memref<8xf32>):
    %0 = loop.load %in0["8*d0 + d1"] : memref<4x8xf32>
    %1 = loop.load %in1["d1"] : memref<8xf32>
    %2 = arith.addf %0, %1 : f32
    loop.yield %2 : f32
  }
  %mm7 = loop.extern (%add6, %w7) : (memref<4x8xf32>, memref<8x8xf32>) -> memref<4x8xf32> {
  ^bb0(%0: tensor<4x8xf32>, %1: tensor<8x8xf32>):
    %mm7_1 = aten.mm.default(%0, %1) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    loop.yield %mm7_1 : tensor<4x8xf32>
  }
  %relu7 = loop.pointwise [4, 8] (%mm7) : (memref<4x8xf32>) -> memref<4x8xf32> {
  ^bb0(%d0: index, %d1: index, %in0: memref<4x8xf32>):
    %0 = loop.load %in0["8*d0 + d1"] : memref<4x8xf32>
    %1 = arith.constant 0.000000e+00 : f32
    %2 = arith.maximumf %0, %1 : f32
    loop.yield %2 : f32
  }
  %add7 = loop.pointwise [4, 8] (%relu7, %b) : (memref<4x8xf32>, memref<8xf32>) -> memref<4x8xf32> {
  ^bb0(%d0: index, %d1: index, %in0: memref<4x8xf32>, %in1: memref<8xf32>):
    %0 = loop.load %in0["8*d0 + d1"] : memref<4x8xf32>
    %1 = loop.load %in1["d1"] : memref<8xf32>
    %2 = arith.addf %0, %1 : f32
    loop.yield %2 : f32
  }
  %mm8 = loop.extern (%add7, %w8) : (memref<4x8xf32>, memref<8x8xf32>) -> memref<4x8xf32> {
  ^bb0(%0: tensor<4x8xf32>, %1: tensor<8x8xf32>):
    %mm8_1 = aten.mm.default(%0, %1) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    loop.yield %mm8_1 : tensor<4x8xf32>
  }
  %relu8 = loop.pointwise [4, 8] (%mm8) : (memref<4x8xf32>) -> memref<4x8xf32> {
  ^bb0(%d0: index, %d1: index, %in0: memref<4x8xf32>):
    %0 = loop.load %in0["8*d0 + d1"] : memref<4x8xf32>
    %1 = arith.constant 0.000000e+00 : f32
    %2 = arith.maximumf %0, %1 : f32
    loop.yield %2 : f32
  }
  %add8 = loop.pointwise [4, 8] (%relu8, %b) : (memref<4x8xf32>, memref<8xf32>) -> memref<4x8xf32> {
  ^bb0(%d0: index, %d1: index, %in0: memref<4x8xf32>, %in1: memref<8xf32>):
    %0 = loop.load %in0["8*d0 + d1"] : memref<4x8xf32>
    %1 = loop.load %in1["d1"] : memref<8xf32>
    %2 = arith.addf %0, %1 : f32
    loop.yield %2 : f32
  }
  func.return %add8 : memref<4x8xf32>
}

// Nine layers of exp then neg: every layer is inlined into the next, so the last kernel
// computes all nine and no period keeps ops of its own; the window's would compute five
// only. Inlining reaching across more than one period is refused: no stamping, the full
// schedule (before that check, the program computed five layers).
// CHECK-LABEL: kernel.kernel @kernel8
// CHECK-COUNT-9:   math.exp
// CHECK:           kernel.yield
// CHECK-LABEL: kernel.program @chain
// CHECK-NOT:     kiln.stamped_fuse
// CHECK:         kernel.launch @kernel8(%x) outs(%n9)
func.func @chain(%x: memref<4xf32>) -> memref<4xf32> {
  %e1 = loop.pointwise [4] (%x) : (memref<4xf32>) -> memref<4xf32> {
  ^bb0(%d0: index, %in0: memref<4xf32>):
    %0 = loop.load %in0["d0"] : memref<4xf32>
    %1 = math.exp %0 : f32
    loop.yield %1 : f32
  }
  %n1 = loop.pointwise [4] (%e1) : (memref<4xf32>) -> memref<4xf32> {
  ^bb0(%d0: index, %in0: memref<4xf32>):
    %0 = loop.load %in0["d0"] : memref<4xf32>
    %1 = arith.negf %0 : f32
    loop.yield %1 : f32
  }
  %e2 = loop.pointwise [4] (%n1) : (memref<4xf32>) -> memref<4xf32> {
  ^bb0(%d0: index, %in0: memref<4xf32>):
    %0 = loop.load %in0["d0"] : memref<4xf32>
    %1 = math.exp %0 : f32
    loop.yield %1 : f32
  }
  %n2 = loop.pointwise [4] (%e2) : (memref<4xf32>) -> memref<4xf32> {
  ^bb0(%d0: index, %in0: memref<4xf32>):
    %0 = loop.load %in0["d0"] : memref<4xf32>
    %1 = arith.negf %0 : f32
    loop.yield %1 : f32
  }
  %e3 = loop.pointwise [4] (%n2) : (memref<4xf32>) -> memref<4xf32> {
  ^bb0(%d0: index, %in0: memref<4xf32>):
    %0 = loop.load %in0["d0"] : memref<4xf32>
    %1 = math.exp %0 : f32
    loop.yield %1 : f32
  }
  %n3 = loop.pointwise [4] (%e3) : (memref<4xf32>) -> memref<4xf32> {
  ^bb0(%d0: index, %in0: memref<4xf32>):
    %0 = loop.load %in0["d0"] : memref<4xf32>
    %1 = arith.negf %0 : f32
    loop.yield %1 : f32
  }
  %e4 = loop.pointwise [4] (%n3) : (memref<4xf32>) -> memref<4xf32> {
  ^bb0(%d0: index, %in0: memref<4xf32>):
    %0 = loop.load %in0["d0"] : memref<4xf32>
    %1 = math.exp %0 : f32
    loop.yield %1 : f32
  }
  %n4 = loop.pointwise [4] (%e4) : (memref<4xf32>) -> memref<4xf32> {
  ^bb0(%d0: index, %in0: memref<4xf32>):
    %0 = loop.load %in0["d0"] : memref<4xf32>
    %1 = arith.negf %0 : f32
    loop.yield %1 : f32
  }
  %e5 = loop.pointwise [4] (%n4) : (memref<4xf32>) -> memref<4xf32> {
  ^bb0(%d0: index, %in0: memref<4xf32>):
    %0 = loop.load %in0["d0"] : memref<4xf32>
    %1 = math.exp %0 : f32
    loop.yield %1 : f32
  }
  %n5 = loop.pointwise [4] (%e5) : (memref<4xf32>) -> memref<4xf32> {
  ^bb0(%d0: index, %in0: memref<4xf32>):
    %0 = loop.load %in0["d0"] : memref<4xf32>
    %1 = arith.negf %0 : f32
    loop.yield %1 : f32
  }
  %e6 = loop.pointwise [4] (%n5) : (memref<4xf32>) -> memref<4xf32> {
  ^bb0(%d0: index, %in0: memref<4xf32>):
    %0 = loop.load %in0["d0"] : memref<4xf32>
    %1 = math.exp %0 : f32
    loop.yield %1 : f32
  }
  %n6 = loop.pointwise [4] (%e6) : (memref<4xf32>) -> memref<4xf32> {
  ^bb0(%d0: index, %in0: memref<4xf32>):
    %0 = loop.load %in0["d0"] : memref<4xf32>
    %1 = arith.negf %0 : f32
    loop.yield %1 : f32
  }
  %e7 = loop.pointwise [4] (%n6) : (memref<4xf32>) -> memref<4xf32> {
  ^bb0(%d0: index, %in0: memref<4xf32>):
    %0 = loop.load %in0["d0"] : memref<4xf32>
    %1 = math.exp %0 : f32
    loop.yield %1 : f32
  }
  %n7 = loop.pointwise [4] (%e7) : (memref<4xf32>) -> memref<4xf32> {
  ^bb0(%d0: index, %in0: memref<4xf32>):
    %0 = loop.load %in0["d0"] : memref<4xf32>
    %1 = arith.negf %0 : f32
    loop.yield %1 : f32
  }
  %e8 = loop.pointwise [4] (%n7) : (memref<4xf32>) -> memref<4xf32> {
  ^bb0(%d0: index, %in0: memref<4xf32>):
    %0 = loop.load %in0["d0"] : memref<4xf32>
    %1 = math.exp %0 : f32
    loop.yield %1 : f32
  }
  %n8 = loop.pointwise [4] (%e8) : (memref<4xf32>) -> memref<4xf32> {
  ^bb0(%d0: index, %in0: memref<4xf32>):
    %0 = loop.load %in0["d0"] : memref<4xf32>
    %1 = arith.negf %0 : f32
    loop.yield %1 : f32
  }
  %e9 = loop.pointwise [4] (%n8) : (memref<4xf32>) -> memref<4xf32> {
  ^bb0(%d0: index, %in0: memref<4xf32>):
    %0 = loop.load %in0["d0"] : memref<4xf32>
    %1 = math.exp %0 : f32
    loop.yield %1 : f32
  }
  %n9 = loop.pointwise [4] (%e9) : (memref<4xf32>) -> memref<4xf32> {
  ^bb0(%d0: index, %in0: memref<4xf32>):
    %0 = loop.load %in0["d0"] : memref<4xf32>
    %1 = arith.negf %0 : f32
    loop.yield %1 : f32
  }
  func.return %n9 : memref<4xf32>
}


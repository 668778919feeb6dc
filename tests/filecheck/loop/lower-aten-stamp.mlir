// RUN: kiln-opt %s --lower-aten | filecheck %s
// RUN: kiln-opt %s -p 'lower-aten{stamp=false}' | filecheck %s --check-prefix=REAL

// Six layers (mm by the layer's weight, relu, add of a shared bias; the layer's output
// is a transposed view, which the next layer transposes back). The first layer reads an
// argument where the others read the previous layer: periods 2-6 repeat, periods 2-4
// are lowered for real and 5-6 are clones of period 3's loop ops, reading their own
// weights and the previous period's buffer, named after their own aten values. The IR
// is the one a real lowering gives (REAL), but for the note on the function.
// CHECK-LABEL: func.func @layers
// CHECK-SAME:    attributes {kiln.stamped = "2 of 5 periods of 5 aten ops"}
// CHECK:         %mm5 = loop.extern (%add4, %w5)
// CHECK:           %mm5_1 = aten.mm.default
// CHECK:         %relu5 = loop.pointwise [4, 8] (%mm5)
// CHECK:         %add5 = loop.pointwise [4, 8] (%relu5, %b)
// CHECK:         %mm6 = loop.extern (%add5, %w6)
// CHECK:         %relu6 = loop.pointwise [4, 8] (%mm6)
// CHECK:         %add6 = loop.pointwise [4, 8] (%relu6, %b)
// CHECK:         %t6 = loop.pointwise [8, 4] (%add6)
// CHECK-NEXT:    ^bb0(%d0: index, %d1: index, %in0: memref<4x8xf32>):
// CHECK-NEXT:      %0 = loop.load %in0["d0 + 8*d1"] : memref<4x8xf32>
// CHECK:         func.return %t6
// REAL-LABEL: func.func @layers
// REAL-NOT:     kiln.stamped
// REAL:         %mm5 = loop.extern (%add4, %w5)
// REAL:           %mm5_1 = aten.mm.default
// REAL:         %relu5 = loop.pointwise [4, 8] (%mm5)
// REAL:         %add5 = loop.pointwise [4, 8] (%relu5, %b)
// REAL:         %mm6 = loop.extern (%add5, %w6)
// REAL:         %t6 = loop.pointwise [8, 4] (%add6)
func.func @layers(%x: tensor<4x8xf32>, %w1: tensor<8x8xf32>, %w2: tensor<8x8xf32>, %w3: tensor<8x8xf32>, %w4: tensor<8x8xf32>, %w5: tensor<8x8xf32>, %w6: tensor<8x8xf32>, %b: tensor<8xf32>) -> tensor<8x4xf32> {
  %mm1 = aten.mm.default(%x, %w1) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %relu1 = aten.relu.default(%mm1) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %add1 = aten.add.Tensor(%relu1, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %t1 = aten.permute.default(%add1, dims = [1, 0]) : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %s2 = aten.permute.default(%t1, dims = [1, 0]) : (tensor<8x4xf32>) -> tensor<4x8xf32>
  %mm2 = aten.mm.default(%s2, %w2) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %relu2 = aten.relu.default(%mm2) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %add2 = aten.add.Tensor(%relu2, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %t2 = aten.permute.default(%add2, dims = [1, 0]) : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %s3 = aten.permute.default(%t2, dims = [1, 0]) : (tensor<8x4xf32>) -> tensor<4x8xf32>
  %mm3 = aten.mm.default(%s3, %w3) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %relu3 = aten.relu.default(%mm3) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %add3 = aten.add.Tensor(%relu3, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %t3 = aten.permute.default(%add3, dims = [1, 0]) : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %s4 = aten.permute.default(%t3, dims = [1, 0]) : (tensor<8x4xf32>) -> tensor<4x8xf32>
  %mm4 = aten.mm.default(%s4, %w4) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %relu4 = aten.relu.default(%mm4) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %add4 = aten.add.Tensor(%relu4, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %t4 = aten.permute.default(%add4, dims = [1, 0]) : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %s5 = aten.permute.default(%t4, dims = [1, 0]) : (tensor<8x4xf32>) -> tensor<4x8xf32>
  %mm5 = aten.mm.default(%s5, %w5) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %relu5 = aten.relu.default(%mm5) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %add5 = aten.add.Tensor(%relu5, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %t5 = aten.permute.default(%add5, dims = [1, 0]) : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %s6 = aten.permute.default(%t5, dims = [1, 0]) : (tensor<8x4xf32>) -> tensor<4x8xf32>
  %mm6 = aten.mm.default(%s6, %w6) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %relu6 = aten.relu.default(%mm6) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %add6 = aten.add.Tensor(%relu6, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %t6 = aten.permute.default(%add6, dims = [1, 0]) : (tensor<4x8xf32>) -> tensor<8x4xf32>
  func.return %t6 : tensor<8x4xf32>
}

// Three repetitions are too few to stamp (three periods are lowered for real): no note.
// CHECK-LABEL: func.func @three
// CHECK-NOT:     kiln.stamped
// CHECK:         %c = loop.pointwise
func.func @three(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = aten.neg.default(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %b = aten.neg.default(%a) : (tensor<4xf32>) -> tensor<4xf32>
  %c = aten.neg.default(%b) : (tensor<4xf32>) -> tensor<4xf32>
  func.return %c : tensor<4xf32>
}

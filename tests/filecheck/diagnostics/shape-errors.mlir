// RUN: kiln-opt %s --split-input-file --verify-diagnostics | filecheck %s
// RUN: not kiln-opt %s 2>&1 | filecheck %s --check-prefix=EXIT

// Result types are checked against torch's shape functions (issue 20): operands whose
// shapes torch rejects, and declared results that are not what torch computes.

func.func @mm_inner_dims(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) -> tensor<2x5xf32> {
  %0 = aten.mm.default(%a, %b) : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  func.return %0 : tensor<2x5xf32>
}
// CHECK: {{.*}}shape-errors.mlir:[[# @LINE - 3]]:8: error: 'aten.mm.default' op torch rejects these operand types: {{.*}}
// CHECK-NEXT: %0 = aten.mm.default(%a, %b)
// EXIT: {{.*}}shape-errors.mlir:8:8: error: 'aten.mm.default' op torch rejects these operand types
// EXIT-NOT: Traceback

// -----

func.func @sum_declared_wrong(%a: tensor<2x3xf32>) -> tensor<7xf64> {
  %0 = aten.sum.default(%a) : (tensor<2x3xf32>) -> tensor<7xf64>
  func.return %0 : tensor<7xf64>
}
// CHECK: {{.*}}shape-errors.mlir:[[# @LINE - 3]]:8: error: 'aten.sum.default' op result #0 is declared tensor<7xf64>, but for these operands torch computes tensor<f32>

// -----

func.func @add_no_broadcast(%a: tensor<2x3xf32>, %b: tensor<4xf32>) -> tensor<2x3xf32> {
  %0 = aten.add.Tensor(%a, %b) : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  func.return %0 : tensor<2x3xf32>
}
// CHECK: {{.*}}shape-errors.mlir:[[# @LINE - 3]]:8: error: 'aten.add.Tensor' op torch rejects these operand types: {{.*}}broadcast{{.*}}

// -----

func.func @promotion(%a: tensor<2x3xi64>, %b: tensor<3xf16>) -> tensor<2x3xi64> {
  %0 = aten.mul.Tensor(%a, %b) : (tensor<2x3xi64>, tensor<3xf16>) -> tensor<2x3xi64>
  func.return %0 : tensor<2x3xi64>
}
// CHECK: {{.*}}shape-errors.mlir:[[# @LINE - 3]]:8: error: 'aten.mul.Tensor' op result #0 is declared tensor<2x3xi64>, but for these operands torch computes tensor<2x3xf16>

// -----

// Dynamic shapes: element types are checked. A view keeps its source's element type
// (a float32 view of a bfloat16 buffer once verified and read garbage).
func.func @dynamic_view_retyped(%x: tensor<?x3xbf16>, %s: index) -> tensor<?xf32> {
  %0 = aten.view.default(%x, size = [%s]) : (tensor<?x3xbf16>, index) -> tensor<?xf32>
  func.return %0 : tensor<?xf32>
}
// CHECK: {{.*}}shape-errors.mlir:[[# @LINE - 3]]:8: error: 'aten.view.default' op result #0 is declared tensor<?xf32>, but it aliases 'self' (tensor<?x3xbf16>) and keeps its element type

// -----

func.func @dynamic_copy_retyped(%x: tensor<?x3xbf16>, %y: tensor<?x3xf32>) -> tensor<?x3xf32> {
  %0 = aten.generic "aten::copy_.default"(%x, %y) : (tensor<?x3xbf16>, tensor<?x3xf32>) -> tensor<?x3xf32>
  func.return %0 : tensor<?x3xf32>
}
// CHECK: {{.*}}shape-errors.mlir:[[# @LINE - 3]]:8: error: 'aten.generic' op result #0 is declared tensor<?x3xf32>, but it aliases 'self' (tensor<?x3xbf16>) and keeps its element type

// -----

func.func @dynamic_promotion(%x: tensor<?x3xbf16>, %y: tensor<?x3xbf16>) -> tensor<?x3xf32> {
  %0 = aten.add.Tensor(%x, %y) : (tensor<?x3xbf16>, tensor<?x3xbf16>) -> tensor<?x3xf32>
  func.return %0 : tensor<?x3xf32>
}
// CHECK: {{.*}}shape-errors.mlir:[[# @LINE - 3]]:8: error: 'aten.add.Tensor' op result #0 is declared tensor<?x3xf32>, but for these operand types torch computes element type bf16

// -----

func.func @symbolic_factory(%n: index) -> tensor<?xf32> {
  %0 = aten.arange.default(end = %n) : (index) -> tensor<?xf32>
  func.return %0 : tensor<?xf32>
}
// CHECK: {{.*}}shape-errors.mlir:[[# @LINE - 3]]:8: error: 'aten.arange.default' op result #0 is declared tensor<?xf32>, but for these operand types torch computes element type i64

// -----

// Valid ops verify (of dynamic ones, the element types are checked).
func.func @valid(%a: tensor<2x3xf32>, %b: tensor<3x5xf32>, %c: tensor<?x3xf32>, %d: tensor<?x3xbf16>, %s: index, %t: f64) -> (tensor<2x5xf32>, tensor<f32>, tensor<?x3xf32>, tensor<?x3xf32>, tensor<?x3xbf16>, tensor<?xi64>, tensor<?x3xbf16>, tensor<?x3xbf16>) {
  %0 = aten.mm.default(%a, %b) : (tensor<2x3xf32>, tensor<3x5xf32>) -> tensor<2x5xf32>
  %1 = aten.sum.default(%a) : (tensor<2x3xf32>) -> tensor<f32>
  %2 = aten.neg.default(%c) : (tensor<?x3xf32>) -> tensor<?x3xf32>
  %3 = aten.add.Tensor(%d, %c) : (tensor<?x3xbf16>, tensor<?x3xf32>) -> tensor<?x3xf32>
  %4 = aten.mul.Scalar(%d, other = %t) : (tensor<?x3xbf16>, f64) -> tensor<?x3xbf16>
  %5 = aten.arange.default(end = %s) : (index) -> tensor<?xi64>
  %6 = aten.generic "aten::copy_.default"(%d, %c) : (tensor<?x3xbf16>, tensor<?x3xf32>) -> tensor<?x3xbf16>
  %7 = aten.view.default(%d, size = [%s, 3]) : (tensor<?x3xbf16>, index) -> tensor<?x3xbf16>
  func.return %0, %1, %2, %3, %4, %5, %6, %7 : tensor<2x5xf32>, tensor<f32>, tensor<?x3xf32>, tensor<?x3xf32>, tensor<?x3xbf16>, tensor<?xi64>, tensor<?x3xbf16>, tensor<?x3xbf16>
}
// CHECK: func.func @valid

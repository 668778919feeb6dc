// RUN: kiln-opt %s --split-input-file --verify-diagnostics | filecheck %s
// RUN: not kiln-opt %s 2>&1 | filecheck %s --check-prefix=EXIT

// A result type the aten op does not allow.
func.func @bad_result(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = "aten.neg.default"(%x) : (tensor<4x8xf32>) -> i32
  func.return %x : tensor<4x8xf32>
}
// CHECK: {{.*}}verify-errors.mlir:[[# @LINE - 3]]:8: error: 'aten.neg.default' op result 'result' at position 0 does not verify: {{.*}}i32
// CHECK-NEXT: %0 = "aten.neg.default"(%x) : (tensor<4x8xf32>) -> i32
// CHECK-NEXT: {{^       \^~+$}}
// EXIT: {{.*}}verify-errors.mlir:6:8: error: 'aten.neg.default' op result
// EXIT-NOT: Traceback

// -----

// A required schema argument is missing (only possible in the generic form).
func.func @missing_argument(%x: tensor<4x8xf32>) -> tensor<32xf32> {
  %0 = "aten.view.default"(%x) : (tensor<4x8xf32>) -> tensor<32xf32>
  func.return %0 : tensor<32xf32>
}
// CHECK: {{.*}}verify-errors.mlir:[[# @LINE - 3]]:8: error: 'aten.view.default' op missing required argument 'size'

// -----

// The returned type does not match the function's result type.
func.func @return_mismatch(%x: tensor<4x8xf32>) -> tensor<f32> {
  %0 = aten.sum.default(%x) : (tensor<4x8xf32>) -> tensor<f32>
  func.return %x : tensor<4x8xf32>
}
// CHECK: {{.*}}verify-errors.mlir:[[# @LINE - 2]]:3: error: 'func.return' op Expected arguments to have the same types as the function output types: expected [tensor<f32>], got [tensor<4x8xf32>]
// CHECK-NEXT: func.return %x : tensor<4x8xf32>
// CHECK-NEXT: {{^  \^~+$}}

// -----

// An op carrying a source location also reports it.
func.func @with_location(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = "aten.neg.default"(%x) : (tensor<4x8xf32>) -> i32 loc("model.py":12:5)
  func.return %x : tensor<4x8xf32>
}
// CHECK: {{.*}}verify-errors.mlir:[[# @LINE - 3]]:8: error: 'aten.neg.default' op result
// CHECK: model.py:12:5: note: the op's location attribute

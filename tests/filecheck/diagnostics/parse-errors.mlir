// RUN: kiln-opt %s --split-input-file --parsing-diagnostics | filecheck %s
// RUN: not kiln-opt %s 2>&1 | filecheck %s --check-prefix=EXIT

// Malformed IR: the missing parenthesis is reported where it was expected.
func.func @malformed(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = aten.neg.default(%x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}
// CHECK: {{.*}}parse-errors.mlir:[[# @LINE - 3]]:28: error: Expected ')'
// CHECK-NEXT: %0 = aten.neg.default(%x : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: {{^ +\^$}}
// EXIT: {{.*}}parse-errors.mlir:6:28: error: Expected ')'
// EXIT-NOT: Traceback

// -----

// An unknown op is reported at its name.
func.func @unknown(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = foo.bar(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}
// CHECK: {{.*}}parse-errors.mlir:[[# @LINE - 3]]:8: error: Operation foo.bar is not registered
// CHECK-NEXT: %0 = foo.bar(%x)
// CHECK-NEXT: {{^       \^~~~~~~$}}

// -----

// A value used with another type than it was defined with.
func.func @mismatch(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = aten.neg.default(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf64>
}
// CHECK: {{.*}}parse-errors.mlir:[[# @LINE - 2]]:15: error: operand is used with type tensor<4x8xf64>, but has been previously used or defined with type tensor<4x8xf32>

// -----

// An aten argument the schema does not have.
func.func @bad_argument(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = aten.neg.default(%x, alpha = 2) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}
// CHECK: {{.*}}parse-errors.mlir:[[# @LINE - 3]]:29: error: neg.default has no argument 'alpha'

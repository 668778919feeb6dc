// RUN: kiln-opt %s --lower-aten | filecheck %s

// ATen's CPU pow kernel runs float16 through std::pow, not its sqrt/rsqrt shortcuts:
// (-inf) ** 0.5 is inf, not NaN, and (-0.0) ** -0.5 is inf, not -inf.
// CHECK-LABEL: func.func @half_root
// CHECK:         math.powf
// CHECK-NOT:     math.sqrt
func.func @half_root(%x: tensor<4xf16>) -> tensor<4xf16> {
  %r = aten.pow.Tensor_Scalar(%x, exponent = 0.5) : (tensor<4xf16>) -> tensor<4xf16>
  func.return %r : tensor<4xf16>
}

// float32 (and float64, bfloat16) take them, as ATen does.
// CHECK-LABEL: func.func @single_reciprocal_root
// CHECK:         math.rsqrt
func.func @single_reciprocal_root(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = aten.pow.Tensor_Scalar(%x, exponent = -0.5) : (tensor<4xf32>) -> tensor<4xf32>
  func.return %r : tensor<4xf32>
}

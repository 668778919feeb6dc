// RUN: kiln-opt %s --lower-aten | filecheck %s

// CUDA's pow kernel takes the sqrt shortcut for every dtype, float16 included.
// CHECK-LABEL: func.func @half_root
// CHECK:         math.sqrt
// CHECK-NOT:     math.powf
builtin.module attributes {kiln.device = "cuda:0"} {
  func.func @half_root(%x: tensor<4xf16>) -> tensor<4xf16> {
    %r = aten.pow.Tensor_Scalar(%x, exponent = 0.5) : (tensor<4xf16>) -> tensor<4xf16>
    func.return %r : tensor<4xf16>
  }
}

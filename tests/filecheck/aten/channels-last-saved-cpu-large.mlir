// RUN: kiln-opt %s --channels-last | filecheck %s
// RUN: kiln-opt %s -p 'channels-last{saved-nhwc-cpu-min-elements=100000000}' | filecheck %s --check-prefix=SMALL

// On the CPU a training forward whose largest convolution output has at least
// saved-nhwc-cpu-min-elements elements (4M by default; here 8x64x96x96 = 4.7M) returns
// its saved activations (kiln.free_layout_outputs) as their NHWC tensors, as
// saved-nhwc-cpu=true does whatever the sizes: oneDNN's training step ran 1.2-1.9x
// faster so at batch 32, 224x224 (MobileNet-v2, EfficientNet-b0, ResNet-50) and slower
// at batch 2, 64x64. Below the threshold they stay NCHW.
// CHECK-LABEL: func.func @saved
// CHECK-SAME:    -> (tensor<8x64xf32>, tensor<8x96x96x64xf32>, tensor<8x96x96x64xf32>)
// CHECK-SAME:    attributes {kiln.outputs = "(0, permute(1, (0, 3, 1, 2)), permute(2, (0, 3, 1, 2)))"}
// SMALL-LABEL: func.func @saved
// SMALL-SAME:    -> (tensor<8x64xf32>, tensor<8x64x96x96xf32>, tensor<8x64x96x96xf32>)
func.func @saved(%x: tensor<8x3x96x96xf32>, %w: tensor<64x3x3x3xf32>) -> (tensor<8x64xf32>, tensor<8x64x96x96xf32>, tensor<8x64x96x96xf32>) attributes {kiln.outputs = "(0, 1, 2)", kiln.free_layout_outputs = [1, 2]} {
  %0 = aten.convolution.default(%x, %w, padding = [1, 1], stride = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1) : (tensor<8x3x96x96xf32>, tensor<64x3x3x3xf32>) -> tensor<8x64x96x96xf32>
  %1 = aten.relu.default(%0) : (tensor<8x64x96x96xf32>) -> tensor<8x64x96x96xf32>
  %2 = aten.mean.dim(%1, dim = [2, 3]) : (tensor<8x64x96x96xf32>) -> tensor<8x64xf32>
  func.return %2, %0, %1 : tensor<8x64xf32>, tensor<8x64x96x96xf32>, tensor<8x64x96x96xf32>
}

// An inference function (no free-layout results) is left as before, whatever its sizes.
// CHECK-LABEL: func.func @inference
// CHECK-SAME:    -> tensor<8x64x96x96xf32>
func.func @inference(%x: tensor<8x3x96x96xf32>, %w: tensor<64x3x3x3xf32>) -> tensor<8x64x96x96xf32> attributes {kiln.outputs = "0"} {
  %0 = aten.convolution.default(%x, %w, padding = [1, 1], stride = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1) : (tensor<8x3x96x96xf32>, tensor<64x3x3x3xf32>) -> tensor<8x64x96x96xf32>
  %1 = aten.relu.default(%0) : (tensor<8x64x96x96xf32>) -> tensor<8x64x96x96xf32>
  func.return %1 : tensor<8x64x96x96xf32>
}

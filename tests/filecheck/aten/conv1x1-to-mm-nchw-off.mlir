// RUN: kiln-opt %s -p 'conv1x1-to-mm{nchw-max-weight=0}' | filecheck %s

// With nchw-max-weight=0 a 1x1 convolution of an NCHW activation and its backward stay
// oneDNN's (the bound on the weight's elements up to which they become batched products).
// CHECK-LABEL: func.func @off
// CHECK-NEXT:    %0 = aten.convolution.default(%x, %w,
// CHECK-NEXT:    %1, %2, %3 = aten.convolution_backward.default(%g, %x, %w,
// CHECK-NEXT:    func.return %0, %1
func.func @off(%x: tensor<2x4x6x6xf32>, %w: tensor<8x4x1x1xf32>, %g: tensor<2x8x6x6xf32>) -> (tensor<2x8x6x6xf32>, tensor<2x4x6x6xf32>) {
  %0 = aten.convolution.default(%x, %w, padding = [0, 0], stride = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1) : (tensor<2x4x6x6xf32>, tensor<8x4x1x1xf32>) -> tensor<2x8x6x6xf32>
  %1, %2, %3 = aten.convolution_backward.default(%g, %x, %w, bias_sizes = [0], stride = [1, 1], padding = [0, 0], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1, output_mask = [true, false, false]) : (tensor<2x8x6x6xf32>, tensor<2x4x6x6xf32>, tensor<8x4x1x1xf32>) -> (tensor<2x4x6x6xf32>, none, none)
  func.return %0, %1 : tensor<2x8x6x6xf32>, tensor<2x4x6x6xf32>
}

// RUN: kiln-opt %s --channels-last | filecheck %s

// channels-last lays out the activations of 2-D convolutions NHWC by rewriting aten IR:
// the image is copied to channels-last once; pointwise ops between convolutions compute
// the NHWC tensor (broadcast operands unsqueezed and permuted) and their old NCHW result
// becomes a permute of it, which lower-aten turns into an index map.
// CHECK-LABEL: func.func @forward
// CHECK-NEXT:    %x_nhwc = aten.clone.default(%x, memory_format = "channels_last") : (tensor<2x3x6x6xf32>) -> tensor<2x3x6x6xf32>
// CHECK-NEXT:    %0 = aten.convolution.default(%x_nhwc, %w, {{.*}}) : (tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32>
// CHECK-NEXT:    %1 = aten.permute.default(%0, dims = [0, 2, 3, 1]) : (tensor<2x4x6x6xf32>) -> tensor<2x6x6x4xf32>
// CHECK-NEXT:    %2 = aten.unsqueeze.default(%b, dim = 0) : (tensor<4x1x1xf32>) -> tensor<1x4x1x1xf32>
// CHECK-NEXT:    %3 = aten.permute.default(%2, dims = [0, 2, 3, 1]) : (tensor<1x4x1x1xf32>) -> tensor<1x1x1x4xf32>
// CHECK-NEXT:    %4 = aten.add.Tensor(%1, %3) : (tensor<2x6x6x4xf32>, tensor<1x1x1x4xf32>) -> tensor<2x6x6x4xf32>
// CHECK-NEXT:    %5 = aten.relu.default(%4) : (tensor<2x6x6x4xf32>) -> tensor<2x6x6x4xf32>
// CHECK-NEXT:    %6 = aten.permute.default(%5, dims = [0, 3, 1, 2]) : (tensor<2x6x6x4xf32>) -> tensor<2x4x6x6xf32>
// CHECK-NEXT:    %7 = aten.convolution.default(%6, %w2, {{.*}}) : (tensor<2x4x6x6xf32>, tensor<4x4x1x1xf32>) -> tensor<2x4x6x6xf32>
// CHECK-NEXT:    %8 = aten.permute.default(%7, dims = [0, 2, 3, 1]) : (tensor<2x4x6x6xf32>) -> tensor<2x6x6x4xf32>
// CHECK-NEXT:    %9 = aten.add.Tensor(%8, %5) : (tensor<2x6x6x4xf32>, tensor<2x6x6x4xf32>) -> tensor<2x6x6x4xf32>
// CHECK-NEXT:    %10 = aten.permute.default(%9, dims = [0, 3, 1, 2]) : (tensor<2x6x6x4xf32>) -> tensor<2x4x6x6xf32>
// CHECK-NEXT:    %11 = aten.mean.dim(%10, dim = [2, 3]) : (tensor<2x4x6x6xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:    func.return %11 : tensor<2x4xf32>
func.func @forward(%x: tensor<2x3x6x6xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4x1x1xf32>, %w2: tensor<4x4x1x1xf32>) -> tensor<2x4xf32> {
  %0 = aten.convolution.default(%x, %w, padding = [1, 1], stride = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1) : (tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32>
  %1 = aten.add.Tensor(%0, %b) : (tensor<2x4x6x6xf32>, tensor<4x1x1xf32>) -> tensor<2x4x6x6xf32>
  %2 = aten.relu.default(%1) : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %3 = aten.convolution.default(%2, %w2, padding = [0, 0], stride = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1) : (tensor<2x4x6x6xf32>, tensor<4x4x1x1xf32>) -> tensor<2x4x6x6xf32>
  %4 = aten.add.Tensor(%3, %2) : (tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %5 = aten.mean.dim(%4, dim = [2, 3]) : (tensor<2x4x6x6xf32>) -> tensor<2x4xf32>
  func.return %5 : tensor<2x4xf32>
}

// Returned tensors are contiguous NCHW buffers: the returned relu, and the convolution
// it is computed from, keep their layout (only the image is copied).
// CHECK-LABEL: func.func @returned
// CHECK-NEXT:    %x_nhwc = aten.clone.default(%x, memory_format = "channels_last")
// CHECK-NEXT:    %0 = aten.convolution.default(%x_nhwc, %w, {{.*}}) : (tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32>
// CHECK-NEXT:    %1 = aten.relu.default(%0) : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
// CHECK-NEXT:    func.return %1 : tensor<2x4x6x6xf32>
func.func @returned(%x: tensor<2x3x6x6xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32> {
  %0 = aten.convolution.default(%x, %w, padding = [1, 1], stride = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1) : (tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32>
  %1 = aten.relu.default(%0) : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  func.return %1 : tensor<2x4x6x6xf32>
}

// A function without 2-D convolutions is left alone.
// CHECK-LABEL: func.func @no_conv
// CHECK-NEXT:    %0 = aten.add.Tensor(%x, %y) : (tensor<2x3x6x6xf32>, tensor<3x1x1xf32>) -> tensor<2x3x6x6xf32>
// CHECK-NEXT:    func.return %0 : tensor<2x3x6x6xf32>
func.func @no_conv(%x: tensor<2x3x6x6xf32>, %y: tensor<3x1x1xf32>) -> tensor<2x3x6x6xf32> {
  %0 = aten.add.Tensor(%x, %y) : (tensor<2x3x6x6xf32>, tensor<3x1x1xf32>) -> tensor<2x3x6x6xf32>
  func.return %0 : tensor<2x3x6x6xf32>
}

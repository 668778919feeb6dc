// RUN: kiln-opt %s -p 'channels-last{saved-nhwc-cpu=true}' | filecheck %s
// RUN: kiln-opt %s --channels-last | filecheck %s --check-prefix=CPU

// Only with saved-nhwc=true on the GPU (kiln.device) or saved-nhwc-cpu=true on the host;
// by default a CPU program this small returns the results NCHW, as before (large ones:
// channels-last-saved-cpu-large.mlir). A CPU backward follows the layout its arguments
// come in: channels-last where its forward saved them so.
// CPU-LABEL: func.func @saved
// CPU-SAME:    -> (tensor<2x4xf32>, tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>)
// CPU-LABEL: func.func @backward
// CPU-NEXT:    %relu_nhwc = aten.permute.default(%relu, dims = [0, 2, 3, 1])

// A training forward's results listed in kiln.free_layout_outputs (the activations it
// saves for the backward) are returned as their NHWC tensors where they are stored
// channels-last, seen by the caller through a permute (kiln.outputs): no copy back to
// NCHW. The user's output (result 0) is computed as before; the attribute is consumed.
// CHECK-LABEL: func.func @saved
// CHECK-SAME:    -> (tensor<2x4xf32>, tensor<2x6x6x4xf32>, tensor<2x6x6x4xf32>)
// CHECK-SAME:    attributes {kiln.outputs = "(0, permute(1, (0, 3, 1, 2)), permute(2, (0, 3, 1, 2)))"}
// CHECK-NEXT:    %x_nhwc = aten.clone.default(%x, memory_format = "channels_last")
// CHECK-NEXT:    %0 = aten.convolution.default(%x_nhwc, %w, {{.*}}) : (tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32>
// CHECK-NEXT:    %1 = aten.permute.default(%0, dims = [0, 2, 3, 1]) : (tensor<2x4x6x6xf32>) -> tensor<2x6x6x4xf32>
// CHECK-NEXT:    %2 = aten.relu.default(%1) : (tensor<2x6x6x4xf32>) -> tensor<2x6x6x4xf32>
// CHECK-NEXT:    %3 = aten.permute.default(%2, dims = [0, 3, 1, 2]) : (tensor<2x6x6x4xf32>) -> tensor<2x4x6x6xf32>
// CHECK-NEXT:    %4 = aten.mean.dim(%3, dim = [2, 3]) : (tensor<2x4x6x6xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:    func.return %4, %1, %2 : tensor<2x4xf32>, tensor<2x6x6x4xf32>, tensor<2x6x6x4xf32>
func.func @saved(%x: tensor<2x3x6x6xf32>, %w: tensor<4x3x3x3xf32>) -> (tensor<2x4xf32>, tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>) attributes {kiln.outputs = "(0, 1, 2)", kiln.free_layout_outputs = [1, 2]} {
  %0 = aten.convolution.default(%x, %w, padding = [1, 1], stride = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1) : (tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32>
  %1 = aten.relu.default(%0) : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %2 = aten.mean.dim(%1, dim = [2, 3]) : (tensor<2x4x6x6xf32>) -> tensor<2x4xf32>
  func.return %2, %0, %1 : tensor<2x4xf32>, tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>
}

// Without the attribute the same results stay NCHW, and with them the convolution
// (so the image is not copied either).
// CHECK-LABEL: func.func @not_free
// CHECK-NEXT:    %0 = aten.convolution.default(%x, %w, {{.*}}) : (tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32>
// CHECK-NEXT:    %1 = aten.relu.default(%0) : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
// CHECK-NEXT:    %2 = aten.mean.dim(%1, dim = [2, 3]) : (tensor<2x4x6x6xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:    func.return %2, %0, %1 : tensor<2x4xf32>, tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>
func.func @not_free(%x: tensor<2x3x6x6xf32>, %w: tensor<4x3x3x3xf32>) -> (tensor<2x4xf32>, tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>) attributes {kiln.outputs = "(0, 1, 2)"} {
  %0 = aten.convolution.default(%x, %w, padding = [1, 1], stride = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1) : (tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32>
  %1 = aten.relu.default(%0) : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %2 = aten.mean.dim(%1, dim = [2, 3]) : (tensor<2x4x6x6xf32>) -> tensor<2x4xf32>
  func.return %2, %0, %1 : tensor<2x4xf32>, tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>
}

// A backward: an argument with channels-last strides (a saved activation) and the
// input gradient of convolution_backward that the importer records as laid out NHWC
// are stored channels-last, so the pointwise ops reading them compute NHWC tensors
// (the incoming gradient %g, contiguous, is read through a permute). Results are
// returned NCHW as before.
// CHECK-LABEL: func.func @backward
// CHECK-NEXT:    %relu_nhwc = aten.permute.default(%relu, dims = [0, 2, 3, 1]) : (tensor<2x4x6x6xf32>) -> tensor<2x6x6x4xf32>
// CHECK-NEXT:    %0 = aten.permute.default(%g, dims = [0, 2, 3, 1]) : (tensor<2x4x6x6xf32>) -> tensor<2x6x6x4xf32>
// CHECK-NEXT:    %1 = aten.threshold_backward.default(%0, %relu_nhwc, threshold = 0) : (tensor<2x6x6x4xf32>, tensor<2x6x6x4xf32>) -> tensor<2x6x6x4xf32>
// CHECK-NEXT:    %2 = aten.permute.default(%1, dims = [0, 3, 1, 2]) : (tensor<2x6x6x4xf32>) -> tensor<2x4x6x6xf32>
// CHECK-NEXT:    %3, %4, %5 = aten.convolution_backward.default(%2, %relu, %w, {{.*}}) {kiln.result_orders = {{.*}}}
// CHECK-NEXT:    %6 = aten.permute.default(%3, dims = [0, 2, 3, 1]) : (tensor<2x4x6x6xf32>) -> tensor<2x6x6x4xf32>
// CHECK-NEXT:    %7 = aten.mul.Tensor(%6, %relu_nhwc) : (tensor<2x6x6x4xf32>, tensor<2x6x6x4xf32>) -> tensor<2x6x6x4xf32>
// CHECK-NEXT:    %8 = aten.permute.default(%7, dims = [0, 3, 1, 2]) : (tensor<2x6x6x4xf32>) -> tensor<2x4x6x6xf32>
// CHECK-NEXT:    %9 = aten.sum.dim_IntList(%8, dim = [0], keepdim = true)
// CHECK:         func.return %11, %3 : tensor<4x4x3x3xf32>, tensor<2x4x6x6xf32>
func.func @backward(%g: tensor<2x4x6x6xf32>, %relu: tensor<2x4x6x6xf32> {kiln.arg_strides = [144 : i64, 1 : i64, 24 : i64, 4 : i64]}, %w: tensor<4x4x3x3xf32>) -> (tensor<4x4x3x3xf32>, tensor<2x4x6x6xf32>) attributes {kiln.outputs = "(0, 1)"} {
  %0 = aten.threshold_backward.default(%g, %relu, threshold = 0) : (tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %1, %2, %3 = aten.convolution_backward.default(%0, %relu, %w, bias_sizes = [0], stride = [1, 1], padding = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1, output_mask = [true, true, false]) {kiln.result_orders = [[0 : i64, 2 : i64, 3 : i64, 1 : i64], [], []]} : (tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>, tensor<4x4x3x3xf32>) -> (tensor<2x4x6x6xf32>, tensor<4x4x3x3xf32>, none)
  %4 = aten.mul.Tensor(%1, %relu) : (tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %5 = aten.sum.dim_IntList(%4, dim = [0], keepdim = true) : (tensor<2x4x6x6xf32>) -> tensor<1x4x6x6xf32>
  %6 = aten.view.default(%5, size = [4, 4, 3, 3]) : (tensor<1x4x6x6xf32>) -> tensor<4x4x3x3xf32>
  %7 = aten.add.Tensor(%2, %6) : (tensor<4x4x3x3xf32>, tensor<4x4x3x3xf32>) -> tensor<4x4x3x3xf32>
  func.return %7, %1 : tensor<4x4x3x3xf32>, tensor<2x4x6x6xf32>
}

// A free result that kiln.outputs replays a view on (output-layout's alias: the saved
// tensor and a view of it) stays NCHW: aten.view of a channels-last tensor may fail.
// CHECK-LABEL: func.func @alias_base
// CHECK-SAME:    -> (tensor<2x4xf32>, tensor<2x4x6x6xf32>)
// CHECK:         func.return %{{.*}}, %{{.*}} : tensor<2x4xf32>, tensor<2x4x6x6xf32>
func.func @alias_base(%x: tensor<2x3x6x6xf32>, %w: tensor<4x3x3x3xf32>) -> (tensor<2x4xf32>, tensor<2x4x6x6xf32>) attributes {kiln.outputs = "(0, 1, alias('aten::view.default', 1, \"{'size': [-1]}\"))", kiln.free_layout_outputs = [1, 2]} {
  %0 = aten.convolution.default(%x, %w, padding = [1, 1], stride = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1) : (tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32>
  %1 = aten.relu.default(%0) : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %2 = aten.mean.dim(%1, dim = [2, 3]) : (tensor<2x4x6x6xf32>) -> tensor<2x4xf32>
  func.return %2, %1 : tensor<2x4xf32>, tensor<2x4x6x6xf32>
}

// The first layer's weight gradient reads a channels-last output gradient and the NCHW
// image: the image (3 channels) is copied channels-last right before the call, rather
// than ATen copying the gradient to NCHW, and the weight gradient is recorded as ATen
// then lays it out (NHWC). Not where the input gradient is computed.
// CHECK-LABEL: func.func @first_layer
// CHECK:         %x_nhwc = aten.clone.default(%x, memory_format = "channels_last")
// CHECK-NEXT:    aten.convolution_backward.default(%1, %x_nhwc, %w, {{.*}}) {kiln.result_orders = [[], [0 : i64, 2 : i64, 3 : i64, 1 : i64], []]}
// CPU-LABEL: func.func @first_layer
// CPU:         %x_nhwc = aten.clone.default(%x, memory_format = "channels_last")
func.func @first_layer(%g: tensor<2x4x6x6xf32> {kiln.arg_strides = [144 : i64, 1 : i64, 24 : i64, 4 : i64]}, %x: tensor<2x3x6x6xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<4x3x3x3xf32> attributes {kiln.outputs = "(0,)"} {
  %0 = aten.relu.default(%g) : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %1, %2, %3 = aten.convolution_backward.default(%0, %x, %w, bias_sizes = [0], stride = [1, 1], padding = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1, output_mask = [false, true, false]) : (tensor<2x4x6x6xf32>, tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>) -> (none, tensor<4x3x3x3xf32>, none)
  func.return %2 : tensor<4x3x3x3xf32>
}

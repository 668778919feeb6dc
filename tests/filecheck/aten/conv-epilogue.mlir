// RUN: kiln-opt %s -p "conv-epilogue{force=true min_output=0 min_output_per_weight=0}" | filecheck %s
// RUN: kiln-opt %s -p conv-epilogue | filecheck %s --check-prefix=OFF

// A convolution with a bias and an eval batch norm after it, as the default pipeline has
// them before lower-aten (channels-last: the result read through its NHWC permute, the
// batch norm decomposed into per-channel sub, mul, mul, add). The four ops fold into the
// weight and bias of one oneDNN convolution (no activation: the hardtanh reads the NCHW
// result, outside the chain). Without kiln.inference on the module (OFF) nothing changes.
// CHECK:      %epilogue_scale = aten.mul.Tensor(%epilogue_p1, %epilogue_p2)
// CHECK:      %epilogue_weight = aten.mul.Tensor(%arg01, %epilogue_scale_w)
// CHECK-NEXT: %epilogue_bias = aten.mul.Tensor(%arg11, %epilogue_scale)
// CHECK-NEXT: %epilogue_bias_1 = aten.add.Tensor(%epilogue_bias, %epilogue_shift_3)
// CHECK-NEXT: %convolution = aten.generic "mkldnn::_convolution_pointwise"(%arg21_nhwc, %epilogue_weight, B = %epilogue_bias_1, padding = [1, 1], stride = [1, 1], dilation = [1, 1], groups = 1, attr = "none", scalars = []
// CHECK-SAME: {kiln.result_orders = {{\[\[}}0 : i64, 2 : i64, 3 : i64, 1 : i64]]}
// CHECK-NEXT: %convolution_nhwc = aten.permute.default(%convolution, dims = [0, 2, 3, 1])
// CHECK-NEXT: %add1_nchw = aten.permute.default(%convolution_nhwc, dims = [0, 3, 1, 2])
// CHECK-NOT:  aten.convolution.default
// OFF:        aten.convolution.default
// OFF-NOT:    mkldnn
builtin.module {
  func.func @forward(%arg01: tensor<4x3x3x3xf32> {kiln.name = "arg0_1"}, %arg11: tensor<4xf32> {kiln.name = "arg1_1"}, %arg21: tensor<1x3x6x6xf32> {kiln.name = "arg2_1"}, %arg31: tensor<4xf32> {kiln.name = "arg3_1"}, %arg41: tensor<4xf32> {kiln.name = "arg4_1"}, %arg51: tensor<4xf32> {kiln.name = "arg5_1"}, %arg61: tensor<4xf32> {kiln.name = "arg6_1"}) -> tensor<1x4x6x6xf32> attributes {kiln.outputs = "(0,)"} {
    %arg21_nhwc = aten.clone.default(%arg21, memory_format = "channels_last") : (tensor<1x3x6x6xf32>) -> tensor<1x3x6x6xf32>
    %convolution = aten.convolution.default(%arg21_nhwc, %arg01, bias = %arg11, stride = [1, 1], padding = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1) {kiln.prepack} : (tensor<1x3x6x6xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x6x6xf32>
    %convolution_nhwc = aten.permute.default(%convolution, dims = [0, 2, 3, 1]) : (tensor<1x4x6x6xf32>) -> tensor<1x6x6x4xf32>
    %_to_copy = aten._to_copy.default(%arg31, dtype = f32) : (tensor<4xf32>) -> tensor<4xf32>
    %_to_copy1 = aten._to_copy.default(%arg41, dtype = f32) : (tensor<4xf32>) -> tensor<4xf32>
    %add = aten.add.Scalar(%_to_copy1, other = 1.0e-05) : (tensor<4xf32>) -> tensor<4xf32>
    %sqrt = aten.sqrt.default(%add) : (tensor<4xf32>) -> tensor<4xf32>
    %reciprocal = aten.reciprocal.default(%sqrt) : (tensor<4xf32>) -> tensor<4xf32>
    %mul = aten.mul.Scalar(%reciprocal, other = 1) : (tensor<4xf32>) -> tensor<4xf32>
    %unsqueeze = aten.unsqueeze.default(%_to_copy, dim = -1) : (tensor<4xf32>) -> tensor<4x1xf32>
    %unsqueeze1 = aten.unsqueeze.default(%unsqueeze, dim = -1) : (tensor<4x1xf32>) -> tensor<4x1x1xf32>
    %unsqueeze2 = aten.unsqueeze.default(%mul, dim = -1) : (tensor<4xf32>) -> tensor<4x1xf32>
    %unsqueeze3 = aten.unsqueeze.default(%unsqueeze2, dim = -1) : (tensor<4x1xf32>) -> tensor<4x1x1xf32>
    %0 = aten.unsqueeze.default(%unsqueeze1, dim = 0) : (tensor<4x1x1xf32>) -> tensor<1x4x1x1xf32>
    %1 = aten.permute.default(%0, dims = [0, 2, 3, 1]) : (tensor<1x4x1x1xf32>) -> tensor<1x1x1x4xf32>
    %sub = aten.sub.Tensor(%convolution_nhwc, %1) : (tensor<1x6x6x4xf32>, tensor<1x1x1x4xf32>) -> tensor<1x6x6x4xf32>
    %2 = aten.unsqueeze.default(%unsqueeze3, dim = 0) : (tensor<4x1x1xf32>) -> tensor<1x4x1x1xf32>
    %3 = aten.permute.default(%2, dims = [0, 2, 3, 1]) : (tensor<1x4x1x1xf32>) -> tensor<1x1x1x4xf32>
    %mul1 = aten.mul.Tensor(%sub, %3) : (tensor<1x6x6x4xf32>, tensor<1x1x1x4xf32>) -> tensor<1x6x6x4xf32>
    %unsqueeze4 = aten.unsqueeze.default(%arg51, dim = -1) : (tensor<4xf32>) -> tensor<4x1xf32>
    %unsqueeze5 = aten.unsqueeze.default(%unsqueeze4, dim = -1) : (tensor<4x1xf32>) -> tensor<4x1x1xf32>
    %4 = aten.unsqueeze.default(%unsqueeze5, dim = 0) : (tensor<4x1x1xf32>) -> tensor<1x4x1x1xf32>
    %5 = aten.permute.default(%4, dims = [0, 2, 3, 1]) : (tensor<1x4x1x1xf32>) -> tensor<1x1x1x4xf32>
    %mul2 = aten.mul.Tensor(%mul1, %5) : (tensor<1x6x6x4xf32>, tensor<1x1x1x4xf32>) -> tensor<1x6x6x4xf32>
    %unsqueeze6 = aten.unsqueeze.default(%arg61, dim = -1) : (tensor<4xf32>) -> tensor<4x1xf32>
    %unsqueeze7 = aten.unsqueeze.default(%unsqueeze6, dim = -1) : (tensor<4x1xf32>) -> tensor<4x1x1xf32>
    %6 = aten.unsqueeze.default(%unsqueeze7, dim = 0) : (tensor<4x1x1xf32>) -> tensor<1x4x1x1xf32>
    %7 = aten.permute.default(%6, dims = [0, 2, 3, 1]) : (tensor<1x4x1x1xf32>) -> tensor<1x1x1x4xf32>
    %add1 = aten.add.Tensor(%mul2, %7) : (tensor<1x6x6x4xf32>, tensor<1x1x1x4xf32>) -> tensor<1x6x6x4xf32>
    %add1_nchw = aten.permute.default(%add1, dims = [0, 3, 1, 2]) : (tensor<1x6x6x4xf32>) -> tensor<1x4x6x6xf32>
    %hardtanh = aten.hardtanh.default(%add1_nchw, min_val = 0.0, max_val = 6.0) : (tensor<1x4x6x6xf32>) -> tensor<1x4x6x6xf32>
    func.return %hardtanh : tensor<1x4x6x6xf32>
  }
}
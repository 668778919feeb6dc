// RUN: kiln-opt %s --split-input-file --lower-aten | filecheck %s

// A bfloat16 depthwise convolution of a GPU program (kiln.device) is a pointwise loop
// over the output: per tap a load of the input, masked where the window reaches into
// the padding (filled with 0), times the weight, accumulated in f32.
// CHECK-LABEL: func.func @depthwise
// CHECK-NEXT:    %0 = loop.pointwise [1, 2, 2, 2] (%x, %w)
// CHECK:           %30 = loop.load %in0["18*d0 + 9*d1 + 6*d2 + 2*d3 - 4"] if %29 else 0.0 : memref<1x2x3x3xbf16>
// CHECK-NEXT:      %31 = loop.load %in1["4*d1"] : memref<2x1x2x2xbf16>
// CHECK-NEXT:      %32 = arith.extf %30 : bf16 to f32
// CHECK-NEXT:      %33 = arith.extf %31 : bf16 to f32
// CHECK-NEXT:      %34 = arith.mulf %32, %33 : f32
// CHECK:           %50 = loop.load %in0["18*d0 + 9*d1 + 6*d2 + 2*d3"] if %49 else 0.0 : memref<1x2x3x3xbf16>
// CHECK:           %55 = arith.addf %48, %54 : f32
// CHECK-NEXT:      %56 = arith.truncf %55 : f32 to bf16
// CHECK-NEXT:      loop.yield %56 : bf16
// CHECK-NOT:     loop.extern
builtin.module attributes {"kiln.device" = "cuda:0"} {
  func.func @depthwise(%x: tensor<1x2x3x3xbf16>, %w: tensor<2x1x2x2xbf16>) -> tensor<1x2x2x2xbf16> {
    %0 = aten.convolution.default(%x, %w, stride = [2, 2], padding = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 2) : (tensor<1x2x3x3xbf16>, tensor<2x1x2x2xbf16>) -> tensor<1x2x2x2xbf16>
    func.return %0 : tensor<1x2x2x2xbf16>
  }
}

// -----

// float32 keeps cuDNN's convolution, and so does a CPU program (oneDNN's).
// CHECK-LABEL: func.func @float32
// CHECK-NEXT:    %0 = loop.extern
builtin.module attributes {"kiln.device" = "cuda:0"} {
  func.func @float32(%x: tensor<1x2x3x3xf32>, %w: tensor<2x1x2x2xf32>) -> tensor<1x2x2x2xf32> {
    %0 = aten.convolution.default(%x, %w, stride = [2, 2], padding = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 2) : (tensor<1x2x3x3xf32>, tensor<2x1x2x2xf32>) -> tensor<1x2x2x2xf32>
    func.return %0 : tensor<1x2x2x2xf32>
  }
}

// -----

// CHECK-LABEL: func.func @cpu
// CHECK-NEXT:    %0 = loop.extern
builtin.module {
  func.func @cpu(%x: tensor<1x2x3x3xbf16>, %w: tensor<2x1x2x2xbf16>) -> tensor<1x2x2x2xbf16> {
    %0 = aten.convolution.default(%x, %w, stride = [2, 2], padding = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 2) : (tensor<1x2x3x3xbf16>, tensor<2x1x2x2xbf16>) -> tensor<1x2x2x2xbf16>
    func.return %0 : tensor<1x2x2x2xbf16>
  }
}

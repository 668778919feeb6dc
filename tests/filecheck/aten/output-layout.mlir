// RUN: kiln-opt %s --output-layout | filecheck %s

// output-layout gives returned tensors eager's strides: an output whose recorded strides
// (kiln.output_strides, from the importer) are a permuted dense layout is computed and
// returned permuted, and kiln.outputs says how the caller views it back.
// CHECK-LABEL: func.func @transposed(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) attributes {kiln.outputs = "(permute(0, (1, 0)), 1)"}
// CHECK-NEXT:    %t = aten.t.default(%x) : (tensor<4x8xf32>) -> tensor<8x4xf32>
// CHECK-NEXT:    %y = aten.mul.Scalar(%t, other = 2) : (tensor<8x4xf32>) -> tensor<8x4xf32>
// CHECK-NEXT:    %z = aten.neg.default(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %0 = aten.permute.default(%y, dims = [1, 0]) : (tensor<8x4xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    func.return %0, %z : tensor<4x8xf32>, tensor<4x8xf32>
func.func @transposed(%x: tensor<4x8xf32>) -> (tensor<8x4xf32>, tensor<4x8xf32>) attributes {kiln.outputs = "(0, 1)", kiln.output_strides = [[1, 8], [8, 1]]} {
  %t = aten.t.default(%x) : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %y = aten.mul.Scalar(%t, other = 2) : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %z = aten.neg.default(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %y, %z : tensor<8x4xf32>, tensor<4x8xf32>
}

// A channels-last output is computed as NHWC.
// CHECK-LABEL: func.func @nhwc(%x: tensor<2x3x4x5xf32>) -> tensor<2x4x5x3xf32> attributes {kiln.outputs = "permute(0, (0, 3, 1, 2))"}
// CHECK-NEXT:    %y = aten.relu.default(%x) : (tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
// CHECK-NEXT:    %0 = aten.permute.default(%y, dims = [0, 2, 3, 1]) : (tensor<2x3x4x5xf32>) -> tensor<2x4x5x3xf32>
// CHECK-NEXT:    func.return %0 : tensor<2x4x5x3xf32>
func.func @nhwc(%x: tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32> attributes {kiln.outputs = "0", kiln.output_strides = [[60, 1, 15, 3]]} {
  %y = aten.relu.default(%x) : (tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
  func.return %y : tensor<2x3x4x5xf32>
}

// A contiguous output is left alone (the consumed strides attribute is dropped).
// CHECK-LABEL: func.func @contiguous(%x: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {kiln.outputs = "0"}
// CHECK-NEXT:    %y = aten.neg.default(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    func.return %y : tensor<4x8xf32>
func.func @contiguous(%x: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {kiln.outputs = "0", kiln.output_strides = [[8, 1]]} {
  %y = aten.neg.default(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}

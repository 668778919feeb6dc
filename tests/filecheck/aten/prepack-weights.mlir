// RUN: kiln-opt %s --split-input-file -p 'prepack-weights{linear-max-rows=4 cpu-bfloat16=always}' | filecheck %s

// In an inference graph (the driver marks the module kiln.inference), a 2-D float32
// convolution whose weight is a function argument is marked kiln.prepack: the C++
// wrapper runs it on a cached oneDNN-prepacked copy of the weight. A weight computed in
// the graph (%w2 = relu(...)) is new at every call, so its convolution stays plain, and
// so does a 1x1 convolution (ATen's own path is faster for those).
// CHECK-LABEL: func.func @inference
// CHECK-NEXT:    %0 = aten.convolution.default(%x, %w, {{.*}}) {kiln.prepack} : (tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<2x4x6x6xf32>
// CHECK-NEXT:    %w2 = aten.relu.default(%w)
// CHECK-NEXT:    %1 = aten.convolution.default(%x, %w2, {{.*}}) : (
// CHECK-NEXT:    %2 = aten.convolution.default(%x, %w1x1, {{.*}}) : (
builtin.module attributes {kiln.inference} {
  func.func @inference(%x: tensor<2x3x6x6xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4xf32>, %w1x1: tensor<4x3x1x1xf32>) -> (tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>) {
    %0 = aten.convolution.default(%x, %w, bias = %b, padding = [1, 1], stride = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1) : (tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<2x4x6x6xf32>
    %w2 = aten.relu.default(%w) : (tensor<4x3x3x3xf32>) -> tensor<4x3x3x3xf32>
    %1 = aten.convolution.default(%x, %w2, padding = [1, 1], stride = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1) : (tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32>
    %2 = aten.convolution.default(%x, %w1x1, padding = [0, 0], stride = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1) : (tensor<2x3x6x6xf32>, tensor<4x3x1x1xf32>) -> tensor<2x4x6x6xf32>
    func.return %0, %1, %2 : tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>
  }
}

// -----

// bfloat16 convolutions too (float16 and float64 ones stay plain on the CPU).
// CHECK-LABEL: func.func @bfloat16
// CHECK-NEXT:    %0 = aten.convolution.default(%x, %w, {{.*}}) {kiln.prepack} : (tensor<2x3x6x6xbf16>, tensor<4x3x3x3xbf16>) -> tensor<2x4x6x6xbf16>
// CHECK-NEXT:    %1 = aten.convolution.default(%h, %wh, {{.*}}) : (
builtin.module attributes {kiln.inference} {
  func.func @bfloat16(%x: tensor<2x3x6x6xbf16>, %w: tensor<4x3x3x3xbf16>, %h: tensor<2x3x6x6xf16>, %wh: tensor<4x3x3x3xf16>) -> (tensor<2x4x6x6xbf16>, tensor<2x4x6x6xf16>) {
    %0 = aten.convolution.default(%x, %w, padding = [1, 1], stride = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1) : (tensor<2x3x6x6xbf16>, tensor<4x3x3x3xbf16>) -> tensor<2x4x6x6xbf16>
    %1 = aten.convolution.default(%h, %wh, padding = [1, 1], stride = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1) : (tensor<2x3x6x6xf16>, tensor<4x3x3x3xf16>) -> tensor<2x4x6x6xf16>
    func.return %0, %1 : tensor<2x4x6x6xbf16>, tensor<2x4x6x6xf16>
  }
}

// -----

// A training (or unmarked) graph is left as it is.
// CHECK-LABEL: func.func @training
// CHECK-NEXT:    %0 = aten.convolution.default(%x, %w, {{.*}}) : (
builtin.module {
  func.func @training(%x: tensor<2x3x6x6xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32> {
    %0 = aten.convolution.default(%x, %w, padding = [1, 1], stride = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1) : (tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32>
    func.return %0 : tensor<2x4x6x6xf32>
  }
}

// -----

// Linear layers (only when asked: linear-max-rows, here 4 rows): x @ t(w) (mm, or addmm
// with a 1-D bias) of a weight argument, or x @ v of one read as it is (GPT-2's Conv1D).
// A product with a weight computed in the graph stays plain.
// CHECK-LABEL: func.func @linear
// CHECK-NEXT:    %wt = aten.permute.default(%w, dims = [1, 0])
// CHECK-NEXT:    %0 = aten.addmm.default(%b, %x, %wt) {kiln.prepack} :
// CHECK-NEXT:    %1 = aten.mm.default(%x, %wt) {kiln.prepack} :
// CHECK-NEXT:    %2 = aten.mm.default(%x, %v) {kiln.prepack} :
// CHECK-NEXT:    %u = aten.relu.default(%v)
// CHECK-NEXT:    %3 = aten.mm.default(%x, %u) :
builtin.module attributes {kiln.inference} {
  func.func @linear(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %b: tensor<16xf32>, %v: tensor<8x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>) {
    %wt = aten.permute.default(%w, dims = [1, 0]) : (tensor<16x8xf32>) -> tensor<8x16xf32>
    %0 = aten.addmm.default(%b, %x, %wt) : (tensor<16xf32>, tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    %1 = aten.mm.default(%x, %wt) : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    %2 = aten.mm.default(%x, %v) : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    %u = aten.relu.default(%v) : (tensor<8x16xf32>) -> tensor<8x16xf32>
    %3 = aten.mm.default(%x, %u) : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    func.return %0, %1, %2, %3 : tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>
  }
}

// -----

// Symbolic batch and image sizes (dynamic=True): still marked, with a static weight; the
// wrapper's site keeps one packed copy per input size it meets.
// CHECK-LABEL: func.func @symbolic
// CHECK-NEXT:    %0 = aten.convolution.default(%x, %w, {{.*}}) {kiln.prepack} : (tensor<?x3x?x?xf32>, tensor<4x3x3x3xf32>) -> tensor<?x4x?x?xf32>
builtin.module attributes {kiln.inference} {
  func.func @symbolic(%x: tensor<?x3x?x?xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<?x4x?x?xf32> {
    %0 = aten.convolution.default(%x, %w, padding = [1, 1], stride = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1) : (tensor<?x3x?x?xf32>, tensor<4x3x3x3xf32>) -> tensor<?x4x?x?xf32>
    func.return %0 : tensor<?x4x?x?xf32>
  }
}

// -----

// On the GPU (kiln.device): a convolution with a spatial kernel and a weight argument,
// in any floating dtype, is marked (the Triton wrapper keeps its weight channels-last);
// a 1x1 convolution (its OIHW weight is channels-last already) and linear layers (cuBLAS
// reads a transposed weight in place) are not.
// CHECK-LABEL: func.func @gpu
// CHECK-NEXT:    %0 = aten.convolution.default(%x, %w, {{.*}}) {kiln.prepack} : (tensor<2x3x6x6xbf16>, tensor<4x3x3x3xbf16>) -> tensor<2x4x6x6xbf16>
// CHECK-NEXT:    %1 = aten.convolution.default(%x, %w1x1, {{.*}}) : (
// CHECK-NEXT:    %wt = aten.permute.default(%v, dims = [1, 0])
// CHECK-NEXT:    %2 = aten.mm.default(%y, %wt) :
builtin.module attributes {kiln.inference, "kiln.device" = "cuda:0"} {
  func.func @gpu(%x: tensor<2x3x6x6xbf16>, %w: tensor<4x3x3x3xbf16>, %w1x1: tensor<4x3x1x1xbf16>, %y: tensor<4x8xf32>, %v: tensor<16x8xf32>) -> (tensor<2x4x6x6xbf16>, tensor<2x4x6x6xbf16>, tensor<4x16xf32>) {
    %0 = aten.convolution.default(%x, %w, padding = [1, 1], stride = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1) : (tensor<2x3x6x6xbf16>, tensor<4x3x3x3xbf16>) -> tensor<2x4x6x6xbf16>
    %1 = aten.convolution.default(%x, %w1x1, padding = [0, 0], stride = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1) : (tensor<2x3x6x6xbf16>, tensor<4x3x1x1xbf16>) -> tensor<2x4x6x6xbf16>
    %wt = aten.permute.default(%v, dims = [1, 0]) : (tensor<16x8xf32>) -> tensor<8x16xf32>
    %2 = aten.mm.default(%y, %wt) : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    func.return %0, %1, %2 : tensor<2x4x6x6xbf16>, tensor<2x4x6x6xbf16>, tensor<4x16xf32>
  }
}

// -----

// A GPU training graph (kiln.training): its convolutions, and a backward's
// convolution_backward of a weight argument, are marked: the Triton wrapper keeps one
// channels-last copy per weight, made by the forward and read by the backward. A
// backward on a weight computed in the graph, or with a 1x1 weight, stays plain.
// CHECK-LABEL: func.func @gpu_training
// CHECK-NEXT:    %0 = aten.convolution.default(%x, %w, {{.*}}) {kiln.prepack} :
// CHECK-NEXT:    %gi, %gw, %gb = aten.convolution_backward.default(%g, %x, %w, {{.*}}) {kiln.prepack} :
// CHECK-NEXT:    %w2 = aten.neg.default(%w)
// CHECK-NEXT:    %gi2, %gw2, %gb2 = aten.convolution_backward.default(%g, %x, %w2, {{.*}}) : (
// CHECK-NEXT:    %gi3, %gw3, %gb3 = aten.convolution_backward.default(%g, %x, %w1x1, {{.*}}) : (
builtin.module attributes {kiln.training, "kiln.device" = "cuda:0"} {
  func.func @gpu_training(%x: tensor<2x4x6x6xf32>, %w: tensor<4x4x3x3xf32>, %g: tensor<2x4x6x6xf32>, %w1x1: tensor<4x4x1x1xf32>) -> (tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>, tensor<4x4x3x3xf32>, tensor<4x4x3x3xf32>, tensor<4x4x1x1xf32>) {
    %0 = aten.convolution.default(%x, %w, padding = [1, 1], stride = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1) : (tensor<2x4x6x6xf32>, tensor<4x4x3x3xf32>) -> tensor<2x4x6x6xf32>
    %gi, %gw, %gb = aten.convolution_backward.default(%g, %x, %w, bias_sizes = [0], stride = [1, 1], padding = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1, output_mask = [true, true, false]) : (tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>, tensor<4x4x3x3xf32>) -> (tensor<2x4x6x6xf32>, tensor<4x4x3x3xf32>, none)
    %w2 = aten.neg.default(%w) : (tensor<4x4x3x3xf32>) -> tensor<4x4x3x3xf32>
    %gi2, %gw2, %gb2 = aten.convolution_backward.default(%g, %x, %w2, bias_sizes = [0], stride = [1, 1], padding = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1, output_mask = [true, true, false]) : (tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>, tensor<4x4x3x3xf32>) -> (tensor<2x4x6x6xf32>, tensor<4x4x3x3xf32>, none)
    %gi3, %gw3, %gb3 = aten.convolution_backward.default(%g, %x, %w1x1, bias_sizes = [0], stride = [1, 1], padding = [0, 0], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1, output_mask = [false, true, false]) : (tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>, tensor<4x4x1x1xf32>) -> (none, tensor<4x4x1x1xf32>, none)
    func.return %0, %gi, %gw, %gw2, %gw3 : tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>, tensor<4x4x3x3xf32>, tensor<4x4x3x3xf32>, tensor<4x4x1x1xf32>
  }
}

// -----

// On the CPU a training graph is left as it is (oneDNN packs per call in training).
// CHECK-LABEL: func.func @cpu_training
// CHECK-NEXT:    %0 = aten.convolution.default(%x, %w, {{.*}}) : (
builtin.module attributes {kiln.training} {
  func.func @cpu_training(%x: tensor<2x3x6x6xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32> {
    %0 = aten.convolution.default(%x, %w, padding = [1, 1], stride = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1) : (tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32>
    func.return %0 : tensor<2x4x6x6xf32>
  }
}

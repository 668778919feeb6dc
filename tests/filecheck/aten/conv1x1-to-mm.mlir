// RUN: kiln-opt %s --split-input-file --conv1x1-to-mm | filecheck %s

// A 1x1 stride-1 convolution of an activation stored NHWC becomes one matrix product on
// views: the NHWC value's [N*H*W, C] rows times the transposed [O, C] weight (addmm
// with a bias), viewed back as NHWC and permuted to the NCHW value it replaces. The
// input is either the NCHW permute channels-last writes (its NHWC source is read
// directly) or a channels-last clone / convolution result (permuted to NHWC first).
// A 3x3 and a strided 1x1 stay convolutions; a 1x1 of an NCHW value (a small float32
// weight) becomes one bmm of the weight, expanded over the batch, and the NCHW buffer.
// CHECK-LABEL: func.func @forward
// CHECK-NEXT:    %x_nhwc = aten.clone.default(%x, memory_format = "channels_last")
// CHECK-NEXT:    %x_nhwc_1 = aten.permute.default(%x_nhwc, dims = [0, 2, 3, 1]) : (tensor<2x4x6x6xf32>) -> tensor<2x6x6x4xf32>
// CHECK-NEXT:    %x_rows = aten.view.default(%x_nhwc_1, size = [72, 4]) : (tensor<2x6x6x4xf32>) -> tensor<72x4xf32>
// CHECK-NEXT:    %w_2d = aten.view.default(%w, size = [8, 4]) : (tensor<8x4x1x1xf32>) -> tensor<8x4xf32>
// CHECK-NEXT:    %w_t = aten.permute.default(%w_2d, dims = [1, 0]) : (tensor<8x4xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %addmm = aten.addmm.default(%b, %x_rows, %w_t) : (tensor<8xf32>, tensor<72x4xf32>, tensor<4x8xf32>) -> tensor<72x8xf32>
// CHECK-NEXT:    %y_nhwc = aten.view.default(%addmm, size = [2, 6, 6, 8]) : (tensor<72x8xf32>) -> tensor<2x6x6x8xf32>
// CHECK-NEXT:    %conv = aten.permute.default(%y_nhwc, dims = [0, 3, 1, 2]) : (tensor<2x6x6x8xf32>) -> tensor<2x8x6x6xf32>
// CHECK-NEXT:    %0 = aten.permute.default(%conv, dims = [0, 2, 3, 1])
// CHECK-NEXT:    %1 = aten.relu.default(%0)
// CHECK-NEXT:    %2 = aten.permute.default(%1, dims = [0, 3, 1, 2])
// CHECK-NEXT:    %x_rows_1 = aten.view.default(%1, size = [72, 8]) : (tensor<2x6x6x8xf32>) -> tensor<72x8xf32>
// CHECK-NEXT:    %w_2d_1 = aten.view.default(%w2, size = [8, 8])
// CHECK-NEXT:    %w_t_1 = aten.permute.default(%w_2d_1, dims = [1, 0])
// CHECK-NEXT:    %mm = aten.mm.default(%x_rows_1, %w_t_1) : (tensor<72x8xf32>, tensor<8x8xf32>) -> tensor<72x8xf32>
// CHECK-NEXT:    %y_nhwc_1 = aten.view.default(%mm, size = [2, 6, 6, 8])
// CHECK-NEXT:    %c = aten.permute.default(%y_nhwc_1, dims = [0, 3, 1, 2])
// CHECK-NEXT:    %3 = aten.convolution.default(%2, %w3, {{.*}}padding = [1, 1]
// CHECK-NEXT:    %4 = aten.convolution.default(%2, %w2, stride = [2, 2]
// CHECK-NEXT:    %x_3d = aten.view.default(%y, size = [2, 8, 36]) : (tensor<2x8x6x6xf32>) -> tensor<2x8x36xf32>
// CHECK-NEXT:    %w_2d_2 = aten.view.default(%w2, size = [8, 8])
// CHECK-NEXT:    %w_batched = aten.expand.default(%w_2d_2, size = [2, 8, 8]) : (tensor<8x8xf32>) -> tensor<2x8x8xf32>
// CHECK-NEXT:    %bmm = aten.bmm.default(%w_batched, %x_3d) : (tensor<2x8x8xf32>, tensor<2x8x36xf32>) -> tensor<2x8x36xf32>
// CHECK-NEXT:    %conv_1 = aten.view.default(%bmm, size = [2, 8, 6, 6]) : (tensor<2x8x36xf32>) -> tensor<2x8x6x6xf32>
// CHECK-NEXT:    %5 = aten.add.Tensor(%c, %3)
func.func @forward(%x: tensor<2x4x6x6xf32>, %w: tensor<8x4x1x1xf32>, %b: tensor<8xf32>, %w2: tensor<8x8x1x1xf32>, %w3: tensor<8x8x3x3xf32>, %y: tensor<2x8x6x6xf32>) -> (tensor<2x8xf32>, tensor<2x8x6x6xf32>, tensor<2x8x3x3xf32>, tensor<2x8x6x6xf32>) {
  %x_nhwc = aten.clone.default(%x, memory_format = "channels_last") : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %0 = aten.convolution.default(%x_nhwc, %w, bias = %b, padding = [0, 0], stride = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1) : (tensor<2x4x6x6xf32>, tensor<8x4x1x1xf32>, tensor<8xf32>) -> tensor<2x8x6x6xf32>
  %1 = aten.permute.default(%0, dims = [0, 2, 3, 1]) : (tensor<2x8x6x6xf32>) -> tensor<2x6x6x8xf32>
  %2 = aten.relu.default(%1) : (tensor<2x6x6x8xf32>) -> tensor<2x6x6x8xf32>
  %3 = aten.permute.default(%2, dims = [0, 3, 1, 2]) : (tensor<2x6x6x8xf32>) -> tensor<2x8x6x6xf32>
  %c = aten.convolution.default(%3, %w2, padding = [0, 0], stride = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1) : (tensor<2x8x6x6xf32>, tensor<8x8x1x1xf32>) -> tensor<2x8x6x6xf32>
  %4 = aten.convolution.default(%3, %w3, padding = [1, 1], stride = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1) : (tensor<2x8x6x6xf32>, tensor<8x8x3x3xf32>) -> tensor<2x8x6x6xf32>
  %5 = aten.convolution.default(%3, %w2, padding = [0, 0], stride = [2, 2], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1) : (tensor<2x8x6x6xf32>, tensor<8x8x1x1xf32>) -> tensor<2x8x3x3xf32>
  %6 = aten.convolution.default(%y, %w2, padding = [0, 0], stride = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1) : (tensor<2x8x6x6xf32>, tensor<8x8x1x1xf32>) -> tensor<2x8x6x6xf32>
  %7 = aten.add.Tensor(%c, %4) : (tensor<2x8x6x6xf32>, tensor<2x8x6x6xf32>) -> tensor<2x8x6x6xf32>
  %8 = aten.mean.dim(%7, dim = [2, 3]) : (tensor<2x8x6x6xf32>) -> tensor<2x8xf32>
  func.return %8, %6, %5, %4 : tensor<2x8xf32>, tensor<2x8x6x6xf32>, tensor<2x8x3x3xf32>, tensor<2x8x6x6xf32>
}

// -----

// A convolution whose result the function returns keeps it (its layout is the output's),
// and so does a program for the GPU (cuDNN runs it).
// CHECK-LABEL: func.func @returned
// CHECK-NEXT:    %0 = aten.permute.default(%x, dims = [0, 3, 1, 2])
// CHECK-NEXT:    %1 = aten.convolution.default(%0, %w,
func.func @returned(%x: tensor<1x6x6x4xf32>, %w: tensor<8x4x1x1xf32>) -> tensor<1x8x6x6xf32> {
  %0 = aten.permute.default(%x, dims = [0, 3, 1, 2]) : (tensor<1x6x6x4xf32>) -> tensor<1x4x6x6xf32>
  %1 = aten.convolution.default(%0, %w, padding = [0, 0], stride = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1) : (tensor<1x4x6x6xf32>, tensor<8x4x1x1xf32>) -> tensor<1x8x6x6xf32>
  func.return %1 : tensor<1x8x6x6xf32>
}

// -----

// CHECK-LABEL: func.func @gpu
// CHECK-NEXT:    %0 = aten.permute.default(%x, dims = [0, 3, 1, 2])
// CHECK-NEXT:    %1 = aten.convolution.default(%0, %w,
builtin.module attributes {kiln.device = "cuda"} {
  func.func @gpu(%x: tensor<1x6x6x4xf32>, %w: tensor<8x4x1x1xf32>) -> tensor<1x8xf32> {
    %0 = aten.permute.default(%x, dims = [0, 3, 1, 2]) : (tensor<1x6x6x4xf32>) -> tensor<1x4x6x6xf32>
    %1 = aten.convolution.default(%0, %w, padding = [0, 0], stride = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1) : (tensor<1x4x6x6xf32>, tensor<8x4x1x1xf32>) -> tensor<1x8x6x6xf32>
    %2 = aten.mean.dim(%1, dim = [2, 3]) : (tensor<1x8x6x6xf32>) -> tensor<1x8xf32>
    func.return %2 : tensor<1x8xf32>
  }
}

// -----

// Symbolic batch and image sizes (dynamic=True): the views take the input's sizes as
// sym_size.int values and the row count as their product; the channels stay static.
// CHECK-LABEL: func.func @symbolic
// CHECK-NEXT:    %0 = aten.permute.default(%x, dims = [0, 3, 1, 2])
// CHECK-NEXT:    %batch = aten.sym_size.int(%0, dim = 0) : (tensor<?x4x?x?xf32>) -> index
// CHECK-NEXT:    %height = aten.sym_size.int(%0, dim = 2) : (tensor<?x4x?x?xf32>) -> index
// CHECK-NEXT:    %width = aten.sym_size.int(%0, dim = 3) : (tensor<?x4x?x?xf32>) -> index
// CHECK-NEXT:    %rows_partial = arith.muli %batch, %height : index
// CHECK-NEXT:    %rows = arith.muli %rows_partial, %width : index
// CHECK-NEXT:    %x_rows = aten.view.default(%x, size = [%rows, 4]) : (tensor<?x?x?x4xf32>, index) -> tensor<?x4xf32>
// CHECK-NEXT:    %w_2d = aten.view.default(%w, size = [8, 4]) : (tensor<8x4x1x1xf32>) -> tensor<8x4xf32>
// CHECK-NEXT:    %w_t = aten.permute.default(%w_2d, dims = [1, 0]) : (tensor<8x4xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %mm = aten.mm.default(%x_rows, %w_t) : (tensor<?x4xf32>, tensor<4x8xf32>) -> tensor<?x8xf32>
// CHECK-NEXT:    %y_nhwc = aten.view.default(%mm, size = [%batch, %height, %width, 8]) : (tensor<?x8xf32>, index, index, index) -> tensor<?x?x?x8xf32>
// CHECK-NEXT:    %conv = aten.permute.default(%y_nhwc, dims = [0, 3, 1, 2]) : (tensor<?x?x?x8xf32>) -> tensor<?x8x?x?xf32>
// CHECK-NEXT:    %1 = aten.mean.dim(%conv, dim = [2, 3])
func.func @symbolic(%x: tensor<?x?x?x4xf32>, %w: tensor<8x4x1x1xf32>) -> tensor<?x8xf32> {
  %0 = aten.permute.default(%x, dims = [0, 3, 1, 2]) : (tensor<?x?x?x4xf32>) -> tensor<?x4x?x?xf32>
  %1 = aten.convolution.default(%0, %w, padding = [0, 0], stride = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1) : (tensor<?x4x?x?xf32>, tensor<8x4x1x1xf32>) -> tensor<?x8x?x?xf32>
  %2 = aten.mean.dim(%1, dim = [2, 3]) : (tensor<?x8x?x?xf32>) -> tensor<?x8xf32>
  func.return %2 : tensor<?x8xf32>
}

// -----

// A 1x1 map (squeeze-and-excitation's pooled input) is stored the same NCHW or NHWC:
// its 1x1 convolution is an addmm whatever made it (here a mean of an NCHW value).
// CHECK-LABEL: func.func @pooled
// CHECK-NEXT:    %m = aten.mean.dim(%x, dim = [2, 3], keepdim = true)
// CHECK-NEXT:    %x_nhwc = aten.permute.default(%m, dims = [0, 2, 3, 1]) : (tensor<2x8x1x1xf32>) -> tensor<2x1x1x8xf32>
// CHECK-NEXT:    %x_rows = aten.view.default(%x_nhwc, size = [2, 8]) : (tensor<2x1x1x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT:    %w_2d = aten.view.default(%w, size = [4, 8])
// CHECK-NEXT:    %w_t = aten.permute.default(%w_2d, dims = [1, 0])
// CHECK-NEXT:    %addmm = aten.addmm.default(%b, %x_rows, %w_t) : (tensor<4xf32>, tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:    %y_nhwc = aten.view.default(%addmm, size = [2, 1, 1, 4])
// CHECK-NEXT:    %s = aten.permute.default(%y_nhwc, dims = [0, 3, 1, 2]) : (tensor<2x1x1x4xf32>) -> tensor<2x4x1x1xf32>
// CHECK-NEXT:    %r = aten.relu.default(%s)
func.func @pooled(%x: tensor<2x8x5x5xf32>, %w: tensor<4x8x1x1xf32>, %b: tensor<4xf32>) -> tensor<2x4x1x1xf32> {
  %m = aten.mean.dim(%x, dim = [2, 3], keepdim = true) : (tensor<2x8x5x5xf32>) -> tensor<2x8x1x1xf32>
  %s = aten.convolution.default(%m, %w, bias = %b, padding = [0, 0], stride = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1) : (tensor<2x8x1x1xf32>, tensor<4x8x1x1xf32>, tensor<4xf32>) -> tensor<2x4x1x1xf32>
  %r = aten.relu.default(%s) : (tensor<2x4x1x1xf32>) -> tensor<2x4x1x1xf32>
  func.return %r : tensor<2x4x1x1xf32>
}

// -----

// In an inference module the driver marked kiln.packed_linear (this machine runs oneDNN's
// packed GEMM faster than ATen's mm), a product with a weight argument is marked
// kiln.prepack from prepack-weights' auto_min_rows for its weight (1024 rows for this
// small one), as prepack-weights{linear=auto} marks linear layers (it runs before this
// pass); the C++ wrapper packs the [O, C, 1, 1] weight as its [O, C] matrix.
// CHECK-LABEL: func.func @packed
// CHECK:         aten.addmm.default(%b, %x_rows, %w_t) {kiln.prepack} : (tensor<8xf32>, tensor<1024x4xf32>, tensor<4x8xf32>) -> tensor<1024x8xf32>
builtin.module attributes {kiln.inference, kiln.packed_linear} {
  func.func @packed(%x: tensor<4x4x16x16xf32>, %w: tensor<8x4x1x1xf32>, %b: tensor<8xf32>) -> tensor<4x8x16x16xf32> {
    %x_nhwc = aten.clone.default(%x, memory_format = "channels_last") : (tensor<4x4x16x16xf32>) -> tensor<4x4x16x16xf32>
    %conv = aten.convolution.default(%x_nhwc, %w, bias = %b, padding = [0, 0], stride = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1) : (tensor<4x4x16x16xf32>, tensor<8x4x1x1xf32>, tensor<8xf32>) -> tensor<4x8x16x16xf32>
    %r = aten.relu.default(%conv) : (tensor<4x8x16x16xf32>) -> tensor<4x8x16x16xf32>
    func.return %r : tensor<4x8x16x16xf32>
  }
}

// -----

// The same product at 512 rows: a weight this small runs faster on ATen's mm there.
// CHECK-LABEL: func.func @too_few_rows_to_pack
// CHECK:         aten.addmm.default(%b, %x_rows, %w_t) : (tensor<8xf32>, tensor<512x4xf32>, tensor<4x8xf32>) -> tensor<512x8xf32>
builtin.module attributes {kiln.inference, kiln.packed_linear} {
  func.func @too_few_rows_to_pack(%x: tensor<2x4x16x16xf32>, %w: tensor<8x4x1x1xf32>, %b: tensor<8xf32>) -> tensor<2x8x16x16xf32> {
    %x_nhwc = aten.clone.default(%x, memory_format = "channels_last") : (tensor<2x4x16x16xf32>) -> tensor<2x4x16x16xf32>
    %conv = aten.convolution.default(%x_nhwc, %w, bias = %b, padding = [0, 0], stride = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1) : (tensor<2x4x16x16xf32>, tensor<8x4x1x1xf32>, tensor<8xf32>) -> tensor<2x8x16x16xf32>
    %r = aten.relu.default(%conv) : (tensor<2x8x16x16xf32>) -> tensor<2x8x16x16xf32>
    func.return %r : tensor<2x8x16x16xf32>
  }
}

// -----

// Symbolic rows (dynamic=True): the product is marked with the same threshold as its
// kiln.prepack_min_rows, which the call checks against its row count (fewer rows run
// ATen's product on the plain weight), as prepack-weights marks symbolic linear layers.
// CHECK-LABEL: func.func @packed_symbolic
// CHECK:         aten.addmm.default(%b, %x_rows, %w_t) {kiln.prepack, kiln.prepack_min_rows = 1024 : i64} : (tensor<8xf32>, tensor<?x4xf32>, tensor<4x8xf32>) -> tensor<?x8xf32>
builtin.module attributes {kiln.inference, kiln.packed_linear} {
  func.func @packed_symbolic(%x: tensor<?x4x?x?xf32>, %w: tensor<8x4x1x1xf32>, %b: tensor<8xf32>) -> tensor<?x8x?x?xf32> {
    %x_nhwc = aten.clone.default(%x, memory_format = "channels_last") : (tensor<?x4x?x?xf32>) -> tensor<?x4x?x?xf32>
    %conv = aten.convolution.default(%x_nhwc, %w, bias = %b, padding = [0, 0], stride = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1) : (tensor<?x4x?x?xf32>, tensor<8x4x1x1xf32>, tensor<8xf32>) -> tensor<?x8x?x?xf32>
    %r = aten.relu.default(%conv) : (tensor<?x8x?x?xf32>) -> tensor<?x8x?x?xf32>
    func.return %r : tensor<?x8x?x?xf32>
  }
}

// -----

// bfloat16: the views and the product keep the element type.
// CHECK-LABEL: func.func @bfloat16
// CHECK-NEXT:    %x = aten.permute.default(%x_nhwc, dims = [0, 3, 1, 2])
// CHECK-NEXT:    %x_rows = aten.view.default(%x_nhwc, size = [72, 4]) : (tensor<2x6x6x4xbf16>) -> tensor<72x4xbf16>
// CHECK-NEXT:    %w_2d = aten.view.default(%w, size = [8, 4]) : (tensor<8x4x1x1xbf16>) -> tensor<8x4xbf16>
// CHECK-NEXT:    %w_t = aten.permute.default(%w_2d, dims = [1, 0]) : (tensor<8x4xbf16>) -> tensor<4x8xbf16>
// CHECK-NEXT:    %mm = aten.mm.default(%x_rows, %w_t) : (tensor<72x4xbf16>, tensor<4x8xbf16>) -> tensor<72x8xbf16>
// CHECK-NEXT:    %y_nhwc = aten.view.default(%mm, size = [2, 6, 6, 8]) : (tensor<72x8xbf16>) -> tensor<2x6x6x8xbf16>
// CHECK-NEXT:    %c = aten.permute.default(%y_nhwc, dims = [0, 3, 1, 2]) : (tensor<2x6x6x8xbf16>) -> tensor<2x8x6x6xbf16>
// CHECK-NEXT:    %0 = aten.relu.default(%c)
func.func @bfloat16(%x_nhwc: tensor<2x6x6x4xbf16>, %w: tensor<8x4x1x1xbf16>) -> tensor<2x8x6x6xbf16> {
  %x = aten.permute.default(%x_nhwc, dims = [0, 3, 1, 2]) : (tensor<2x6x6x4xbf16>) -> tensor<2x4x6x6xbf16>
  %c = aten.convolution.default(%x, %w, padding = [0, 0], stride = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1) : (tensor<2x4x6x6xbf16>, tensor<8x4x1x1xbf16>) -> tensor<2x8x6x6xbf16>
  %0 = aten.relu.default(%c) : (tensor<2x8x6x6xbf16>) -> tensor<2x8x6x6xbf16>
  func.return %0 : tensor<2x8x6x6xbf16>
}

// -----

// The backward of a 1x1 convolution of NCHW activations (a small float32 weight): the
// input's gradient a bmm of the transposed weight, expanded over the batch, and the
// output's gradient; the weight's a bmm per image summed over the batch; the bias's a
// sum. A 3x3's stays convolution_backward.
// CHECK-LABEL: func.func @backward
// CHECK-NEXT:    %g_3d = aten.view.default(%g, size = [2, 8, 36]) : (tensor<2x8x6x6xf32>) -> tensor<2x8x36xf32>
// CHECK-NEXT:    %w_2d = aten.view.default(%w, size = [8, 4])
// CHECK-NEXT:    %w_t = aten.permute.default(%w_2d, dims = [1, 0]) : (tensor<8x4xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %w_t_batched = aten.expand.default(%w_t, size = [2, 4, 8]) : (tensor<4x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT:    %grad_x_3d = aten.bmm.default(%w_t_batched, %g_3d) : (tensor<2x4x8xf32>, tensor<2x8x36xf32>) -> tensor<2x4x36xf32>
// CHECK-NEXT:    %grad_x = aten.view.default(%grad_x_3d, size = [2, 4, 6, 6])
// CHECK-NEXT:    %x_3d = aten.view.default(%x, size = [2, 4, 36])
// CHECK-NEXT:    %x_t = aten.permute.default(%x_3d, dims = [0, 2, 1]) : (tensor<2x4x36xf32>) -> tensor<2x36x4xf32>
// CHECK-NEXT:    %grad_w_3d = aten.bmm.default(%g_3d, %x_t) : (tensor<2x8x36xf32>, tensor<2x36x4xf32>) -> tensor<2x8x4xf32>
// CHECK-NEXT:    %grad_w_2d = aten.sum.dim_IntList(%grad_w_3d, dim = [0]) : (tensor<2x8x4xf32>) -> tensor<8x4xf32>
// CHECK-NEXT:    %grad_w = aten.view.default(%grad_w_2d, size = [8, 4, 1, 1])
// CHECK-NEXT:    %grad_b = aten.sum.dim_IntList(%g, dim = [0, 2, 3]) : (tensor<2x8x6x6xf32>) -> tensor<8xf32>
// CHECK-NEXT:    %0, %1, %2 = aten.convolution_backward.default(%g, %x, %w3, {{.*}}padding = [1, 1]
// CHECK-NEXT:    func.return %grad_x, %grad_w, %grad_b, %0
func.func @backward(%g: tensor<2x8x6x6xf32>, %x: tensor<2x4x6x6xf32>, %w: tensor<8x4x1x1xf32>, %w3: tensor<8x4x3x3xf32>) -> (tensor<2x4x6x6xf32>, tensor<8x4x1x1xf32>, tensor<8xf32>, tensor<2x4x6x6xf32>) {
  %0, %1, %2 = aten.convolution_backward.default(%g, %x, %w, bias_sizes = [8], stride = [1, 1], padding = [0, 0], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1, output_mask = [true, true, true]) : (tensor<2x8x6x6xf32>, tensor<2x4x6x6xf32>, tensor<8x4x1x1xf32>) -> (tensor<2x4x6x6xf32>, tensor<8x4x1x1xf32>, tensor<8xf32>)
  %3, %4, %5 = aten.convolution_backward.default(%g, %x, %w3, bias_sizes = [0], stride = [1, 1], padding = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1, output_mask = [true, false, false]) : (tensor<2x8x6x6xf32>, tensor<2x4x6x6xf32>, tensor<8x4x3x3xf32>) -> (tensor<2x4x6x6xf32>, none, none)
  func.return %0, %1, %2, %3 : tensor<2x4x6x6xf32>, tensor<8x4x1x1xf32>, tensor<8xf32>, tensor<2x4x6x6xf32>
}

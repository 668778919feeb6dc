// RUN: kiln-opt %s -p 'dot-kernels{mode=epilogue}' | filecheck %s
// RUN: kiln-opt %s -p 'dot-kernels{mode=half}' | filecheck %s --check-prefix=HALF
// RUN: kiln-opt %s -p 'dot-kernels' | filecheck %s --check-prefix=HALF
// RUN: kiln-opt %s -p 'dot-kernels{mode=none}' | filecheck %s --check-prefix=NONE

// dot-kernels marks the products that run as Triton dot kernels, on a GPU only;
// mode=half (bfloat16/float16 products) is the default.
// NONE-NOT: kiln.dot_kernel

builtin.module attributes {kiln.device = "cuda:0"} {
  // A product whose result feeds only pointwise ops (through a view): its epilogue fuses.
  // CHECK-LABEL: func.func @epilogue
  // CHECK:         aten.mm.default(%x, %w) {kiln.dot_kernel}
  // HALF-LABEL:  func.func @epilogue
  // HALF-NOT:      kiln.dot_kernel
  func.func @epilogue(%x: tensor<32x64xf32>, %w: tensor<64x16xf32>) -> tensor<2x16x16xf32> {
    %0 = aten.mm.default(%x, %w) : (tensor<32x64xf32>, tensor<64x16xf32>) -> tensor<32x16xf32>
    %1 = aten.view.default(%0, size = [2, 16, 16]) : (tensor<32x16xf32>) -> tensor<2x16x16xf32>
    %2 = aten.relu.default(%1) : (tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
    func.return %2 : tensor<2x16x16xf32>
  }

  // A product a reduction reads keeps cuBLAS under mode=epilogue; mode=half takes every
  // bfloat16 product, addmm (alpha = beta = 1) too.
  // CHECK-LABEL: func.func @reduced
  // CHECK-NOT:     kiln.dot_kernel
  // HALF-LABEL:  func.func @reduced
  // HALF:          aten.addmm.default(%b, %x, %w) {kiln.dot_kernel}
  func.func @reduced(%b: tensor<16xbf16>, %x: tensor<32x64xbf16>, %w: tensor<64x16xbf16>) -> tensor<16xbf16> {
    %0 = aten.addmm.default(%b, %x, %w) : (tensor<16xbf16>, tensor<32x64xbf16>, tensor<64x16xbf16>) -> tensor<32x16xbf16>
    %1 = aten.sum.dim_IntList(%0, dim = [0]) : (tensor<32x16xbf16>) -> tensor<16xbf16>
    func.return %1 : tensor<16xbf16>
  }

  // addmm with beta other than 1 stays an ATen call.
  // HALF-LABEL:  func.func @scaled
  // HALF-NOT:      kiln.dot_kernel
  func.func @scaled(%b: tensor<16xbf16>, %x: tensor<32x64xbf16>, %w: tensor<64x16xbf16>) -> tensor<32x16xbf16> {
    %0 = aten.addmm.default(%b, %x, %w, beta = 2) : (tensor<16xbf16>, tensor<32x64xbf16>, tensor<64x16xbf16>) -> tensor<32x16xbf16>
    func.return %0 : tensor<32x16xbf16>
  }
}

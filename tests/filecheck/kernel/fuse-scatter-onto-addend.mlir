// RUN: kiln-opt %s -p 'lower-aten,fuse' | filecheck %s

// A tied embedding's weight gradient: the LM head's product plus the embedding's
// scatter. The scatter adds onto the product (a fresh buffer nothing else reads) after
// it is computed: no zero fill, no add kernel, one launch.

// CHECK-LABEL: kernel.program @tied
// CHECK:         %mm = kernel.extern
// CHECK:         kernel.launch @kernel0(%ids, %g) outs(%mm)
// CHECK-NEXT:    kernel.return %mm

// Where the product is also returned, it is not the sum's to overwrite: zero fill,
// scatter and add stay.

// CHECK-LABEL: kernel.program @product_returned
// CHECK:         %put = kernel.alloc
// CHECK-NEXT:    kernel.launch @{{kernel[0-9]+}}() outs(%put)
// CHECK-NEXT:    kernel.launch @{{kernel[0-9]+}}(%ids, %g) outs(%put)
// CHECK:         %sum = kernel.alloc
// CHECK-NEXT:    kernel.launch @{{kernel[0-9]+}}(%mm, %put) outs(%sum)
// CHECK-NEXT:    kernel.return %sum, %mm
module attributes {kiln.device = "cuda:0"} {
  func.func @tied(%ids: tensor<32xi64>, %g: tensor<32x16xf32>, %a: tensor<32x100xf32>, %b: tensor<32x16xf32>) -> tensor<100x16xf32> {
    %zeros = aten.generic "aten::zeros.default"(size = [100, 16], device = "cuda:0", pin_memory = false) : () -> tensor<100x16xf32>
    %put = aten.index_put.default(%zeros, %g, indices = [%ids], accumulate = true) : (tensor<100x16xf32>, tensor<32xi64>, tensor<32x16xf32>) -> tensor<100x16xf32>
    %at = aten.t.default(%a) : (tensor<32x100xf32>) -> tensor<100x32xf32>
    %mm = aten.mm.default(%at, %b) : (tensor<100x32xf32>, tensor<32x16xf32>) -> tensor<100x16xf32>
    %sum = aten.add.Tensor(%mm, %put) : (tensor<100x16xf32>, tensor<100x16xf32>) -> tensor<100x16xf32>
    func.return %sum : tensor<100x16xf32>
  }
  func.func @product_returned(%ids: tensor<32xi64>, %g: tensor<32x16xf32>, %a: tensor<32x100xf32>, %b: tensor<32x16xf32>) -> (tensor<100x16xf32>, tensor<100x16xf32>) {
    %zeros = aten.generic "aten::zeros.default"(size = [100, 16], device = "cuda:0", pin_memory = false) : () -> tensor<100x16xf32>
    %put = aten.index_put.default(%zeros, %g, indices = [%ids], accumulate = true) : (tensor<100x16xf32>, tensor<32xi64>, tensor<32x16xf32>) -> tensor<100x16xf32>
    %at = aten.t.default(%a) : (tensor<32x100xf32>) -> tensor<100x32xf32>
    %mm = aten.mm.default(%at, %b) : (tensor<100x32xf32>, tensor<32x16xf32>) -> tensor<100x16xf32>
    %sum = aten.add.Tensor(%mm, %put) : (tensor<100x16xf32>, tensor<100x16xf32>) -> tensor<100x16xf32>
    func.return %sum, %mm : tensor<100x16xf32>, tensor<100x16xf32>
  }
}

// RUN: kiln-opt %s --lower-aten | filecheck %s

// nan_to_num of integers is a clone, lowered as an alias of %x; the 0-d view of it runs
// in a loop.extern (ATen's view of %x's memory). Eager returns a new tensor: the return
// copies the extern's result instead of handing back a view of the argument.
// CHECK-LABEL: func.func @view_of_clone(%x: memref<ui8>) -> memref<1xui8>
// CHECK-NEXT:    %v = loop.extern (%x) : (memref<ui8>) -> memref<1xui8> {
// CHECK:           aten.view.default
// CHECK:         %v_1 = loop.extern (%v) : (memref<1xui8>) -> memref<1xui8> {
// CHECK:           aten.clone.default
// CHECK:         func.return %v_1 : memref<1xui8>
func.func @view_of_clone(%x: tensor<ui8>) -> tensor<1xui8> {
  %c = aten.clone.default(%x) : (tensor<ui8>) -> tensor<ui8>
  %v = aten.view.default(%c, size = [1]) : (tensor<ui8>) -> tensor<1xui8>
  func.return %v : tensor<1xui8>
}

// A view of the argument itself is a view in eager too: returned as it is.
// CHECK-LABEL: func.func @view_of_argument(%x: memref<ui8>) -> memref<1xui8>
// CHECK-NEXT:    %v = loop.extern (%x) : (memref<ui8>) -> memref<1xui8> {
// CHECK:           aten.view.default
// CHECK:         func.return %v : memref<1xui8>
func.func @view_of_argument(%x: tensor<ui8>) -> tensor<1xui8> {
  %v = aten.view.default(%x, size = [1]) : (tensor<ui8>) -> tensor<1xui8>
  func.return %v : tensor<1xui8>
}

// RUN: kiln-opt %s --lower-aten | filecheck %s
// RUN: kiln-opt %s --lower-aten | filecheck %s --check-prefix=NODIV

// A size that is a division of sizes (every other column: `(s27 + 1) // 2`) gets a
// size symbol of its own, computed once on the host: the loop ops' sizes and indices
// are polynomials in their `s<k>`, and both ops read the one value.
// CHECK-LABEL: func.func @forward
// CHECK:         %[[ONE:.*]] = arith.constant 1 : index
// CHECK-NEXT:    %[[SUM:.*]] = arith.addi %[[ONE]], %arg11 : index
// CHECK-NEXT:    %[[TWO:.*]] = arith.constant 2 : index
// CHECK-NEXT:    %[[HALF:.*]] = arith.floordivsi %[[SUM]], %[[TWO]] : index
// CHECK-NEXT:    %relu = loop.pointwise ["s0", "s1"] (%arg21) syms(%arg01, %[[HALF]], %arg11)
// CHECK:           loop.load %in0["d0*s2 + 2*d1"]
// CHECK:         %mul7 = loop.pointwise ["s0", "s1"] (%relu) syms(%arg01, %[[HALF]])
// CHECK:           loop.load %in0["d0*s1 + d1"]
// No division is left in any loop op.
// NODIV-NOT: {{//}}
builtin.module {
  func.func @forward(%arg01: index {kiln.name = "arg0_1", kiln.size_symbol = "s77"}, %arg11: index {kiln.name = "arg1_1", kiln.size_symbol = "s27"}, %arg21: tensor<?x?xf32> {kiln.name = "arg2_1", kiln.size_symbols = ["s77", "s27"]}) -> tensor<?x?xf32> attributes {kiln.outputs = "(0,)", kiln.size_hints = {s27 = 9 : i64, s77 = 4 : i64}} {
    %slice1 = aten.slice.Tensor(%arg21, start = 0, end = 9223372036854775807) {kiln.traced_sizes = [["s77", "s27"]]} : (tensor<?x?xf32>) -> tensor<?x?xf32>
    %slice2 = aten.slice.Tensor(%slice1, dim = 1, start = 0, end = 9223372036854775807, step = 2) {kiln.traced_sizes = [["s77", "(s27 + 1) // 2"]]} : (tensor<?x?xf32>) -> tensor<?x?xf32>
    %relu = aten.relu.default(%slice2) {kiln.traced_sizes = [["s77", "(s27 + 1) // 2"]]} : (tensor<?x?xf32>) -> tensor<?x?xf32>
    %mul7 = aten.mul.Scalar(%relu, other = 2) {kiln.traced_sizes = [["s77", "(s27 + 1) // 2"]]} : (tensor<?x?xf32>) -> tensor<?x?xf32>
    func.return %mul7 : tensor<?x?xf32>
  }
}

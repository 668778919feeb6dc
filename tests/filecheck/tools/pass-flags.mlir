// Pass flags run in command-line order, after the -p pipeline; each prints under its header.
// RUN: kiln-opt %s --load-plugin %plugins/kiln_test_plugin.py -p 'test-count-ops' --cse --print-ir-after-all 2>&1 >/dev/null | filecheck %s --check-prefix=ORDER
// RUN: kiln-opt %s --load-plugin %plugins/kiln_test_plugin.py --cse --test-count-ops | filecheck %s --check-prefix=CSE-FIRST
// RUN: kiln-opt %s --load-plugin %plugins/kiln_test_plugin.py --test-count-ops --cse | filecheck %s --check-prefix=COUNT-FIRST

func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = aten.neg.default(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = aten.neg.default(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %2 = aten.add.Tensor(%0, %1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %2 : tensor<4xf32>
}

// ORDER: // -----// IR Dump After test-count-ops //----- //
// ORDER-NEXT: builtin.module attributes {kiln_test.op_count = 5 : i64} {
// ORDER: aten.neg.default
// ORDER-NEXT: aten.neg.default
// ORDER: // -----// IR Dump After cse //----- //
// ORDER: aten.neg.default
// ORDER-NOT: aten.neg.default
// ORDER: func.return

// CSE-FIRST: builtin.module attributes {kiln_test.op_count = 4 : i64}
// COUNT-FIRST: builtin.module attributes {kiln_test.op_count = 5 : i64}
// COUNT-FIRST: aten.neg.default
// COUNT-FIRST-NOT: aten.neg.default

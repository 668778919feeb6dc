// RUN: kiln-opt %s -p 'prepack-weights{linear=always}' | filecheck %s --check-prefix=ALWAYS
// RUN: kiln-opt %s -p 'prepack-weights{linear=never}' | filecheck %s --check-prefix=NEVER
// RUN: kiln-opt %s -p 'prepack-weights{linear=never linear-max-rows=8}' | filecheck %s --check-prefix=CAP

// Linear layers x @ t(w) of a weight argument on oneDNN's packed GEMM: `linear=always`
// marks them whatever their size, `never` none, and a positive `linear-max-rows` marks
// those of at most that many rows whatever `linear` says. (The default, `auto`, marks
// layers of >= 128 rows where this machine measures oneDNN faster than ATen's mm: not
// fixed enough for a text test; tests/backends/cpp/test_prepack_weights.py checks it.)
// ALWAYS-LABEL: func.func @linear
// ALWAYS:         aten.mm.default(%x, %wt) {kiln.prepack} :
// ALWAYS-NEXT:    aten.addmm.default(%b, %y, %wt) {kiln.prepack} :
// NEVER-LABEL:  func.func @linear
// NEVER-NOT:      kiln.prepack
// CAP-LABEL:    func.func @linear
// CAP:            aten.mm.default(%x, %wt) {kiln.prepack} :
// CAP-NEXT:       aten.addmm.default(%b, %y, %wt) :
builtin.module attributes {kiln.inference} {
  func.func @linear(%x: tensor<4x8xf32>, %y: tensor<256x8xf32>, %w: tensor<16x8xf32>, %b: tensor<16xf32>) -> (tensor<4x16xf32>, tensor<256x16xf32>) {
    %wt = aten.permute.default(%w, dims = [1, 0]) : (tensor<16x8xf32>) -> tensor<8x16xf32>
    %0 = aten.mm.default(%x, %wt) : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    %1 = aten.addmm.default(%b, %y, %wt) : (tensor<16xf32>, tensor<256x8xf32>, tensor<8x16xf32>) -> tensor<256x16xf32>
    func.return %0, %1 : tensor<4x16xf32>, tensor<256x16xf32>
  }
}

// RUN: kiln-opt %s --split-input-file -p 'prepack-weights' | filecheck %s --check-prefix=AUTO
// RUN: kiln-opt %s --split-input-file -p 'prepack-weights{linear=always}' | filecheck %s --check-prefix=ALWAYS
// RUN: kiln-opt %s --split-input-file -p 'prepack-weights{linear=never}' | filecheck %s --check-prefix=NEVER
// RUN: kiln-opt %s --split-input-file -p 'prepack-weights{linear=never linear-max-rows=8}' | filecheck %s --check-prefix=CAP

// Linear layers x @ t(w) of a weight argument on oneDNN's packed GEMM. The default,
// `linear=auto`, marks layers of >= 128 rows in a module the driver marked
// kiln.packed_linear (this machine measured oneDNN's packed GEMM faster than ATen's mm:
// kiln.backends.cpp.gemm_calibration), none elsewhere; `always` marks every one, `never`
// none, and a positive `linear-max-rows` those of at most that many rows whatever
// `linear` says.
// AUTO-LABEL:   func.func @measured_faster
// AUTO:           aten.mm.default(%x, %wt) :
// AUTO-NEXT:      aten.addmm.default(%b, %y, %wt) {kiln.prepack} :
// ALWAYS-LABEL: func.func @measured_faster
// ALWAYS:         aten.mm.default(%x, %wt) {kiln.prepack} :
// ALWAYS-NEXT:    aten.addmm.default(%b, %y, %wt) {kiln.prepack} :
// NEVER-LABEL:  func.func @measured_faster
// NEVER-NOT:      kiln.prepack
// CAP-LABEL:    func.func @measured_faster
// CAP:            aten.mm.default(%x, %wt) {kiln.prepack} :
// CAP-NEXT:       aten.addmm.default(%b, %y, %wt) :
builtin.module attributes {kiln.inference, kiln.packed_linear} {
  func.func @measured_faster(%x: tensor<4x8xf32>, %y: tensor<256x8xf32>, %w: tensor<16x8xf32>, %b: tensor<16xf32>) -> (tensor<4x16xf32>, tensor<256x16xf32>) {
    %wt = aten.permute.default(%w, dims = [1, 0]) : (tensor<16x8xf32>) -> tensor<8x16xf32>
    %0 = aten.mm.default(%x, %wt) : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    %1 = aten.addmm.default(%b, %y, %wt) : (tensor<16xf32>, tensor<256x8xf32>, tensor<8x16xf32>) -> tensor<256x16xf32>
    func.return %0, %1 : tensor<4x16xf32>, tensor<256x16xf32>
  }
}

// -----

// AUTO-LABEL:   func.func @not_measured_faster
// AUTO-NOT:       kiln.prepack
// ALWAYS-LABEL: func.func @not_measured_faster
// ALWAYS:         aten.addmm.default(%b, %y, %wt) {kiln.prepack} :
builtin.module attributes {kiln.inference} {
  func.func @not_measured_faster(%y: tensor<256x8xf32>, %w: tensor<16x8xf32>, %b: tensor<16xf32>) -> tensor<256x16xf32> {
    %wt = aten.permute.default(%w, dims = [1, 0]) : (tensor<16x8xf32>) -> tensor<8x16xf32>
    %0 = aten.addmm.default(%b, %y, %wt) : (tensor<16xf32>, tensor<256x8xf32>, tensor<8x16xf32>) -> tensor<256x16xf32>
    func.return %0 : tensor<256x16xf32>
  }
}

// -----

// Symbolic rows (dynamic=True): the site packs the weight for any row count; under
// `auto` the op says below how many rows a call runs ATen's product instead; a row cap
// cannot bound a symbolic count, so `linear-max-rows` leaves it.
// AUTO-LABEL:   func.func @symbolic_rows
// AUTO:           aten.mm.default(%x, %wt) {kiln.prepack, kiln.prepack_min_rows = 128 : i64} :
// ALWAYS-LABEL: func.func @symbolic_rows
// ALWAYS:         aten.mm.default(%x, %wt) {kiln.prepack} :
// NEVER-LABEL:  func.func @symbolic_rows
// NEVER-NOT:      kiln.prepack
// CAP-LABEL:    func.func @symbolic_rows
// CAP-NOT:        kiln.prepack
builtin.module attributes {kiln.inference, kiln.packed_linear} {
  func.func @symbolic_rows(%x: tensor<?x8xf32>, %w: tensor<16x8xf32>) -> tensor<?x16xf32> {
    %wt = aten.permute.default(%w, dims = [1, 0]) : (tensor<16x8xf32>) -> tensor<8x16xf32>
    %0 = aten.mm.default(%x, %wt) : (tensor<?x8xf32>, tensor<8x16xf32>) -> tensor<?x16xf32>
    func.return %0 : tensor<?x16xf32>
  }
}

// RUN: kiln-opt %s --split-input-file -p 'prepack-weights' | filecheck %s --check-prefix=AUTO
// RUN: kiln-opt %s --split-input-file -p 'prepack-weights{linear=always}' | filecheck %s --check-prefix=ALWAYS
// RUN: kiln-opt %s --split-input-file -p 'prepack-weights{linear=never}' | filecheck %s --check-prefix=NEVER
// RUN: kiln-opt %s --split-input-file -p 'prepack-weights{linear=never linear-max-rows=8}' | filecheck %s --check-prefix=CAP

// Linear layers x @ t(w) of a weight argument on oneDNN's packed GEMM. The default,
// `linear=auto`, marks layers in a module the driver marked kiln.packed_linear (this
// machine measured oneDNN's packed GEMM faster than ATen's mm:
// kiln.backends.cpp.gemm_calibration) from a row count that falls as the weight grows
// (auto_min_rows: a weight under 32K elements from 1024 rows, up to 512K from 3M
// multiply-adds, larger ones always), none elsewhere; `always` marks every one, `never`
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
  func.func @measured_faster(%x: tensor<4x8xf32>, %y: tensor<1024x8xf32>, %w: tensor<16x8xf32>, %b: tensor<16xf32>) -> (tensor<4x16xf32>, tensor<1024x16xf32>) {
    %wt = aten.permute.default(%w, dims = [1, 0]) : (tensor<16x8xf32>) -> tensor<8x16xf32>
    %0 = aten.mm.default(%x, %wt) : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    %1 = aten.addmm.default(%b, %y, %wt) : (tensor<16xf32>, tensor<1024x8xf32>, tensor<8x16xf32>) -> tensor<1024x16xf32>
    func.return %0, %1 : tensor<4x16xf32>, tensor<1024x16xf32>
  }
}

// -----

// The row threshold by weight size under `auto`: a 16 x 8 weight is left to ATen at 512
// rows; a 256 x 128 one (32K elements) is packed from 96 rows (3M multiply-adds), not at
// 64; a 1024 x 512 one (512K) at 2 rows.
// AUTO-LABEL:   func.func @threshold_by_weight_size
// AUTO:           aten.mm.default(%small, %st) :
// AUTO-NEXT:      aten.mm.default(%x64, %mt) :
// AUTO-NEXT:      aten.mm.default(%x96, %mt) {kiln.prepack} :
// AUTO-NEXT:      aten.mm.default(%x2, %lt) {kiln.prepack} :
builtin.module attributes {kiln.inference, kiln.packed_linear} {
  func.func @threshold_by_weight_size(%small: tensor<512x8xf32>, %sw: tensor<16x8xf32>, %x64: tensor<64x128xf32>, %x96: tensor<96x128xf32>, %mw: tensor<256x128xf32>, %x2: tensor<2x512xf32>, %lw: tensor<1024x512xf32>) -> (tensor<512x16xf32>, tensor<64x256xf32>, tensor<96x256xf32>, tensor<2x1024xf32>) {
    %st = aten.permute.default(%sw, dims = [1, 0]) : (tensor<16x8xf32>) -> tensor<8x16xf32>
    %mt = aten.permute.default(%mw, dims = [1, 0]) : (tensor<256x128xf32>) -> tensor<128x256xf32>
    %lt = aten.permute.default(%lw, dims = [1, 0]) : (tensor<1024x512xf32>) -> tensor<512x1024xf32>
    %0 = aten.mm.default(%small, %st) : (tensor<512x8xf32>, tensor<8x16xf32>) -> tensor<512x16xf32>
    %1 = aten.mm.default(%x64, %mt) : (tensor<64x128xf32>, tensor<128x256xf32>) -> tensor<64x256xf32>
    %2 = aten.mm.default(%x96, %mt) : (tensor<96x128xf32>, tensor<128x256xf32>) -> tensor<96x256xf32>
    %3 = aten.mm.default(%x2, %lt) : (tensor<2x512xf32>, tensor<512x1024xf32>) -> tensor<2x1024xf32>
    func.return %0, %1, %2, %3 : tensor<512x16xf32>, tensor<64x256xf32>, tensor<96x256xf32>, tensor<2x1024xf32>
  }
}

// -----

// A weight read as it is, x @ w of a [K, N] argument (GPT-2's Conv1D: addmm(b, x, w)),
// is a linear layer too: the wrapper packs its transpose.
// AUTO-LABEL:   func.func @weight_read_as_it_is
// AUTO:           aten.addmm.default(%b, %x, %w) {kiln.prepack} :
// NEVER-LABEL:  func.func @weight_read_as_it_is
// NEVER-NOT:      kiln.prepack
builtin.module attributes {kiln.inference, kiln.packed_linear} {
  func.func @weight_read_as_it_is(%x: tensor<32x768xf32>, %w: tensor<768x2304xf32>, %b: tensor<2304xf32>) -> tensor<32x2304xf32> {
    %0 = aten.addmm.default(%b, %x, %w) : (tensor<2304xf32>, tensor<32x768xf32>, tensor<768x2304xf32>) -> tensor<32x2304xf32>
    func.return %0 : tensor<32x2304xf32>
  }
}

// -----

// AUTO-LABEL:   func.func @not_measured_faster
// AUTO-NOT:       kiln.prepack
// ALWAYS-LABEL: func.func @not_measured_faster
// ALWAYS:         aten.addmm.default(%b, %y, %wt) {kiln.prepack} :
builtin.module attributes {kiln.inference} {
  func.func @not_measured_faster(%y: tensor<1024x8xf32>, %w: tensor<16x8xf32>, %b: tensor<16xf32>) -> tensor<1024x16xf32> {
    %wt = aten.permute.default(%w, dims = [1, 0]) : (tensor<16x8xf32>) -> tensor<8x16xf32>
    %0 = aten.addmm.default(%b, %y, %wt) : (tensor<16xf32>, tensor<1024x8xf32>, tensor<8x16xf32>) -> tensor<1024x16xf32>
    func.return %0 : tensor<1024x16xf32>
  }
}

// -----

// Symbolic rows (dynamic=True): the site packs the weight for any row count; under
// `auto` the op says below how many rows a call runs ATen's product instead; a row cap
// cannot bound a symbolic count, so `linear-max-rows` leaves it.
// AUTO-LABEL:   func.func @symbolic_rows
// AUTO:           aten.mm.default(%x, %wt) {kiln.prepack, kiln.prepack_min_rows = 1024 : i64} :
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

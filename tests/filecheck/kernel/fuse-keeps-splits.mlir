// RUN: kiln-opt %s -p 'lower-aten,fuse{report=true}' -o %t 2>&1 | filecheck %s
// RUN: kiln-opt %s -p 'lower-aten,fuse,tile' | filecheck %s --check-prefix=IR
// RUN: sed -e 's/cuda:0/cpu/' %s | kiln-opt -p 'lower-aten,fuse{report=true}' -o %t 2>&1 | filecheck %s --check-prefix=CPU

// A sum over 16384 elements and the division reading it over the same elements. Fused
// on a GPU, the division needs the whole sum in the program that computes it: one
// program would loop over all of it twice. Apart, the tile pass splits the sum into 16
// chunks (a split kernel and a combine kernel) and the division is a pointwise kernel.
// On the CPU, where the tile pass does not split such a sum, they fuse as before.

// CHECK: fuse: round 1: [%sum] + [%div]: not fused: %div reads the reduced values over the whole space: the 1 x 16384 reduction would not split in 16
// CPU:   fuse: round 1: [%sum] + [%div]: fused (vertical, pointwise over the reduced input)

// IR:      kernel.kernel @kernel0_split split [16] x [1024]
// IR:      kernel.kernel @kernel0_combine persistent [1] x [16]
// IR:      kernel.kernel @kernel1 pointwise [16384] x [1]
module attributes {kiln.device = "cuda:0"} {
  func.func @normalize(%x: tensor<16384xf32>) -> tensor<16384xf32> {
    %sum = aten.sum.default(%x) : (tensor<16384xf32>) -> tensor<f32>
    %div = aten.div.Tensor(%x, %sum) : (tensor<16384xf32>, tensor<f32>) -> tensor<16384xf32>
    func.return %div : tensor<16384xf32>
  }
}

// RUN: kiln-opt %s --lower-aten --fuse --emit-cpp | filecheck %s
// RUN: kiln-opt %s -p 'lower-aten,fuse,lower-to-cpp{threads=1}' -t cpp | filecheck %s

// The issue's command prints a C++ translation unit: the prelude, then one extern "C"
// function per kernel under a comment block naming the nodes it computes.

// CHECK:       #include <cmath>
// CHECK:       // kernel0: reduction kernel over [4] x [24]
// CHECK-NEXT:  // %sum: sum [4] reduce [24]
// CHECK-NEXT:  // %add: pointwise [4]
// CHECK:       extern "C" int kernel0(const float* in_ptr0, const float* in_ptr1, float* out_ptr0)
// CHECK-NEXT:  {
// CHECK-NEXT:      for (int64_t x0 = 0; x0 < 4; ++x0)
// CHECK:               #pragma omp simd
// CHECK:                   float [[X:tmp[0-9]+]] = in_ptr0[r0 + 24*x0];
// CHECK:               float [[BIAS:tmp[0-9]+]] = in_ptr1[x0];
// CHECK-NEXT:          float [[OUT:tmp[0-9]+]] = {{tmp[0-9]+}} + [[BIAS]];
// CHECK-NEXT:          out_ptr0[x0] = [[OUT]];
// CHECK-NEXT:      }
// CHECK-NEXT:      return 0;
// CHECK-NEXT:  }
func.func @sum_bias(%x: tensor<4x24xf32>, %bias: tensor<4xf32>) -> tensor<4xf32> {
  %sum = aten.sum.dim_IntList(%x, dim = [-1]) : (tensor<4x24xf32>) -> tensor<4xf32>
  %add = aten.add.Tensor(%sum, %bias) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %add : tensor<4xf32>
}

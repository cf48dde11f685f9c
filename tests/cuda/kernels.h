// Run-time lookup of the recurrent-kernel instantiations the GPU tests use.
#ifndef DELTAC_TESTS_CUDA_KERNELS_H
#define DELTAC_TESTS_CUDA_KERNELS_H

#include "deltac/params.h"

#include <cuda_runtime.h>

namespace deltac::test {

// deltac::cuda::detail::recurrent_bv<Var, K, V, InT> with bv bound (and the
// form / PDL of kernels.cuh's form_under_test, pdl_under_test).
using KernelFn = cudaError_t (*)(const deltac_fwd_params&, cudaStream_t, int bv);

// Values of bv that select the knobs (tile_v, warps) = (32, 2), (16, 1) and
// (64, 2) (K = V = 128 only; kernels.cuh).
constexpr int kKnobs32x2 = -2, kKnobs16x1 = -1, kKnobs64x2 = -3;

// The instantiation for (variant, K, V, dtype), or null when the tests did
// not instantiate it. One definition per variant (kernels_<variant>.cu).
KernelFn find_delta(int K, int V, bool bf16);
KernelFn find_gated(int K, int V, bool bf16);
KernelFn find_kda(int K, int V, bool bf16);
KernelFn find_kernel(deltac_variant var, int K, int V, bool bf16);

}  // namespace deltac::test

#endif  // DELTAC_TESTS_CUDA_KERNELS_H

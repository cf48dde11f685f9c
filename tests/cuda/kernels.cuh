// Shapes instantiated for the tests and the lookup over them; included once
// per variant by kernels_<variant>.cu so the variants compile in parallel.
#ifndef DELTAC_TESTS_CUDA_KERNELS_CUH
#define DELTAC_TESTS_CUDA_KERNELS_CUH

#include "deltac/cuda/recurrent.cuh"
#include "kernels.h"

#include <tuple>

namespace deltac::test {

template <int K, int V>
struct Shape {};

// K, V pairs under test: the powers of two, K != V both ways, and shapes
// whose V is not a multiple of 32 or whose K leaves odd rows per thread.
using TestShapes = std::tuple<Shape<16, 16>, Shape<64, 64>, Shape<128, 128>, Shape<256, 256>,
                              Shape<128, 256>, Shape<256, 128>, Shape<64, 16>, Shape<48, 80>>;

template <deltac_variant Var, int K, int V>
KernelFn pick(Shape<K, V>, int k, int v, bool bf16) {
  if (k != K || v != V)
    return nullptr;
  if (bf16)
    return &cuda::detail::recurrent_bv<Var, K, V, __nv_bfloat16>;
  return &cuda::detail::recurrent_bv<Var, K, V, float>;
}

template <deltac_variant Var, class... S>
KernelFn find_in(std::tuple<S...>, int k, int v, bool bf16) {
  KernelFn f = nullptr;
  ((f = f ? f : pick<Var>(S{}, k, v, bf16)), ...);
  return f;
}

}  // namespace deltac::test

#endif  // DELTAC_TESTS_CUDA_KERNELS_CUH

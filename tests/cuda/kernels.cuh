// Shapes instantiated for the tests and the lookup over them; included once
// per variant by kernels_<variant>.cu so the variants compile in parallel.
#ifndef DELTAC_TESTS_CUDA_KERNELS_CUH
#define DELTAC_TESTS_CUDA_KERNELS_CUH

#include "deltac/cuda/recurrent.cuh"
#include "kernels.h"

#include <cstdlib>
#include <string>
#include <tuple>

namespace deltac::test {

template <int K, int V>
struct Shape {};

// K, V pairs under test: the powers of two, K != V both ways, and shapes
// whose V is not a multiple of 32 or whose K leaves odd rows per thread.
using TestShapes = std::tuple<Shape<16, 16>, Shape<64, 64>, Shape<128, 128>, Shape<256, 256>,
                              Shape<128, 256>, Shape<256, 128>, Shape<64, 16>, Shape<48, 80>>;

// The kernel form under test: DELTAC_TEST_RECURRENT_FORM = split, strip,
// packed or stream forces one (default: the library's choice); DELTAC_TEST_PDL=0 launches
// without programmatic dependent launch.
inline cuda::detail::Form form_under_test() {
  static const cuda::detail::Form f = [] {
    const char* s = std::getenv("DELTAC_TEST_RECURRENT_FORM");
    const std::string x = s ? s : "";
    return x == "split"    ? cuda::detail::Form::Split
           : x == "strip"  ? cuda::detail::Form::Strip
           : x == "packed" ? cuda::detail::Form::Packed
           : x == "stream" ? cuda::detail::Form::Stream
                           : cuda::detail::Form::Auto;
  }();
  return f;
}
inline bool pdl_under_test() {
  static const bool on = [] {
    const char* s = std::getenv("DELTAC_TEST_PDL");
    return !(s && std::string(s) == "0");
  }();
  return on;
}

// bv: recurrent_bv's tile width, or at K = V = 128 kKnobs32x2 / kKnobs16x1 /
// kKnobs64x2 for recurrent_knobs with (tile_v, warps) = (32, 2) / (16, 1) /
// (64, 2) (one token, 16-bit and fp8 states: the only kernel of those knobs).
template <deltac_variant Var, int K, int V, class InT>
cudaError_t run_recurrent(const deltac_fwd_params& p, cudaStream_t stream, int bv) {
  using namespace cuda::detail;
  if constexpr (K == 128 && V == 128) {
    if (bv == kKnobs32x2)
      return recurrent_knobs<Var, K, V, InT, 32, 2>(p, stream, nullptr, form_under_test(),
                                                    pdl_under_test());
    if (bv == kKnobs16x1)
      return recurrent_knobs<Var, K, V, InT, 16, 1>(p, stream, nullptr, form_under_test(),
                                                    pdl_under_test());
    if (bv == kKnobs64x2)
      return recurrent_knobs<Var, K, V, InT, 64, 2>(p, stream, nullptr, form_under_test(),
                                                    pdl_under_test());
  }
  return recurrent_bv<Var, K, V, InT>(p, stream, bv, form_under_test(), pdl_under_test());
}

template <deltac_variant Var, int K, int V>
KernelFn pick(Shape<K, V>, int k, int v, bool bf16) {
  if (k != K || v != V)
    return nullptr;
  if (bf16)
    return &run_recurrent<Var, K, V, __nv_bfloat16>;
  return &run_recurrent<Var, K, V, float>;
}

template <deltac_variant Var, class... S>
KernelFn find_in(std::tuple<S...>, int k, int v, bool bf16) {
  KernelFn f = nullptr;
  ((f = f ? f : pick<Var>(S{}, k, v, bf16)), ...);
  return f;
}

}  // namespace deltac::test

#endif  // DELTAC_TESTS_CUDA_KERNELS_CUH

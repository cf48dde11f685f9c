// Shapes, dtypes and configs of deltac::cuda::chunked instantiated for the
// tests; included once per variant by kernels_chunked_<variant>.cu.
#ifndef DELTAC_TESTS_CUDA_KERNELS_CHUNKED_CUH
#define DELTAC_TESTS_CUDA_KERNELS_CHUNKED_CUH

#include "deltac/cuda/chunked.cuh"
#include "kernels_chunked.h"

#include <tuple>

namespace deltac::test {

template <int K, int V, class InT>
struct CShape {};

// bf16: the precompiled shapes (64, 128, 256, 128/256) and three others
// (96, 192, 48/80 with V not a multiple of 32); f32: 64, 128, 256, 48/80;
// f16: 128, 256.
using ChunkedShapes =
    std::tuple<CShape<64, 64, __nv_bfloat16>, CShape<128, 128, __nv_bfloat16>,
               CShape<256, 256, __nv_bfloat16>, CShape<128, 256, __nv_bfloat16>,
               CShape<96, 96, __nv_bfloat16>, CShape<192, 192, __nv_bfloat16>,
               CShape<48, 80, __nv_bfloat16>, CShape<64, 64, float>, CShape<128, 128, float>,
               CShape<256, 256, float>, CShape<48, 80, float>, CShape<128, 128, __half>,
               CShape<256, 256, __half>>;

template <class InT>
constexpr int dtype_id() {
  return std::is_same_v<InT, float> ? DELTAC_F32
         : std::is_same_v<InT, __half> ? DELTAC_F16
                                       : DELTAC_BF16;
}

// Workspace for Cfg with `Split` segments forced (0: the rule).
template <deltac_variant Var, int K, int V, class InT, class Cfg, int Split>
size_t ws_split(const deltac_fwd_params& p) {
  return cuda::chunked_workspace_bytes<Var, K, V, InT, Cfg>(p, Split);
}

// Cfg with the block scan (the warp scan's rule when DELTAC_TEST_WARP_SCAN=1).
template <deltac_variant Var, int K, int V, class InT, class Cfg>
cudaError_t run_default(const deltac_fwd_params& p, void* ws, size_t bytes, cudaStream_t stream,
                        const int32_t* skip) {
  return cuda::detail::chunked_stages<Var, K, V, InT, Cfg>(p, ws, bytes, stream, 3, skip, 0, 0,
                                                           0, 0, scan_env());
}

template <deltac_variant Var, int K, int V, class InT, class Cfg>
ChunkedFns fns() {
  ChunkedFns f;
  f.run = &run_default<Var, K, V, InT, Cfg>;
  f.ws = &ws_split<Var, K, V, InT, Cfg, 0>;
  return f;
}

// Cfg with the sequence split forced to Split segments (1: none).
template <deltac_variant Var, int K, int V, class InT, class Cfg, int Split>
cudaError_t run_split(const deltac_fwd_params& p, void* ws, size_t bytes, cudaStream_t stream,
                      const int32_t* skip) {
  return cuda::detail::chunked_stages<Var, K, V, InT, Cfg>(p, ws, bytes, stream, 3, skip, 0,
                                                           Split, 0, 0, scan_env());
}

template <deltac_variant Var, int K, int V, class InT, class Cfg, int Split>
ChunkedFns fns_split() {
  ChunkedFns f;
  f.run = &run_split<Var, K, V, InT, Cfg, Split>;
  f.ws = &ws_split<Var, K, V, InT, Cfg, Split>;
  return f;
}

// Cfg with the scan's V tile forced to BV (no run-time choice).
template <deltac_variant Var, int K, int V, class InT, class Cfg, int BV>
cudaError_t run_bv(const deltac_fwd_params& p, void* ws, size_t bytes, cudaStream_t stream,
                   const int32_t* skip) {
  return cuda::detail::chunked_stages<Var, K, V, InT, Cfg>(p, ws, bytes, stream, 3, skip, BV, 0,
                                                           0, 0, scan_env());
}

template <deltac_variant Var, int K, int V, class InT, class Cfg, int BV>
ChunkedFns fns_bv() {
  ChunkedFns f;
  f.run = &run_bv<Var, K, V, InT, Cfg, BV>;
  f.ws = &ws_split<Var, K, V, InT, Cfg, 0>;
  return f;
}

// Cfg with the fused launch (chunked_fused.cuh) where it fits.
template <deltac_variant Var, int K, int V, class InT, class Cfg>
cudaError_t run_fused(const deltac_fwd_params& p, void* ws, size_t bytes, cudaStream_t stream,
                        const int32_t* skip) {
  return cuda::detail::chunked_stages<Var, K, V, InT, Cfg>(p, ws, bytes, stream, 3, skip, 0, 0,
                                                           1, 0, 1);
}

// Cfg with the scan's rule (the warp scan where it runs) and the sequence
// split forced to Split segments.
template <deltac_variant Var, int K, int V, class InT, class Cfg, int Split>
cudaError_t run_warp_split(const deltac_fwd_params& p, void* ws, size_t bytes,
                           cudaStream_t stream, const int32_t* skip) {
  return cuda::detail::chunked_stages<Var, K, V, InT, Cfg>(p, ws, bytes, stream, 3, skip, 0,
                                                           Split, 0, 0, 0);
}

// Cfg with the warp scan (chunked_scan_warp.cuh; W = 2: with output warps)
// where it runs: chunked_stages' scan 0 (the rule) or 2.
template <deltac_variant Var, int K, int V, class InT, class Cfg, int W>
cudaError_t run_warp(const deltac_fwd_params& p, void* ws, size_t bytes, cudaStream_t stream,
                     const int32_t* skip) {
  return cuda::detail::chunked_stages<Var, K, V, InT, Cfg>(p, ws, bytes, stream, 3, skip, 0, 0,
                                                           0, 0, W == 2 ? 2 : 0);
}

// Cfg with the TMA scan (chunked_scan_tma.cuh) where it runs: scan 3.
template <deltac_variant Var, int K, int V, class InT, class Cfg>
cudaError_t run_tma(const deltac_fwd_params& p, void* ws, size_t bytes, cudaStream_t stream,
                    const int32_t* skip) {
  return cuda::detail::chunked_stages<Var, K, V, InT, Cfg>(p, ws, bytes, stream, 3, skip, 0, 0,
                                                           0, 0, 3);
}

// Cfg with the transposed TMA scan (chunked_scan_tmat.cuh) where it runs: scan 4.
template <deltac_variant Var, int K, int V, class InT, class Cfg>
cudaError_t run_tmat(const deltac_fwd_params& p, void* ws, size_t bytes, cudaStream_t stream,
                     const int32_t* skip) {
  return cuda::detail::chunked_stages<Var, K, V, InT, Cfg>(p, ws, bytes, stream, 3, skip, 0, 0,
                                                           0, 0, 4);
}

// The transposed TMA scan with the split forced to Split: scan 4.
template <deltac_variant Var, int K, int V, class InT, class Cfg, int Split>
cudaError_t run_tmat_split(const deltac_fwd_params& p, void* ws, size_t bytes,
                           cudaStream_t stream, const int32_t* skip) {
  return cuda::detail::chunked_stages<Var, K, V, InT, Cfg>(p, ws, bytes, stream, 3, skip, 0,
                                                           Split, 0, 0, 4);
}

// Cfg with scan 5 (the block scan with two-term products; unsplit) and
// its workspace (T's low halves too).
template <deltac_variant Var, int K, int V, class InT, class Cfg>
cudaError_t run_precise(const deltac_fwd_params& p, void* ws, size_t bytes, cudaStream_t stream,
                        const int32_t* skip) {
  return cuda::detail::chunked_stages<Var, K, V, InT, Cfg>(p, ws, bytes, stream, 3, skip, 0, 1,
                                                           0, 0, cuda::kChunkedScanPrecise);
}
template <deltac_variant Var, int K, int V, class InT, class Cfg>
size_t ws_precise(const deltac_fwd_params& p) {
  const cuda::detail::ChunkedKernels& k = cuda::detail::chunked_kernels<Var, K, V, InT, Cfg>();
  bool warp = false;
  const cuda::detail::ChunkedPlan pl =
      cuda::detail::chunked_run_plan(k, p, 0, 1, cuda::kChunkedScanPrecise, &warp);
  return cuda::detail::chunked_carve<InT>(k, p, nullptr, nullptr, 1, pl.precise);
}

template <deltac_variant Var, int K, int V, class InT>
ChunkedFns pick_chunked(CShape<K, V, InT>, int k, int v, int dtype, int config) {
  if (k != K || v != V || dtype != dtype_id<InT>())
    return {};
  if (config == 0)
    return fns<Var, K, V, InT, cuda::DefaultChunkedConfig<Var, K, V, InT>>();
  if (config == kChunkedFused) {
    ChunkedFns f = fns<Var, K, V, InT, cuda::DefaultChunkedConfig<Var, K, V, InT>>();
    f.run = &run_fused<Var, K, V, InT, cuda::DefaultChunkedConfig<Var, K, V, InT>>;
    return f;
  }
  if (config >= kChunkedWarpSplit2 && config <= kChunkedWarpSplit8) {
    using D = cuda::DefaultChunkedConfig<Var, K, V, InT>;
    ChunkedFns f = config == kChunkedWarpSplit2   ? fns_split<Var, K, V, InT, D, 2>()
                   : config == kChunkedWarpSplit4 ? fns_split<Var, K, V, InT, D, 4>()
                                                  : fns_split<Var, K, V, InT, D, 8>();
    f.run = config == kChunkedWarpSplit2   ? &run_warp_split<Var, K, V, InT, D, 2>
            : config == kChunkedWarpSplit4 ? &run_warp_split<Var, K, V, InT, D, 4>
                                           : &run_warp_split<Var, K, V, InT, D, 8>;
    return f;
  }
  if (config == kChunkedTma || config == kChunkedTmat) {
    using D = cuda::DefaultChunkedConfig<Var, K, V, InT>;
    ChunkedFns f = fns<Var, K, V, InT, D>();
    f.run = config == kChunkedTma ? &run_tma<Var, K, V, InT, D> : &run_tmat<Var, K, V, InT, D>;
    return f;
  }
  if (config == kChunkedTmatWarm2 || config == kChunkedTmatWarm4) {
    using D = cuda::DefaultChunkedConfig<Var, K, V, InT>;
    ChunkedFns f = fns_split<Var, K, V, InT, D, 4>();  // covers 2 and the scan's own
    f.run = config == kChunkedTmatWarm2 ? &run_tmat_split<Var, K, V, InT, D, 2>
                                        : &run_tmat_split<Var, K, V, InT, D, 4>;
    return f;
  }
  if (config == kChunkedPrecise) {
    using D = cuda::DefaultChunkedConfig<Var, K, V, InT>;
    ChunkedFns f;
    f.run = &run_precise<Var, K, V, InT, D>;
    f.ws = &ws_precise<Var, K, V, InT, D>;
    return f;
  }
  if (config == kChunkedWarp || config == kChunkedWarpSplitO) {
    using D = cuda::DefaultChunkedConfig<Var, K, V, InT>;
    ChunkedFns f = fns<Var, K, V, InT, D>();
    f.run = config == kChunkedWarp ? &run_warp<Var, K, V, InT, D, 1>
                                   : &run_warp<Var, K, V, InT, D, 2>;
    return f;
  }
  constexpr bool kForced = (K == 128 && V == 128 && std::is_same_v<InT, __nv_bfloat16>) ||
                           (K == 64 && V == 64 && std::is_same_v<InT, float>);
  if constexpr (kForced) {
    using D = cuda::DefaultChunkedConfig<Var, K, V, InT>;
    if (config == 1)
      return fns_bv<Var, K, V, InT, cuda::ChunkedConfig<32, 16, 2, 3>, 16>();
    if (config == 2)
      return fns_bv<Var, K, V, InT, cuda::ChunkedConfig<16, 64, 8, 2>, 64>();
    if (config == 3)
      return fns_bv<Var, K, V, InT, cuda::ChunkedConfig<64, 64, 8, 1>, 64>();
    if (config == 4)
      return fns_bv<Var, K, V, InT, D, D::kBV>();
    if constexpr (cuda::detail::chunked_bv_ok<Var, K, V, InT, D>(D::kBV / 2))
      if (config == 5)
        return fns_bv<Var, K, V, InT, D, D::kBV / 2>();
    if (config == 6)
      return fns_split<Var, K, V, InT, D, 2>();
    if (config == 7)
      return fns_split<Var, K, V, InT, D, 4>();
    if (config == 8)
      return fns_split<Var, K, V, InT, D, 8>();
    if (config == 9)
      return fns_split<Var, K, V, InT, D, 1>();
    if (config == 10)  // split with a narrower V tile (chunk 32, BV 32)
      return fns_split<Var, K, V, InT, cuda::ChunkedConfig<32, 32, 4, 2>, 4>();
  }
  return {};
}

template <deltac_variant Var, class... S>
ChunkedFns find_chunked_in(std::tuple<S...>, int k, int v, int dtype, int config) {
  ChunkedFns f;
  ((f = f.run ? f : pick_chunked<Var>(S{}, k, v, dtype, config)), ...);
  return f;
}

}  // namespace deltac::test

#endif  // DELTAC_TESTS_CUDA_KERNELS_CHUNKED_CUH

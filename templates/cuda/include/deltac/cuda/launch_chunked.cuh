// The cuda_chunked family's launch points (see deltac/cuda/launch.cuh):
// chunked_cfg / chunked_run, their workspace sizes, and the runtime's
// precompiled instance, launch_chunked / workspace_chunked.
#ifndef DELTAC_CUDA_LAUNCH_CHUNKED_CUH
#define DELTAC_CUDA_LAUNCH_CHUNKED_CUH

#include "deltac/catalogue.h"
#include "deltac/cuda/chunked.cuh"

#include <cuda_fp16.h>

namespace deltac::cuda {

// cuda_chunked with split, fuse and scan at run time (the values chunked_cfg's
// Split, Fuse and Scan take), for the kernels k (a precompiled config's,
// detail::chunked_kernels, or the runtime's NVRTC ones). Batch-invariant
// (det): k's widest tile (the warp scan's widest), no split, no fused
// launch; routed: no split, no fused launch. chunked_run_workspace takes
// chunked_run's arguments in its order and sizes what that call carves.
// cstates (chunk-end states) run chunked_knobs' knobs (chunked_rules.h):
// chunked_run_stages, chunked_run_with, chunked_cfg_workspace(..., cstates)
// and the runtime all take them from there. saved: the backward's saved
// states (chunked_run_stages says where they are written).
namespace detail {
template <class InT>
size_t chunked_workspace_with(const ChunkedKernels& k, const deltac_fwd_params& p, bool det,
                             int32_t route, int split, int fuse, int scan) {
  (void)fuse;  // the workspace is the same with or without the fused launch
  if (det || route)
    split = 1;
  if (p.N < 0 || p.T < 0 || p.B < 0 || p.HV <= 0)
    return 0;
  const int force_bv = det ? k.bv0 : 0;
  bool warp = false;
  const ChunkedPlan pl = chunked_run_plan(k, p, force_bv, split, scan, &warp);
  return chunked_carve<InT>(k, p, nullptr, nullptr, pl.split, pl.precise);
}

template <class InT>
cudaError_t chunked_run_with(const ChunkedKernels& k, const deltac_fwd_params& p,
                        cudaStream_t stream, void* workspace, size_t workspace_bytes,
                        const int32_t* skip, bool det, int32_t route, int split, int fuse,
                        int scan, float* cstates = nullptr, int64_t cstates_count = 0,
                        void* saved = nullptr) {
  const int force_bv = det ? k.bv0 : 0;
  if (det || route)
    split = 1, fuse = 0;
  const ChunkedKnobs kn = chunked_knobs(split, fuse, scan, cstates != nullptr);
  split = kn.split, fuse = kn.fuse, scan = kn.scan;  // as chunked_run_stages: the workspace fits
  if (workspace)
    return chunked_run_stages<InT>(k, p, workspace, workspace_bytes, stream, 3, skip, force_bv,
                                   split, fuse, route, scan, cstates, cstates_count, saved);
  const size_t need = chunked_workspace_with<InT>(k, p, det, route, split, fuse, scan);
  void* ws = nullptr;
  cudaError_t e = cudaMallocAsync(&ws, need ? need : 256, stream);
  if (e != cudaSuccess)
    return e;
  e = chunked_run_stages<InT>(k, p, ws, need, stream, 3, skip, force_bv, split, fuse, route,
                              scan, cstates, cstates_count, saved);
  const cudaError_t f = cudaFreeAsync(ws, stream);
  return e != cudaSuccess ? e : f;
}
}  // namespace detail

template <deltac_variant Var, int K, int V, class InT, int Chunk, int BV, int Warps,
          int Stages>
size_t chunked_run_workspace(const deltac_fwd_params& p, bool det, int32_t route, int split,
                             int fuse, int scan) {
  return detail::chunked_workspace_with<InT>(
      detail::chunked_kernels<Var, K, V, InT, ChunkedConfig<Chunk, BV, Warps, Stages>>(), p, det,
      route, split, fuse, scan);
}

template <deltac_variant Var, int K, int V, class InT, int Chunk, int BV, int Warps,
          int Stages>
cudaError_t chunked_run(const deltac_fwd_params& p, cudaStream_t stream, void* workspace,
                        size_t workspace_bytes, const int32_t* skip, bool det, int32_t route,
                        int split, int fuse, int scan, float* cstates = nullptr,
                        int64_t cstates_count = 0, void* saved = nullptr) {
  static_assert(chunked_legal(Var, K, V, sizeof(InT), Chunk, BV, Warps, Stages),
                "chunked config: see chunked_rules.h");
  return detail::chunked_run_with<InT>(
      detail::chunked_kernels<Var, K, V, InT, ChunkedConfig<Chunk, BV, Warps, Stages>>(), p,
      stream, workspace, workspace_bytes, skip, det, route, split, fuse, scan, cstates,
      cstates_count, saved);
}

// cstates: the workspace of a call writing chunk-end states (chunked_knobs'
// knobs, whatever Split, Fuse and Scan say).
template <deltac_variant Var, int K, int V, class InT, int Chunk, int BV, int Warps,
          int Stages, int Split = 0, int Fuse = 0, int Scan = 0>
size_t chunked_cfg_workspace(const deltac_fwd_params& p, bool det = false, int32_t route = 0,
                             bool cstates = false) {
  const ChunkedKnobs kn = chunked_knobs(Split, Fuse, Scan, cstates);
  return chunked_run_workspace<Var, K, V, InT, Chunk, BV, Warps, Stages>(p, det, route, kn.split,
                                                                         kn.fuse, kn.scan);
}

template <deltac_variant Var, int K, int V, class InT, int Chunk, int BV, int Warps,
          int Stages, int Split = 0, int Fuse = 0, int Scan = 0>
cudaError_t chunked_cfg(const deltac_fwd_params& p, cudaStream_t stream,
                        void* workspace = nullptr, size_t workspace_bytes = 0,
                        const int32_t* skip = nullptr, bool det = false, int32_t route = 0,
                        float* cstates = nullptr, int64_t cstates_count = 0) {
  static_assert(Split == 0 || chunked_detail::one_of(Split, kChunkedSplits),
                "split: 0 (the rule) or one of kChunkedSplits");
  static_assert(Fuse == 0 || Fuse == 1, "fuse: 0 or 1");
  static_assert(chunked_detail::one_of(Scan, kChunkedScans),
                "scan: one of kChunkedScans (the values the catalogue offers)");
  return chunked_run<Var, K, V, InT, Chunk, BV, Warps, Stages>(
      p, stream, workspace, workspace_bytes, skip, det, route, Split, Fuse, Scan, cstates,
      cstates_count);
}

namespace detail {

// The precompiled chunked instance of one (K, V): the default config's
// chunk, tile_v, warps and stages, with the config's split, fuse and scan.
template <deltac_variant Var, int K, int V, class InT>
cudaError_t launch_chunked(const KernelConfig& c, const deltac_fwd_params& p,
                           cudaStream_t stream, const int32_t* skip, void* ws,
                           size_t ws_bytes, bool* found, bool det, int32_t route,
                           float* cstates = nullptr, int64_t cstates_count = 0,
                           void* saved = nullptr) {
  constexpr ChunkedChoice d = chunked_default(Var, K, V, sizeof(InT));
  *found = false;
  if constexpr (d.chunk != 0) {
    if (c.chunk == d.chunk && c.tile_v == d.bv && c.warps == d.warps && c.stages == d.stages) {
      *found = true;
      return chunked_run<Var, K, V, InT, d.chunk, d.bv, d.warps, d.stages>(
          p, stream, ws, ws_bytes, skip, det, route, c.split, c.fuse, c.scan, cstates,
          cstates_count, saved);
    }
  }
  return cudaErrorInvalidValue;
}

template <deltac_variant Var, int K, int V, class InT>
size_t workspace_chunked(const KernelConfig& c, const deltac_fwd_params& p, bool det,
                         int32_t route) {
  constexpr ChunkedChoice d = chunked_default(Var, K, V, sizeof(InT));
  if constexpr (d.chunk != 0) {
    if (c.chunk == d.chunk && c.tile_v == d.bv && c.warps == d.warps && c.stages == d.stages)
      return chunked_run_workspace<Var, K, V, InT, d.chunk, d.bv, d.warps, d.stages>(
          p, det, route, c.split, c.fuse, c.scan);
  }
  return 0;
}

}  // namespace detail

}  // namespace deltac::cuda

#endif  // DELTAC_CUDA_LAUNCH_CHUNKED_CUH

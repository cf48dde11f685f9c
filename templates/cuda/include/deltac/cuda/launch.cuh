// The CUDA kernel families of the catalogue (deltac/catalogue.h) with their
// knobs as template parameters, and what turns a KernelConfig into a
// template instance of one (K, V):
//
//   deltac::cuda::recurrent_cfg<Var, K, V, InT, BV, Warps>(p, stream, skip[, det])
//       family cuda_recurrent: tile_v = BV, warps = Warps
//   deltac::cuda::chunked_cfg<Var, K, V, InT, Chunk, BV, Warps, Stages, Split, Fuse,
//                             Scan>(p, stream, workspace, workspace_bytes[, skip, det])
//       family cuda_chunked: chunk, tile_v = BV, warps, stages, split, fuse,
//       scan. Split: segments per sequence (0: chunked_default_split's rule
//       on the device; 1: none; 2..16 forced where it can run); Fuse: 1 the
//       block scan's fused launch where it fits (chunked_stages), 0 three
//       launches; Scan: 0 the rule (the TMA scan where it runs and the grid
//       is one wave, else the warp scan where it runs: chunked_uses_warp_scan;
//       it reads Split, not Fuse), 1 the block scan (reads BV, Warps, Stages,
//       Split, Fuse), 3 the TMA scan where it runs (reads none; sm_90a,
//       chunked_tma_runs), else as 0. All three are
//       run-time values of the kernel: chunked_run<..., Stages>(..., split,
//       fuse, scan) takes them as arguments. With no workspace it takes
//       one from the stream-ordered allocator (cudaMallocAsync /
//       cudaFreeAsync on `stream`: no host sync, graph-capturable);
//       chunked_cfg_workspace<...>(p[, det]) is the size to pass.
//   deltac::cuda::detail::launch_chunked<Var, K, V, InT> / workspace_chunked
//   deltac::cuda::detail::launch_recurrent<Var, K, V, InT, BV, SD>
//       config -> the runtime's precompiled instance of one (K, V) (chunked:
//       the default config's chunk, tile_v, warps, stages, any split,
//       fuse and scan; recurrent: tile_v BV, the default warps, state
//       dtype SD); the runtime compiles each in its own translation unit,
//       one per entry of DELTAC_CUDA_CHUNKED_DIMS / DELTAC_CUDA_RECURRENT_DIMS
//       (and dtype, tile_v, state dtype), and switches on them in
//       runtime/src/cuda_dispatch.h
//
// p holds device pointers and passed deltac::check_params (cu_seqlens'
// contents are trusted); the config passed deltac::check_config. `skip`, when
// not null, is a device int32: the kernel reads it first and returns without
// writing anything when it is nonzero (set by a device-side check enqueued
// before, so a failed check never needs a host round trip). The chunked
// family's scan reads it (its intra-chunk kernel writes only the workspace).
//
// det (deltac_options.deterministic, batch-invariant): every choice that
// changes the arithmetic depends on the config and the spec only, never on
// the grid (sequences x heads): the chunked family runs the config's V tile
// (BV; the warp scan its widest legal one), no sequence split and no fused
// launch (split, fuse ignored); the recurrent family one kernel
// form for every call (the several-token form also for T = 1 calls, where it
// would otherwise run the packed one-token form). Each sequence's blocks then
// compute the same operations in the same order wherever it sits in a batch.
//
// route (mixed batches: prompts and decode steps in one varlen call; 0: off):
// the cuda_chunked instance runs only the sequences of more than route
// tokens (no split then), the cuda_recurrent one only those of at most route
// tokens; each reads cu_seqlens on the device and writes no o or ht of the
// other's sequences. The runtime launches both with route =
// kCudaAutoRecurrentMaxTokens on one stream.
#ifndef DELTAC_CUDA_LAUNCH_CUH
#define DELTAC_CUDA_LAUNCH_CUH

#include "deltac/catalogue.h"
#include "deltac/cuda/chunked.cuh"
#include "deltac/cuda/recurrent.cuh"

#include <cuda_fp16.h>

namespace deltac::cuda {

template <deltac_variant Var, int K, int V, class InT, int BV, int Warps, int StateOnly = -1>
cudaError_t recurrent_cfg(const deltac_fwd_params& p, cudaStream_t stream,
                          const int32_t* skip = nullptr, bool det = false, int32_t route = 0) {
  // Some kernel exists for the knobs (the catalogue's check_config says for
  // which calls: cuda_recurrent_knobs_ok).
  static_assert(cuda_recurrent_knobs_ok(K, BV, Warps, 2, true), "knobs: see the catalogue");
  return detail::recurrent_knobs<Var, K, V, InT, BV, Warps, StateOnly>(
      p, stream, skip, detail::Form::Auto, true, det, route);
}

// cuda_chunked with split, fuse and scan at run time (the values chunked_cfg's
// Split, Fuse and Scan take), for the kernels k (a precompiled config's,
// detail::chunked_kernels, or the runtime's NVRTC ones). Batch-invariant
// (det): k's widest tile (the warp scan's widest), no split, no fused
// launch; routed: no split, no fused launch. chunked_run_workspace takes
// chunked_run's arguments in its order and sizes what that call carves.
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
  return chunked_carve<InT>(k, p, nullptr, nullptr,
                            chunked_run_plan(k, p, force_bv, split, scan, &warp).split);
}

template <class InT>
cudaError_t chunked_run_with(const ChunkedKernels& k, const deltac_fwd_params& p,
                        cudaStream_t stream, void* workspace, size_t workspace_bytes,
                        const int32_t* skip, bool det, int32_t route, int split, int fuse,
                        int scan) {
  const int force_bv = det ? k.bv0 : 0;
  if (det || route)
    split = 1, fuse = 0;
  if (workspace)
    return chunked_run_stages<InT>(k, p, workspace, workspace_bytes, stream, 3, skip, force_bv,
                                   split, fuse, route, scan);
  const size_t need = chunked_workspace_with<InT>(k, p, det, route, split, fuse, scan);
  void* ws = nullptr;
  cudaError_t e = cudaMallocAsync(&ws, need ? need : 256, stream);
  if (e != cudaSuccess)
    return e;
  e = chunked_run_stages<InT>(k, p, ws, need, stream, 3, skip, force_bv, split, fuse, route,
                              scan);
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
                        int split, int fuse, int scan) {
  static_assert(chunked_legal(Var, K, V, sizeof(InT), Chunk, BV, Warps, Stages),
                "chunked config: see chunked_rules.h");
  return detail::chunked_run_with<InT>(
      detail::chunked_kernels<Var, K, V, InT, ChunkedConfig<Chunk, BV, Warps, Stages>>(), p,
      stream, workspace, workspace_bytes, skip, det, route, split, fuse, scan);
}

template <deltac_variant Var, int K, int V, class InT, int Chunk, int BV, int Warps,
          int Stages, int Split = 0, int Fuse = 0, int Scan = 0>
size_t chunked_cfg_workspace(const deltac_fwd_params& p, bool det = false, int32_t route = 0) {
  return chunked_run_workspace<Var, K, V, InT, Chunk, BV, Warps, Stages>(p, det, route, Split,
                                                                         Fuse, Scan);
}

template <deltac_variant Var, int K, int V, class InT, int Chunk, int BV, int Warps,
          int Stages, int Split = 0, int Fuse = 0, int Scan = 0>
cudaError_t chunked_cfg(const deltac_fwd_params& p, cudaStream_t stream,
                        void* workspace = nullptr, size_t workspace_bytes = 0,
                        const int32_t* skip = nullptr, bool det = false, int32_t route = 0) {
  static_assert(Split == 0 || Split == 1 || Split == 2 || Split == 4 || Split == 8 ||
                    Split == 16,
                "split: 0 (the rule) or one of kChunkedSplits");
  static_assert(Fuse == 0 || Fuse == 1, "fuse: 0 or 1");
  static_assert(Scan == 0 || Scan == 1 || Scan == 3,
                "scan: 0 (the rule), 1 (the block scan) or 3 (the TMA scan)");
  return chunked_run<Var, K, V, InT, Chunk, BV, Warps, Stages>(p, stream, workspace,
                                                               workspace_bytes, skip, det, route,
                                                               Split, Fuse, Scan);
}

namespace detail {

// The precompiled chunked instance of one (K, V): the default config's
// chunk, tile_v, warps and stages, with the config's split, fuse and scan.
template <deltac_variant Var, int K, int V, class InT>
cudaError_t launch_chunked(const KernelConfig& c, const deltac_fwd_params& p,
                           cudaStream_t stream, const int32_t* skip, void* ws,
                           size_t ws_bytes, bool* found, bool det, int32_t route) {
  constexpr ChunkedChoice d = chunked_default(Var, K, V, sizeof(InT));
  *found = false;
  if constexpr (d.chunk != 0) {
    if (c.chunk == d.chunk && c.tile_v == d.bv && c.warps == d.warps && c.stages == d.stages) {
      *found = true;
      return chunked_run<Var, K, V, InT, d.chunk, d.bv, d.warps, d.stages>(
          p, stream, ws, ws_bytes, skip, det, route, c.split, c.fuse, c.scan);
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

// The precompiled recurrent instance of one (K, V, tile_v = BV, state dtype
// SD): the catalogue's default warps.
template <deltac_variant Var, int K, int V, class InT, int BV, int SD>
cudaError_t launch_recurrent(const KernelConfig& c, const deltac_fwd_params& p,
                             cudaStream_t stream, const int32_t* skip, bool* found, bool det,
                             int32_t route) {
  constexpr int W = cuda_recurrent_default_warps(K, BV);
  *found = c.tile_v == BV && c.warps == W && p.state_dtype == SD;
  if (!*found)
    return cudaErrorInvalidValue;
  return recurrent_cfg<Var, K, V, InT, BV, W, SD>(p, stream, skip, det, route);
}

}  // namespace detail

}  // namespace deltac::cuda

#endif  // DELTAC_CUDA_LAUNCH_CUH

// deltac::cuda::chunked: the chunked (WY / UT) delta-rule forward pass on a
// CUDA stream (prefill), on tensor cores (mma.sync: sm_80, sm_90a, sm_120).
//
//   template <deltac_variant Var, int K, int V, class InT,
//             class Cfg = DefaultChunkedConfig<Var, K, V, InT>>
//   size_t chunked_workspace_bytes(const deltac_fwd_params& p);
//   template <deltac_variant Var, int K, int V, class InT,
//             class Cfg = DefaultChunkedConfig<Var, K, V, InT>>
//   cudaError_t chunked(const deltac_fwd_params& p, void* workspace,
//                       size_t workspace_bytes, cudaStream_t stream);
//
// p holds device pointers (cu_seqlens too: the chunk index is built on the
// device). InT (float, __nv_bfloat16 or __half) is the dtype of q, k, v and
// o; g, beta and the state are f32, the state in either layout; h0 and ht may
// be null and may be the same buffer. The caller passes a device workspace of
// at least chunked_workspace_bytes(p) bytes, 256-byte aligned. Nothing is
// allocated, the host never waits, and the call can be captured in a CUDA
// graph. Returns cudaErrorInvalidValue when p does not match the
// instantiation (variant, K, V, dtypes), a pointer is null or misaligned
// (q, k, v, o, h0, ht: 16 bytes; workspace: 256 bytes), the workspace is
// too small, or p asks for a state pool, state_steps or accepted (recurrent
// kernels only); nothing is launched then. cu_seqlens must be valid (the runtime
// checks it); a bad one cannot make the kernels access memory out of bounds,
// it only gives wrong outputs.
//
// Three launches: the varlen chunk index (cu_seqlens only; one block), the
// intra-chunk kernel (one block per chunk and value head:
// chunked_prep.cuh; writes T, Aqk and row factors, about 17 KB per chunk and
// head at C = 64) and the scan (one block per V tile, value head and
// sequence: chunked_scan.cuh; reads q, k, v again). With the sequence split
// (when value heads x sequences leave the GPU idle; chunked_plan), the scan
// runs S segments of each sequence in parallel and two more launches
// compose them (chunked_split.cuh). On request (chunked_stages' fuse, not
// the default: slower today), where the scan's grid is one wave, the
// intra-chunk work and the scan run as one launch instead (a memset of its
// flags, then chunked_fused.cuh). Where asked for (chunked_stages' scan:
// cuda_chunked's knob, by default wherever it runs), the scan runs as a
// barrier-free chain per warp instead (chunked_scan_warp.cuh: 16-bit inputs,
// K = 64, 128 or 256, no split). Config knobs: chunked_traits.cuh.
#ifndef DELTAC_CUDA_CHUNKED_CUH
#define DELTAC_CUDA_CHUNKED_CUH

#include "deltac/cuda/chunked_fused.cuh"
#include "deltac/cuda/chunked_mma.cuh"
#include "deltac/cuda/chunked_prep.cuh"
#include "deltac/cuda/chunked_scan.cuh"
#include "deltac/cuda/chunked_scan_warp.cuh"
#include "deltac/cuda/chunked_split.cuh"
#include "deltac/cuda/chunked_traits.cuh"
#include "deltac/params.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <type_traits>

namespace deltac::cuda {
namespace detail {

template <class InT>
constexpr int32_t chunked_dtype() {
  return std::is_same_v<InT, float> ? DELTAC_F32
         : std::is_same_v<InT, __half> ? DELTAC_F16
                                       : DELTAC_BF16;
}

inline bool chunked_aligned(const void* ptr, uintptr_t bytes) {
  return reinterpret_cast<uintptr_t>(ptr) % bytes == 0;
}

template <deltac_variant Var, int K, int V, class InT>
bool chunked_matches(const deltac_fwd_params& p) {
  if (p.variant != Var || p.K != K || p.V != V)
    return false;
  if (p.in_dtype != chunked_dtype<InT>() || p.out_dtype != chunked_dtype<InT>() ||
      p.state_dtype != DELTAC_F32)
    return false;
  if (p.state_layout != DELTAC_STATE_KV && p.state_layout != DELTAC_STATE_VK)
    return false;
  if (p.H <= 0 || p.HV <= 0 || p.HV % p.H != 0 || p.HV > 65535 || p.N < 0 || p.T < 0 ||
      p.B < 0)
    return false;
  if (p.N > 65535)
    return false;
  if (!p.q || !p.k || !p.v || !p.beta || !p.o)
    return false;
  if (Var != DELTAC_VARIANT_DELTA && !p.g)
    return false;
  if (p.read_slots || p.write_slots || p.state_steps || p.accepted)
    return false;  // state pools and per-token states: the recurrent kernels
  if (p.cu_seqlens ? p.B != 1 : p.N != p.B)
    return false;
  for (const void* ptr : {p.q, p.k, p.v, static_cast<const void*>(p.o), p.h0,
                          static_cast<const void*>(p.ht)})
    if (!chunked_aligned(ptr, 16))
      return false;
  if (!chunked_aligned(p.beta, 4) ||
      !chunked_aligned(p.g, Var == DELTAC_VARIANT_KDA ? 16 : 4) ||
      !chunked_aligned(p.cu_seqlens, 8))
    return false;
  return true;
}

// Per-device facts the launches need, read once per device (the host
// calls cost time on every launch otherwise): multiprocessors, the opt-in
// shared memory per block. Devices 0..63; others are asked every time.
struct ChunkedDevice {
  int dev, sms, smem;
};
inline cudaError_t chunked_device(ChunkedDevice& d) {
  static std::atomic<int> sms_cache[64], smem_cache[64];  // 0: not read yet
  d = {0, 0, 0};
  cudaError_t e = cudaGetDevice(&d.dev);
  if (e != cudaSuccess)
    return e;
  const bool cached = d.dev >= 0 && d.dev < 64;
  if (cached) {
    d.sms = sms_cache[d.dev].load(std::memory_order_relaxed);
    d.smem = smem_cache[d.dev].load(std::memory_order_relaxed);
    if (d.sms > 0 && d.smem > 0)
      return cudaSuccess;
  }
  if ((e = cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, d.dev)) !=
          cudaSuccess ||
      (e = cudaDeviceGetAttribute(&d.smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, d.dev)) !=
          cudaSuccess) {
    d.sms = d.smem = 0;
    return e;
  }
  if (cached) {
    sms_cache[d.dev].store(d.sms, std::memory_order_relaxed);
    smem_cache[d.dev].store(d.smem, std::memory_order_relaxed);
  }
  return cudaSuccess;
}

// cudaFuncSetAttribute(Kern, max dynamic shared memory, bytes), once per
// device and kernel (Kern's own cache; the attribute is per device).
template <auto Kern>
cudaError_t chunked_smem_attr(int dev, int bytes) {
  static std::atomic<unsigned long long> done{0};
  const unsigned long long bit = dev >= 0 && dev < 64 ? 1ull << dev : 0;
  if (bit && (done.load(std::memory_order_acquire) & bit))
    return cudaSuccess;
  const cudaError_t e =
      cudaFuncSetAttribute(Kern, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (e == cudaSuccess && bit)
    done.fetch_or(bit, std::memory_order_acq_rel);
  return e;
}

// Blocks of Kern (threads, bytes of dynamic shared memory) one
// multiprocessor holds, once per device (sets the shared-memory attribute).
template <auto Kern>
cudaError_t chunked_occupancy(int dev, int threads, int bytes, int& blocks) {
  static std::atomic<int> cache[64];  // blocks + 1; 0: not read yet
  blocks = 0;
  const bool cached = dev >= 0 && dev < 64;
  if (cached && cache[dev].load(std::memory_order_relaxed) > 0) {
    blocks = cache[dev].load(std::memory_order_relaxed) - 1;
    return cudaSuccess;
  }
  cudaError_t e = chunked_smem_attr<Kern>(dev, bytes);
  if (e == cudaSuccess)
    e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, Kern, threads, size_t(bytes));
  if (e != cudaSuccess) {
    blocks = 0;
    return e;
  }
  if (cached)
    cache[dev].store(blocks + 1, std::memory_order_relaxed);
  return cudaSuccess;
}

// Chunk slots to allocate: every chunk of every sequence fits.
template <int C>
int64_t chunked_max_chunks(const deltac_fwd_params& p) {
  if (p.cu_seqlens)
    return (int64_t(p.B) * p.T + int64_t(p.N) * (C - 1)) / C;
  return int64_t(p.N) * ((int64_t(p.T) + C - 1) / C);
}

inline size_t chunked_round(size_t x) { return (x + 255) / 256 * 256; }

// Workspace carve-up for `split` segments per sequence; returns the bytes
// used (ws may be null to measure).
template <class Tr>
size_t chunked_carve(const deltac_fwd_params& p, void* base, ChunkedWs<typename Tr::Ts>* ws,
                     int split) {
  using Ts = typename Tr::Ts;
  const int64_t slots = chunked_max_chunks<Tr::C>(p) * p.HV;
  char* b = static_cast<char*>(base);
  size_t off = 0;
  auto take = [&](size_t bytes) {
    char* ptr = b ? b + off : nullptr;
    off += chunked_round(bytes);
    return ptr;
  };
  ChunkedWs<Ts> w{};
  w.offsets = reinterpret_cast<int32_t*>(take(size_t(p.N + 1) * 4));
  // The fused kernel's tickets and ready flags, one region (zeroed per call).
  // (ready stays null: the scan waits on it only in the fused launch).
  w.tickets = reinterpret_cast<unsigned long long*>(take(16 + size_t(slots) * 4));
  w.ready = nullptr;
  w.t = reinterpret_cast<Ts*>(take(size_t(slots) * Tr::C * Tr::C * sizeof(Ts)));
  w.aqk = reinterpret_cast<Ts*>(take(size_t(slots) * Tr::C * Tr::C * sizeof(Ts)));
  w.f = reinterpret_cast<float*>(take(size_t(slots) * 4 * Tr::C * 4));
  w.gamma = reinterpret_cast<float*>(take(size_t(slots) * Tr::K * 4));
  if (Tr::kKda) {
    w.qg = reinterpret_cast<Ts*>(take(size_t(slots) * Tr::C * Tr::K * sizeof(Ts)));
    w.kg = reinterpret_cast<Ts*>(take(size_t(slots) * Tr::C * Tr::K * sizeof(Ts)));
    w.kd = reinterpret_cast<Ts*>(take(size_t(slots) * Tr::C * Tr::K * sizeof(Ts)));
  }
  w.split = split;
  if (split > 1) {
    const size_t segs = size_t(p.N) * split * p.HV;
    w.qt = reinterpret_cast<Ts*>(take(size_t(p.B) * p.T * p.HV * Tr::K * sizeof(Ts)));
    w.cst = reinterpret_cast<float*>(take(segs * Tr::K * Tr::V * 4));
    w.pst = reinterpret_cast<float*>(take(segs * Tr::K * Tr::K * 4));
  }
  w.max_chunks = chunked_max_chunks<Tr::C>(p);
  if (ws)
    *ws = w;
  return off;
}

// The scan with V tiles of BVe columns (a legal width for Cfg's other knobs).
template <deltac_variant Var, int K, int V, class InT, class Cfg, int BVe>
cudaError_t chunked_scan_launch(const deltac_fwd_params& p, const ChunkedWs<InT>& ws,
                                cudaStream_t stream) {
  using Tr = ChunkedTraits<Var, K, V, InT,
                           ChunkedConfig<Cfg::kChunk, BVe, Cfg::kWarps, Cfg::kStages>>;
  auto scan = chunked_scan_kernel<Var, Tr>;
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e == cudaSuccess)
    e = chunked_smem_attr<chunked_scan_kernel<Var, Tr>>(dev, int(Tr::kScanSmem));
  if (e != cudaSuccess)
    return e;
  // Split: K / BVe more V tiles (identity columns), split segments a sequence.
  const unsigned tiles = V / BVe + (ws.split > 1 ? K / BVe : 0);
  scan<<<dim3(tiles, unsigned(p.HV), unsigned(p.N) * unsigned(ws.split)), Tr::kThreads,
         Tr::kScanSmem, stream>>>(p, ws);
  return cudaGetLastError();
}

// The fused launch (chunked_fused.cuh) with V tiles of BVe columns, where it
// fits: Cfg's chunk and warps with one stage are fusable, two blocks fit on
// a multiprocessor and the scan's grid is at most one block per
// multiprocessor. `done` says whether it launched (else nothing was).
template <deltac_variant Var, int K, int V, class InT, class Cfg, int BVe>
cudaError_t chunked_fused_launch(const deltac_fwd_params& p, const ChunkedWs<InT>& ws,
                                 float scale, cudaStream_t stream, bool& done) {
  done = false;
  if constexpr (chunked_legal(Var, K, V, sizeof(InT), Cfg::kChunk, BVe, Cfg::kWarps, 1)) {
    using Tp = ChunkedTraits<Var, K, V, InT, Cfg>;
    using Ts1 = ChunkedTraits<Var, K, V, InT, ChunkedConfig<Cfg::kChunk, BVe, Cfg::kWarps, 1>>;
    if constexpr (chunked_fusable<Ts1>()) {
      constexpr int kSmem = int(Tp::kPrepSmem > Ts1::kScanSmem ? Tp::kPrepSmem : Ts1::kScanSmem);
      ChunkedDevice d;
      cudaError_t e = chunked_device(d);
      if (e != cudaSuccess)
        return e;
      const int64_t nscan = int64_t(V / BVe) * p.HV * p.N;
      if (size_t(kSmem) > size_t(d.smem) || nscan > d.sms)
        return cudaSuccess;
      int occ = 0;
      if ((e = chunked_occupancy<chunked_fused_kernel<Var, Tp, Ts1>>(d.dev, Ts1::kThreads, kSmem,
                                                                     occ)) != cudaSuccess)
        return e;
      if (occ < 2)
        return cudaSuccess;
      const int64_t items = ws.max_chunks * p.HV;
      const int64_t workers = std::max<int64_t>(1, std::min<int64_t>(items, int64_t(occ) * d.sms - nscan));
      const size_t flags = 16 + size_t(items) * 4;
      if ((e = cudaMemsetAsync(ws.tickets, 0, flags, stream)) != cudaSuccess)
        return e;
      ChunkedWs<InT> wf = ws;
      wf.ready = reinterpret_cast<int32_t*>(ws.tickets + 2);
      chunked_fused_kernel<Var, Tp, Ts1><<<unsigned(workers + nscan), Ts1::kThreads, kSmem,
                                           stream>>>(p, wf, scale, int(workers));
      done = true;
      return cudaGetLastError();
    }
  }
  return cudaSuccess;
}

// Whether the scan can run Cfg with V tiles of bv columns instead of Cfg's.
template <deltac_variant Var, int K, int V, class InT, class Cfg>
constexpr bool chunked_bv_ok(int bv) {
  return bv >= 16 && V % bv == 0 &&
         chunked_legal(Var, K, V, sizeof(InT), Cfg::kChunk, bv, Cfg::kWarps, Cfg::kStages);
}

// The V tile the scan runs: Cfg's BV (the widest), halved (once or twice,
// where legal) while the grid would leave more than 1/8 of the
// multiprocessors idle. force_bv: that width if legal (tests), 0: choose.
template <deltac_variant Var, int K, int V, class InT, class Cfg>
int chunked_pick_bv(const deltac_fwd_params& p, int force_bv) {
  constexpr int B0 = Cfg::kBV;
  constexpr bool ok1 = chunked_bv_ok<Var, K, V, InT, Cfg>(B0 / 2);
  constexpr bool ok2 = ok1 && chunked_bv_ok<Var, K, V, InT, Cfg>(B0 / 4);
  if (force_bv)
    return force_bv == B0 || (force_bv == B0 / 2 && ok1) || (force_bv == B0 / 4 && ok2)
               ? force_bv
               : 0;
  ChunkedDevice d;
  const int sms = chunked_device(d) == cudaSuccess ? d.sms : 0;
  auto shrt = [&](int bv) { return chunked_grid_short(int64_t(V / bv) * p.HV * p.N, sms); };
  int bv = B0;
  if (ok1 && shrt(bv))
    bv = B0 / 2;
  if (ok2 && bv == B0 / 2 && shrt(bv))
    bv = B0 / 4;
  return bv;
}

// The warp scan's V tile for p with Cfg's chunk (chunked_scan_warp.cuh; with
// output warps: split_o), 0 where it cannot run on this device: force_bv
// where legal, else the widest of kChunkedWarpBVs that divides V, halved
// while the grid would leave more than 1/8 of the multiprocessors idle; det
// (batch-invariant): the widest legal one whatever the grid.
template <deltac_variant Var, int K, int V, class InT, class Cfg>
int chunked_warp_bv(const deltac_fwd_params& p, int force_bv, bool split_o, bool det) {
  ChunkedDevice d;
  if (chunked_device(d) != cudaSuccess)
    return 0;
  auto ok = [&](int bv) {
    return chunked_warp_ok(Var, K, V, int(sizeof(InT)), Cfg::kChunk, bv, size_t(d.smem),
                           split_o);
  };
  if (force_bv && ok(force_bv))
    return force_bv;
  int bv = 0;
  for (int w : {kChunkedWarpBVs[0], kChunkedWarpBVs[1]})
    if (ok(w) && (bv == 0 || (!det && chunked_grid_short(int64_t(V / bv) * p.HV * p.N, d.sms))))
      bv = w;
  return bv;
}

// The warp scan with V tiles of BV columns (nothing launched where it
// cannot run: cudaErrorInvalidValue).
template <deltac_variant Var, int K, int V, class InT, int C, int BV, bool SplitO>
cudaError_t chunked_warp_launch(const deltac_fwd_params& p, const ChunkedWs<InT>& ws,
                                cudaStream_t stream) {
  if constexpr (chunked_warp_ok(Var, K, V, int(sizeof(InT)), C, BV, kChunkedSmemSm90, SplitO)) {
    using Tw = WarpScanTraits<Var, K, V, InT, C, BV, SplitO>;
    int dev = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess)
      e = chunked_smem_attr<chunked_scan_warp_kernel<Var, Tw>>(dev, int(Tw::kSmem));
    if (e != cudaSuccess)
      return e;
    chunked_scan_warp_kernel<Var, Tw><<<dim3(V / BV, unsigned(p.HV), unsigned(p.N)),
                                        Tw::kThreads, Tw::kSmem, stream>>>(p, ws);
    return cudaGetLastError();
  }
  return cudaErrorInvalidValue;
}

struct ChunkedPlan {
  int bv, split;  // the scan's V tile, segments per sequence (1: no split)
};

// The V tile and the sequence split. force_split: that many segments (1: no
// split) where the split can run (a V tile that divides K too, sequences x
// segments <= 65535), else none; 0: the rule of chunked_default_split
// (chunked_rules.h) on this device's multiprocessors.
template <deltac_variant Var, int K, int V, class InT, class Cfg>
ChunkedPlan chunked_plan(const deltac_fwd_params& p, int force_bv, int force_split) {
  using Tr = ChunkedTraits<Var, K, V, InT, Cfg>;
  ChunkedPlan pl{chunked_pick_bv<Var, K, V, InT, Cfg>(p, force_bv), 1};
  if (pl.bv == 0 || force_split == 1 || p.N <= 0)
    return pl;
  constexpr int B0 = Cfg::kBV;
  int sbv = 0;  // the split's V tile: the widest legal one that divides K too
  for (int b : {B0, B0 / 2, B0 / 4})
    if (!sbv && K % b == 0 && chunked_bv_ok<Var, K, V, InT, Cfg>(b) && (!force_bv || b == force_bv))
      sbv = b;
  ChunkedDevice d;
  if (chunked_device(d) != cudaSuccess)
    d.sms = d.smem = 0;
  const int sms = d.sms, smem = d.smem;
  if (sbv == 0 || size_t(smem) < chunked_fix_smem<Tr, chunked_fix_cols<V>()>())
    return pl;
  int split = force_split;
  if (split == 0) {
    const int64_t max_chunks = (int64_t(p.T) + Tr::C - 1) / Tr::C;  // varlen: T bounds each
    split = chunked_default_split(K, V, int64_t(p.HV) * p.N, max_chunks, pl.bv, sbv, sms);
  }
  if (split > 1 && int64_t(p.N) * split <= 65535)
    pl = {sbv, split};
  return pl;
}

// chunked() with a choice of launches, for benchmarks that time the stages
// apart: bit 0 the chunk index and the intra-chunk kernel, bit 1 the scan
// (which reads the workspace an earlier call wrote) and, with the split,
// the fold and the fix-up; bit 2 (value 4) the fold and the fix-up alone. skip: a device flag or
// null; when it is nonzero the scan writes nothing (o and ht untouched).
// force_bv: the scan's V tile (tests; 0: chunked_pick_bv chooses);
// force_split: segments per sequence (0: the rule; chunked_plan).
// fuse: 1 the intra-chunk work and the scan in one launch where that fits
// (chunked_fused_launch; stages 3, no split, no forced V tile, varlen with
// one sequence); 0 (the default) never: it measured slower (H200, GDN 16/32
// heads 1x32768: 2.49 vs 2.01 ms; docs/performance.md, version 9).
// route > 0 (mixed batches, varlen only): this call runs only the sequences
// of more than route tokens and writes nothing of the others (the recurrent
// kernel's, launched with the same route); no split, no fused launch then.
// scan: 0 the rule (chunked_uses_warp_scan): the scan as a chain per warp
// (chunked_scan_warp.cuh) where it runs (16-bit inputs, K = 64, 128 or 256, chunk
// 32 or 64) and neither a split (force_split > 1) nor the fused launch is
// asked for, else the block scan; 1 the block scan; 2 the warp scan with
// output warps beside the chain warps where it runs (compiled only where
// DELTAC_CHUNKED_WARP_OUTPUT is nonzero: tests, benchmarks; not measured
// faster). The warp scan runs no split and no fused launch, and falls back
// to the block scan (no split) where this device's shared memory is too
// small for it; a forced V tile (force_bv: tests, batch-invariant calls)
// that it cannot take makes it run its widest legal one, whatever the grid.
template <deltac_variant Var, int K, int V, class InT, class Cfg>
cudaError_t chunked_stages(const deltac_fwd_params& p, void* workspace, size_t workspace_bytes,
                           cudaStream_t stream, int stages, const int32_t* skip = nullptr,
                           int force_bv = 0, int force_split = 0, int fuse = 0,
                           int32_t route = 0, int scan = 0) {
  using Tr = detail::ChunkedTraits<Var, K, V, InT, Cfg>;
  using Ts = typename Tr::Ts;
  if (!detail::chunked_matches<Var, K, V, InT>(p))
    return cudaErrorInvalidValue;
  if (p.N == 0)
    return cudaSuccess;
  if (route < 0 || (route > 0 && !p.cu_seqlens))
    return cudaErrorInvalidValue;
  if (route > 0)
    force_split = 1, fuse = 0;
  constexpr bool kWarpRuns = chunked_warp_runs(Var, K, V, int(sizeof(InT)), Cfg::kChunk);
  const bool warp =
      kWarpRuns && (scan == 2 || chunked_uses_warp_scan(Var, K, V, int(sizeof(InT)),
                                                         Cfg::kChunk, scan, force_split, fuse));
  if (warp)
    force_split = 1, fuse = 0;
  const ChunkedPlan pl = chunked_plan<Var, K, V, InT, Cfg>(p, force_bv, force_split);
  const int bv = pl.bv;
  if (bv == 0)
    return cudaErrorInvalidValue;
  const size_t need = detail::chunked_carve<Tr>(p, nullptr, nullptr, pl.split);
  if (!workspace || workspace_bytes < need || !detail::chunked_aligned(workspace, 256))
    return cudaErrorInvalidValue;
  detail::ChunkedWs<Ts> ws;
  detail::chunked_carve<Tr>(p, workspace, &ws, pl.split);
  ws.skip = skip;
  ws.route = route;
  if (ws.max_chunks > 0x7fffffff)
    return cudaErrorInvalidValue;
  const float scale = p.scale != 0.f ? p.scale : 1.f / std::sqrt(float(K));

  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess)
    return e;
  if (p.cu_seqlens && (stages & 1)) {
    detail::chunked_index_kernel<Tr::C><<<1, 1024, 0, stream>>>(p, ws.offsets, ws.max_chunks,
                                                                 route);
    if ((e = cudaGetLastError()) != cudaSuccess)
      return e;
  }
  constexpr int B0 = Cfg::kBV;
  if (fuse == 1 && stages == 3 && pl.split == 1 && force_bv == 0 &&
      (!p.cu_seqlens || p.N == 1) && ws.max_chunks > 0) {
    bool done = false;
    if (bv == B0)
      e = chunked_fused_launch<Var, K, V, InT, Cfg, B0>(p, ws, scale, stream, done);
    if constexpr (B0 / 2 >= 16)
      if (bv == B0 / 2)
        e = chunked_fused_launch<Var, K, V, InT, Cfg, B0 / 2>(p, ws, scale, stream, done);
    if constexpr (B0 / 4 >= 16)
      if (bv == B0 / 4)
        e = chunked_fused_launch<Var, K, V, InT, Cfg, B0 / 4>(p, ws, scale, stream, done);
    if (e != cudaSuccess || done)
      return e;
  }
  auto prep = detail::chunked_prep_kernel<Var, Tr>;
  if ((e = chunked_smem_attr<detail::chunked_prep_kernel<Var, Tr>>(dev, int(Tr::kPrepSmem))) !=
      cudaSuccess)
    return e;
  if (ws.max_chunks > 0 && (stages & 1)) {
    prep<<<dim3(unsigned(ws.max_chunks), unsigned(p.HV)), Tr::kPrepThreads, Tr::kPrepSmem,
           stream>>>(p, ws, scale);
    if ((e = cudaGetLastError()) != cudaSuccess)
      return e;
  }
  if (!(stages & 6))
    return cudaSuccess;
  if constexpr (kWarpRuns) {
    const bool so = scan == 2 && DELTAC_CHUNKED_WARP_OUTPUT;
    const int wbv = warp ? chunked_warp_bv<Var, K, V, InT, Cfg>(p, force_bv, so, force_bv != 0)
                         : 0;
    if (wbv) {
      if (!(stages & 2))
        return cudaSuccess;
      constexpr int W0 = kChunkedWarpBVs[0], W1 = kChunkedWarpBVs[1], C = Cfg::kChunk;
#if DELTAC_CHUNKED_WARP_OUTPUT
      if (so)
        return wbv == W0 ? chunked_warp_launch<Var, K, V, InT, C, W0, true>(p, ws, stream)
                         : chunked_warp_launch<Var, K, V, InT, C, W1, true>(p, ws, stream);
#endif
      return wbv == W0 ? chunked_warp_launch<Var, K, V, InT, C, W0, false>(p, ws, stream)
                       : chunked_warp_launch<Var, K, V, InT, C, W1, false>(p, ws, stream);
    }
  }
  e = (stages & 2) ? cudaErrorInvalidValue : cudaSuccess;
  if constexpr (chunked_bv_ok<Var, K, V, InT, Cfg>(B0 / 4))
    if (bv == B0 / 4 && (stages & 2))
      e = chunked_scan_launch<Var, K, V, InT, Cfg, B0 / 4>(p, ws, stream);
  if constexpr (chunked_bv_ok<Var, K, V, InT, Cfg>(B0 / 2))
    if (bv == B0 / 2 && (stages & 2))
      e = chunked_scan_launch<Var, K, V, InT, Cfg, B0 / 2>(p, ws, stream);
  if (bv == B0 && (stages & 2))
    e = chunked_scan_launch<Var, K, V, InT, Cfg, B0>(p, ws, stream);
  if (e != cudaSuccess || pl.split == 1)
    return e;
  // The split: fold the segments' states (and write ht), then correct the
  // later segments' outputs.
  chunked_fold_kernel<K, V, Tr::C><<<dim3(V / 16, unsigned(p.HV), unsigned(p.N)), 256, 0,
                                     stream>>>(p, ws.offsets, ws.max_chunks, pl.split, ws.pst,
                                               ws.cst, skip);
  if ((e = cudaGetLastError()) != cudaSuccess || ws.max_chunks == 0)
    return e;
  constexpr int CV = chunked_fix_cols<V>();
  constexpr size_t kFixSmem = chunked_fix_smem<Tr, CV>();
  auto fix = chunked_fix_kernel<Tr, CV>;
  if ((e = chunked_smem_attr<chunked_fix_kernel<Tr, CV>>(dev, int(kFixSmem))) != cudaSuccess)
    return e;
  fix<<<dim3(unsigned(ws.max_chunks), unsigned(p.HV), V / CV), Tr::C / 16 * 32, kFixSmem,
        stream>>>(p, ws);
  return cudaGetLastError();
}

}  // namespace detail

// Workspace bytes for p (with the sequence split the call will choose on this
// device; force_split as in chunked_stages).
template <deltac_variant Var, int K, int V, class InT,
          class Cfg = DefaultChunkedConfig<Var, K, V, InT>>
size_t chunked_workspace_bytes(const deltac_fwd_params& p, int force_split = 0) {
  using Tr = detail::ChunkedTraits<Var, K, V, InT, Cfg>;
  if (p.N < 0 || p.T < 0 || p.B < 0 || p.HV <= 0)
    return 0;
  const int split = detail::chunked_plan<Var, K, V, InT, Cfg>(p, 0, force_split).split;
  return detail::chunked_carve<Tr>(p, nullptr, nullptr, split);
}

// skip: see chunked_stages.
template <deltac_variant Var, int K, int V, class InT,
          class Cfg = DefaultChunkedConfig<Var, K, V, InT>>
cudaError_t chunked(const deltac_fwd_params& p, void* workspace, size_t workspace_bytes,
                    cudaStream_t stream, const int32_t* skip = nullptr) {
  return detail::chunked_stages<Var, K, V, InT, Cfg>(p, workspace, workspace_bytes, stream, 3,
                                                     skip);
}

}  // namespace deltac::cuda

#endif  // DELTAC_CUDA_CHUNKED_CUH

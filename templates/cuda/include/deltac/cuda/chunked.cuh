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
// K = 64, 128 or 256; its own split rule, chunked_warp_plan, with the same
// fold and fix-up). Config knobs: chunked_traits.cuh.
#ifndef DELTAC_CUDA_CHUNKED_CUH
#define DELTAC_CUDA_CHUNKED_CUH

#include "deltac/backward_rules.h"
#include "deltac/cuda/chunked_fused.cuh"
#include "deltac/cuda/chunked_mma.cuh"
#include "deltac/cuda/chunked_prep.cuh"
#include "deltac/cuda/chunked_scan.cuh"
#include "deltac/cuda/chunked_scan_tma.cuh"
#include "deltac/cuda/chunked_scan_tmat.cuh"
#include "deltac/cuda/chunked_scan_warp.cuh"
#include "deltac/cuda/chunked_split.cuh"
#include "deltac/cuda/chunked_traits.cuh"
#include "deltac/params.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <tuple>
#include <type_traits>
#include <utility>

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

// Whether p matches a chunked kernel of (var, K, V, input dtype) and has what
// the kernels dereference, aligned as they read it.
inline bool chunked_matches(const deltac_fwd_params& p, int32_t var, int K, int V,
                            int32_t dtype) {
  if (p.variant != var || p.K != K || p.V != V)
    return false;
  if (p.in_dtype != dtype || p.out_dtype != dtype ||
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
  if (var != DELTAC_VARIANT_DELTA && !p.g)
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
      !chunked_aligned(p.g, var == DELTAC_VARIANT_KDA ? 16 : 4) ||
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

// cudaFuncSetAttribute(fn, max dynamic shared memory, bytes), once per
// device and kernel handle (the attribute is per device).
inline cudaError_t chunked_smem_attr(const void* fn, int dev, int bytes) {
  static std::mutex mu;
  static std::set<std::tuple<const void*, int, int>> done;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (done.count({fn, dev, bytes}))
      return cudaSuccess;
  }
  const cudaError_t e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (e == cudaSuccess) {
    std::lock_guard<std::mutex> lock(mu);
    done.insert({fn, dev, bytes});
  }
  return e;
}

// Blocks of fn (threads, bytes of dynamic shared memory) one multiprocessor
// holds, once per device and handle (sets the shared-memory attribute).
inline cudaError_t chunked_occupancy(const void* fn, int dev, int threads, int bytes,
                                     int& blocks) {
  static std::mutex mu;
  static std::map<std::pair<const void*, int>, int> cache;
  blocks = 0;
  {
    std::lock_guard<std::mutex> lock(mu);
    const auto it = cache.find({fn, dev});
    if (it != cache.end()) {
      blocks = it->second;
      return cudaSuccess;
    }
  }
  cudaError_t e = chunked_smem_attr(fn, dev, bytes);
  if (e == cudaSuccess)
    e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, fn, threads, size_t(bytes));
  if (e != cudaSuccess) {
    blocks = 0;
    return e;
  }
  std::lock_guard<std::mutex> lock(mu);
  cache[{fn, dev}] = blocks;
  return cudaSuccess;
}

// One config's kernels, as handles, and what their sizes derive from (the
// plain rules of chunked_rules.h and chunked_split.cuh): all the launches
// below read. The precompiled instances fill it from their templates
// (chunked_kernels); the runtime's NVRTC path (runtime/src/cuda_jit.cu) from
// a compiled module. A null handle is a kernel that is not there (not
// legal, or not compiled): the launches skip what is null.
struct ChunkedKernels {
  int var, K, V, elem, C, bv0, warps, stages;
  const void* index;     // chunked_index_kernel<C>
  const void* prep;      // chunked_prep_kernel
  const void* scan[3];   // chunked_scan_kernel with V tiles bv0, bv0 / 2, bv0 / 4
  const void* warp[2];   // chunked_scan_warp_kernel, V tile kChunkedWarpBVs[i]
  const void* warp_o[2]; // the same with output warps (DELTAC_CHUNKED_WARP_OUTPUT)
  const void* fold;      // chunked_fold_kernel<InT, K, V, C>
  const void* fix;       // chunked_fix_kernel, chunked_fix_cols(V) columns
  const void* fused[3];  // chunked_fused_kernel with V tiles bv0, bv0 / 2, bv0 / 4
  bool split_o;          // scan = 2 asks for output warps (DELTAC_CHUNKED_WARP_OUTPUT)
  const void* tma;       // chunked_scan_tma_kernel (one warpgroup), or null
  const void* tmat[3];   // chunked_scan_tmat_kernel of form i + 1 (tmat_form_cols), or null
  const void* precise[3];  // scan 5: chunked_scan_kernel<..., true>, V tiles as scan[], or null
};

// Chunk slots to allocate: every chunk of every sequence fits.
inline int64_t chunked_max_chunks(const deltac_fwd_params& p, int C) {
  if (p.cu_seqlens)
    return (int64_t(p.B) * p.T + int64_t(p.N) * (C - 1)) / C;
  return int64_t(p.N) * ((int64_t(p.T) + C - 1) / C);
}

inline size_t chunked_round(size_t x) { return (x + 255) / 256 * 256; }

// Workspace carve-up for `split` segments per sequence; returns the bytes
// used (ws may be null to measure).
// precise: scan 5's T low halves too (16-bit types).
template <class Ts>
size_t chunked_carve(const ChunkedKernels& k, const deltac_fwd_params& p, void* base,
                     ChunkedWs<Ts>* ws, int split, bool precise = false) {
  const int C = k.C, K = k.K;
  const int64_t slots = chunked_max_chunks(p, C) * p.HV;
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
  w.t = reinterpret_cast<Ts*>(take(size_t(slots) * C * C * sizeof(Ts)));
  w.aqk = reinterpret_cast<Ts*>(take(size_t(slots) * C * C * sizeof(Ts)));
  w.tlo = precise && sizeof(Ts) == 2
              ? reinterpret_cast<Ts*>(take(size_t(slots) * C * C * sizeof(Ts)))
              : nullptr;
  w.f = reinterpret_cast<float*>(take(size_t(slots) * 4 * C * 4));
  w.gamma = reinterpret_cast<float*>(take(size_t(slots) * K * 4));
  if (k.var == DELTAC_VARIANT_KDA) {
    w.qg = reinterpret_cast<Ts*>(take(size_t(slots) * C * K * sizeof(Ts)));
    w.kg = reinterpret_cast<Ts*>(take(size_t(slots) * C * K * sizeof(Ts)));
    w.kd = reinterpret_cast<Ts*>(take(size_t(slots) * C * K * sizeof(Ts)));
  }
  w.split = split;
  w.warm = 1;
  if (split > 1) {
    const size_t segs = size_t(p.N) * split * p.HV;
    w.qt = reinterpret_cast<Ts*>(take(size_t(p.B) * p.T * p.HV * K * sizeof(Ts)));
    w.cst = reinterpret_cast<float*>(take(segs * K * k.V * 4));
    w.pst = reinterpret_cast<float*>(take(segs * K * K * 4));
    w.hin = reinterpret_cast<Ts*>(take(segs * 2 * K * k.V * sizeof(Ts)));
  }
  w.max_chunks = chunked_max_chunks(p, C);
  if (ws)
    *ws = w;
  return off;
}

// Whether the block scan runs k's config with V tiles of bv columns instead
// of its own (and the kernel is there).
inline bool chunked_bv_runs(const ChunkedKernels& k, int bv) {
  for (int i = 0; i < 3; ++i)
    if (bv == k.bv0 >> i)
      return k.scan[i] && bv >= 16 && k.V % bv == 0 &&
             chunked_legal(k.var, k.K, k.V, k.elem, k.C, bv, k.warps, k.stages);
  return false;
}

// The V tile the scan runs: k's bv0 (the widest), halved (once or twice,
// where legal) while the grid would leave more than 1/8 of the
// multiprocessors idle. force_bv: that width if legal (tests), 0: choose.
inline int chunked_pick_bv(const ChunkedKernels& k, const deltac_fwd_params& p, int force_bv) {
  const int B0 = k.bv0;
  const bool ok1 = chunked_bv_runs(k, B0 / 2), ok2 = ok1 && chunked_bv_runs(k, B0 / 4);
  if (force_bv)
    return (force_bv == B0 && chunked_bv_runs(k, B0)) || (force_bv == B0 / 2 && ok1) ||
                   (force_bv == B0 / 4 && ok2)
               ? force_bv
               : 0;
  if (!chunked_bv_runs(k, B0))
    return 0;
  ChunkedDevice d;
  const int sms = chunked_device(d) == cudaSuccess ? d.sms : 0;
  auto shrt = [&](int bv) { return chunked_grid_short(int64_t(k.V / bv) * p.HV * p.N, sms); };
  int bv = B0;
  if (ok1 && shrt(bv))
    bv = B0 / 2;
  if (ok2 && bv == B0 / 2 && shrt(bv))
    bv = B0 / 4;
  return bv;
}

// The warp scan's V tile for p (with output warps: split_o), 0 where it
// cannot run on this device: force_bv where legal, else the widest of
// kChunkedWarpBVs that divides V, halved while the grid would leave more
// than 1/8 of the multiprocessors idle; det (batch-invariant): the widest
// legal one whatever the grid.
inline int chunked_warp_bv(const ChunkedKernels& k, const deltac_fwd_params& p, int force_bv,
                           bool split_o, bool det) {
  ChunkedDevice d;
  if (chunked_device(d) != cudaSuccess)
    return 0;
  auto ok = [&](int bv) {
    for (int i = 0; i < 2; ++i)
      if (bv == kChunkedWarpBVs[i] && (split_o ? k.warp_o[i] : k.warp[i]))
        return chunked_warp_ok(k.var, k.K, k.V, k.elem, k.C, bv, size_t(d.smem), split_o);
    return false;
  };
  if (force_bv && ok(force_bv))
    return force_bv;
  int bv = 0;
  for (int w : {kChunkedWarpBVs[0], kChunkedWarpBVs[1]})
    if (ok(w) && (bv == 0 || (!det && chunked_grid_short(int64_t(k.V / bv) * p.HV * p.N, d.sms))))
      bv = w;
  return bv;
}

struct ChunkedPlan {
  int bv, split;      // the scan's V tile, segments per sequence (1: no split)
  bool warm = false;  // the segments are warm-up ones (the transposed TMA scan)
  bool precise = false;  // scan 5's kernels (k.precise)
};

// Scan 5's V tile on p (0: none runs on this device): force_bv where it
// runs, else the widest that runs, narrowed (as chunked_pick_bv) while the
// grid would leave more than 1/8 of the multiprocessors idle; with force_bv
// it cannot take (batch-invariant calls ask for k.bv0), the widest.
inline int chunked_precise_bv(const ChunkedKernels& k, const deltac_fwd_params& p,
                              int force_bv) {
  ChunkedDevice d;
  if (chunked_device(d) != cudaSuccess)
    return 0;
  auto ok = [&](int i) {
    return k.precise[i] && chunked_precise_ok(k.var, k.K, k.V, k.elem, k.C, k.bv0 >> i,
                                              k.warps, k.stages, size_t(d.smem));
  };
  int bv = 0;
  for (int i = 0; i < 3; ++i)
    if (ok(i) && force_bv == k.bv0 >> i)
      return force_bv;
  for (int i = 0; i < 3; ++i)
    if (ok(i) && (bv == 0 || (!force_bv && chunked_grid_short(
                                              int64_t(k.V / bv) * p.HV * p.N, d.sms))))
      bv = k.bv0 >> i;
  return bv;
}

// Segments per sequence of a split at V tile sbv (0: none can run) when the
// scan runs bv_run unsplit: force_split (> 1), or with 0 the rule of
// chunked_default_split (at least min_split segments) on this device's
// multiprocessors; 1 (none) where the fix-up does not fit the device or
// sequences x segments > 65535.
inline int chunked_split_at(const ChunkedKernels& k, const deltac_fwd_params& p, int force_split,
                            int bv_run, int sbv, int min_split) {
  ChunkedDevice d;
  if (sbv == 0 || chunked_device(d) != cudaSuccess ||
      size_t(d.smem) < chunked_fix_smem(k.K, k.elem, k.C, chunked_fix_cols(k.V)))
    return 1;
  int split = force_split;
  if (split == 0) {
    const int64_t max_chunks = (int64_t(p.T) + k.C - 1) / k.C;  // varlen: T bounds each
    split = chunked_default_split(k.K, k.V, int64_t(p.HV) * p.N, max_chunks, bv_run, sbv, d.sms,
                                  min_split);
  }
  return split > 1 && int64_t(p.N) * split <= 65535 ? split : 1;
}

// The V tile and the sequence split. force_split: that many segments (1: no
// split) where the split can run (a V tile that divides K too, the fold and
// fix-up kernels there, sequences x segments <= 65535), else none; 0: the
// rule (chunked_split_at).
inline ChunkedPlan chunked_plan(const ChunkedKernels& k, const deltac_fwd_params& p,
                                int force_bv, int force_split) {
  ChunkedPlan pl{chunked_pick_bv(k, p, force_bv), 1};
  if (pl.bv == 0 || force_split == 1 || p.N <= 0 || !k.fold || !k.fix)
    return pl;
  const int B0 = k.bv0;
  int sbv = 0;  // the split's V tile: the widest legal one that divides K too
  for (int b : {B0, B0 / 2, B0 / 4})
    if (!sbv && b >= 16 && k.K % b == 0 && chunked_bv_runs(k, b) && (!force_bv || b == force_bv))
      sbv = b;
  const int split = chunked_split_at(k, p, force_split, pl.bv, sbv, kChunkedMinSplitBlock);
  return split > 1 ? ChunkedPlan{sbv, split} : pl;
}

// The warp scan's V tile and sequence split on p (bv 0: it does not run
// here; split 1: none). Unsplit: chunked_warp_bv's tile. force_split as
// chunked_plan's (not with output warps); a split runs at the widest warp
// tile that divides K (chunked_split_at, at least kChunkedMinSplitWarp
// segments by the rule).
inline ChunkedPlan chunked_warp_plan(const ChunkedKernels& k, const deltac_fwd_params& p,
                                     int force_bv, int force_split, bool split_o, bool det) {
  ChunkedPlan pl{chunked_warp_bv(k, p, force_bv, split_o, det), 1};
  ChunkedDevice d;
  if (pl.bv == 0 || split_o || force_split == 1 || p.N <= 0 || !k.fold || !k.fix ||
      chunked_device(d) != cudaSuccess)
    return pl;
  int sbv = 0;
  for (int i = 0; i < 2 && !sbv; ++i) {
    const int b = kChunkedWarpBVs[i];
    if (k.warp[i] && k.K % b == 0 && (!force_bv || b == force_bv) &&
        chunked_warp_ok(k.var, k.K, k.V, k.elem, k.C, b, size_t(d.smem)))
      sbv = b;
  }
  const int split = chunked_split_at(k, p, force_split, pl.bv, sbv, kChunkedMinSplitWarp);
  return split > 1 ? ChunkedPlan{sbv, split} : pl;
}

// cuTensorMapEncodeTiled from the driver (through the runtime: no link to
// libcuda), or null.
inline PFN_cuTensorMapEncodeTiled_v12000 chunked_tma_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 f = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault,
                                         &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      fn = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  return f;
}

// Whether this device runs k.tma: compute capability 9.0, the kernel built
// for it (sm_90a code: no static shared memory, which the other targets'
// stub declares) and the driver's tensor-map encoder. Read once per device
// and kernel.
inline bool chunked_tma_device(const ChunkedKernels& k) {
  // The TMA scan's kernel, or at K = 256 (none) the transposed one's.
  const void* fn = k.tma ? k.tma : k.tmat[kTmatKeySplit - 1];
  if (!fn || !chunked_tma_encoder())
    return false;
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess)
    return false;
  static std::mutex mu;
  static std::map<std::pair<int, const void*>, bool> seen;
  std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_pair(dev, fn);
  const auto it = seen.find(key);
  if (it != seen.end())
    return it->second;
  int major = 0, minor = 0;
  cudaFuncAttributes a{};
  const bool ok =
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess &&
      cudaFuncGetAttributes(&a, fn) == cudaSuccess && major == 9 && minor == 0 &&
      a.binaryVersion == 90 && a.sharedSizeBytes == 0;
  seen[key] = ok;
  return ok;
}

// Whether the TMA scan can take p on this device: its kernel runs here, the
// q, k, v rows are 16-byte aligned (TMA) and every coordinate fits 31 bits.
inline bool chunked_tma_takes(const ChunkedKernels& k, const deltac_fwd_params& p) {
  const int64_t rows = chunked_max_chunks(p, k.C) * p.HV * k.C;
  return p.N > 0 && chunked_aligned(p.q, 16) && chunked_aligned(p.k, 16) &&
         chunked_aligned(p.v, 16) && int64_t(p.B) * p.T < (int64_t(1) << 31) &&
         rows < (int64_t(1) << 31) && chunked_tma_device(k);
}

// The TMA scan's tensor maps for p: q, k [tokens][H][K] and v [tokens][HV][V]
// in boxes of 64 tokens (q, k: 64 keys, swizzled; v: vbox columns, swizzled
// where vswizzle: vbox 64), T and
// Aqk [slots x C][C] in C x C boxes (swizzled).
template <class Ts>
cudaError_t chunked_tma_maps(const ChunkedKernels& k, const deltac_fwd_params& p,
                             const ChunkedWs<Ts>& ws, TmaScanMaps* m, int vbox = kTmaScanBV,
                             bool vswizzle = false) {
  const PFN_cuTensorMapEncodeTiled_v12000 enc = chunked_tma_encoder();
  if (!enc)
    return cudaErrorNotSupported;
  const CUtensorMapDataType dt = std::is_same_v<Ts, __half> ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                             : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  const cuuint32_t es[3] = {1, 1, 1};
  auto make = [&](CUtensorMap* map, const void* base, int rank, const cuuint64_t* dims,
                  const cuuint64_t* strides, const cuuint32_t* box, bool sw) {
    return enc(map, dt, cuuint32_t(rank), const_cast<void*>(base), dims, strides, box, es,
               CU_TENSOR_MAP_INTERLEAVE_NONE,
               sw ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE,
               CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) ==
           CUDA_SUCCESS;
  };
  const cuuint64_t tokens = cuuint64_t(p.B) * cuuint64_t(p.T);
  const cuuint64_t dq[3] = {cuuint64_t(k.K), cuuint64_t(p.H), tokens};
  const cuuint64_t sq[2] = {cuuint64_t(k.K) * 2, cuuint64_t(p.H) * k.K * 2};
  const cuuint32_t bq[3] = {64, 1, cuuint32_t(k.C)};
  const cuuint64_t dv[3] = {cuuint64_t(k.V), cuuint64_t(p.HV), tokens};
  const cuuint64_t sv[2] = {cuuint64_t(k.V) * 2, cuuint64_t(p.HV) * k.V * 2};
  const cuuint32_t bv[3] = {cuuint32_t(vbox), 1, cuuint32_t(k.C)};
  const cuuint64_t dt2[2] = {cuuint64_t(k.C), cuuint64_t(ws.max_chunks) * p.HV * k.C};
  const cuuint64_t st2[1] = {cuuint64_t(k.C) * 2};
  const cuuint32_t bt[2] = {cuuint32_t(k.C), cuuint32_t(k.C)};
  const bool ok = make(&m->q, p.q, 3, dq, sq, bq, true) && make(&m->k, p.k, 3, dq, sq, bq, true) &&
                  make(&m->v, p.v, 3, dv, sv, bv, vswizzle) &&
                  make(&m->t, ws.t, 2, dt2, st2, bt, true) &&
                  make(&m->a, ws.aqk, 2, dt2, st2, bt, true);
  return ok ? cudaSuccess : cudaErrorInvalidValue;
}

// The scan a call runs and its plan: where tma is given, the TMA scan (*tma;
// V tile kTmaScanBV, no split) where scan 3 asks for it or the rule (0)
// picks it and chunked_tma_takes; else the warp scan (*warp) where it runs
// and scan asks for it (0 or 3: chunked_uses_warp_scan's rule, 2: with
// output warps), else the block scan (no split where the warp scan was
// asked for but does not fit this device). What chunked_run_stages launches
// and chunked_carve sizes (without tma: the warp or block scan's plan, whose
// workspace also holds the TMA scan's).
//
// tmat (where given): the transposed TMA scan's form (tmat_form_cols; 0: it
// does not run) where scan 4 asks for it or the rule (0, no forced V tile or
// split) picks it: where its unsplit grid of 64-column blocks leaves at most
// 1/8 of the SMs idle (chunked_grid_short); at K = 256 its key split, else two
// warpgroups where the grid of 128-column blocks does too, else one. H100:
// 1.02-1.34x the rule's warp scan on such rows (16/32, 16/64 heads 4x8192, 2/8
// 8x1024, K=64 8x4096), two warpgroups 1.16x one at 4x8192 16/32; K = 256, 16
// heads: the key split's scan 0.836 ms against the warp scan's 1.406 at 4x8192
// (256 blocks), 1.562 against 1.376 at 1x32768 (64 blocks). On shorter grids
// the warp scan (and its sequence split) wins (docs/performance.md), except
// GDN at K = 256, where the rule splits the key split's sequences into
// warm-up segments (chunked_warm_split, while kChunkedWarmRule is on); scan 4
// with split S > 1 forces S warm-up segments (GDN; the other variants run it
// unsplit).
inline ChunkedPlan chunked_run_plan(const ChunkedKernels& k, const deltac_fwd_params& p,
                                    int force_bv, int force_split, int scan, bool* warp,
                                    bool* tma = nullptr, int* tmat = nullptr) {
  *warp = false;
  if (tma)
    *tma = false;
  if (tmat)
    *tmat = 0;
  // Scan 5, unsplit (chunked_knobs); the block scan where it does not run:
  // kda, f32, or no V tile within this device's shared memory (sm_86 / 89 /
  // 120: 99 KB; K = 256 at V tile 16).
  if (scan == kChunkedScanPrecise) {
    const int bv = chunked_precise_runs(k.var, k.elem) ? chunked_precise_bv(k, p, force_bv) : 0;
    if (bv == 0)
      return chunked_plan(k, p, force_bv, 1);
    ChunkedPlan pl{bv, 1};
    pl.precise = true;
    return pl;
  }
  if (tmat && (scan == 4 || (scan == 0 && force_split <= 1)) && force_bv == 0 &&
      (k.tmat[0] || k.tmat[kTmatKeySplit - 1]) &&
      chunked_tmat_runs(k.var, k.K, k.V, k.elem, k.C) && chunked_tma_takes(k, p)) {
    ChunkedDevice d;
    const bool dev = chunked_device(d) == cudaSuccess;
    const int64_t heads = int64_t(p.N) * p.HV;
    // Warm-up segments: forced (scan 4, split > 1), or the rule's at K = 256.
    // Not where h0 and ht share bytes: a later segment's ht could land before
    // another block read h0.
    const size_t sbytes = size_t(p.N) * p.HV * k.K * k.V * 4;
    const char *h0b = static_cast<const char*>(p.h0), *htb = static_cast<const char*>(p.ht);
    const bool alias = h0b && htb && h0b < htb + sbytes && htb < h0b + sbytes;
    int warm = 1;
    if (k.var == DELTAC_VARIANT_GATED && dev && force_split != 1 && !alias) {
      const int64_t max_chunks = (int64_t(p.T) + k.C - 1) / k.C;  // varlen: T bounds each
      if (force_split > 1)
        warm = force_split;
      else if (k.tmat[kTmatKeySplit - 1])
        warm = chunked_warm_split(heads * (k.V / 64), max_chunks, d.sms);
      if (int64_t(p.N) * warm > 65535)
        warm = 1;
    }
    const bool full = scan == 4 || warm > 1 || (dev && chunked_tmat_fills(heads, k.V, d.sms));
    if (k.tmat[kTmatKeySplit - 1]) {
      if (full) {
        *tmat = kTmatKeySplit;
        return {64, warm, warm > 1};
      }
    } else if (full) {
      const bool two = k.tmat[1] && k.V % 128 == 0 && dev &&
                       !chunked_grid_short(heads * warm * (k.V / 128), d.sms);
      *tmat = two ? 2 : 1;
      return {64 * *tmat, warm, warm > 1};
    }
  }
  const bool runs = chunked_warp_runs(k.var, k.K, k.V, k.elem, k.C) && (k.warp[0] || k.warp[1]);
  if (runs && (scan == 2 || chunked_uses_warp_scan(k.var, k.K, k.V, k.elem, k.C, scan))) {
    const ChunkedPlan w =
        chunked_warp_plan(k, p, force_bv, force_split, scan == 2 && k.split_o, force_bv != 0);
    // The TMA scan: asked for (3), or by the rule (0) where the warp scan
    // would run unsplit and its grid at V tile 32 fits one wave (not for
    // batch-invariant calls, whose kernel must not depend on the grid).
    const bool rule = scan == 0 || scan == 4;  // 4 where the transposed scan did not take it
    if (tma && w.bv && (scan == 3 || (rule && force_bv == 0 && w.split == 1)) &&
        chunked_tma_runs(k.var, k.K, k.V, k.elem, k.C) && chunked_tma_takes(k, p)) {
      ChunkedDevice d;
      const int64_t blocks = int64_t(p.N) * p.HV * (k.V / kTmaScanBV);
      if (scan == 3 || (chunked_device(d) == cudaSuccess && blocks <= d.sms)) {
        *tma = true;
        return {kTmaScanBV, 1};
      }
    }
    if (w.bv) {
      *warp = true;
      return w;
    }
    force_split = 1;
  }
  return chunked_plan(k, p, force_bv, force_split);
}

// cudaLaunchKernel of fn, with its shared-memory attribute set where bytes
// exceed the 48 KB every kernel may take (these kernels hold no static shared
// memory beside their dynamic bytes; the fused one's 8 static bytes are
// covered by chunked_occupancy, which always sets it).
inline cudaError_t chunked_launch(const void* fn, int dev, dim3 grid, int threads, int smem,
                                  cudaStream_t stream, void** args) {
  cudaError_t e = smem > 48 * 1024 ? chunked_smem_attr(fn, dev, smem) : cudaSuccess;
  if (e == cudaSuccess)
    e = cudaLaunchKernel(fn, grid, dim3(unsigned(threads)), args, size_t(smem), stream);
  if (e != cudaSuccess)
    cudaGetLastError();  // returned here, not left pending for a later check
  return e;
}

// The fused launch (chunked_fused.cuh) with V tiles of k.bv0 >> i columns,
// where it fits: the kernel is there, two blocks fit on a multiprocessor and
// the scan's grid is at most one block per multiprocessor. `done` says
// whether it launched (else nothing was).
template <class Ts>
cudaError_t chunked_fused_launch(const ChunkedKernels& k, int i, const deltac_fwd_params& p,
                                 const ChunkedWs<Ts>& ws, float scale, cudaStream_t stream,
                                 bool& done) {
  done = false;
  const int bv = k.bv0 >> i;
  if (!k.fused[i] || !chunked_fusable(k.var, k.K, k.V, k.elem, k.C, bv, k.warps))
    return cudaSuccess;
  const int smem = int(chunked_fused_smem(k.var, k.K, k.V, k.elem, k.C, bv));
  ChunkedDevice d;
  cudaError_t e = chunked_device(d);
  if (e != cudaSuccess)
    return e;
  const int64_t nscan = int64_t(k.V / bv) * p.HV * p.N;
  if (smem > d.smem || nscan > d.sms)
    return cudaSuccess;
  int occ = 0;
  const int threads = 32 * k.warps;
  if ((e = chunked_occupancy(k.fused[i], d.dev, threads, smem, occ)) != cudaSuccess)
    return e;
  if (occ < 2)
    return cudaSuccess;
  const int64_t items = ws.max_chunks * p.HV;
  const int64_t workers =
      std::max<int64_t>(1, std::min<int64_t>(items, int64_t(occ) * d.sms - nscan));
  const size_t flags = 16 + size_t(items) * 4;
  if ((e = cudaMemsetAsync(ws.tickets, 0, flags, stream)) != cudaSuccess)
    return e;
  ChunkedWs<Ts> wf = ws;
  wf.ready = reinterpret_cast<int32_t*>(ws.tickets + 2);
  deltac_fwd_params pp = p;
  int nw = int(workers);
  void* args[] = {&pp, &wf, &scale, &nw};
  done = true;
  return chunked_launch(k.fused[i], d.dev, dim3(unsigned(workers + nscan)), threads, smem,
                        stream, args);
}

// The stages of k's config on p: see chunked_stages below (its arguments
// after the workspace). Ts: the input type (the workspace's compute type).
// cstates (null: none): chunk-end states, cstates_count entries (ChunkedWs);
// they take no route and run the knobs chunked_knobs gives. saved (null:
// none): the backward's saved states (deltac/backward_rules.h), written where
// the transposed TMA scan runs a bf16 call bwd_saves_states offers, with no
// route; the caller zeroes its header's flag first (the scan sets it).
template <class Ts>
cudaError_t chunked_run_stages(const ChunkedKernels& k, const deltac_fwd_params& p,
                               void* workspace, size_t workspace_bytes, cudaStream_t stream,
                               int stages, const int32_t* skip, int force_bv, int force_split,
                               int fuse, int32_t route, int scan, float* cstates = nullptr,
                               int64_t cstates_count = 0, void* saved = nullptr) {
  if (!chunked_matches(p, k.var, k.K, k.V, chunked_dtype<Ts>()))
    return cudaErrorInvalidValue;
  if (p.N == 0)
    return cudaSuccess;
  if (route < 0 || (route > 0 && !p.cu_seqlens) ||
      (cstates && (route || cstates_count < 0 || !chunked_aligned(cstates, 16))))
    return cudaErrorInvalidValue;
  if (route > 0)
    force_split = 1, fuse = 0;
  const ChunkedKnobs kn = chunked_knobs(force_split, fuse, scan, cstates != nullptr);
  force_split = kn.split, fuse = kn.fuse, scan = kn.scan;
  bool warp = false, tma = false;
  int tmat = 0;
  const ChunkedPlan pl = chunked_run_plan(k, p, force_bv, force_split, scan, &warp, &tma, &tmat);
  if (scan == 2 || chunked_uses_warp_scan(k.var, k.K, k.V, k.elem, k.C, scan))
    fuse = 0;  // the warp scan (or the block scan standing in for it) runs unfused
  const int bv = pl.bv;
  if (bv == 0)
    return cudaErrorInvalidValue;
  const int carve_split = pl.warm ? 1 : pl.split;  // warm-up segments take no workspace
  const size_t need = chunked_carve<Ts>(k, p, nullptr, nullptr, carve_split, pl.precise);
  if (!workspace || workspace_bytes < need || !chunked_aligned(workspace, 256))
    return cudaErrorInvalidValue;
  ChunkedWs<Ts> ws;
  chunked_carve<Ts>(k, p, workspace, &ws, carve_split, pl.precise);
  ws.warm = pl.warm ? pl.split : 1;
  ws.skip = skip;
  ws.route = route;
  ws.cstates = cstates;
  ws.cstates_count = cstates ? cstates_count : 0;
  if (ws.max_chunks > 0x7fffffff)
    return cudaErrorInvalidValue;
  float scale = p.scale != 0.f ? p.scale : 1.f / std::sqrt(float(k.K));
  deltac_fwd_params pp = p;

  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess)
    return e;
  if (p.cu_seqlens && (stages & 1)) {
    int64_t mc = ws.max_chunks;
    void* args[] = {&pp, &ws.offsets, &mc, &route};
    if ((e = chunked_launch(k.index, dev, dim3(1), 1024, 0, stream, args)) != cudaSuccess)
      return e;
  }
  if (fuse == 1 && stages == 3 && pl.split == 1 && force_bv == 0 &&
      (!p.cu_seqlens || p.N == 1) && ws.max_chunks > 0) {
    bool done = false;
    for (int i = 0; i < 3 && !done; ++i)
      if (bv == k.bv0 >> i && (e = chunked_fused_launch<Ts>(k, i, p, ws, scale, stream, done)) !=
                                  cudaSuccess)
        return e;
    if (done)
      return cudaSuccess;
  }
  if (ws.max_chunks > 0 && (stages & 1)) {
    void* args[] = {&pp, &ws, &scale};
    if ((e = chunked_launch(k.prep, dev, dim3(unsigned(ws.max_chunks), unsigned(p.HV)),
                            32 * kChunkedPrepWarps,
                            int(chunked_prep_smem(k.var, k.K, k.V, k.elem, k.C)), stream,
                            args)) != cudaSuccess)
      return e;
  }
  if (!(stages & 6))
    return cudaSuccess;
  if (tma && (stages & 2)) {
    TmaScanMaps maps;
    if ((e = chunked_tma_maps<Ts>(k, p, ws, &maps)) != cudaSuccess)
      return e;
    void* args[] = {&pp, &ws, &maps};
    if ((e = chunked_launch(k.tma, dev,
                            dim3(unsigned(k.V / kTmaScanBV), unsigned(p.HV), unsigned(p.N)),
                            kTmaScanThreads, int(tma_scan_smem(k.K, k.C)), stream, args)) !=
        cudaSuccess)
      return e;
  }
  if (tmat && (stages & 2)) {
    if (saved && route == 0 && k.C == kBwdChunk && chunked_dtype<Ts>() == DELTAC_BF16 &&
        bwd_saves_states(k.var, k.K, k.V, DELTAC_BF16) && chunked_aligned(saved, 256)) {
      const BwdSavedLayout sl = bwd_saved_layout_of(p);  // p's K, V are k's (chunked_matches)
      char* b = static_cast<char*>(saved);
      ws.saved_flag = reinterpret_cast<int32_t*>(b);
      ws.saved_h = reinterpret_cast<Ts*>(b + sl.h);
      ws.saved_u = reinterpret_cast<Ts*>(b + sl.u);
    }
    TmaScanMaps maps;
    if ((e = chunked_tma_maps<Ts>(k, p, ws, &maps, 64, true)) != cudaSuccess)
      return e;
    void* args[] = {&pp, &ws, &maps};
    if ((e = chunked_launch(
             k.tmat[tmat - 1], dev,
             dim3(unsigned(k.V / tmat_form_cols(tmat)), unsigned(p.HV),
                  unsigned(p.N) * unsigned(ws.warm)),
             tmat_scan_threads(tmat), int(tmat_scan_smem(k.K, k.C, tmat)), stream, args)) !=
        cudaSuccess)
      return e;
  }
  if (warp && (stages & 2)) {
    // Split: K / bv more V tiles (identity columns), split segments a sequence.
    const bool so = scan == 2 && k.split_o;
    const int i = bv == kChunkedWarpBVs[0] ? 0 : 1;
    const int ws_stages = warp_scan_stages(k.var, k.K, k.C, bv, so);
    const int smem = int(warp_scan_smem(k.var, k.K, k.C, bv, so, ws_stages));
    const unsigned tiles = k.V / bv + (ws.split > 1 ? k.K / bv : 0);
    void* args[] = {&pp, &ws};
    if ((e = chunked_launch(so ? k.warp_o[i] : k.warp[i], dev,
                            dim3(tiles, unsigned(p.HV), unsigned(p.N) * unsigned(ws.split)),
                            32 * warp_scan_warps(k.K, bv, so), smem, stream, args)) !=
        cudaSuccess)
      return e;
  }
  if (!warp && !tma && !tmat && (stages & 2)) {
    // Split: K / bv more V tiles (identity columns), split segments a sequence.
    int i = 0;
    while (i < 3 && bv != k.bv0 >> i)
      ++i;
    const void* fn = i == 3 ? nullptr : pl.precise ? k.precise[i] : k.scan[i];
    if (!fn)
      return cudaErrorInvalidValue;
    const unsigned tiles = k.V / bv + (ws.split > 1 ? k.K / bv : 0);
    void* args[] = {&pp, &ws};
    if ((e = chunked_launch(fn, dev,
                            dim3(tiles, unsigned(p.HV), unsigned(p.N) * unsigned(ws.split)),
                            32 * k.warps,
                            int(chunked_scan_smem(k.var, k.K, k.elem, k.C, bv, k.stages,
                                                  pl.precise)),
                            stream, args)) != cudaSuccess)
      return e;
  }
  if (pl.split == 1 || pl.warm)
    return cudaSuccess;
  // The split: fold the segments' states (and write ht), then correct the
  // later segments' outputs.
  {
    int64_t mc = ws.max_chunks;
    int split = pl.split;
    const float* pst = ws.pst;
    float* cst = ws.cst;
    Ts* hin = ws.hin;
    void* args[] = {&pp, &ws.offsets, &mc, &split, &pst, &cst, &hin, &skip};
    if ((e = chunked_launch(k.fold, dev, dim3(k.V / 16, unsigned(p.HV), unsigned(p.N)), 256,
                            int(chunked_fold_smem(k.K)), stream, args)) != cudaSuccess ||
        ws.max_chunks == 0)
      return e;
  }
  const int cv = chunked_fix_cols(k.V);
  void* args[] = {&pp, &ws};
  return chunked_launch(k.fix, dev, dim3(unsigned(ws.max_chunks), unsigned(p.HV), k.V / cv),
                        k.C / 16 * 32, int(chunked_fix_smem(k.K, k.elem, k.C, cv)), stream,
                        args);
}

// Whether the scan can run Cfg with V tiles of bv columns instead of Cfg's.
template <deltac_variant Var, int K, int V, class InT, class Cfg>
constexpr bool chunked_bv_ok(int bv) {
  return bv >= 16 && V % bv == 0 &&
         chunked_legal(Var, K, V, sizeof(InT), Cfg::kChunk, bv, Cfg::kWarps, Cfg::kStages);
}

// The kernels of the precompiled config (Var, K, V, InT, Cfg), as
// chunked_run_stages takes them (chunked_kernels: built once).
template <deltac_variant Var, int K, int V, class InT, class Cfg>
ChunkedKernels make_chunked_kernels() {
  using Tr = ChunkedTraits<Var, K, V, InT, Cfg>;
  constexpr int B0 = Cfg::kBV, C = Cfg::kChunk, E = int(sizeof(InT));
  ChunkedKernels k{Var, K, V, E, C, B0, Cfg::kWarps, Cfg::kStages, nullptr, nullptr, {},
                   {},  {}, nullptr, nullptr, {}, DELTAC_CHUNKED_WARP_OUTPUT != 0};
  k.index = reinterpret_cast<const void*>(&chunked_index_kernel<C>);
  k.prep = reinterpret_cast<const void*>(&chunked_prep_kernel<Var, Tr>);
  auto scan_at = [&](auto i) {
    constexpr int I = decltype(i)::value, BVe = B0 >> I;
    if constexpr (BVe >= 16 && chunked_bv_ok<Var, K, V, InT, Cfg>(BVe)) {
      using Te = ChunkedTraits<Var, K, V, InT, ChunkedConfig<C, BVe, Cfg::kWarps, Cfg::kStages>>;
      k.scan[I] = reinterpret_cast<const void*>(&chunked_scan_kernel<Var, Te>);
    }
    if constexpr (chunked_precise_ok(Var, K, V, E, C, BVe, Cfg::kWarps, Cfg::kStages) &&
                  V % BVe == 0) {
      using Te = ChunkedTraits<Var, K, V, InT, ChunkedConfig<C, BVe, Cfg::kWarps, Cfg::kStages>>;
      k.precise[I] = reinterpret_cast<const void*>(&chunked_scan_kernel<Var, Te, true>);
    }
    if constexpr (BVe >= 16 &&
                  chunked_legal(Var, K, V, sizeof(InT), C, BVe, Cfg::kWarps, 1)) {
      using Ts1 = ChunkedTraits<Var, K, V, InT, ChunkedConfig<C, BVe, Cfg::kWarps, 1>>;
      static_assert(chunked_fusable<Ts1>() ==
                        chunked_fusable(Var, K, V, E, C, BVe, Cfg::kWarps),
                    "the fused launch's rule: traits and plain form agree");
      if constexpr (chunked_fusable<Ts1>())
        k.fused[I] = reinterpret_cast<const void*>(&chunked_fused_kernel<Var, Tr, Ts1>);
    }
  };
  scan_at(std::integral_constant<int, 0>{});
  scan_at(std::integral_constant<int, 1>{});
  scan_at(std::integral_constant<int, 2>{});
  auto warp_at = [&](auto i, auto so) {
    constexpr int I = decltype(i)::value, BVw = kChunkedWarpBVs[I];
    constexpr bool SO = decltype(so)::value;
    if constexpr (chunked_warp_ok(Var, K, V, E, C, BVw, kChunkedSmemSm90, SO)) {
      using Tw = WarpScanTraits<Var, K, V, InT, C, BVw, SO>;
      (SO ? k.warp_o : k.warp)[I] =
          reinterpret_cast<const void*>(&chunked_scan_warp_kernel<Var, Tw>);
    }
  };
  if constexpr (chunked_warp_runs(Var, K, V, E, C)) {
    warp_at(std::integral_constant<int, 0>{}, std::false_type{});
    warp_at(std::integral_constant<int, 1>{}, std::false_type{});
#if DELTAC_CHUNKED_WARP_OUTPUT
    warp_at(std::integral_constant<int, 0>{}, std::true_type{});
    warp_at(std::integral_constant<int, 1>{}, std::true_type{});
#endif
  }
  if constexpr (chunked_tma_runs(Var, K, V, E, C)) {
    using Tt = TmaScanTraits<Var, K, V, InT, 1, kTmaScanStages>;
    k.tma = reinterpret_cast<const void*>(&chunked_scan_tma_kernel<Var, Tt>);
  }
  if constexpr (chunked_tmat_runs(Var, K, V, E, C) && tmat_keys_split(K)) {
    using Tt = TmatScanTraits<Var, K, V, InT, 2, kTmatScanStages, false, 2>;
    k.tmat[kTmatKeySplit - 1] = reinterpret_cast<const void*>(&chunked_scan_tmat_kernel<Var, Tt>);
  } else if constexpr (chunked_tmat_runs(Var, K, V, E, C)) {
    static_assert(chunked_tma_runs(Var, K, V, E, C),
                  "the transposed TMA scan's device check (chunked_tma_takes) reads k.tma");
    k.tmat[0] = reinterpret_cast<const void*>(
        &chunked_scan_tmat_kernel<Var, TmatScanTraits<Var, K, V, InT, 1, kTmatScanStages>>);
    if constexpr (V % 128 == 0)
      k.tmat[1] = reinterpret_cast<const void*>(
          &chunked_scan_tmat_kernel<Var, TmatScanTraits<Var, K, V, InT, 2, kTmatScanStages>>);
  }
  k.fold = reinterpret_cast<const void*>(&chunked_fold_kernel<InT, K, V, C>);
  k.fix = reinterpret_cast<const void*>(&chunked_fix_kernel<Tr, chunked_fix_cols(V)>);
  return k;
}
template <deltac_variant Var, int K, int V, class InT, class Cfg>
const ChunkedKernels& chunked_kernels() {
  static const ChunkedKernels k = make_chunked_kernels<Var, K, V, InT, Cfg>();
  return k;
}

// chunked() with a choice of launches, for benchmarks that time the stages
// apart: bit 0 the chunk index and the intra-chunk kernel, bit 1 the scan
// (which reads the workspace an earlier call wrote) and, with the split,
// the fold and the fix-up; bit 2 (value 4) the fold and the fix-up alone. skip: a device flag or
// null; when it is nonzero the scan writes nothing (o and ht untouched).
// force_bv: the scan's V tile (tests; 0: chunked_pick_bv chooses);
// force_split: segments per sequence (0: the rule; chunked_plan, or for the
// warp scan chunked_warp_plan).
// fuse: 1 the intra-chunk work and the block scan in one launch where that
// fits (chunked_fused_launch; stages 3, no split, no forced V tile, varlen
// with one sequence); 0 (the default) never: it measured slower (H200, GDN
// 16/32 heads 1x32768: 2.49 vs 2.01 ms; docs/performance.md, version 9).
// route > 0 (mixed batches, varlen only): this call runs only the sequences
// of more than route tokens and writes nothing of the others (the recurrent
// kernel's, launched with the same route); no split, no fused launch then.
// scan: 0 the rule (chunked_uses_warp_scan): the scan as a chain per warp
// (chunked_scan_warp.cuh) where it runs (16-bit inputs, K = 64, 128 or 256, chunk
// 32 or 64), else the block scan; 1 the block scan; 2 the warp scan with
// output warps beside the chain warps where it runs (compiled only where
// DELTAC_CHUNKED_WARP_OUTPUT is nonzero: tests, benchmarks; not measured
// faster; no split). The warp scan runs no fused launch (fuse is read as 0),
// and falls back to the block scan (no split) where this device's shared memory is too
// small for it; a forced V tile (force_bv: tests, batch-invariant calls)
// that it cannot take makes it run its widest legal one, whatever the grid.
template <deltac_variant Var, int K, int V, class InT, class Cfg>
cudaError_t chunked_stages(const deltac_fwd_params& p, void* workspace, size_t workspace_bytes,
                           cudaStream_t stream, int stages, const int32_t* skip = nullptr,
                           int force_bv = 0, int force_split = 0, int fuse = 0,
                           int32_t route = 0, int scan = 0) {
  return chunked_run_stages<InT>(chunked_kernels<Var, K, V, InT, Cfg>(), p, workspace,
                                 workspace_bytes, stream, stages, skip, force_bv, force_split,
                                 fuse, route, scan);
}

}  // namespace detail

// Workspace bytes for p (with the sequence split the call will choose on this
// device, for either scan; force_split as in chunked_stages).
template <deltac_variant Var, int K, int V, class InT,
          class Cfg = DefaultChunkedConfig<Var, K, V, InT>>
size_t chunked_workspace_bytes(const deltac_fwd_params& p, int force_split = 0) {
  if (p.N < 0 || p.T < 0 || p.B < 0 || p.HV <= 0)
    return 0;
  const detail::ChunkedKernels& k = detail::chunked_kernels<Var, K, V, InT, Cfg>();
  bool warp = false;  // enough for either scan (chunked_stages' scan 0 or 1)
  const int s0 = detail::chunked_run_plan(k, p, 0, force_split, 0, &warp).split;
  const int s1 = detail::chunked_plan(k, p, 0, force_split).split;
  return detail::chunked_carve<InT>(k, p, nullptr, nullptr, s0 > s1 ? s0 : s1);
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

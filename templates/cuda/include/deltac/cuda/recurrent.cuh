// deltac::cuda::recurrent: the fused recurrent delta-rule forward pass on a
// CUDA stream (decode and short sequences).
//
//   template <deltac_variant Var, int K, int V, class InT>
//   cudaError_t recurrent(const deltac_fwd_params& p, cudaStream_t stream);
//
// p holds device pointers (cu_seqlens, slots and accepted too). InT is float
// or __nv_bfloat16 and is the dtype of q, k, v and o; g and beta are f32; the
// state is f32, bf16 or fp8 e4m3 (p.state_dtype), in either layout. h0 and ht may be
// null and may be the same buffer (in-place update); with read_slots they are
// state pools (params.h), and state_steps / accepted are honoured. Graph-
// safe: no allocation, no host synchronisation. K and V must equal p.K and p.V. p.scale == 0 means 1/sqrt(K).
// Returns cudaErrorInvalidValue when p does not match the instantiation
// (nothing is launched), else the launch's error. The kernel assumes the
// rest of p was validated (deltac::check_params). The tile width and warps
// are the defaults of recurrent_rules.h (cuda_recurrent_default_tile,
// cuda_recurrent_default_warps); the entry with every knob fixed is
// deltac::cuda::recurrent_cfg in deltac/cuda/launch_recurrent.cuh.
#ifndef DELTAC_CUDA_RECURRENT_CUH
#define DELTAC_CUDA_RECURRENT_CUH

#include "deltac/cuda/recurrent_kernel.cuh"
#include "deltac/cuda/recurrent_rules.h"
#include "deltac/cuda/recurrent_stream.cuh"
#include "deltac/cuda/recurrent_strip.cuh"
#include "deltac/cuda/traits.cuh"
#include "deltac/check.h"
#include "deltac/params.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <type_traits>

namespace deltac::cuda {
namespace detail {

template <class InT>
constexpr int32_t dtype_of() {
  static_assert(std::is_same_v<InT, float> || std::is_same_v<InT, __nv_bfloat16>,
                "InT: float or __nv_bfloat16");
  return std::is_same_v<InT, float> ? DELTAC_F32 : DELTAC_BF16;
}

inline bool aligned(const void* ptr, uintptr_t bytes) {
  return reinterpret_cast<uintptr_t>(ptr) % bytes == 0;
}

// The strip kernels' 16-byte access flags for p (16-byte aligned bases:
// every lane's offset is a multiple of its access): v and o (io), the
// states (st), q, k and kda's g (qk).
struct RecurrentFlags {
  bool io, st, qk;
};
inline RecurrentFlags recurrent_flags(const deltac_fwd_params& p, int32_t var) {
  return {aligned(p.v, 16) && aligned(p.o, 16),
          aligned(p.h0, 16) && aligned(p.ht, 16) && aligned(p.state_steps, 16),
          aligned(p.q, 16) && aligned(p.k, 16) && (var != DELTAC_VARIANT_KDA || aligned(p.g, 16))};
}

// Whether a one-token call of p with knobs (bv, warps), the strip vec and
// `blocks` in its grid runs the staged kernel (recurrent_strip.cuh's
// strip_staged_kernel) rather than the one holding its state in registers:
// under Auto on a small grid (kRecurrentSmallGrid blocks; an f32 state
// kRecurrentStagedF32Grid) and for 16-bit and fp8 states at the wide tile
// (64 / 2 at batch 64 / 512 bf16: 45.06 / 321.06 us staged against 48.13 /
// 356.29 from registers), under Strip wherever it applies, never under
// Packed; it applies where its geometry fits (strip_staged_fits) to K-first
// states with 16-byte aligned bases. H200 (docs/performance.md "Decode",
// the staged kernel by row groups): batch 1 at 32 / 2, f32 2.67 us staged
// against 2.75 from registers, bf16 2.42 against 2.49; larger grids ran
// faster from registers. The precompiled launch and NVRTC ask this alike.
inline bool recurrent_staged(const deltac_fwd_params& p, int bv, int warps, int vec, Form form,
                             int64_t blocks) {
  const int st = deltac::detail::dtypeSize(p.state_dtype);
  const int64_t small = st == 4 ? kRecurrentStagedF32Grid : kRecurrentSmallGrid;
  // The wide tile of 16-bit and fp8 states staged at every grid (the
  // catalogue's choice for those calls, cuda_recurrent_tile_for).
  const bool wide = st <= 2 && bv == kCudaRecurrentWideTile;
  const bool want = form == Form::Strip || (form == Form::Auto && (blocks <= small || wide));
  return want && p.state_layout == DELTAC_STATE_KV && recurrent_flags(p, p.variant).st &&
         strip_staged_fits(p.K, bv, warps, vec, st, p.in_dtype == DELTAC_F32 ? 4 : 2);
}

// Whether p matches a kernel of (var, K, V, input dtype in_dtype) and has
// what the kernel dereferences.
inline bool recurrent_matches(const deltac_fwd_params& p, int32_t var, int K, int V,
                              int32_t in_dtype) {
  if (p.variant != var || p.K != K || p.V != V)
    return false;
  if (p.in_dtype != in_dtype || p.out_dtype != in_dtype ||
      (p.state_dtype != DELTAC_F32 && p.state_dtype != DELTAC_BF16 &&
       p.state_dtype != DELTAC_FP8_E4M3))
    return false;
  if (p.state_scale && p.state_dtype != DELTAC_FP8_E4M3)
    return false;
  if (p.read_slots ? p.num_slots <= 0 : p.num_slots != 0)
    return false;
  if (p.state_layout != DELTAC_STATE_KV && p.state_layout != DELTAC_STATE_VK)
    return false;
  if (p.H <= 0 || p.HV <= 0 || p.HV % p.H != 0 || p.N < 0 || p.T < 0)
    return false;
  if (!p.q || !p.k || !p.v || !p.beta || !p.o)
    return false;
  if (var != DELTAC_VARIANT_DELTA && !p.g)
    return false;
  if (p.cu_seqlens ? p.B != 1 : p.N != p.B)
    return false;
  return true;
}
template <deltac_variant Var, int K, int V, class InT>
bool matches(const deltac_fwd_params& p) {
  return recurrent_matches(p, Var, K, V, dtype_of<InT>());
}

// kernel<<<blocks, threads, 0, stream>>>(args...), with programmatic
// dependent launch allowed when `pdl` (the kernel waits for its
// predecessor before touching memory: recurrent_kernel.cuh's pdl_enter).
// launch_ex_smem: with `smem` bytes of dynamic shared memory.
template <class... Params, class... Args>
cudaError_t launch_ex_smem(void (*kernel)(Params...), unsigned blocks, int threads, size_t smem,
                           cudaStream_t stream, bool pdl, Args... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(blocks);
  cfg.blockDim = dim3(threads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, args...);
}
template <class... Params, class... Args>
cudaError_t launch_ex(void (*kernel)(Params...), unsigned blocks, int threads, cudaStream_t stream,
                      bool pdl, Args... args) {
  return launch_ex_smem(kernel, blocks, threads, 0, stream, pdl, args...);
}

// The stream kernel (recurrent_stream.cuh): where it runs, and its launch.
// Its blocks aim at this much shared memory (stages of the ring: 2 to
// kStreamMaxStages; H200: 2 stages measured best, more cost blocks per
// multiprocessor) and take at most kStreamSmemMax (and the device's limit).
constexpr size_t kStreamSmemTarget = 64 * 1024;
constexpr size_t kStreamSmemMax = 200 * 1024;
// Stages of the ring, when > 0 (1..kStreamMaxStages), instead of the rule
// above: set by the decode bench only, to measure the rule.
inline int stream_stages_override = 0;

// Whether call p may run the stream kernel: no cu_seqlens, state_steps,
// accepted, batch-invariant mode or routing; 1..DELTAC_MAX_DECODE_TOKENS
// tokens; K-first states; 16-byte aligned bases (cp.async, vector stores).
inline bool stream_applies(const deltac_fwd_params& p, int32_t var, bool det, int32_t route) {
  if (det || route || p.cu_seqlens || p.state_steps || p.accepted)
    return false;
  if (p.T < 1 || p.T > DELTAC_MAX_DECODE_TOKENS || p.state_layout != DELTAC_STATE_KV)
    return false;
  return aligned(p.q, 16) && aligned(p.k, 16) && aligned(p.v, 16) && aligned(p.o, 16) &&
         aligned(p.h0, 16) && aligned(p.ht, 16) &&
         (var != DELTAC_VARIANT_KDA || aligned(p.g, 16));
}

// Per device: whether the stream kernel has sm_80+ code for it (PTX and
// machine code: a body compiled for an older target only traps), its
// multiprocessors, the dynamic shared memory a block may take there, and
// its blocks per multiprocessor at each token count (rule stages).
struct StreamDeviceInfo {
  std::atomic<int> ready{0}, usable{0}, sms{0}, smem_max{0};
  std::atomic<int> blocks[DELTAC_MAX_DECODE_TOKENS + 1] = {};
};

// Launches the stream kernel of (Var, Tr, InT, StT) for p; *ran false (and
// nothing launched) where this device or binary cannot run it.
template <deltac_variant Var, class Tr, class InT, class StT>
cudaError_t launch_stream(const deltac_fwd_params& p, float scale, cudaStream_t stream, bool pdl,
                          const int32_t* skip, bool* ran) {
  *ran = false;
  auto* kernel = stream_kernel<Var, Tr, InT, StT>;
  const StreamLayout<Tr, InT, StT> lay(p.T, Var == DELTAC_VARIANT_KDA);
  size_t stages = kStreamSmemTarget / size_t(lay.bytes);
  stages = stages < 2 ? 2 : stages > size_t(kStreamMaxStages) ? size_t(kStreamMaxStages) : stages;
  const bool forced = stream_stages_override > 0 && stream_stages_override <= kStreamMaxStages;
  if (forced)
    stages = size_t(stream_stages_override);
  const size_t smem = stages * size_t(lay.bytes);
  constexpr int kThreads = (Tr::kWarps + 1) * 32;
  constexpr int kDevices = 64;
  static StreamDeviceInfo info[kDevices];
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess)
    return e;
  if (dev < 0 || dev >= kDevices)
    return cudaSuccess;
  StreamDeviceInfo& d = info[dev];
  if (!d.ready.load(std::memory_order_acquire)) {
    cudaFuncAttributes a{};
    int major = 0, sms = 0, optin = 0;
    if ((e = cudaFuncGetAttributes(&a, kernel)) != cudaSuccess ||
        (e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev)) != cudaSuccess ||
        (e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess ||
        (e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev)) !=
            cudaSuccess)
      return e;
    const bool usable = a.ptxVersion >= 80 && a.binaryVersion >= 80 && major >= 8;
    int limit = optin - int(a.sharedSizeBytes);
    limit = limit < int(kStreamSmemMax) ? limit : int(kStreamSmemMax);
    if (usable && limit > 0 &&
        (e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, limit)) !=
            cudaSuccess)
      return e;
    d.usable.store(usable && limit > 0);
    d.sms.store(sms);
    d.smem_max.store(limit);
    d.ready.store(1, std::memory_order_release);
  }
  if (!d.usable.load() || smem > size_t(d.smem_max.load()))
    return cudaSuccess;
  int per_sm = forced ? 0 : d.blocks[p.T].load();  // the cache holds the rule's stages
  if (per_sm == 0) {
    if ((e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, smem)) !=
        cudaSuccess)
      return e;
    if (per_sm <= 0)
      return cudaSuccess;
    if (!forced)
      d.blocks[p.T].store(per_sm);
  }
  const int64_t tiles = int64_t(p.N) * p.HV * Tr::kTiles;
  const int64_t cap = int64_t(d.sms.load()) * per_sm;
  *ran = true;
  return launch_ex_smem(kernel, unsigned(tiles < cap ? tiles : cap), kThreads, smem, stream, pdl,
                        p, scale, int(stages), skip);
}

// Launches the instance of knobs (BV, Warps) for state type StT. Form::Auto
// picks by what measured faster on the H200 (docs/performance.md, decode):
// one token per sequence (decode): the strip kernel where its warps read at
// least 64 contiguous bytes of a state row (StripTraits::kRowBytes), else
// the split kernel; several tokens: the stream kernel on large grids
// (stream_auto, where stream_applies), else the strip kernel wherever its
// geometry exists (no barrier per token). The split kernel is that of traits
// RecurrentTraits<K, V, BV, Warps>: the guarded one when Guarded, else the
// plain entry kernels of recurrent_kernel.cuh. route > 0 (mixed batches,
// varlen; guarded instances only): sequences of more than route tokens are
// the chunked kernel's, their blocks return at once (routed_away).
template <deltac_variant Var, int K, int V, int BV, int Warps, class InT, class StT,
          bool PerToken, bool Guarded>
cudaError_t launch_st(const deltac_fwd_params& p, float scale, bool vec_io, bool vec_state,
                      cudaStream_t stream, const int32_t* skip, Form form, bool pdl,
                      bool det, int32_t route) {
  if (!Guarded && route > 0)
    return cudaErrorInvalidValue;
  constexpr bool kBf16 = std::is_same_v<StT, __nv_bfloat16>;
  constexpr bool kFp8 = kFp8State<StT>;  // the geometry of a bf16 state
  constexpr int kVec = strip_vec(K, BV, Warps, kBf16 || kFp8, false);     // several tokens
  constexpr int kVecOne = strip_vec(K, BV, Warps, kBf16 || kFp8, true);   // one token
  constexpr bool kSplit = (BV == 16 || BV == 32) && cuda_recurrent_warps_ok(K, BV, Warps);
  const bool one = recurrent_one_token(p, det);  // false with state_steps / accepted
  const RecurrentFlags f = recurrent_flags(p, Var);
  const int32_t* sk = Guarded ? skip : nullptr;
  const int64_t grid = int64_t(p.N) * p.HV * (V / BV);
  RecurrentKernel rk = recurrent_choice(K, BV, Warps, int(sizeof(StT)), one, form, grid).kernel;
  if (rk == RecurrentKernel::Stream || (form == Form::Auto && stream_auto(Var, one, grid))) {
    if constexpr (kVec != 0 && stream_geom_ok(K, BV, Warps, kVec, int(sizeof(StT)))) {
      if (stream_applies(p, Var, det, route)) {
        bool ran = false;
        const cudaError_t e = launch_stream<Var, StripTraits<K, V, BV, Warps, kVec>, InT, StT>(
            p, scale, stream, pdl, sk, &ran);
        if (ran || e != cudaSuccess)
          return e;
      }
    }
    if (rk == RecurrentKernel::Stream) {  // where the stream kernel does not run
      form = Form::Auto;
      rk = recurrent_choice(K, BV, Warps, int(sizeof(StT)), one, form, grid).kernel;
    }
  }
  if constexpr (kVecOne != 0) {
    using Tr = StripTraits<K, V, BV, Warps, kVecOne>;
    if (rk == RecurrentKernel::StripOne) {
      const int64_t blocks = int64_t(p.N) * p.HV * Tr::kTiles;
      if (blocks > 0x7fffffff)
        return cudaErrorInvalidConfiguration;
      if constexpr (StagedFits<Tr, InT, StT>::value) {
        if (recurrent_staged(p, BV, Warps, kVecOne, form, blocks))
          return launch_ex(strip_staged_kernel<Var, Tr, InT, StT>, unsigned(blocks),
                           Tr::kThreads, stream, pdl, p, scale, f.io, f.st, f.qk, sk);
      }
      return launch_ex(strip_one_kernel<Var, Tr, InT, StT>, unsigned(blocks),
                       Tr::kThreads, stream, pdl, p, scale, f.io, f.st, f.qk, sk);
    }
  }
  if constexpr (kVec != 0) {
    using Tr = StripTraits<K, V, BV, Warps, kVec>;
    if (rk == RecurrentKernel::Strip) {
      const int64_t blocks = int64_t(p.N) * p.HV * Tr::kTiles;
      if (blocks > 0x7fffffff)
        return cudaErrorInvalidConfiguration;
      return launch_ex(strip_kernel<Var, Tr, InT, StT, PerToken>, unsigned(blocks),
                       Tr::kThreads, stream, pdl, p, scale, f.io, f.st, f.qk, sk, route);
    }
  }
  if constexpr (kSplit) {
    using Tr = RecurrentTraits<K, V, BV, Warps>;
    if (rk == RecurrentKernel::Split) {
      const int64_t blocks = int64_t(p.N) * p.HV * Tr::kTiles;
      if (blocks > 0x7fffffff)
        return cudaErrorInvalidConfiguration;
      if constexpr (Guarded) {
        if constexpr (Tr::kThreads > 128)
          return launch_ex(guarded_kernel_2<Var, Tr, InT, StT, PerToken>, unsigned(blocks),
                           Tr::kThreads, stream, pdl, p, scale, vec_io, vec_state, skip, route);
        else
          return launch_ex(guarded_kernel<Var, Tr, InT, StT, PerToken>, unsigned(blocks),
                           Tr::kThreads, stream, pdl, p, scale, vec_io, vec_state, skip, route);
      } else if constexpr (Tr::kThreads > 128) {
        return launch_ex(recurrent_kernel_2<Var, Tr, InT, StT, PerToken>, unsigned(blocks),
                         Tr::kThreads, stream, pdl, p, scale, vec_io, vec_state);
      } else {
        return launch_ex(recurrent_kernel<Var, Tr, InT, StT, PerToken>, unsigned(blocks),
                         Tr::kThreads, stream, pdl, p, scale, vec_io, vec_state);
      }
    }
  }
  return cudaErrorInvalidValue;  // knobs without a kernel for this call (bench only)
}

// launch_st for p.state_dtype (f32, bf16 or fp8 e4m3) and per-token stores or not.
// StateOnly >= 0 (a deltac_dtype): only that state dtype's kernels are
// compiled (the runtime's units, one per state dtype: a smaller module to
// load on the first call); other calls return cudaErrorInvalidValue.
template <deltac_variant Var, int K, int V, int BV, int Warps, class InT, bool Guarded = false,
          int StateOnly = -1>
cudaError_t launch(const deltac_fwd_params& p, float scale, bool vec_io, bool vec_state,
                   cudaStream_t stream, const int32_t* skip = nullptr, Form form = Form::Auto,
                   bool pdl = true, bool det = false, int32_t route = 0) {
  auto with = [&](auto state) {  // state: a value of the state's element type
    using S = decltype(state);
    return p.state_steps || p.accepted
               ? launch_st<Var, K, V, BV, Warps, InT, S, true, Guarded>(
                     p, scale, vec_io, vec_state, stream, skip, form, pdl, det, route)
               : launch_st<Var, K, V, BV, Warps, InT, S, false, Guarded>(
                     p, scale, vec_io, vec_state, stream, skip, form, pdl, det, route);
  };
  using B16 = __nv_bfloat16;
  using F8 = __nv_fp8_e4m3;
  if constexpr (StateOnly >= 0) {  // the other state dtypes: not instantiated
    if (p.state_dtype != StateOnly)
      return cudaErrorInvalidValue;
    if constexpr (StateOnly == DELTAC_BF16)
      return with(B16{});
    else if constexpr (StateOnly == DELTAC_FP8_E4M3)
      return with(F8{});
    else
      return with(0.f);
  } else {
    if (p.state_dtype == DELTAC_FP8_E4M3)
      return with(F8{});
    if (p.state_dtype == DELTAC_BF16)
      return with(B16{});
    return with(0.f);
  }
}

// Scale and vector-access flags of a call (shared by every entry).
inline void call_setup(const deltac_fwd_params& p, int in_bytes, float* scale, bool* vec_io,
                       bool* vec_state) {
  *scale = p.scale != 0.f ? p.scale : 1.f / std::sqrt(float(p.K));
  // Vector (4-element) access needs 16-byte aligned f32 / 8-byte aligned bf16
  // rows; element-aligned pointers still work through scalar accesses.
  *vec_io = aligned(p.v, 4 * in_bytes) && aligned(p.o, 4 * in_bytes);
  // The state: 4 elements (16 bytes f32, 8 bytes bf16, 4 fp8) in h0, ht, state_steps.
  const uintptr_t sv = p.state_dtype == DELTAC_BF16       ? 8
                       : p.state_dtype == DELTAC_FP8_E4M3 ? 4
                                                          : 16;
  *vec_state = aligned(p.h0, sv) && aligned(p.ht, sv) && aligned(p.state_steps, sv);
}

// The instance with every knob fixed: tile_v = BV, warps = Warps (legal per
// deltac::cuda_recurrent_warps_ok, checked at compile time by the traits).
// `form` / `pdl`: which kernel, and programmatic dependent launch (bench,
// tests). StateOnly: as launch's.
template <deltac_variant Var, int K, int V, class InT, int BV, int Warps, int StateOnly = -1>
cudaError_t recurrent_knobs(const deltac_fwd_params& p, cudaStream_t stream,
                            const int32_t* skip, Form form = Form::Auto, bool pdl = true,
                            bool det = false, int32_t route = 0) {
  if (!matches<Var, K, V, InT>(p))
    return cudaErrorInvalidValue;
  if (p.N == 0)
    return cudaSuccess;
  float scale;
  bool vec_io, vec_state;
  call_setup(p, int(sizeof(InT)), &scale, &vec_io, &vec_state);
  return launch<Var, K, V, BV, Warps, InT, /*Guarded=*/true, StateOnly>(
      p, scale, vec_io, vec_state, stream, skip, form, pdl, det, route);
}

// recurrent() with the V-tile width chosen by the caller: bv = 16, 32 (where
// it divides V) or kCudaRecurrentWideTile (where it divides V; one-token calls
// of 16-bit and fp8 states only), or 0 for the catalogue's default
// (cuda_recurrent_tile_for, as default_config: the wide tile for one-token
// 16-bit and fp8 states on large grids, else cuda_recurrent_default_tile), with
// cuda_recurrent_default_warps; form and pdl as in recurrent_knobs.
template <deltac_variant Var, int K, int V, class InT>
cudaError_t recurrent_bv(const deltac_fwd_params& p, cudaStream_t stream, int bv,
                         Form form = Form::Auto, bool pdl = true) {
  if (!matches<Var, K, V, InT>(p))
    return cudaErrorInvalidValue;
  constexpr int kWide = cuda_recurrent_default_tile(V);
  constexpr bool kHasWide = V % kCudaRecurrentWideTile == 0;
  if (bv != 0 && bv != 16 && bv != kWide && !(kHasWide && bv == kCudaRecurrentWideTile))
    return cudaErrorInvalidValue;
  if (p.N == 0)
    return cudaSuccess;
  float scale;
  bool vec_io, vec_state;
  call_setup(p, int(sizeof(InT)), &scale, &vec_io, &vec_state);

  if (bv == 0) {  // the catalogue's default tile (default_config)
    bv = cuda_recurrent_tile_for(V, deltac::detail::dtypeSize(p.state_dtype),
                                 recurrent_one_token(p, false),
                                 int64_t(p.N) * p.HV * (V / kWide));
  }
  if constexpr (kHasWide) {
    constexpr int kW = kCudaRecurrentWideTile;
    if (bv == kW)
      return launch<Var, K, V, kW, cuda_recurrent_default_warps(K, kW), InT>(
          p, scale, vec_io, vec_state, stream, nullptr, form, pdl);
  }
  if (bv == 16)
    return launch<Var, K, V, 16, cuda_recurrent_default_warps(K, 16), InT>(
        p, scale, vec_io, vec_state, stream, nullptr, form, pdl);
  return launch<Var, K, V, kWide, cuda_recurrent_default_warps(K, kWide), InT>(
      p, scale, vec_io, vec_state, stream, nullptr, form, pdl);
}

}  // namespace detail

template <deltac_variant Var, int K, int V, class InT>
cudaError_t recurrent(const deltac_fwd_params& p, cudaStream_t stream) {
  return detail::recurrent_bv<Var, K, V, InT>(p, stream, 0);
}

}  // namespace deltac::cuda

#endif  // DELTAC_CUDA_RECURRENT_CUH

// The fused recurrent (token-by-token) delta-rule kernel. One block owns the
// [K, BV] state tile of one (sequence, value head, V-tile) in registers for
// the whole sequence: the state is read once and written once (plus once
// per token to state_steps when asked).
#ifndef DELTAC_CUDA_RECURRENT_KERNEL_CUH
#define DELTAC_CUDA_RECURRENT_KERNEL_CUH

#include "deltac/cuda/convert.cuh"
#include "deltac/cuda/traits.cuh"
#include "deltac/params.h"

#include <cstdint>
#include <type_traits>

namespace deltac::cuda::detail {

// f32 -> the state's element type (round to nearest even for bf16 and
// fp8; fp8 as convert.cuh's fp8_bits).
template <class T>
__device__ __forceinline__ T from_float(float x) {
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else if constexpr (kFp8State<T>) {
    T r;
    r.__x = __nv_fp8_storage_t(fp8_bits(x));
    return r;
  } else {
    return __float2bfloat16_rn(x);
  }
}

// A warp's q . k of one token, normalised when l2norm (then *rq, *rk are
// 1 / ||q||, 1 / ||k||, else 1): lane reads q[lane], q[lane + 32], ...
template <int K>
__device__ __forceinline__ float warp_qk_norms(const float* q, const float* k, int lane,
                                               bool l2norm, float* rq, float* rk) {
  float dot = 0.f, ssq = 0.f, ssk = 0.f;
#pragma unroll
  for (int i = lane; i < K; i += 32) {
    const float x = q[i], y = k[i];
    dot = fmaf(x, y, dot);
    ssq = fmaf(x, x, ssq);
    ssk = fmaf(y, y, ssk);
  }
  dot = reduce_rows<1>(dot);
  *rq = *rk = 1.f;
  if (l2norm) {
    *rq = 1.f / sqrtf(reduce_rows<1>(ssq) + 1e-6f);
    *rk = 1.f / sqrtf(reduce_rows<1>(ssk) + 1e-6f);
  }
  return dot * *rq * *rk;
}

// Per token, with h' = a (.) h the decayed state:
//   hk = h'^T k, hq = h'^T q (one pass over the registers, one block-wide
//   reduction), u = beta (v - hk), h = h' + k u^T,
//   o = scale (hq + u (k . q))  ( = scale h^T q, without a second reduction).
// `vec_io` / `vec_state` say the v/o and h0/ht/state_steps pointers allow
// vector access. StT: the state's element type (float or __nv_bfloat16).
// The decode fields (params.h): the state is read from slot read_slots[n]
// of h0 and written to slot write_slots[n] of ht (-1 or out of range: the
// zero state / not written), after accepted[n] tokens (default: all), and
// after every token to state_steps.
//
// PerToken: the instance for calls with state_steps or accepted, which
// stores inside the token loop; the other writes ht once after it (a store
// in the loop alone costs ~35 registers per thread with an f32 state: 127
// instead of 92 at K = V = 128, 4 warps).
template <deltac_variant Var, class Tr, class InT, class StT, bool PerToken>
__device__ __forceinline__ void recurrent_body(const deltac_fwd_params& p, float scale,
                                               bool vec_io, bool vec_state) {
  constexpr int K = Tr::K, V = Tr::V, BV = Tr::BV;
  constexpr int kWarps = Tr::kWarps, kRows = Tr::kRowsPerThread;
  constexpr int kStep = Tr::kRowsPerStep, kLanesV = Tr::kLanesV;
  constexpr int kThreads = Tr::kThreads;
  constexpr int kLoads = (K + kThreads - 1) / kThreads;  // q/k elements staged per thread
  constexpr bool kKda = Var == DELTAC_VARIANT_KDA;
  constexpr bool kGated = Var == DELTAC_VARIANT_GATED;

  __shared__ float sq[K], sk[K];
  __shared__ float sg[kKda ? K : 1];
  __shared__ __align__(16) float sp[2][kWarps][BV];  // per-warp partial h'^T k, h'^T q

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int col = (lane % kLanesV) * 4;  // first of this thread's 4 columns in the tile
  const int rsub = lane / kLanesV;       // row inside a warp step

  int bid = blockIdx.x;
  const int tile = bid % Tr::kTiles;
  bid /= Tr::kTiles;
  const int j = bid % p.HV;  // value head
  const int n = bid / p.HV;  // sequence
  const int hqk = j / (p.HV / p.H);
  const int v0 = tile * BV + col;

  int64_t t0, t1;
  if (p.cu_seqlens) {
    t0 = p.cu_seqlens[n];
    t1 = p.cu_seqlens[n + 1];
  } else {
    t0 = int64_t(n) * p.T;
    t1 = t0 + p.T;
  }
  auto row = [&](int i) { return (i * kWarps + warp) * kStep + rsub; };

  const InT* q = static_cast<const InT*>(p.q);
  const InT* k = static_cast<const InT*>(p.k);
  const InT* v = static_cast<const InT*>(p.v);
  InT* o = static_cast<InT*>(p.o);

  // Inputs of the next token, loaded one token ahead into registers.
  float nq[kLoads], nk[kLoads], ng[kLoads], nv[4], nb = 0.f, na = 1.f;
  auto prefetch = [&](int64_t t) {
    const int64_t qoff = (t * p.H + hqk) * K;
    const int64_t th = t * p.HV + j;
#pragma unroll
    for (int l = 0; l < kLoads; ++l) {
      const int i = tid + l * kThreads;
      if (i < K) {
        nq[l] = to_float(q[qoff + i]);
        nk[l] = to_float(k[qoff + i]);
        if (kKda)
          ng[l] = p.g[th * K + i];
      }
    }
    load4(v + th * V + v0, vec_io, nv);
    nb = p.beta[th];
    if (kGated)
      na = p.g[th];
  };
  // The first token's inputs before the slot lookup: their latency hides
  // the dependent load of the slot index (batch 1 with a pool).
  if (t0 < t1)
    prefetch(t0);


  // Slots (params.h): without a pool, sequence n's own state.
  int32_t rs = p.h0 ? n : -1, ws = p.ht ? n : -1;
  if (p.read_slots) {
    rs = p.h0 ? p.read_slots[n] : -1;
    ws = p.ht ? (p.write_slots ? p.write_slots : p.read_slots)[n] : -1;
    rs = rs >= 0 && rs < p.num_slots ? rs : -1;
    ws = ws >= 0 && ws < p.num_slots ? ws : -1;
  }
  // The state kept in ht: after `acc` tokens (clamped: never out of bounds).
  int64_t acc = t1 - t0;
  if (p.accepted) {
    const int64_t a = p.accepted[n];
    acc = a < 0 ? 0 : a < acc ? a : acc;
  }

  // Initial state. An fp8 state is e4m3 times the head's scale (params.h).
  float h[kRows][4];
  const bool vk = p.state_layout == DELTAC_STATE_VK;
  const float s8 = kFp8State<StT> ? fp8_scale_of(p.state_scale, j) : 1.f;
  auto store_state = [&](StT* dst) {
    const float inv = 1.f / s8;
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      float x[4];
#pragma unroll
      for (int c = 0; c < 4; ++c) x[c] = kFp8State<StT> ? h[i][c] * inv : h[i][c];
      if (!vk) {
        store4(dst + int64_t(row(i)) * V + v0, vec_state, x);
      } else {
#pragma unroll
        for (int c = 0; c < 4; ++c) dst[int64_t(v0 + c) * K + row(i)] = from_float<StT>(x[c]);
      }
    }
  };
  StT* ht = ws >= 0 ? static_cast<StT*>(p.ht) + (int64_t(ws) * p.HV + j) * K * V : nullptr;
  if (rs >= 0) {
    const StT* h0 = static_cast<const StT*>(p.h0) + (int64_t(rs) * p.HV + j) * K * V;
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      if (!vk) {
        load4(h0 + int64_t(row(i)) * V + v0, vec_state, h[i]);
      } else {
#pragma unroll
        for (int c = 0; c < 4; ++c) h[i][c] = to_float(h0[int64_t(v0 + c) * K + row(i)]);
      }
      if constexpr (kFp8State<StT>)
#pragma unroll
        for (int c = 0; c < 4; ++c) h[i][c] *= s8;
    }
  } else {
#pragma unroll
    for (int i = 0; i < kRows; ++i)
#pragma unroll
      for (int c = 0; c < 4; ++c) h[i][c] = 0.f;
  }
  if (PerToken && acc == 0 && ht)
    store_state(ht);

  for (int64_t t = t0; t < t1; ++t) {
    const int64_t th = t * p.HV + j;
#pragma unroll
    for (int l = 0; l < kLoads; ++l) {
      const int i = tid + l * kThreads;
      if (i < K) {
        sq[i] = nq[l];
        sk[i] = nk[l];
        if (kKda)
          sg[i] = ng[l];
      }
    }
    float vv[4] = {nv[0], nv[1], nv[2], nv[3]};
    const float beta = nb;
    const float a = kGated ? expf(na) : 1.f;
    if (t + 1 < t1)
      prefetch(t + 1);
    __syncthreads();

    // q . k and the L2 norms, each warp on its own.
    float rq, rk;
    const float qk = warp_qk_norms<K>(sq, sk, lane, p.qk_l2norm, &rq, &rk);

    // Decay, then this thread's part of h'^T k and h'^T q.
    float kr[kRows], pk[4] = {0.f, 0.f, 0.f, 0.f}, pq[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const int r = row(i);
      kr[i] = sk[r] * rk;
      const float qr = sq[r] * rq;
      const float ai = kKda ? expf(sg[r]) : a;
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        if (Var != DELTAC_VARIANT_DELTA)
          h[i][c] *= ai;
        pk[c] = fmaf(h[i][c], kr[i], pk[c]);
        pq[c] = fmaf(h[i][c], qr, pq[c]);
      }
    }
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      pk[c] = reduce_rows<kLanesV>(pk[c]);
      pq[c] = reduce_rows<kLanesV>(pq[c]);
    }
    if (rsub == 0) {
      *reinterpret_cast<float4*>(&sp[0][warp][col]) = make_float4(pk[0], pk[1], pk[2], pk[3]);
      *reinterpret_cast<float4*>(&sp[1][warp][col]) = make_float4(pq[0], pq[1], pq[2], pq[3]);
    }
    __syncthreads();

    float hk[4] = {0.f, 0.f, 0.f, 0.f}, hq[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float4 x = *reinterpret_cast<const float4*>(&sp[0][w][col]);
      const float4 y = *reinterpret_cast<const float4*>(&sp[1][w][col]);
      hk[0] += x.x, hk[1] += x.y, hk[2] += x.z, hk[3] += x.w;
      hq[0] += y.x, hq[1] += y.y, hq[2] += y.z, hq[3] += y.w;
    }
    float u[4], out[4];
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      u[c] = beta * (vv[c] - hk[c]);
      out[c] = scale * fmaf(u[c], qk, hq[c]);
    }
#pragma unroll
    for (int i = 0; i < kRows; ++i)
#pragma unroll
      for (int c = 0; c < 4; ++c) h[i][c] = fmaf(kr[i], u[c], h[i][c]);
    if (warp == 0 && rsub == 0)
      store4(o + th * V + v0, vec_io, out);
    if constexpr (PerToken) {
      if (p.state_steps)
        store_state(static_cast<StT*>(p.state_steps) + th * K * V);
      if (t - t0 + 1 == acc && ht)  // the state kept: written once
        store_state(ht);
    }
  }
  if (!PerToken && ht)  // the final state, written once
    store_state(ht);
}

// Programmatic dependent launch (sm_90): wait for the grid this launch
// depends on (a no-op without one), then let the next grid be scheduled.
// Everything the kernel reads or writes comes after the wait.
__device__ __forceinline__ void pdl_enter() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

// Mixed batches (route > 0, varlen): whether sequence n has more than route
// tokens, i.e. belongs to the chunked kernel: this kernel's blocks of it
// return before touching o or ht.
__device__ __forceinline__ bool routed_away(const deltac_fwd_params& p, int n, int32_t route) {
  return route > 0 && p.cu_seqlens && p.cu_seqlens[n + 1] - p.cu_seqlens[n] > route;
}

// Entry points. ptxas picks few registers for launch bounds with no
// minimum, but spilled at 256 threads; asking for 2 blocks per SM there
// (at most 128 registers) removes the spills.
template <deltac_variant Var, class Tr, class InT, class StT, bool PerToken>
__global__ void __launch_bounds__(Tr::kThreads)
    recurrent_kernel(const deltac_fwd_params p, float scale, bool vec_io, bool vec_state) {
  pdl_enter();
  recurrent_body<Var, Tr, InT, StT, PerToken>(p, scale, vec_io, vec_state);
}

template <deltac_variant Var, class Tr, class InT, class StT, bool PerToken>
__global__ void __launch_bounds__(Tr::kThreads, 2)
    recurrent_kernel_2(const deltac_fwd_params p, float scale, bool vec_io, bool vec_state) {
  pdl_enter();
  recurrent_body<Var, Tr, InT, StT, PerToken>(p, scale, vec_io, vec_state);
}

// The entry kernels with a guard: `skip`, when not null, is a device flag
// read first; nonzero makes every block return at once without touching o
// or ht (the runtime's device-side value check sets it). The guard is one
// uniform branch; the runtime's instances (recurrent_knobs) always use these
// kernels, so each config is compiled once.
template <deltac_variant Var, class Tr, class InT, class StT, bool PerToken>
__global__ void __launch_bounds__(Tr::kThreads)
    guarded_kernel(const deltac_fwd_params p, float scale, bool vec_io, bool vec_state,
                   const int32_t* skip, int32_t route) {
  pdl_enter();
  if ((skip && *skip != 0) || routed_away(p, int(blockIdx.x) / Tr::kTiles / p.HV, route))
    return;
  recurrent_body<Var, Tr, InT, StT, PerToken>(p, scale, vec_io, vec_state);
}

template <deltac_variant Var, class Tr, class InT, class StT, bool PerToken>
__global__ void __launch_bounds__(Tr::kThreads, 2)
    guarded_kernel_2(const deltac_fwd_params p, float scale, bool vec_io, bool vec_state,
                     const int32_t* skip, int32_t route) {
  pdl_enter();
  if ((skip && *skip != 0) || routed_away(p, int(blockIdx.x) / Tr::kTiles / p.HV, route))
    return;
  recurrent_body<Var, Tr, InT, StT, PerToken>(p, scale, vec_io, vec_state);
}

}  // namespace deltac::cuda::detail

#endif  // DELTAC_CUDA_RECURRENT_KERNEL_CUH

// Stages 1-4 of the chunked forward pass, all intra-chunk and parallel over
// every (chunk, value head): chunk index, gate cumsum, the WY/UT transform
// and the decayed operands the sequential scan consumes.
//
// Per chunk of C tokens (rows i, j; G the in-chunk cumsum of the log decay,
// gated: one per token, kda: one per token and key channel; Γ_i = exp(G_i)):
//   A   = strictly-lower(diag(beta) (K Kᵀ ∘ exp(G_i - G_j)))
//   T   = (I + A)⁻¹            (16 x 16 diagonal blocks by forward
//                               substitution, then the off-diagonal blocks)
//   W   = T diag(beta) (K ∘ Γ),  U = T diag(beta) V
//   Aqk = scale lower(Q Kᵀ ∘ exp(G_i - G_j)),  Qg = scale Q ∘ Γ
//   KdT = (K ∘ exp(G_last - G))ᵀ,  gamma = exp(G_last)
// For kda the decay is per key channel: the diagonal 16 x 16 blocks of A and
// Aqk take exact exponentials per element, the blocks below them factor
// through the row before the block (both factors <= 1) into tensor-core
// products. Gates are clamped at kGateFloor (exp of any sum holding one is
// exactly 0 in f32), so a -inf gate resets exactly and never meets
// (-inf) - (-inf); NaN gates stay NaN.
#ifndef DELTAC_CUDA_CHUNKED_PREP_CUH
#define DELTAC_CUDA_CHUNKED_PREP_CUH

#include "deltac/cuda/chunked_mma.cuh"
#include "deltac/cuda/chunked_traits.cuh"
#include "deltac/params.h"

#include <cstdint>

namespace deltac::cuda::detail {

// Workspace views (device pointers), carved by the host entry.
template <class Ts>
struct ChunkedWs {
  int32_t* offsets;  // [N + 1] first chunk slot of each sequence (varlen only)
  Ts *w, *wlo, *qg, *kdt, *aqk;  // wlo: W - W_hi (16-bit types), else unused
  float *u, *gamma;
  int64_t max_chunks;  // slots allocated
  // Device flag (or null): when nonzero the scan returns at once and writes
  // no output (the runtime's checking mode sets it on the device).
  const int32_t* skip;
};

// Token range of sequence n, clamped into [0, B*T) so that a bad cu_seqlens
// can never index out of bounds.
__device__ __forceinline__ void seq_bounds(const deltac_fwd_params& p, int n, int64_t& s0,
                                           int64_t& s1) {
  const int64_t total = int64_t(p.B) * p.T;
  if (p.cu_seqlens) {
    s0 = p.cu_seqlens[n];
    s1 = p.cu_seqlens[n + 1];
    s0 = s0 < 0 ? 0 : (s0 > total ? total : s0);
    s1 = s1 < s0 ? s0 : (s1 > total ? total : s1);
  } else {
    s0 = int64_t(n) * p.T;
    s1 = s0 + p.T;
  }
}

// Chunk slots of sequence n: [first, last).
__device__ __forceinline__ void seq_slots(const deltac_fwd_params& p, const int32_t* offsets,
                                          int n, int C, int64_t& first, int64_t& last) {
  if (p.cu_seqlens) {
    first = offsets[n];
    last = offsets[n + 1];
  } else {
    const int64_t per = (int64_t(p.T) + C - 1) / C;
    first = n * per;
    last = first + per;
  }
}

// Varlen: offsets[n] = sum over earlier sequences of ceil(len / C), clamped
// to the slots allocated. One block.
template <int C>
__global__ void __launch_bounds__(1024) chunked_index_kernel(const deltac_fwd_params p,
                                                             int32_t* offsets,
                                                             int64_t max_chunks) {
  __shared__ int64_t part[1024];
  const int tid = threadIdx.x, nth = blockDim.x;
  const int per = (p.N + nth - 1) / nth;
  const int b = tid * per, e = min(p.N, b + per);
  int64_t sum = 0;
  for (int n = b; n < e; ++n) {
    int64_t s0, s1;
    seq_bounds(p, n, s0, s1);
    sum += (s1 - s0 + C - 1) / C;
  }
  part[tid] = sum;
  __syncthreads();
  if (tid == 0) {
    int64_t run = 0;
    for (int i = 0; i < nth; ++i) {
      const int64_t x = part[i];
      part[i] = run;
      run += x;
    }
  }
  __syncthreads();
  int64_t run = part[tid];
  for (int n = b; n < e; ++n) {
    offsets[n] = int32_t(run < max_chunks ? run : max_chunks);
    int64_t s0, s1;
    seq_bounds(p, n, s0, s1);
    run += (s1 - s0 + C - 1) / C;
  }
  if (tid == nth - 1)
    offsets[p.N] = int32_t(run < max_chunks ? run : max_chunks);
}

// The largest divisor of x that is <= 8.
__host__ __device__ constexpr int nt_for(int x) {
  for (int d = 8; d > 1; --d)
    if (x % d == 0)
      return d;
  return 1;
}

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

template <class Tr>
__device__ __forceinline__ float clamp_gate(float g) {
  return g < Tr::kGateFloor ? Tr::kGateFloor : g;  // NaN compares false: stays NaN
}

// One block per (chunk slot, value head).
//
// q and k stay raw (exact input values) in shared memory; their L2-norm
// factors rq, rk are applied in f32 (epilogues and element-wise passes). For
// 16-bit types the right-hand sides beta K ∘ Γ and beta V of W and U are
// split into hi + lo halves (two products), W is stored as W_hi + W_lo and U
// in f32: v' = U - W S in the scan is a residual, and one rounding of U or W
// (or of k) there costs several times its size. The one rounding left, of T,
// multiplies the residual (v' = T (beta V - beta K Γ S)) and stays small.
template <deltac_variant Var, class Tr>
__global__ void __launch_bounds__(Tr::kPrepThreads)
    chunked_prep_kernel(const deltac_fwd_params p, const ChunkedWs<typename Tr::Ts> ws,
                        float scale) {
  using Ts = typename Tr::Ts;
  using In = typename Tr::In;
  constexpr int C = Tr::C, K = Tr::K, V = Tr::V, LK = Tr::LK, LC = Tr::LC, LG = Tr::LG;
  constexpr int NTH = Tr::kPrepThreads, NW = Tr::kPrepWarps, NBLK = Tr::kBlocks;
  constexpr int KV = K > V ? K : V;
  constexpr bool kKda = Tr::kKda, kDecay = Tr::kDecay, kSplit = Tr::kSplit;
  constexpr int E = 16 / int(sizeof(Ts));  // elements per 16-byte copy
  static_assert(C * V <= 2 * C * LK, "v rows are staged in the q/k buffers");

  extern __shared__ __align__(16) unsigned char smem_raw[];
  Ts* kn = reinterpret_cast<Ts*>(smem_raw);  // [C][LK] raw k
  Ts* qn = kn + C * LK;                      // [C][LK] raw q
  Ts* tT = qn + C * LK;                      // [C][LC]
  Ts* xT = tT + C * LC;                      // [KV][LC]
  Ts* dk = xT + KV * LC;                     // kda: [16 + 16 + C - 16][LK]
  float* G = reinterpret_cast<float*>(dk + (kKda ? (32 + C - 16) * LK : 0));
  float* Af = G + (kKda ? C * LG : C);  // [C][C + 1]
  float* Tf = Af + C * (C + 1);        // [C][C + 1]; first Aqk, then T
  float* bs = Tf + C * (C + 1);        // [C]
  float* rq = bs + C;                  // [C]
  float* rk = rq + C;                  // [C]
  float* P = rk + C;                   // [max(NBLK - 1, 1)][16][16]
  // Low halves of the right-hand sides: over A and T once both are dead, or
  // after P when they do not fit there.
  Ts* xTlo = Tr::kLoAliased ? reinterpret_cast<Ts*>(Af)
                            : reinterpret_cast<Ts*>(P + (NBLK > 1 ? NBLK - 1 : 1) * 256);
  Ts* vraw = kn;  // [C][V] raw v, staged once q and k are no longer needed

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int j = blockIdx.y;
  const int64_t slot_chunk = blockIdx.x;

  // Which sequence and tokens this chunk slot holds.
  int n;
  int64_t t0;
  int len;
  if (p.cu_seqlens) {
    if (slot_chunk >= ws.offsets[p.N])
      return;
    int lo = 0, hi = p.N - 1;  // largest n with offsets[n] <= slot
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (ws.offsets[mid] <= slot_chunk)
        lo = mid;
      else
        hi = mid - 1;
    }
    n = lo;
    int64_t s0, s1;
    seq_bounds(p, n, s0, s1);
    t0 = s0 + (slot_chunk - ws.offsets[n]) * C;
    const int64_t rem = s1 - t0;
    len = int(rem < C ? rem : C);
  } else {
    const int64_t per = (int64_t(p.T) + C - 1) / C;
    n = int(slot_chunk / per);
    const int64_t c = slot_chunk % per;
    t0 = int64_t(n) * p.T + c * C;
    const int64_t rem = int64_t(p.T) - c * C;
    len = int(rem < C ? rem : C);
  }
  if (len <= 0)
    return;
  const int hqk = j / (p.HV / p.H);
  const int64_t slot = slot_chunk * p.HV + j;

  // 1. Raw q, k (and kda gate) rows by cp.async, all in flight at once; zero
  // rows past the end of the sequence.
  {
    const In* q = static_cast<const In*>(p.q);
    const In* k = static_cast<const In*>(p.k);
    constexpr int SEG = K / E;
    for (int i = tid; i < C * SEG; i += NTH) {
      const int r = i / SEG, sg = i % SEG;
      if (r < len) {
        const int64_t off = ((t0 + r) * p.H + hqk) * K + sg * E;
        cp_async16(kn + r * LK + sg * E, k + off);
        cp_async16(qn + r * LK + sg * E, q + off);
      } else {
        *reinterpret_cast<uint4*>(kn + r * LK + sg * E) = make_uint4(0, 0, 0, 0);
        *reinterpret_cast<uint4*>(qn + r * LK + sg * E) = make_uint4(0, 0, 0, 0);
      }
    }
    if constexpr (kKda) {
      constexpr int GS = K / 4;
      for (int i = tid; i < C * GS; i += NTH) {
        const int r = i / GS, sg = i % GS;
        if (r < len)
          cp_async16(G + r * LG + sg * 4, p.g + ((t0 + r) * p.HV + j) * K + sg * 4);
        else
          *reinterpret_cast<float4*>(G + r * LG + sg * 4) = make_float4(0.f, 0.f, 0.f, 0.f);
      }
    }
    cp_async_commit();
  }
  for (int r = tid; r < C; r += NTH) bs[r] = r < len ? p.beta[(t0 + r) * p.HV + j] : 0.f;
  if constexpr (Tr::kGated) {
    for (int r = tid; r < C; r += NTH)
      G[r] = r < len ? clamp_gate<Tr>(p.g[(t0 + r) * p.HV + j]) : 0.f;
  }
  cp_async_wait_all();
  __syncthreads();

  // 2. L2-norm factors (f32), gate cumsum within the chunk.
  for (int r = warp; r < C; r += NW) {
    float ssq = 0.f, ssk = 0.f;
    for (int e = lane; e < K; e += 32) {
      const float x = cvt_f(qn[r * LK + e]), y = cvt_f(kn[r * LK + e]);
      ssq = fmaf(x, x, ssq);
      ssk = fmaf(y, y, ssk);
    }
    ssq = warp_sum(ssq);
    ssk = warp_sum(ssk);
    if (lane == 0) {
      rq[r] = p.qk_l2norm ? 1.f / sqrtf(ssq + 1e-6f) : 1.f;
      rk[r] = p.qk_l2norm ? 1.f / sqrtf(ssk + 1e-6f) : 1.f;
    }
  }
  if constexpr (Tr::kGated) {
    if (warp == 0) {
      float carry = 0.f;
      for (int b = 0; b < C; b += 32) {
        float x = b + lane < C ? G[b + lane] : 0.f;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
          const float y = __shfl_up_sync(0xffffffffu, x, o);
          if (lane >= o)
            x += y;
        }
        x += carry;
        if (b + lane < C)
          G[b + lane] = x;
        carry = __shfl_sync(0xffffffffu, x, 31);
      }
    }
  } else if constexpr (kKda) {
    for (int c = tid; c < K; c += NTH) {
      float s = 0.f;
      for (int r = 0; r < C; ++r) {
        s += clamp_gate<Tr>(G[r * LG + c]);
        G[r * LG + c] = s;
      }
    }
  }
  __syncthreads();

  // Decay from token jj to token i (i >= jj), gated / delta.
  auto decay = [&](int i, int jj) -> float {
    if constexpr (Tr::kGated)
      return expf(G[i] - G[jj]);
    else
      return 1.f;
  };

  // 3. A (into Af) and Aqk (staged in Tf).
  if constexpr (!kKda) {
    constexpr int NT = nt_for(C / 8);
    block_gemm_tn<Ts, C, C, K, NT>(
        kn, LK, kn, nullptr, LK, warp, NW,
        [&](int i, int jj, float x0, float x1) {
          const float f = bs[i] * rk[i];
          Af[i * (C + 1) + jj] = i > jj ? f * rk[jj] * decay(i, jj) * x0 : 0.f;
          Af[i * (C + 1) + jj + 1] = i > jj + 1 ? f * rk[jj + 1] * decay(i, jj + 1) * x1 : 0.f;
        },
        [](int, int) { return false; });
    block_gemm_tn<Ts, C, C, K, NT>(
        qn, LK, kn, nullptr, LK, warp, NW,
        [&](int i, int jj, float x0, float x1) {
          const float f = scale * rq[i];
          Tf[i * (C + 1) + jj] = i >= jj ? f * rk[jj] * decay(i, jj) * x0 : 0.f;
          Tf[i * (C + 1) + jj + 1] =
              i >= jj + 1 ? f * rk[jj + 1] * decay(i, jj + 1) * x1 : 0.f;
        },
        [](int, int) { return false; });
  } else {
    // Diagonal 16 x 16 blocks: exact per-channel decays, one lane per (i, jj)
    // pair, each lane starting at its own channel (no bank conflicts).
    const int rot = lane % K;
    for (int b = warp; b < NBLK; b += NW) {
      for (int pidx = lane; pidx < 136; pidx += 32) {
        int i = int((sqrtf(8.f * pidx + 1.f) - 1.f) * 0.5f);
        while ((i + 1) * (i + 2) / 2 <= pidx) ++i;
        while (i * (i + 1) / 2 > pidx) --i;
        const int jj = pidx - i * (i + 1) / 2;
        const int ii = 16 * b + i, j2 = 16 * b + jj;
        float sa = 0.f, sq = 0.f;
        for (int c0 = 0; c0 < K; ++c0) {
          int c = c0 + rot;
          if (c >= K)
            c -= K;
          const float d = expf(G[ii * LG + c] - G[j2 * LG + c]);
          const float kj = cvt_f(kn[j2 * LK + c]) * d;
          sa = fmaf(cvt_f(kn[ii * LK + c]), kj, sa);
          sq = fmaf(cvt_f(qn[ii * LK + c]), kj, sq);
        }
        Af[ii * (C + 1) + j2] = jj < i ? bs[ii] * rk[ii] * rk[j2] * sa : 0.f;
        Tf[ii * (C + 1) + j2] = scale * rq[ii] * rk[j2] * sq;
      }
    }
    // Above the diagonal: zero (inside the diagonal blocks too).
    for (int idx = tid; idx < C * C; idx += NTH) {
      const int i = idx / C, jj = idx % C;
      if (jj > i)
        Af[i * (C + 1) + jj] = Tf[i * (C + 1) + jj] = 0.f;
    }
    // Blocks below the diagonal, one block row I at a time, factored
    // through row bnd = 16 I - 1: exp(G_i - G_j) = exp(G_i - G_bnd) exp(G_bnd - G_j).
    Ts* left = dk;             // [16][LK]  k_i ∘ exp(G_i - G_bnd)
    Ts* qleft = dk + 16 * LK;  // [16][LK]  q_i ∘ exp(G_i - G_bnd)
    Ts* right = dk + 32 * LK;  // [16 I][LK] k_j ∘ exp(G_bnd - G_j)
    for (int I = 1; I < NBLK; ++I) {
      const int bnd = 16 * I - 1;
      for (int idx = tid; idx < 16 * K; idx += NTH) {
        const int r = idx / K, c = idx % K, i = 16 * I + r;
        const float e = expf(G[i * LG + c] - G[bnd * LG + c]);
        left[r * LK + c] = cvt_t<Ts>(cvt_f(kn[i * LK + c]) * e);
        qleft[r * LK + c] = cvt_t<Ts>(cvt_f(qn[i * LK + c]) * e);
      }
      for (int idx = tid; idx < 16 * I * K; idx += NTH) {
        const int r = idx / K, c = idx % K;
        right[r * LK + c] =
            cvt_t<Ts>(cvt_f(kn[r * LK + c]) * expf(G[bnd * LG + c] - G[r * LG + c]));
      }
      __syncthreads();
      if constexpr (C > 16) {
        block_gemm_tn<Ts, 16, C - 16, K, 2>(
            left, LK, right, nullptr, LK, warp, NW,
            [&](int r, int jj, float x0, float x1) {
              const int i = 16 * I + r;
              const float f = bs[i] * rk[i];
              Af[i * (C + 1) + jj] = f * rk[jj] * x0;
              Af[i * (C + 1) + jj + 1] = f * rk[jj + 1] * x1;
            },
            [&](int, int n0) { return n0 >= 16 * I; });
        block_gemm_tn<Ts, 16, C - 16, K, 2>(
            qleft, LK, right, nullptr, LK, warp, NW,
            [&](int r, int jj, float x0, float x1) {
              const int i = 16 * I + r;
              const float f = scale * rq[i];
              Tf[i * (C + 1) + jj] = f * rk[jj] * x0;
              Tf[i * (C + 1) + jj + 1] = f * rk[jj + 1] * x1;
            },
            [&](int, int n0) { return n0 >= 16 * I; });
      }
      __syncthreads();
    }
  }
  __syncthreads();

  // 4. Aqk out (from Tf), then T = (I + A)^-1 into Tf.
  {
    Ts* aqk = ws.aqk + slot * C * C;
    for (int idx = tid; idx < C * C / 2; idx += NTH) {
      const int i = (2 * idx) / C, jj = (2 * idx) % C;
      store2(aqk + i * C + jj, Tf[i * (C + 1) + jj], Tf[i * (C + 1) + jj + 1]);
    }
  }
  __syncthreads();
  // Diagonal blocks: forward substitution, one lane per column, two blocks
  // per warp.
  {
    const int b = warp * 2 + (lane >> 4), c = lane & 15;
    if (b < NBLK) {
      const float* a = Af + 16 * b * (C + 1) + 16 * b;
      float x[16];
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        float s = i == c ? 1.f : 0.f;
#pragma unroll
        for (int jj = 0; jj < i; ++jj) s = fmaf(-a[i * (C + 1) + jj], x[jj], s);
        x[i] = s;
      }
      float* t = Tf + 16 * b * (C + 1) + 16 * b;
#pragma unroll
      for (int i = 0; i < 16; ++i) t[i * (C + 1) + c] = x[i];
    }
    static_assert(NBLK <= 2 * NW, "one pass over the diagonal blocks");
    for (int idx = tid; idx < C * C; idx += NTH) {
      const int i = idx / C, jj = idx % C;
      if (jj / 16 > i / 16)
        Tf[i * (C + 1) + jj] = 0.f;
    }
  }
  __syncthreads();
  // Off-diagonal blocks by distance d = I - J:
  //   T_IJ = -T_II sum_{L = J}^{I - 1} A_IL T_LJ.
  for (int d = 1; d < NBLK; ++d) {
    for (int idx = tid; idx < (NBLK - d) * 256; idx += NTH) {
      const int qb = idx / 256, e = idx % 256, r = e / 16, cc = e % 16;
      const int I = d + qb, J = qb;
      float s = 0.f;
      for (int L = J; L < I; ++L)
#pragma unroll 4
        for (int m = 0; m < 16; ++m)
          s = fmaf(Af[(16 * I + r) * (C + 1) + 16 * L + m], Tf[(16 * L + m) * (C + 1) + 16 * J + cc], s);
      P[idx] = s;
    }
    __syncthreads();
    for (int idx = tid; idx < (NBLK - d) * 256; idx += NTH) {
      const int qb = idx / 256, e = idx % 256, r = e / 16, cc = e % 16;
      const int I = d + qb, J = qb;
      float s = 0.f;
#pragma unroll 4
      for (int m = 0; m < 16; ++m)
        s = fmaf(Tf[(16 * I + r) * (C + 1) + 16 * I + m], P[qb * 256 + m * 16 + cc], s);
      Tf[(16 * I + r) * (C + 1) + 16 * J + cc] = -s;
    }
    __syncthreads();
  }

  // 5. T in the compute type.
  for (int idx = tid; idx < C * C; idx += NTH) {
    const int i = idx / C, jj = idx % C;
    tT[i * LC + jj] = cvt_t<Ts>(Tf[i * (C + 1) + jj]);
  }
  __syncthreads();  // A and T (f32) are dead from here: xTlo may overwrite them
  auto gam = [&](int c, int kk) -> float {  // log of the decay from the chunk start
    if constexpr (kKda)
      return G[c * LG + kk];
    else if constexpr (Tr::kGated)
      return G[c];
    else
      return 0.f;
  };
  // (beta K ∘ Γ)ᵀ in f32, as hi (+ lo).
  for (int idx = tid; idx < C * K; idx += NTH) {
    const int kk = idx / C, c = idx % C;
    float x = bs[c] * rk[c] * cvt_f(kn[c * LK + kk]);
    if constexpr (kDecay)
      x *= expf(gam(c, kk));
    const Ts hi = cvt_t<Ts>(x);
    xT[kk * LC + c] = hi;
    if constexpr (kSplit)
      xTlo[kk * LC + c] = cvt_t<Ts>(x - cvt_f(hi));
  }
  {
    Ts* qg = ws.qg + slot * C * K;
    for (int idx = tid; idx < C * K / 2; idx += NTH) {
      const int c = (2 * idx) / K, kk = (2 * idx) % K;
      const float f = scale * rq[c];
      float x0 = f * cvt_f(qn[c * LK + kk]), x1 = f * cvt_f(qn[c * LK + kk + 1]);
      if constexpr (kDecay) {
        x0 *= expf(gam(c, kk));
        x1 *= expf(gam(c, kk + 1));
      }
      store2(qg + c * K + kk, x0, x1);
    }
    Ts* kdt = ws.kdt + slot * K * C;
    for (int idx = tid; idx < C * K / 2; idx += NTH) {
      const int kk = (2 * idx) / C, c = (2 * idx) % C;
      float x0 = rk[c] * cvt_f(kn[c * LK + kk]), x1 = rk[c + 1] * cvt_f(kn[(c + 1) * LK + kk]);
      if constexpr (kDecay) {
        const float gl = gam(C - 1, kk);
        x0 *= expf(gl - gam(c, kk));
        x1 *= expf(gl - gam(c + 1, kk));
      }
      store2(kdt + kk * C + c, x0, x1);
    }
    float* gm = ws.gamma + slot * K;
    for (int kk = tid; kk < K; kk += NTH) gm[kk] = kDecay ? expf(gam(C - 1, kk)) : 1.f;
  }
  __syncthreads();

  // 6. Raw v rows into the (now free) q/k buffers, in flight during W.
  {
    const In* v = static_cast<const In*>(p.v);
    constexpr int SEG = V / E;
    for (int i = tid; i < C * SEG; i += NTH) {
      const int r = i / SEG, sg = i % SEG;
      if (r < len)
        cp_async16(vraw + r * V + sg * E, v + ((t0 + r) * p.HV + j) * V + sg * E);
      else
        *reinterpret_cast<uint4*>(vraw + r * V + sg * E) = make_uint4(0, 0, 0, 0);
    }
    cp_async_commit();
  }
  // W = T (beta K ∘ Γ), stored as hi (+ lo).
  {
    Ts* w = ws.w + slot * C * K;
    Ts* wlo = kSplit ? ws.wlo + slot * C * K : nullptr;
    block_gemm_tn<Ts, C, K, C, nt_for(K / 8)>(
        tT, LC, xT, kSplit ? xTlo : nullptr, LC, warp, NW,
        [&](int r, int c, float x0, float x1) {
          store2(w + r * K + c, x0, x1);
          if constexpr (kSplit) {
            const float h0 = cvt_f(cvt_t<Ts>(x0)), h1 = cvt_f(cvt_t<Ts>(x1));
            store2(wlo + r * K + c, x0 - h0, x1 - h1);
          }
        },
        [](int, int) { return false; });
  }
  cp_async_wait_all();
  __syncthreads();
  // 7. (beta V)ᵀ as hi (+ lo), then U = T (beta V) in f32.
  for (int idx = tid; idx < C * V; idx += NTH) {
    const int c = idx / V, vv = idx % V;  // contiguous reads, 4-way writes
    const float x = bs[c] * cvt_f(vraw[c * V + vv]);
    const Ts hi = cvt_t<Ts>(x);
    xT[vv * LC + c] = hi;
    if constexpr (kSplit)
      xTlo[vv * LC + c] = cvt_t<Ts>(x - cvt_f(hi));
  }
  __syncthreads();
  {
    float* u = ws.u + slot * C * V;
    block_gemm_tn<Ts, C, V, C, nt_for(V / 8)>(
        tT, LC, xT, kSplit ? xTlo : nullptr, LC, warp, NW,
        [&](int r, int c, float x0, float x1) {
          *reinterpret_cast<float2*>(u + r * V + c) = make_float2(x0, x1);
        },
        [](int, int) { return false; });
  }
}

}  // namespace deltac::cuda::detail

#endif  // DELTAC_CUDA_CHUNKED_PREP_CUH

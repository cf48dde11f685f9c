// The intra-chunk part of the chunked forward pass, parallel over every
// (chunk, value head): chunk index, gate cumsum, the UT transform and the
// per-row factors the sequential scan (chunked_scan.cuh) applies.
//
// Per chunk of C tokens (rows i, j; G the in-chunk cumsum of the log decay,
// gated: one per token, kda: one per token and key channel; rq, rk the
// L2-norm factors of q and k rows):
//   A   = strictly-lower(diag(beta) (K Kᵀ ∘ exp(G_i - G_j)))  (rk folded in)
//   T   = (I + A)⁻¹            (16 x 16 diagonal blocks by forward
//                               substitution, then the off-diagonal blocks)
//   Aqk = scale lower(Q Kᵀ ∘ exp(G_i - G_j))                 (rq, rk folded in)
//   row factors fa = beta rk exp(G_i), fb = beta, fq = scale rq exp(G_i),
//   fk = rk exp(G_last - G_i); gamma = exp(G_last) per key channel.
// kda (decay per key channel): the scan's q / k operands are stored here
// instead, decayed (Q ∘ scale rq exp(G), K ∘ rk exp(G), K ∘ rk exp(G_last -
// G)), and fa = fb = beta, fq = fk = 1. The diagonal 16 x 16 blocks of A and
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
  Ts *t, *aqk;       // [slot][C][C]
  Ts *qg, *kg, *kd;  // kda only: [slot][C][K] decayed q, k operands
  float *f, *gamma;  // [slot][4][C] row factors fa, fb, fq, fk; [slot][K]
  int64_t max_chunks;  // slots allocated
  // Sequence split (chunked.cuh): segments per sequence (1: none); the
  // identity columns' outputs [token][HV][K] (compute type), the segments'
  // final states [N][split][HV][K][V] and transfer matrices
  // [N][split][HV][K][K] (f32, [K] rows).
  int split;
  Ts* qt;
  float *cst, *pst;
  // Device flag (or null): when nonzero the scan returns at once and writes
  // no output (the runtime's checking mode sets it on the device).
  const int32_t* skip;
  // The fused kernel (chunked_fused.cuh; null otherwise): [2] block and
  // item tickets, [slots] 1 once a slot's intra-chunk output is written.
  // Zeroed before each fused launch.
  unsigned long long* tickets;
  int32_t* ready;
  // Mixed batches (varlen; chunked.cuh's route): > 0 leaves the sequences of
  // at most route tokens to the recurrent kernel: they get no chunk slots and
  // the scan writes none of their o or ht. 0: every sequence.
  int32_t route;
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

// Chunks of a sequence of len tokens: none when it has at most route tokens
// (mixed batches: the recurrent kernel's), else ceil(len / C).
template <int C>
__device__ __forceinline__ int64_t routed_chunks(int64_t len, int32_t route) {
  return len > route ? (len + C - 1) / C : 0;
}

// Varlen: offsets[n] = sum over earlier sequences of their chunks
// (routed_chunks), clamped to the slots allocated. One block.
template <int C>
__global__ void __launch_bounds__(1024) chunked_index_kernel(const deltac_fwd_params p,
                                                             int32_t* offsets,
                                                             int64_t max_chunks,
                                                             int32_t route) {
  __shared__ int64_t part[1024];
  const int tid = threadIdx.x, nth = blockDim.x;
  const int per = (p.N + nth - 1) / nth;
  const int b = tid * per, e = min(p.N, b + per);
  int64_t sum = 0;
  for (int n = b; n < e; ++n) {
    int64_t s0, s1;
    seq_bounds(p, n, s0, s1);
    sum += routed_chunks<C>(s1 - s0, route);
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
    run += routed_chunks<C>(s1 - s0, route);
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

template <class Tr>
__device__ __forceinline__ float clamp_gate(float g) {
  return g < Tr::kGateFloor ? Tr::kGateFloor : g;  // NaN compares false: stays NaN
}

// Eight consecutive elements (p aligned to 16 bytes).
__device__ __forceinline__ void store8(float* p, const float x[8]) {
  reinterpret_cast<float4*>(p)[0] = make_float4(x[0], x[1], x[2], x[3]);
  reinterpret_cast<float4*>(p)[1] = make_float4(x[4], x[5], x[6], x[7]);
}
template <class T>
__device__ __forceinline__ void store8(T* p, const float x[8]) {
  uint4 u;
  store2(reinterpret_cast<T*>(&u.x), x[0], x[1]);
  store2(reinterpret_cast<T*>(&u.y), x[2], x[3]);
  store2(reinterpret_cast<T*>(&u.z), x[4], x[5]);
  store2(reinterpret_cast<T*>(&u.w), x[6], x[7]);
  *reinterpret_cast<uint4*>(p) = u;
}

// Sums of a and b over the warp (interleaved: two independent chains).
__device__ __forceinline__ void warp_sum2(float& a, float& b) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    a += __shfl_xor_sync(0xffffffffu, a, o);
    b += __shfl_xor_sync(0xffffffffu, b, o);
  }
}

// The intra-chunk work of one (chunk slot, value head), by the whole block
// (kPrepThreads threads; dynamic shared memory of kPrepSmem bytes). q and k
// stay raw (exact input values) in shared memory; their L2-norm factors rq,
// rk are applied in f32. T is rounded to the compute type once: it
// multiplies the residual in the scan (v' = T r), where that rounding is not
// amplified. Returns at once (the whole block) for a slot past the last
// chunk.
template <deltac_variant Var, class Tr>
__device__ __forceinline__ void chunked_prep_item(const deltac_fwd_params& p,
                                                  const ChunkedWs<typename Tr::Ts>& ws,
                                                  float scale, int64_t slot_chunk, int j) {
  using Ts = typename Tr::Ts;
  using In = typename Tr::In;
  constexpr int C = Tr::C, K = Tr::K, LK = Tr::LK, LG = Tr::LG;
  constexpr int NTH = Tr::kPrepThreads, NW = Tr::kPrepWarps, NBLK = Tr::kBlocks;
  constexpr bool kKda = Tr::kKda;
  constexpr int E = 16 / int(sizeof(Ts));  // elements per 16-byte copy

  extern __shared__ __align__(16) unsigned char smem_raw[];
  Ts* kn = reinterpret_cast<Ts*>(smem_raw);  // [C][LK] raw k
  Ts* qn = kn + C * LK;                      // [C][LK] raw q
  Ts* dk = qn + C * LK;                      // kda: [16 + 16 + C - 16][LK]
  float* G = reinterpret_cast<float*>(dk + (kKda ? (32 + C - 16) * LK : 0));
  float* Af = G + (kKda ? C * LG : C);  // [C][C + 1]
  float* Tf = Af + C * (C + 1);        // [C][C + 1]; first Aqk, then T
  float* bs = Tf + C * (C + 1);        // [C]
  float* rq = bs + C;                  // [C]
  float* rk = rq + C;                  // [C]
  float* P = rk + C;                   // [max(NBLK - 1, 1)][16][16]

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;

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
    const int64_t rs = int64_t(p.H) * K;  // row stride of q, k
    const int64_t base = (t0 * p.H + hqk) * K;
    if constexpr (NTH % SEG == 0 && (C * SEG) % NTH == 0) {
      constexpr int RS = NTH / SEG, NI = C * SEG / NTH;  // row step, items per thread
      const int r0 = tid / SEG, sg = tid % SEG;
#pragma unroll
      for (int m = 0; m < NI; ++m) {
        const int r = r0 + m * RS;
        const bool in = r < len;
        const int64_t off = in ? base + r * rs + sg * E : 0;
        cp_async16_zfill(kn + r * LK + sg * E, k + off, in);
        cp_async16_zfill(qn + r * LK + sg * E, q + off, in);
      }
    } else {
      for (int i = tid; i < C * SEG; i += NTH) {
        const int r = i / SEG, sg = i % SEG;
        const bool in = r < len;
        const int64_t off = in ? base + r * rs + sg * E : 0;
        cp_async16_zfill(kn + r * LK + sg * E, k + off, in);
        cp_async16_zfill(qn + r * LK + sg * E, q + off, in);
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
#pragma unroll
    for (int e = 4 * lane; e < K; e += 128) {  // four elements per lane (K % 16 == 0)
      float x[4], y[4];
      load4f(qn + r * LK + e, x);
      load4f(kn + r * LK + e, y);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        ssq = fmaf(x[i], x[i], ssq);
        ssk = fmaf(y[i], y[i], ssk);
      }
    }
    warp_sum2(ssq, ssk);
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

  // 3. A (into Af) and Aqk (staged in Tf).
  if constexpr (!kKda) {
    // The 16 x 16 blocks on and below the diagonal of K Kᵀ and Q Kᵀ, spread
    // over all warps (the blocks above are never read).
    using Op = Mma<Ts>;
    constexpr int NU = NBLK * (NBLK + 1) / 2;
    const int g = lane >> 2, t = lane & 3;
    for (int u = warp; u < 2 * NU; u += NW) {
      const bool isq = u >= NU;
      int I = 0, J = isq ? u - NU : u;
      while (J > I) J -= ++I;
      float acc[2][4] = {};
      const Ts* X = (isq ? qn : kn) + 16 * I * LK;
#pragma unroll 4
      for (int k0 = 0; k0 < K; k0 += 16) {
        typename Op::FragA fa;
        Op::load_a(fa, X + k0, LK);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          typename Op::FragB fb;
          Op::load_b(fb, kn + (16 * J + 8 * h) * LK + k0, LK);
          Op::mma(acc[h], fa, fb);
        }
      }
      // Row and column factors read before any store (the stores may alias
      // them for the compiler).
      float rowf[2], rowg[2], colf[4], colg[4];
#pragma unroll
      for (int a = 0; a < 2; ++a) {
        const int i = 16 * I + g + 8 * a;
        rowf[a] = isq ? scale * rq[i] : bs[i] * rk[i];
        rowg[a] = Tr::kGated ? G[i] : 0.f;
      }
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        const int jj = 16 * J + 8 * (b >> 1) + 2 * t + (b & 1);
        colf[b] = rk[jj];
        colg[b] = Tr::kGated ? G[jj] : 0.f;
      }
      float* dst = isq ? Tf : Af;
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int a = e >> 1, b = 2 * h + (e & 1);
          const int i = 16 * I + g + 8 * a, jj = 16 * J + 8 * h + 2 * t + (e & 1);
          float x = acc[h][e] * colf[b] * rowf[a];
          if constexpr (Tr::kGated)
            x *= __expf(rowg[a] - colg[b]);  // the decay from token jj to token i
          dst[i * (C + 1) + jj] = (isq ? i >= jj : i > jj) ? x : 0.f;
        }
    }
  } else {
    // Diagonal 16 x 16 blocks: exact per-channel decays, one lane per (i, jj)
    // pair, each lane starting at its own channel (no bank conflicts). (Four
    // lanes per pair, summed by shuffles, measured 23% slower for kda.)
    const int rot = lane % K;
    for (int w = tid; w < NBLK * 136; w += NTH) {
      const int b = w / 136, pidx = w % 136;
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
        const float d = __expf(G[ii * LG + c] - G[j2 * LG + c]);
        const float kj = cvt_f(kn[j2 * LK + c]) * d;
        sa = fmaf(cvt_f(kn[ii * LK + c]), kj, sa);
        sq = fmaf(cvt_f(qn[ii * LK + c]), kj, sq);
      }
      Af[ii * (C + 1) + j2] = jj < i ? bs[ii] * rk[ii] * rk[j2] * sa : 0.f;
      Tf[ii * (C + 1) + j2] = scale * rq[ii] * rk[j2] * sq;
    }
    // Above the diagonal nothing is written: the solve never reads it, and
    // Aqk and T are written out with zeros there.
    // Blocks below the diagonal, one block row I at a time, factored
    // through row bnd = 16 I - 1: exp(G_i - G_j) = exp(G_i - G_bnd) exp(G_bnd - G_j).
    Ts* left = dk;             // [16][LK]  k_i ∘ exp(G_i - G_bnd)
    Ts* qleft = dk + 16 * LK;  // [16][LK]  q_i ∘ exp(G_i - G_bnd)
    Ts* right = dk + 32 * LK;  // [16 I][LK] k_j ∘ exp(G_bnd - G_j)
    for (int I = 1; I < NBLK; ++I) {
      const int bnd = 16 * I - 1;
      for (int idx = tid; idx < 16 * K; idx += NTH) {
        const int r = idx / K, c = idx % K, i = 16 * I + r;
        const float e = __expf(G[i * LG + c] - G[bnd * LG + c]);
        left[r * LK + c] = cvt_t<Ts>(cvt_f(kn[i * LK + c]) * e);
        qleft[r * LK + c] = cvt_t<Ts>(cvt_f(qn[i * LK + c]) * e);
      }
      for (int idx = tid; idx < 16 * I * K; idx += NTH) {
        const int r = idx / K, c = idx % K;
        right[r * LK + c] =
            cvt_t<Ts>(cvt_f(kn[r * LK + c]) * __expf(G[bnd * LG + c] - G[r * LG + c]));
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
    for (int idx = tid; idx < C * C / 8; idx += NTH) {
      const int i = idx / (C / 8), jj = idx % (C / 8) * 8;
      float x[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) x[e] = jj + e <= i ? Tf[i * (C + 1) + jj + e] : 0.f;
      store8(aqk + i * C + jj, x);
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
  }
  __syncthreads();
  // Off-diagonal blocks by distance d = I - J, one warp per block (I, J), on
  // tensor cores in f32 (three TF32 products per step):
  //   T_IJ = -T_II sum_{L = J}^{I - 1} A_IL T_LJ.
  {
    using Of = Mma<float>;
    const int g = lane >> 2, t = lane & 3;
    for (int d = 1; d < NBLK; ++d) {
      if (warp < NBLK - d) {
        const int I = d + warp, J = warp;
        float acc[2][4] = {};
        for (int L = J; L < I; ++L) {
          typename Of::FragA fa;
          Of::load_a(fa, Af + 16 * I * (C + 1) + 16 * L, C + 1);
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            typename Of::FragB fb;
            Of::load_b_t(fb, Tf + 16 * L * (C + 1) + 16 * J + 8 * h, C + 1);
            Of::mma(acc[h], fa, fb);
          }
        }
        float* pw = P + warp * 256;  // [16][16], this warp's
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            pw[(g + (e >= 2 ? 8 : 0)) * 16 + 8 * h + 2 * t + (e & 1)] = acc[h][e];
        __syncwarp();
        typename Of::FragA ft;
        Of::load_a(ft, Tf + 16 * I * (C + 1) + 16 * I, C + 1);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float o[4] = {0.f, 0.f, 0.f, 0.f};
          typename Of::FragB fb;
          Of::load_b_t(fb, pw + 8 * h, 16);
          Of::mma(o, ft, fb);
#pragma unroll
          for (int e = 0; e < 4; ++e)
            Tf[(16 * I + g + (e >= 2 ? 8 : 0)) * (C + 1) + 16 * J + 8 * h + 2 * t + (e & 1)] =
                -o[e];
        }
      }
      __syncthreads();
    }
  }

  // 5. T, the row factors and the chunk decay (kda: the decayed q, k
  // operands) out.
  {
    Ts* t = ws.t + slot * C * C;
    for (int idx = tid; idx < C * C / 8; idx += NTH) {
      const int i = idx / (C / 8), jj = idx % (C / 8) * 8;
      const bool low = jj / 16 <= i / 16;  // blocks above the diagonal: zero
      float x[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) x[e] = low ? Tf[i * (C + 1) + jj + e] : 0.f;
      store8(t + i * C + jj, x);
    }
  }
  auto gam = [&](int c, int kk) -> float {  // log of the decay from the chunk start
    if constexpr (kKda)
      return G[c * LG + kk];
    else if constexpr (Tr::kGated)
      return G[c];
    else
      return 0.f;
  };
  {
    float* f = ws.f + slot * 4 * C;
    for (int r = tid; r < C; r += NTH) {
      float fa = bs[r], fq = 1.f, fk = 1.f;
      if constexpr (!kKda) {
        const float e = Tr::kGated ? expf(gam(r, 0)) : 1.f;
        const float el = Tr::kGated ? expf(gam(C - 1, 0) - gam(r, 0)) : 1.f;
        fa = bs[r] * rk[r] * e;
        fq = scale * rq[r] * e;
        fk = rk[r] * el;
      }
      const bool in = r < len;
      f[r] = in ? fa : 0.f;
      f[C + r] = in ? bs[r] : 0.f;
      f[2 * C + r] = in ? fq : 0.f;
      f[3 * C + r] = in ? fk : 0.f;
    }
    float* gm = ws.gamma + slot * K;
    for (int kk = tid; kk < K; kk += NTH) gm[kk] = Tr::kDecay ? expf(gam(C - 1, kk)) : 1.f;
  }
  if constexpr (kKda) {
    Ts* qg = ws.qg + slot * C * K;
    Ts* kg = ws.kg + slot * C * K;
    Ts* kd = ws.kd + slot * C * K;
    for (int idx = tid; idx < C * K / 2; idx += NTH) {
      const int c = (2 * idx) / K, kk = (2 * idx) % K;
      float x[2], y[2], z[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float e = expf(gam(c, kk + h)), el = expf(gam(C - 1, kk + h) - gam(c, kk + h));
        const float kv = rk[c] * cvt_f(kn[c * LK + kk + h]);
        x[h] = scale * rq[c] * cvt_f(qn[c * LK + kk + h]) * e;
        y[h] = kv * e;
        z[h] = kv * el;
      }
      store2(qg + c * K + kk, x[0], x[1]);
      store2(kg + c * K + kk, y[0], y[1]);
      store2(kd + c * K + kk, z[0], z[1]);
    }
  }
}

// One block per (chunk slot, value head).
template <deltac_variant Var, class Tr>
__global__ void __launch_bounds__(Tr::kPrepThreads)
    chunked_prep_kernel(const deltac_fwd_params p, const ChunkedWs<typename Tr::Ts> ws,
                        float scale) {
  chunked_prep_item<Var, Tr>(p, ws, scale, int64_t(blockIdx.x), int(blockIdx.y));
}

}  // namespace deltac::cuda::detail

#endif  // DELTAC_CUDA_CHUNKED_PREP_CUH

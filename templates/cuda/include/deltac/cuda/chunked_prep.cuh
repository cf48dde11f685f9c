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
// gated: the blocks of A and Aqk below the diagonal take exp(G_i - G_j) as
// exp(G_i - G_b) exp(G_b - G_j), b the last row of column block J (both
// factors <= 1 for log decays <= 0); the diagonal blocks one exponential per
// element.
// kda (decay per key channel): the scan's q / k operands are stored here
// instead, decayed (Q ∘ scale rq exp(G), K ∘ rk exp(G), K ∘ rk exp(G_last -
// G)), and fa = fb = beta, fq = fk = 1. The diagonal 16 x 16 blocks of A and
// Aqk factor through their middle row into tensor-core products where the
// gates span little (16-bit compute types; chunked_kda_diag.cuh), else take
// exact exponentials per element; the blocks below them factor through the
// row before the block (both factors <= 1) into tensor-core products.
// Gates are clamped at kGateFloor (exp of any sum holding one is exactly 0
// in f32), so a -inf gate resets exactly and never meets (-inf) - (-inf);
// NaN gates stay NaN.
#ifndef DELTAC_CUDA_CHUNKED_PREP_CUH
#define DELTAC_CUDA_CHUNKED_PREP_CUH

#include "deltac/cuda/chunked_kda_diag.cuh"
#include "deltac/cuda/chunked_mma.cuh"
#include "deltac/cuda/chunked_traits.cuh"
#include "deltac/cuda/ut_solve.cuh"
#include "deltac/params.h"

#include <cstdint>

namespace deltac::cuda::detail {

// Workspace views (device pointers), carved by the host entry.
template <class Ts>
struct ChunkedWs {
  int32_t* offsets;  // [N + 1] first chunk slot of each sequence (varlen only)
  Ts *t, *aqk;       // [slot][C][C]
  Ts* tlo;           // [slot][C][C] T - T_hi (16-bit T's low half; scan 5 only, else null)
  Ts *qg, *kg, *kd;  // kda only: [slot][C][K] decayed q, k operands
  float *f, *gamma;  // [slot][4][C] row factors fa, fb, fq, fk; [slot][K]
  int64_t max_chunks;  // slots allocated
  // Sequence split (chunked.cuh): segments per sequence (1: none); the
  // identity columns' outputs [token][HV][K] (compute type), the segments'
  // final states [N][split][HV][K][V] and transfer matrices
  // [N][split][HV][K][K] (f32, [K] rows).
  int split;
  // Warm-up split (chunked.cuh; the transposed TMA scan only): segments per
  // sequence that each start from a zero state far enough back for the
  // decay to forget it (tma_scan_begin); 1: none. Needs no workspace.
  int warm;
  Ts* qt;
  float *cst, *pst;
  // Each segment's final state folded (the next segment's h_in) in the
  // compute type, hi then lo (16-bit types; f32: hi only) [N][split][HV][2][K][V],
  // written by the fold for the fix-up.
  Ts* hin;
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
  // Chunk-end states (deltac_options.chunk_states; null: none): the block
  // scan, unsplit, writes the state after chunk slot e to [e][HV][K][V]
  // ([e][HV][V][K] for the VK layout), f32, for e < cstates_count.
  float* cstates;
  int64_t cstates_count;
  // Saved states for the backward (deltac_options.saved_states; null: none):
  // the transposed TMA scan writes each chunk's start state and u there in
  // the chunked backward's layout (deltac/backward_rules.h, bwd_saved_layout)
  // and sets *saved_flag.
  Ts *saved_h, *saved_u;
  int32_t* saved_flag;
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
  *reinterpret_cast<uint4*>(p) = make_uint4(pack2<T>(x[0], x[1]), pack2<T>(x[2], x[3]),
                                            pack2<T>(x[4], x[5]), pack2<T>(x[6], x[7]));
}
// The same to global memory, as one 16-byte store (nvcc split store8's
// into four 4-byte stores in the prep kernel's output loops).
template <class T>
__device__ __forceinline__ void store8_global(T* p, const float x[8]) {
  if constexpr (sizeof(T) == 4) {
    store8(p, x);
  } else {
    asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(pack2<T>(x[0], x[1])),
                 "r"(pack2<T>(x[2], x[3])), "r"(pack2<T>(x[4], x[5])), "r"(pack2<T>(x[6], x[7])));
  }
}

// Four consecutive elements to global memory (p aligned to 4 elements).
template <class T>
__device__ __forceinline__ void store4_global(T* p, float4 x) {
  if constexpr (sizeof(T) == 4)
    *reinterpret_cast<float4*>(p) = x;
  else
    asm volatile("st.global.v2.b32 [%0], {%1, %2};" ::"l"(p), "r"(pack2<T>(x.x, x.y)),
                 "r"(pack2<T>(x.z, x.w)));
}

// Eight consecutive elements as floats (p aligned to 16 bytes).
__device__ __forceinline__ void load8f(const float* p, float out[8]) {
  const float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
  out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w;
  out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
}
template <class T>
__device__ __forceinline__ void load8f(const T* p, float out[8]) {
  const uint4 raw = *reinterpret_cast<const uint4*>(p);
  const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
  for (int i = 0; i < 8; ++i) out[i] = cvt_f(e[i]);
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

  // Layout (chunked_prep_smem): delta / gated keep A and T where the raw
  // q, k rows were (read last by the products of step 3); kda keeps both.
  extern __shared__ __align__(16) unsigned char smem_raw[];
  constexpr int LD = Tr::kPrepLD;  // row stride of Af, Tf
  constexpr size_t kRaw = size_t(2) * C * LK * sizeof(Ts), kAT = size_t(2) * C * LD * 4;
  Ts* kn = reinterpret_cast<Ts*>(smem_raw);  // [C][LK] raw k
  Ts* qn = kn + C * LK;                      // [C][LK] raw q
  Ts* dk = qn + C * LK;                      // kda: [16 + 16 + C - 16][LK]
  float* Af = kKda ? reinterpret_cast<float*>(dk + (32 + C - 16) * LK)
                   : reinterpret_cast<float*>(smem_raw);  // [C][LD]
  float* Tf = Af + C * LD;  // [C][LD]; kda: first Aqk, then T
  float* G = kKda ? Tf + C * LD
                  : reinterpret_cast<float*>(smem_raw + (kRaw > kAT ? kRaw : kAT));
  float* bs = G + (kKda ? C * LG : C);  // [C]
  float* rq = bs + C;                   // [C]
  float* rk = rq + C;                   // [C]
  float* P = rk + C;                    // [C == 64 ? 4 : 1][16][16]

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
    // 32-bit division: chunk slots stay below 2^31 (the grid's x limit).
    const uint32_t per = uint32_t((int64_t(p.T) + C - 1) / C), sc = uint32_t(slot_chunk);
    n = int(sc / per);
    const int64_t c = sc - uint32_t(n) * per;
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
  const In* qsrc = static_cast<const In*>(p.q);
  const In* ksrc = static_cast<const In*>(p.k);
  const int64_t rs = int64_t(p.H) * K;  // row stride of q, k
  const int64_t base = (t0 * p.H + hqk) * K;
  {
    constexpr int SEG = K / E;
    if constexpr (NTH % SEG == 0 && (C * SEG) % NTH == 0) {
      constexpr int RS = NTH / SEG, NI = C * SEG / NTH;  // row step, items per thread
      const int r0 = tid / SEG, sg = tid % SEG;
#pragma unroll
      for (int m = 0; m < NI; ++m) {
        const int r = r0 + m * RS;
        const bool in = r < len;
        const int64_t off = in ? base + r * rs + sg * E : 0;
        cp_async16_zfill(kn + r * LK + sg * E, ksrc + off, in);
        cp_async16_zfill(qn + r * LK + sg * E, qsrc + off, in);
      }
    } else {
      for (int i = tid; i < C * SEG; i += NTH) {
        const int r = i / SEG, sg = i % SEG;
        const bool in = r < len;
        const int64_t off = in ? base + r * rs + sg * E : 0;
        cp_async16_zfill(kn + r * LK + sg * E, ksrc + off, in);
        cp_async16_zfill(qn + r * LK + sg * E, qsrc + off, in);
      }
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
  for (int r = tid; r < C; r += NTH) bs[r] = r < len ? p.beta[(t0 + r) * p.HV + j] : 0.f;
  if constexpr (Tr::kGated) {
    for (int r = tid; r < C; r += NTH)
      G[r] = r < len ? clamp_gate<Tr>(p.g[(t0 + r) * p.HV + j]) : 0.f;
  }
  cp_async_wait_all();
  __syncthreads();

  // 2. L2-norm factors (f32): four lanes per row, eight elements a load (C *
  // 4 is a multiple of 32: whole warps take part in the shuffles), a
  // quarter-warp reading one part of eight rows (the rows' pad puts the
  // eight 16-byte loads in distinct banks); the gate cumsum within the chunk
  // by the last warp.
  for (int idx = tid; idx < C * 4; idx += NTH) {
    const int r = idx / 32 * 8 + idx % 8, part = idx % 32 / 8;
    float ssq = 0.f, ssk = 0.f;
#pragma unroll
    for (int e = 8 * part; e < K; e += 32) {
      float x[8], y[8];
      load8f(qn + r * LK + e, x);
      load8f(kn + r * LK + e, y);
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        ssq = fmaf(x[i], x[i], ssq);
        ssk = fmaf(y[i], y[i], ssk);
      }
    }
#pragma unroll
    for (int o = 8; o < 32; o <<= 1) {
      ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
      ssk += __shfl_xor_sync(0xffffffffu, ssk, o);
    }
    if (part == 0) {
      rq[r] = p.qk_l2norm ? rsqrtf(ssq + 1e-6f) : 1.f;
      rk[r] = p.qk_l2norm ? rsqrtf(ssk + 1e-6f) : 1.f;
    }
  }
  if constexpr (Tr::kGated) {
    if (warp == NW - 1) {
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
      if constexpr (!kKda) {
        // The decay from each token to the last of its 16-row block (<= 1),
        // for the blocks below the diagonal (step 3), in P until the solve.
        __syncwarp();
        for (int c = lane; c < C; c += 32) P[c] = __expf(G[c | 15] - G[c]);
      }
    }
  }
  // kda: a bit per diagonal block that some channel's gates keep off the
  // tensor-core path (chunked_kda_diag.cuh; always for f32 compute types,
  // which keep f32 accuracy on the exact path).
  unsigned exact = 0;
  if constexpr (kKda) {
    unsigned mine = 0;
    for (int c = tid; c < K; c += NTH) {
      float s = 0.f;
      for (int r = 0; r < C; ++r) {
        s += clamp_gate<Tr>(G[r * LG + c]);
        G[r * LG + c] = s;
      }
      if constexpr (sizeof(Ts) == 2) {
#pragma unroll
        for (int b = 0; b < NBLK; ++b)
          if (!diag_span_ok(G, LG, 16 * b, c))
            mine |= 1u << b;
      }
    }
    if constexpr (sizeof(Ts) == 2) {
#pragma unroll
      for (int b = 0; b < NBLK; ++b)
        if (__syncthreads_or(int(mine >> b & 1u)))
          exact |= 1u << b;
    } else {
      __syncthreads();
      exact = (1u << NBLK) - 1;
    }
  } else {
    __syncthreads();
  }

  // 3. A (into Af) and Aqk (delta / gated: straight out; kda: staged in Tf).
  if constexpr (!kKda) {
    // The 16 x 16 blocks on and below the diagonal of K Kᵀ and Q Kᵀ, spread
    // over all warps (the blocks of A above are never read). A stays in
    // registers until every warp is done with q, k: Af aliases them.
    using Op = Mma<Ts>;
    constexpr int NU = NBLK * (NBLK + 1) / 2, UPW = (2 * NU + NW - 1) / NW;
    const int g = lane >> 2, t = lane & 3;
    Ts* aqk = ws.aqk + slot * C * C;
    float held[UPW][2][4];
#pragma unroll
    for (int m = 0; m < UPW; ++m) {
      const int u = warp + m * NW;
      if (u >= 2 * NU)
        continue;
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
      float rowf[2];
#pragma unroll
      for (int a = 0; a < 2; ++a) {
        const int i = 16 * I + g + 8 * a;
        rowf[a] = isq ? scale * rq[i] : bs[i] * rk[i];
      }
      if (I == J) {  // the decay from token jj to token i; the mask
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int a = e >> 1;
            const int i = 16 * I + g + 8 * a, jj = 16 * J + 8 * h + 2 * t + (e & 1);
            float x = acc[h][e] * rk[jj] * rowf[a];
            if constexpr (Tr::kGated)
              x *= __expf(G[i] - G[jj]);
            held[m][h][e] = (isq ? i >= jj : i > jj) ? x : 0.f;
          }
      } else {  // below the diagonal: that decay as row factor x column factor, both <= 1
        if constexpr (Tr::kGated) {
#pragma unroll
          for (int a = 0; a < 2; ++a) rowf[a] *= __expf(G[16 * I + g + 8 * a] - G[16 * J + 15]);
        }
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int jj = 16 * J + 8 * h + 2 * t + (e & 1);
            float x = acc[h][e] * rk[jj] * rowf[e >> 1];
            if constexpr (Tr::kGated)
              x *= P[jj];
            held[m][h][e] = x;
          }
      }
      if (isq) {
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int a = 0; a < 2; ++a)
            store2(aqk + (16 * I + g + 8 * a) * C + 16 * J + 8 * h + 2 * t, held[m][h][2 * a],
                   held[m][h][2 * a + 1]);
      }
    }
    // Aqk's blocks above the diagonal: zeros (16 bytes or 32 a lane).
    for (int z = warp; z < NBLK * (NBLK - 1) / 2; z += NW) {
      int I = 0, J = z;  // z-th block (I, J), J > I, row by row
      while (J >= NBLK - 1 - I) J -= NBLK - 1 - I++;
      J += I + 1;
      const float zero[8] = {};
      store8_global(aqk + (16 * I + lane / 2) * C + 16 * J + 8 * (lane % 2), zero);
    }
    __syncthreads();  // q, k read by every warp: A may overwrite them
#pragma unroll
    for (int m = 0; m < UPW; ++m) {
      const int u = warp + m * NW;
      if (u >= NU)
        continue;
      int I = 0, J = u;
      while (J > I) J -= ++I;
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int a = 0; a < 2; ++a)
          *reinterpret_cast<float2*>(Af + (16 * I + g + 8 * a) * LD + 16 * J + 8 * h + 2 * t) =
              make_float2(held[m][h][2 * a], held[m][h][2 * a + 1]);
    }
  } else {
    // Diagonal blocks on tensor cores (chunked_kda_diag.cuh): a warp per
    // block and slice of the channels, the slices' sums met in the staging
    // rows in slice order (deterministic).
    constexpr int kStage = (32 + C - 16) * LK * int(sizeof(Ts));  // bytes of dk
    constexpr int SF0 = NW / NBLK < 1 ? 1 : NW / NBLK, SFK = K / 16;
    constexpr int SFS = 1 + kStage / (NBLK * 16 * 32 * 4);  // slices whose sums fit
    constexpr int SF = SF0 < SFK ? (SF0 < SFS ? SF0 : SFS) : (SFK < SFS ? SFK : SFS);
    const bool fast = exact != (1u << NBLK) - 1;
    static_assert(NBLK * SF <= NW, "a warp per (block, slice)");
    if (fast) {
      float* sums = reinterpret_cast<float*>(dk);  // [NBLK][SF - 1][16][32]
      const int b = warp % NBLK, sl = warp / NBLK;
      const bool on = sl < SF && !(exact >> b & 1u);
      float sa[2][4] = {}, sq[2][4] = {};
      if (on) {
        kda_diag_block<Ts>(kn, qn, LK, G, LG, 16 * b, 16 * (sl * SFK / SF),
                           16 * ((sl + 1) * SFK / SF), sa, sq);
        if (sl > 0) {
          float* d = sums + (b * (SF - 1) + sl - 1) * 16 * 32 + lane;
#pragma unroll
          for (int e = 0; e < 8; ++e) {
            d[e * 32] = sa[e / 4][e % 4];
            d[(8 + e) * 32] = sq[e / 4][e % 4];
          }
        }
      }
      if constexpr (SF > 1)
        __syncthreads();
      if (on && sl == 0) {
        for (int m = 1; m < SF; ++m) {
          const float* d = sums + (b * (SF - 1) + m - 1) * 16 * 32 + lane;
#pragma unroll
          for (int e = 0; e < 8; ++e) {
            sa[e / 4][e % 4] += d[e * 32];
            sq[e / 4][e % 4] += d[(8 + e) * 32];
          }
        }
        const int g = lane >> 2, t = lane & 3;
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int i = 16 * b + g + 8 * (e >> 1), jj = 16 * b + 8 * h + 2 * t + (e & 1);
            Af[i * LD + jj] = jj < i ? bs[i] * rk[i] * rk[jj] * sa[h][e] : 0.f;
            if (jj <= i)
              Tf[i * LD + jj] = scale * rq[i] * rk[jj] * sq[h][e];
          }
      }
    }
    if (exact) {
      if (fast && SF > 1)
        __syncthreads();  // the staging rows held the slices' sums
      // Other diagonal blocks: exact per-channel decays. A thread takes row i
      // and four columns 4 jg .. 4 jg + 3 (those <= i) of a block over a slice
      // of the channels, two channels a step: row i's gate, k and q are loaded
      // once for four pairs, as 8- and 4-byte words (the loop is bound by
      // shared loads: one lane per pair and channel issued 5 per term). The
      // slices' sums meet in the kda staging rows (free until the blocks
      // below), added in slice order. Each lane starts at its own channel pair.
      constexpr int NI = NBLK * 40;  // (row, column group) items: sum_i (i / 4 + 1) = 40 a block
      constexpr int KP = K / 2;
      constexpr int SBUF = int((32 + C - 16) * LK * sizeof(Ts) / (size_t(NI) * 32));
      constexpr int S0 = NTH / NI < 1 ? 1 : NTH / NI;
      constexpr int S = S0 < SBUF ? S0 : (SBUF < 1 ? 1 : SBUF);  // channel slices
      float* part = reinterpret_cast<float*>(dk);                   // [S][NI][4][2]
      auto item_of = [](int it, int& i, int& jg) {
        i = 0, jg = it % 40;
        while (jg > i / 4) jg -= i / 4 + 1, ++i;
        i += 16 * (it / 40);
      };
      auto put = [&](int ii, int j2, float sa, float sq) {
        Af[ii * LD + j2] = j2 < ii ? bs[ii] * rk[ii] * rk[j2] * sa : 0.f;
        Tf[ii * LD + j2] = scale * rq[ii] * rk[j2] * sq;
      };
      for (int w = tid; w < NI * S; w += NTH) {
        const int it = w % NI, sl = w / NI;
        if (!(exact >> (it / 40) & 1u))
          continue;
        int i, jg;
        item_of(it, i, jg);
        const int j0 = (i & ~15) + 4 * jg, nq = i - j0 + 1;  // columns j0 .. j0 + min(4, nq) - 1
        const int cp0 = sl * KP / S, len = (sl + 1) * KP / S - cp0;
        float sa[4] = {}, sq[4] = {};
        const int start = lane % len;
        for (int m = 0; m < len; ++m) {
          const int r = start + m < len ? start + m : start + m - len;
          const int c = 2 * (cp0 + r);
          const float2 gi = *reinterpret_cast<const float2*>(G + i * LG + c);
          float ki0, ki1, qi0, qi1;
          load2f(kn + i * LK + c, ki0, ki1);
          load2f(qn + i * LK + c, qi0, qi1);
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            if (q < nq) {
              const int j = j0 + q;
              const float2 gj = *reinterpret_cast<const float2*>(G + j * LG + c);
              float kj0, kj1;
              load2f(kn + j * LK + c, kj0, kj1);
              const float t0 = kj0 * __expf(gi.x - gj.x), t1 = kj1 * __expf(gi.y - gj.y);
              sa[q] = fmaf(ki1, t1, fmaf(ki0, t0, sa[q]));
              sq[q] = fmaf(qi1, t1, fmaf(qi0, t0, sq[q]));
            }
          }
        }
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          if constexpr (S == 1) {
            if (q < nq)
              put(i, j0 + q, sa[q], sq[q]);
          } else {
            part[((sl * NI + it) * 4 + q) * 2] = sa[q];
            part[((sl * NI + it) * 4 + q) * 2 + 1] = sq[q];
          }
        }
      }
      if constexpr (S > 1) {
        __syncthreads();
        for (int w = tid; w < NI * 4; w += NTH) {
          const int it = w / 4, q = w % 4;
          if (!(exact >> (it / 40) & 1u))
            continue;
          int i, jg;
          item_of(it, i, jg);
          const int j = (i & ~15) + 4 * jg + q;
          if (j <= i) {
            float sa = 0.f, sq = 0.f;
            for (int sl = 0; sl < S; ++sl) {
              sa += part[((sl * NI + it) * 4 + q) * 2];
              sq += part[((sl * NI + it) * 4 + q) * 2 + 1];
            }
            put(i, j, sa, sq);
          }
        }
      }
    }
    __syncthreads();  // the staging rows below reuse part's space
    // Above the diagonal nothing is written: the solve never reads it, and
    // Aqk and T are written out with zeros there.
    // Blocks below the diagonal, one block row I at a time, factored
    // through row bnd = 16 I - 1: exp(G_i - G_j) = exp(G_i - G_bnd) exp(G_bnd - G_j).
    Ts* left = dk;             // [16][LK]  k_i ∘ exp(G_i - G_bnd)
    Ts* qleft = dk + 16 * LK;  // [16][LK]  q_i ∘ exp(G_i - G_bnd)
    Ts* right = dk + 32 * LK;  // [16 I][LK] k_j ∘ exp(G_bnd - G_j)
    for (int I = 1; I < NBLK; ++I) {
      const int bnd = 16 * I - 1;
      // Eight channels a thread (16-byte rows; every row start is aligned).
      for (int idx = tid; idx < 16 * K / 8; idx += NTH) {
        const int r = idx / (K / 8), c = idx % (K / 8) * 8, i = 16 * I + r;
        float gi[8], gb[8], kv[8], qv[8];
        load8f(G + i * LG + c, gi);
        load8f(G + bnd * LG + c, gb);
        load8f(kn + i * LK + c, kv);
        load8f(qn + i * LK + c, qv);
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          const float x = __expf(gi[e] - gb[e]);
          kv[e] *= x;
          qv[e] *= x;
        }
        store8(left + r * LK + c, kv);
        store8(qleft + r * LK + c, qv);
      }
      for (int idx = tid; idx < 16 * I * K / 8; idx += NTH) {
        const int r = idx / (K / 8), c = idx % (K / 8) * 8;
        float gr[8], gb[8], kv[8];
        load8f(G + r * LG + c, gr);
        load8f(G + bnd * LG + c, gb);
        load8f(kn + r * LK + c, kv);
#pragma unroll
        for (int e = 0; e < 8; ++e) kv[e] *= __expf(gb[e] - gr[e]);
        store8(right + r * LK + c, kv);
      }
      __syncthreads();
      if constexpr (C > 16) {
        block_gemm_tn<Ts, 16, C - 16, K, 2>(
            left, LK, right, nullptr, LK, warp, NW,
            [&](int r, int jj, float x0, float x1) {
              const int i = 16 * I + r;
              const float f = bs[i] * rk[i];
              Af[i * LD + jj] = f * rk[jj] * x0;
              Af[i * LD + jj + 1] = f * rk[jj + 1] * x1;
            },
            [&](int, int n0) { return n0 >= 16 * I; });
        block_gemm_tn<Ts, 16, C - 16, K, 2>(
            qleft, LK, right, nullptr, LK, warp, NW,
            [&](int r, int jj, float x0, float x1) {
              const int i = 16 * I + r;
              const float f = scale * rq[i];
              Tf[i * LD + jj] = f * rk[jj] * x0;
              Tf[i * LD + jj + 1] = f * rk[jj + 1] * x1;
            },
            [&](int, int n0) { return n0 >= 16 * I; });
      }
      __syncthreads();
    }
  }
  __syncthreads();

  // 4. kda: Aqk out (from Tf). Then T = (I + A)^-1 into Tf.
  if constexpr (kKda) {
    Ts* aqk = ws.aqk + slot * C * C;
    for (int idx = tid; idx < C * C / 8; idx += NTH) {
      const int i = idx / (C / 8), jj = idx % (C / 8) * 8;
      float x[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) x[e] = jj + e <= i ? Tf[i * LD + jj + e] : 0.f;
      store8_global(aqk + i * C + jj, x);
    }
    __syncthreads();
  }
  auto gam = [&](int c, int kk) -> float {  // log of the decay from the chunk start
    if constexpr (kKda)
      return G[c * LG + kk];
    else if constexpr (Tr::kGated)
      return G[c];
    else
      return 0.f;
  };
  // T = (I + A)^-1 (ut_solve.cuh): the diagonal blocks on the first warps,
  // while the others write the row factors and the chunk decay; then the
  // blocks below.
  static_assert(kUtDiagWarps<NBLK> < NW && NW >= 4, "warps left for the row factors");
  if (warp < kUtDiagWarps<NBLK>) {
    ut_diag<NBLK, LD>(Af, Tf, warp, lane);
  } else {
    const int ft = tid - 32 * kUtDiagWarps<NBLK>, fn = NTH - 32 * kUtDiagWarps<NBLK>;
    float* f = ws.f + slot * 4 * C;
    for (int r = ft; r < C; r += fn) {
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
    for (int kk = ft; kk < K; kk += fn) gm[kk] = Tr::kDecay ? expf(gam(C - 1, kk)) : 1.f;
  }
  __syncthreads();
  ut_offdiag<NBLK, LD>(Af, Tf, P, warp, lane);

  // 5. T, the row factors and the chunk decay (kda: the decayed q, k
  // operands) out.
  {
    Ts* t = ws.t + slot * C * C;
    // What rounding to Ts leaves of x (the low half scan 5 reads).
    auto rest = [](float x) { return x - cvt_f(cvt_t<Ts>(x)); };
    if constexpr (LD % 4 == 0) {
      // Four elements a thread: 16-byte shared loads without bank conflicts.
      Ts* tl = ws.tlo ? ws.tlo + slot * C * C : nullptr;
      for (int idx = tid; idx < C * C / 4; idx += NTH) {
        const int i = idx / (C / 4), jj = idx % (C / 4) * 4;
        const bool low = jj / 16 <= i / 16;  // blocks above the diagonal: zero
        const float4 x = low ? *reinterpret_cast<const float4*>(Tf + i * LD + jj)
                             : make_float4(0.f, 0.f, 0.f, 0.f);
        store4_global(t + i * C + jj, x);
        if constexpr (sizeof(Ts) == 2)
          if (tl)
            store4_global(tl + i * C + jj,
                          make_float4(rest(x.x), rest(x.y), rest(x.z), rest(x.w)));
      }
    } else {
      for (int idx = tid; idx < C * C / 8; idx += NTH) {
        const int i = idx / (C / 8), jj = idx % (C / 8) * 8;
        const bool low = jj / 16 <= i / 16;
        float x[8];
#pragma unroll
        for (int e = 0; e < 8; ++e) x[e] = low ? Tf[i * LD + jj + e] : 0.f;
        store8_global(t + i * C + jj, x);
        if (sizeof(Ts) == 2 && ws.tlo) {
#pragma unroll
          for (int e = 0; e < 8; ++e) x[e] = rest(x[e]);
          store8_global(ws.tlo + slot * C * C + i * C + jj, x);
        }
      }
    }
  }
  if constexpr (kKda) {
    // Stored in Ts: 16-bit types take the fast exponential (its ~2^-21
    // relative error is far below their rounding).
    auto exp_ts = [](float x) {
      if constexpr (sizeof(Ts) == 2)
        return __expf(x);
      else
        return expf(x);
    };
    Ts* qg = ws.qg + slot * C * K;
    Ts* kg = ws.kg + slot * C * K;
    Ts* kd = ws.kd + slot * C * K;
    // Eight channels a thread: 16-byte loads and stores.
    for (int idx = tid; idx < C * K / 8; idx += NTH) {
      const int c = idx / (K / 8), kk = idx % (K / 8) * 8;
      float g[8], gl[8], kv[8], x[8], y[8], z[8];
      load8f(G + c * LG + kk, g);
      load8f(G + (C - 1) * LG + kk, gl);
      load8f(kn + c * LK + kk, kv);
      load8f(qn + c * LK + kk, x);
      const float fk = rk[c], fq = scale * rq[c];
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const float ex = exp_ts(g[e]), el = exp_ts(gl[e] - g[e]), kr = fk * kv[e];
        x[e] *= fq * ex;
        y[e] = kr * ex;
        z[e] = kr * el;
      }
      store8_global(qg + c * K + kk, x);
      store8_global(kg + c * K + kk, y);
      store8_global(kd + c * K + kk, z);
    }
  }
}

// One block per (chunk slot, value head).
template <deltac_variant Var, class Tr>
__global__ void __launch_bounds__(Tr::kPrepThreads, Tr::kPrepMinBlocks)
    chunked_prep_kernel(const deltac_fwd_params p, const ChunkedWs<typename Tr::Ts> ws,
                        float scale) {
  chunked_prep_item<Var, Tr>(p, ws, scale, int64_t(blockIdx.x), int(blockIdx.y));
}

}  // namespace deltac::cuda::detail

#endif  // DELTAC_CUDA_CHUNKED_PREP_CUH

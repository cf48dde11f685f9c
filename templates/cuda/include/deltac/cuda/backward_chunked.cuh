// The chunked (WY / UT) CUDA backward of the delta rule, delta and gated
// (contract: deltac/backward.h; which calls run it: deltac/backward_rules.h).
//
//   deltac::cuda::bwdc::workspace<Var, K>(p, &bytes)
//   deltac::cuda::bwdc::backward<Var, K>(p, stream, workspace, workspace_bytes)
// (bf16 calls whose pointers fail bwdc::aligned get cudaErrorMisalignedAddress;
// the runtime runs those on the sweep.)
//
// Per chunk of C tokens (rows i, j), h the state at the chunk start [K x V],
// k^, q^ the (L2-normalised) rows, G the in-chunk cumsum of the gate
// (clamped at kGateFloor as the forward; summed in double, so that
// differences of nearby rows stay exact), Γ = e^G, e = e^(G_last - G),
// γ = e^G_last:
//   A   = strictly-lower(diag(β) (K^ K^ᵀ ∘ e^(G_i - G_j))),  T = (I + A)^-1
//   Aqk = scale lower(Q^ K^ᵀ ∘ e^(G_i - G_j))
//   u   = T β (V - Γ K^ h)           (the per-token update, "v_new")
//   O   = scale Γ Q^ h + Aqk u,       h_end = γ h + (e K^)ᵀ u
// Backward, dh = dL/dh_end:
//   du = Aqkᵀ dO + e K^ dh,  dr = Tᵀ du,  dv = β dr
//   dh_start = γ dh + (scale Γ Q^)ᵀ dO - (β Γ K^)ᵀ dr
//   dAqk = dO uᵀ, dA = -dr uᵀ (masked), dq^ = scale Γ dO hᵀ + M K^,
//   dk^ = -βΓ dr hᵀ + e u dhᵀ + Mᵀ Q^ + N K^ + Nᵀ K^
//   (M = dAqk ∘ scale e^(G_i - G_j), N = dA ∘ β_i e^(G_i - G_j)),
//   dβ = rowsum(dr ∘ (V - Γ K^ h)) + rowsum(dA ∘ K^K^ᵀ e^(G_i - G_j)),
//   dG per row from every e^G factor, dg = the reverse cumsum of dG within
//   the chunk (0 where the gate was clamped).
// Kernels: (qk_l2norm) 1/|x| per row (backward.cuh; bf16: in prep16); prep per (chunk,
// value head): T, Aqk; the forward scan per (sequence, value head, V
// tile): chunk-start states h and u; the reverse scan: dh per chunk end, dr,
// dv, dh0; the gradient kernel per (chunk, value head): dq^, dk^ (into the
// f32 accumulators), dβ, dg, then backward.cuh's finish kernel: the L2
// norm backward (bf16: one gradient kernel per chunk and q/k head does all).
// Every product runs on tensor cores from f32 shared memory: three TF32
// products (f32 accuracy) for f32 inputs, one for 16-bit ones (Tf32 below).
// For bf16 inputs both scans are instead the chains per warp of
// backward_scan_warp.cuh (prep16 then writes T and Aqk as bf16 hi, + lo in
// chunks with a β above 1, their lower blocks only, and the row factors F)
// and the gradient kernel that of backward_grad_bf16.cuh
// (bf16 operands by ldmatrix). The workspace holds the chunk data and the
// states h, dh, u, dr: bf16 on the warp-scan path (states16), else f32.
#ifndef DELTAC_CUDA_BACKWARD_CHUNKED_CUH
#define DELTAC_CUDA_BACKWARD_CHUNKED_CUH

#include "deltac/backward_rules.h"
#include "deltac/cuda/backward.cuh"
#include "deltac/cuda/chunked_mma.cuh"
#include "deltac/cuda/ut_solve.cuh"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>

namespace deltac::cuda::bwdc {

constexpr int C = kBwdChunk;
constexpr int kThreads = 256, kWarps = kThreads / 32;
constexpr int kSV = 32;            // V columns per scan block
constexpr int LC = C + 4;          // f32 row strides: +4 floats (conflict-free fragments)
constexpr int LS = kSV + 4;
constexpr float kGateFloor = -128.f;  // as the forward (chunked_traits.cuh)
constexpr int kWF = 5;  // the warp scans' factor rows per (chunk slot, value head): fa, fb, fk, fq, [γ]
template <int K>
constexpr int grad_bv() { return K == 64 ? 32 : 16; }  // V columns per gradient step

// Device pointers of one call.
struct Ws {
  deltac_bwd_params p;
  float scale;
  int64_t slots;
  const float *rq, *rk;  // 1/|x| rows, or null (no L2 norm)
  float *dqa, *dka;      // [tokens][H][K]
  float *T, *Aqk;        // [slot][HV][C][C]
  // [slot][HV] of: f32 [K][V], [C][V] (block scans, grad_kernel) or bf16
  // transposed, [V][K], [V][C] (warp scans, grad16: states16)
  void *hs, *dhs;        // the state at the chunk start, dL/d(the state at its end)
  void *us, *drs;        // u, dr of the chunk's tokens
  float* F;              // [slot][HV][kWF][C]: the warp scans' row factors (backward_scan_warp.cuh)
  int lo_always;         // prep16: T's and Aqk's low halves for every chunk (else where β > 1)
  // hs, us in the forward's saved states (p.saved_states): their flag, set
  // where the forward wrote them (the forward scan then has nothing to do)
  const int32_t* saved_flag;
  int atomic;            // grad_kernel: dq^, dk^ summed over value heads (atomicAdd), else stored
};

// The products: three TF32 products per step (detail::Mma<float>: f32
// accuracy) for f32 inputs; one TF32 product (operands rounded to TF32,
// ~2^-11 relative) where every input and dO are bf16 / f16, whose gradients
// are rounded to 16 bits anyway (error budget: docs/performance.md).
struct Tf32 {
  struct FragA {
    uint32_t r[2][4];
  };
  struct FragB {
    uint32_t r[2][2];
  };
  __device__ static __forceinline__ uint32_t c(float x) { return detail::to_tf32(x); }
  __device__ static __forceinline__ void load_a(FragA& f, const float* a, int lda) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float* p = a + 8 * h;
      f.r[h][0] = c(p[g * lda + t]);
      f.r[h][1] = c(p[(g + 8) * lda + t]);
      f.r[h][2] = c(p[g * lda + t + 4]);
      f.r[h][3] = c(p[(g + 8) * lda + t + 4]);
    }
  }
  __device__ static __forceinline__ void load_b(FragB& f, const float* b, int ldb) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float* p = b + 8 * h;
      f.r[h][0] = c(p[g * ldb + t]);
      f.r[h][1] = c(p[g * ldb + t + 4]);
    }
  }
  __device__ static __forceinline__ void load_a_t(FragA& f, const float* a, int lda) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float* p = a + 8 * h * lda;
      f.r[h][0] = c(p[t * lda + g]);
      f.r[h][1] = c(p[t * lda + g + 8]);
      f.r[h][2] = c(p[(t + 4) * lda + g]);
      f.r[h][3] = c(p[(t + 4) * lda + g + 8]);
    }
  }
  __device__ static __forceinline__ void load_b_t(FragB& f, const float* b, int ldb) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float* p = b + 8 * h * ldb;
      f.r[h][0] = c(p[t * ldb + g]);
      f.r[h][1] = c(p[(t + 4) * ldb + g]);
    }
  }
  __device__ static __forceinline__ void mma(float acc[4], const FragA& a, const FragB& b) {
#pragma unroll
    for (int h = 0; h < 2; ++h) detail::Mma<float>::mma1(acc, a.r[h], b.r[h]);
  }
};
template <bool Fast>
using Ops = std::conditional_t<Fast, Tf32, detail::Mma<float>>;

__device__ __forceinline__ int64_t seq_t0(const deltac_bwd_params& p, int n) {
  return p.cu_seqlens ? p.cu_seqlens[n] : int64_t(n) * p.T;
}
// First chunk slot of sequence n (slots never overlap: floor(t0 / C) + n).
__device__ __forceinline__ int64_t slot0(const deltac_bwd_params& p, int n) {
  return seq_t0(p, n) / C + n;
}

// The sequence and tokens of chunk slot s; false for a slot no chunk has.
__device__ __forceinline__ bool locate(const deltac_bwd_params& p, int64_t s, int& n,
                                       int64_t& ts, int& len) {
  const int N = p.cu_seqlens ? p.N : p.B;
  int lo = 0, hi = N - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (slot0(p, mid) <= s)
      lo = mid;
    else
      hi = mid - 1;
  }
  n = lo;
  const int64_t t0 = seq_t0(p, n);
  const int64_t end = p.cu_seqlens ? p.cu_seqlens[n + 1] : t0 + p.T;
  const int64_t c = s - slot0(p, n), nc = (end - t0 + C - 1) / C;
  if (c < 0 || c >= nc)
    return false;
  ts = t0 + c * C;
  len = int(end - ts < C ? end - ts : C);
  return true;
}

// acc[NT][4] += op(A)[m0 + 16) op(B)[n0 + 8 NT)ᵀ over kd (a multiple of 16).
// TA: A stored [k][m] (else [m][k]); TB: B stored [k][n] (else [n][k]).
template <class Op, bool TA, bool TB, int NT>
__device__ __forceinline__ void mm(float (*acc)[4], const float* A, int lda, const float* B,
                                   int ldb, int m0, int n0, int kd) {
#pragma unroll 2
  for (int k0 = 0; k0 < kd; k0 += 16) {
    typename Op::FragA fa;
    if constexpr (TA)
      Op::load_a_t(fa, A + k0 * lda + m0, lda);
    else
      Op::load_a(fa, A + m0 * lda + k0, lda);
#pragma unroll
    for (int i = 0; i < NT; ++i) {
      typename Op::FragB fb;
      if constexpr (TB)
        Op::load_b_t(fb, B + k0 * ldb + n0 + 8 * i, ldb);
      else
        Op::load_b(fb, B + (n0 + 8 * i) * ldb + k0, ldb);
      Op::mma(acc[i], fa, fb);
    }
  }
}

template <int NT>
__device__ __forceinline__ void zero(float (*acc)[4]) {
#pragma unroll
  for (int i = 0; i < NT; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
}

// f(row, col, e): element e of the unit's fragment sits at (row, col).
template <int NT, class F>
__device__ __forceinline__ void each(int m0, int n0, F&& f) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int i = 0; i < NT; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) f(m0 + g + (e >= 2 ? 8 : 0), n0 + 8 * i + 2 * t + (e & 1), i, e);
}

// The warps take the 16 x 8NT units of an M x N output in turn: f(m0, n0).
template <int M, int N, int NT, int NW = kWarps, class F>
__device__ __forceinline__ void units(F&& f) {
  constexpr int kNg = N / (8 * NT), kUnits = (M / 16) * kNg;
  static_assert(M % 16 == 0 && N % (8 * NT) == 0, "unit shape");
  for (int u = threadIdx.x / 32; u < kUnits; u += NW) f((u / kNg) * 16, (u % kNg) * 8 * NT);
}

// A ROWS x COLS tile (COLS % 4 == 0) of a row-major array of dtype dt
// (DELTAC_F32, BF16 or F16; 16-byte aligned rows for f32, 8-byte for
// 16-bit) into f32 shared memory (row stride COLS + 4), in two steps: fetch
// issues every global load of the thread into registers, put converts and
// stores; fetches of several tiles before their puts overlap their
// latencies. Row r < len is element off + r * stride, scaled by rn[rn_off +
// r * rn_stride] when rn is given; rows >= len are zero.
template <int ROWS, int COLS, int NTH = kThreads>
struct Tile {
  static constexpr int Q = COLS / 4, E = ROWS * Q, N = (E + NTH - 1) / NTH;
  static constexpr bool kPart = E % NTH != 0;  // the last step leaves threads out
  float4 x[N];
  float sc[N];
  int dt;
  __device__ __forceinline__ void fetch(const void* src, int dtype, int64_t off, int64_t stride,
                                        int len, const float* rn = nullptr, int64_t rn_off = 0,
                                        int64_t rn_stride = 0) {
    dt = dtype;
    const int tid = threadIdx.x;
#pragma unroll
    for (int m = 0; m < N; ++m) {
      const int e = tid + m * NTH, r = e / Q, c = (e % Q) * 4;
      const int64_t i = off + r * stride + c;
      sc[m] = 1.f;
      if (r >= len || (kPart && e >= E)) {
        x[m] = make_float4(0.f, 0.f, 0.f, 0.f);
        continue;
      }
      if (dt == DELTAC_F32) {
        x[m] = *reinterpret_cast<const float4*>(static_cast<const float*>(src) + i);
      } else {
        const uint2 u = *reinterpret_cast<const uint2*>(static_cast<const uint16_t*>(src) + i);
        x[m].x = __uint_as_float(u.x);
        x[m].y = __uint_as_float(u.y);
      }
      if (rn)
        sc[m] = rn[rn_off + r * rn_stride];
    }
  }
  __device__ __forceinline__ void put(float* dst) const {
    const int tid = threadIdx.x;
#pragma unroll
    for (int m = 0; m < N; ++m) {
      const int e = tid + m * NTH, r = e / Q, c = (e % Q) * 4;
      if (kPart && e >= E)
        continue;
      float4 y = x[m];
      if (dt != DELTAC_F32) {
        const uint32_t u0 = __float_as_uint(x[m].x), u1 = __float_as_uint(x[m].y);
        float v[4];
        if (dt == DELTAC_BF16) {
          v[0] = __uint_as_float(u0 << 16), v[1] = __uint_as_float(u0 & 0xffff0000u);
          v[2] = __uint_as_float(u1 << 16), v[3] = __uint_as_float(u1 & 0xffff0000u);
        } else {
          v[0] = __half2float(__ushort_as_half(uint16_t(u0 & 0xffffu)));
          v[1] = __half2float(__ushort_as_half(uint16_t(u0 >> 16)));
          v[2] = __half2float(__ushort_as_half(uint16_t(u1 & 0xffffu)));
          v[3] = __half2float(__ushort_as_half(uint16_t(u1 >> 16)));
        }
        y = make_float4(v[0], v[1], v[2], v[3]);
      }
      y.x *= sc[m], y.y *= sc[m], y.z *= sc[m], y.w *= sc[m];
      *reinterpret_cast<float4*>(dst + r * (COLS + 4) + c) = y;
    }
  }
};

// Tile fetches of the call's arrays for chunk rows [ts, ts + len).
template <int K, int NTH>
__device__ __forceinline__ void fetch_qk(Tile<C, K, NTH>& t, const void* src, const float* rn,
                                         const deltac_bwd_params& p, int64_t ts, int len, int hk) {
  t.fetch(src, p.in_dtype, (ts * p.H + hk) * K, int64_t(p.H) * K, len, rn, ts * p.H + hk, p.H);
}
template <int COLS, int NTH>
__device__ __forceinline__ void fetch_v(Tile<C, COLS, NTH>& t, const void* src, int dt,
                                        const deltac_bwd_params& p, int64_t ts, int len, int j,
                                        int v0) {
  t.fetch(src, dt, (ts * p.HV + j) * p.V + v0, int64_t(p.HV) * p.V, len);
}

// The shared-memory tile (row stride cols + 4) out to a [.][gstride] f32 array.
template <int NTH = kThreads>
__device__ __forceinline__ void store_f4(float* dst, int64_t gstride, const float* src, int rows,
                                         int cols) {
  const int q = cols / 4;
  for (int e = threadIdx.x; e < rows * q; e += NTH) {
    const int r = e / q, c = (e % q) * 4;
    *reinterpret_cast<float4*>(dst + r * gstride + c) =
        *reinterpret_cast<const float4*>(src + r * (cols + 4) + c);
  }
}

// β and the gate of a chunk's rows (thread r < C holds row r): fetch into
// registers, then put: b, G (the clamped cumsum in double, so that
// differences of nearby rows stay exact; 0 for delta), Γ = e^G and
// e = e^(G_last - G) into shared memory [C]; padded rows: β = 0, gate 0.
struct Bg {
  float b, g;
  bool low;  // the gate was below kGateFloor (clamped)
  template <deltac_variant Var>
  __device__ __forceinline__ void fetch(const deltac_bwd_params& p, int64_t ts, int len, int j) {
    const int tid = threadIdx.x;
    b = g = 0.f;
    low = false;
    if (tid < len && tid < C) {
      b = static_cast<const float*>(p.beta)[(ts + tid) * p.HV + j];
      if constexpr (Var == DELTAC_VARIANT_GATED) {
        g = static_cast<const float*>(p.g)[(ts + tid) * p.HV + j];
        low = g < kGateFloor;
        g = low ? kGateFloor : g;  // NaN stays NaN
      }
    }
  }
  // Barriers inside (every thread of the block calls it). The cumsum: warp
  // 0, lane l rows 2l and 2l + 1, a shuffle scan over the lanes.
  template <deltac_variant Var>
  __device__ __forceinline__ void put(float* bs, double* G, float* Gx, float* Ex) const {
    static_assert(C == 64, "two rows per lane");
    const int tid = threadIdx.x;
    if (tid < C) {
      bs[tid] = b;
      G[tid] = g;
    }
    __syncthreads();
    if (tid < 32) {
      double s0 = 0.0, s1 = 0.0, last = 0.0;
      if constexpr (Var == DELTAC_VARIANT_GATED) {
        s0 = G[2 * tid];
        s1 = s0 + G[2 * tid + 1];
        double x = s1;  // inclusive scan of the lanes' pair sums
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
          const double y = __shfl_up_sync(0xffffffffu, x, o);
          if (tid >= o) x += y;
        }
        double ex = __shfl_up_sync(0xffffffffu, x, 1);
        ex = tid == 0 ? 0.0 : ex;
        s0 += ex, s1 += ex;
        last = __shfl_sync(0xffffffffu, x, 31);
        G[2 * tid] = s0;
        G[2 * tid + 1] = s1;
      }
      Gx[2 * tid] = expf(float(s0));
      Gx[2 * tid + 1] = expf(float(s1));
      Ex[2 * tid] = expf(float(last - s0));
      Ex[2 * tid + 1] = expf(float(last - s1));
    }
    __syncthreads();
  }
};

// e^(G_i - G_j) for j <= i, else 0 (the delta rule: 1, G unread).
template <deltac_variant Var = DELTAC_VARIANT_GATED>
__device__ __forceinline__ float decay(const double* G, int i, int j) {
  if constexpr (Var == DELTAC_VARIANT_DELTA)
    return j <= i ? 1.f : 0.f;
  else
    return j <= i ? expf(float(G[i] - G[j])) : 0.f;
}

// The [C][LC] f32 shared tile of a lower-triangular matrix as bf16 hi + lo
// (x = hi + lo to ~2^-17) into the [C][C] hi and lo halves of an f32 array's
// place, 4 elements a thread; only the 16 x 16 blocks on and below the
// diagonal (the warp scans read no others: copy_lower); the lo half only
// with lo.
__device__ __forceinline__ void store_hilo(float* at, const float* src, bool lo) {
  __nv_bfloat16* h = reinterpret_cast<__nv_bfloat16*>(at);
  for (int q = threadIdx.x; q < C * C / 4; q += kThreads) {
    const int r = q / (C / 4), c = (q % (C / 4)) * 4;
    if (c >= 16 * (r / 16 + 1))
      continue;
    const float4 x = *reinterpret_cast<const float4*>(src + r * LC + c);
    const float v[4] = {x.x, x.y, x.z, x.w};
    __nv_bfloat16 hi[4], lh[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      hi[i] = __float2bfloat16_rn(v[i]);
      lh[i] = __float2bfloat16_rn(v[i] - __bfloat162float(hi[i]));
    }
    *reinterpret_cast<uint2*>(h + r * C + c) = *reinterpret_cast<const uint2*>(hi);
    if (lo)
      *reinterpret_cast<uint2*>(h + C * C + r * C + c) = *reinterpret_cast<const uint2*>(lh);
  }
}

// ---- prep: G, T, Aqk per (chunk slot, value head) -------------------------
template <deltac_variant Var, int K>
struct PrepSmem {
  static constexpr int LK = K + 4;
  static constexpr int kn = 0, qn = kn + C * LK, A = qn + C * LK, Tf = A + C * LC;
  static constexpr int b = Tf + C * LC, G = b + C, Gx = G + 2 * C, Ex = Gx + C;
  static constexpr int floats = Ex + C;
  static constexpr size_t bytes = size_t(floats) * 4;
};

// T = (I + A)^-1 into Tf (both [C][LC]) by ut_solve.cuh; Tf's blocks above
// the diagonal are zeroed here. P: 4 x 256 floats of scratch. Every thread
// of the block calls it; barriers inside.
__device__ __forceinline__ void solve_t(const float* A, float* Tf, float* P) {
  static_assert(C == 64, "4 blocks");
  using namespace deltac::cuda::detail;
  constexpr int NB = C / 16, D = 32 * kUtDiagWarps<NB>;
  const int warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31;
  if (!ut_diag<NB, LC>(A, Tf, warp, lane)) {  // meanwhile: the 6 blocks above, 4 floats a step
    for (int e = int(threadIdx.x) - D; e < 6 * 64; e += kThreads - D) {
      const int z = e / 64, r = (e % 64) / 4, c = (e % 4) * 4;
      const int I = z < 3 ? 0 : (z < 5 ? 1 : 2), J = z < 3 ? z + 1 : (z < 5 ? z - 1 : 3);
      *reinterpret_cast<float4*>(Tf + (16 * I + r) * LC + 16 * J + c) = make_float4(0.f, 0.f, 0.f, 0.f);
    }
  }
  __syncthreads();
  ut_offdiag<NB, LC>(A, Tf, P, warp, lane);
}

// prep's outputs for the warp scans: T as bf16 hi (+ lo with lo) and the
// row factors fa = β Γ rk, fb = β, fk = e rk, fq = scale Γ rq; [4][0] = γ,
// [4][1] = 1 with lo (rows past len: 0), from b, G, Gx, Ex of the chunk
// (Bg::put), the rows' 1/|x| rk, rq and T in Tf.
__device__ __forceinline__ void store_w(const Ws& w, int64_t slot, int len, const float* b,
                                        const double* G, const float* Gx, const float* Ex,
                                        const float* rks, const float* rqs, const float* Tf,
                                        bool lo) {
  store_hilo(w.T + slot * C * C, Tf, lo);
  const int r = threadIdx.x;
  if (r < C) {
    float* f = w.F + slot * kWF * C;
    const bool in = r < len;
    const float rk = rks[r], rq = rqs[r];
    f[r] = in ? b[r] * Gx[r] * rk : 0.f;
    f[C + r] = in ? b[r] : 0.f;
    f[2 * C + r] = in ? Ex[r] * rk : 0.f;
    f[3 * C + r] = in ? w.scale * Gx[r] * rq : 0.f;
    f[4 * C + r] = r == 0 ? expf(float(G[C - 1])) : r == 1 && lo ? 1.f : 0.f;
  }
}

// (The warp scans' prep, bf16 T and Aqk and the factors F: prep16_kernel.)
template <deltac_variant Var, int K, bool F>
__global__ void __launch_bounds__(kThreads) prep_kernel(const __grid_constant__ Ws w) {
  using O = Ops<F>;
  using L = PrepSmem<Var, K>;
  constexpr int LK = L::LK;
  extern __shared__ __align__(16) float sm[];
  const deltac_bwd_params& p = w.p;
  const int64_t s = blockIdx.x;
  const int j = blockIdx.y;
  int n, len;
  int64_t ts;
  if (!locate(p, s, n, ts, len))
    return;
  const int hk = j / (p.HV / p.H);
  float *kn = sm + L::kn, *qn = sm + L::qn, *A = sm + L::A, *Tf = sm + L::Tf;
  float* b = sm + L::b;
  double* G = reinterpret_cast<double*>(sm + L::G);
  {
    Tile<C, K> tk, tq;
    Bg bg;
    fetch_qk<K>(tk, p.k, w.rk, p, ts, len, hk);
    fetch_qk<K>(tq, p.q, w.rq, p, ts, len, hk);
    bg.fetch<Var>(p, ts, len, j);
    tk.put(kn);
    tq.put(qn);
    bg.put<Var>(b, G, sm + L::Gx, sm + L::Ex);  // (barriers)
  }
  const int64_t slot = s * p.HV + j;
  float* aqk = w.Aqk + slot * C * C;
  units<C, C, 4>([&](int m0, int n0) {
    float ak[4][4], aq[4][4];
    zero<4>(ak);
    zero<4>(aq);
    mm<O, false, false, 4>(ak, kn, LK, kn, LK, m0, n0, K);
    mm<O, false, false, 4>(aq, qn, LK, kn, LK, m0, n0, K);
    each<4>(m0, n0, [&](int i, int jj, int x, int e) {
      const float d = decay<Var>(G, i, jj);
      A[i * LC + jj] = jj < i ? b[i] * d * ak[x][e] : 0.f;
      aqk[i * C + jj] = jj <= i ? w.scale * d * aq[x][e] : 0.f;
    });
  });
  __syncthreads();
  solve_t(A, Tf, qn);  // (P in qn's place, free after the products)
  store_f4(w.T + slot * C * C, C, Tf, C, C);
}

// ---- forward scan: chunk-start states and u per (V tile, value head, seq) --
template <deltac_variant Var, int K>
struct ScanSmem {
  static constexpr int LK = K + 4;
  // the reverse scan's: kn, qn, Aqk, T, DH, DO, DU, DR
  static constexpr int kn = 0, qn = kn + C * LK, A = qn + C * LK, T = A + C * LC;
  static constexpr int S = T + C * LC, X = S + K * LS, Y = X + C * LS, Z = Y + C * LS;
  static constexpr int b = Z + C * LS, G = b + C, Gx = G + 2 * C, Ex = Gx + C, floats = Ex + C;
  static constexpr size_t bytes = size_t(floats) * 4;
};

// The forward scan's: kn, T, the state tile S, R, U (fits twice per SM).
template <deltac_variant Var, int K>
struct FwdSmem {
  static constexpr int LK = K + 4;
  static constexpr int kn = 0, T = kn + C * LK, S = T + C * LC, X = S + K * LS, Y = X + C * LS;
  static constexpr int b = Y + C * LS, G = b + C, Gx = G + 2 * C, Ex = Gx + C, floats = Ex + C;
  static constexpr size_t bytes = size_t(floats) * 4;
};

template <int K>
__device__ __forceinline__ int64_t sidx(const deltac_bwd_params& p, int n, int j, int r, int c) {
  const int64_t base = (int64_t(n) * p.HV + j) * K * p.V;
  return base + (p.state_layout == DELTAC_STATE_VK ? int64_t(c) * K + r : int64_t(r) * p.V + c);
}

template <deltac_variant Var, int K, bool F>
__global__ void __launch_bounds__(kThreads, 2) fwd_scan_kernel(const __grid_constant__ Ws w) {
  using O = Ops<F>;
  using L = FwdSmem<Var, K>;
  constexpr int LK = L::LK;
  extern __shared__ __align__(16) float sm[];
  const deltac_bwd_params& p = w.p;
  const int v0 = blockIdx.x * kSV, j = blockIdx.y, n = blockIdx.z;
  const int hk = j / (p.HV / p.H);
  float *kn = sm + L::kn, *T = sm + L::T, *S = sm + L::S, *R = sm + L::X, *U = sm + L::Y;
  float *b = sm + L::b, *Gx = sm + L::Gx, *Ex = sm + L::Ex;
  double* G = reinterpret_cast<double*>(sm + L::G);
  const int64_t t0 = seq_t0(p, n);
  const int64_t t1 = p.cu_seqlens ? p.cu_seqlens[n + 1] : t0 + p.T;
  const int64_t nc = (t1 - t0 + C - 1) / C, s0 = slot0(p, n);
  for (int e = threadIdx.x; e < K * kSV; e += kThreads) {
    const int r = e / kSV, c = e % kSV;
    S[r * LS + c] = p.h0 ? static_cast<const float*>(p.h0)[sidx<K>(p, n, j, r, v0 + c)] : 0.f;
  }
  for (int64_t ci = 0; ci < nc; ++ci) {
    const int64_t ts = t0 + ci * C, slot = (s0 + ci) * p.HV + j;
    const int len = int(t1 - ts < C ? t1 - ts : C);
    __syncthreads();  // S complete; the previous chunk's reads done
    {
      Tile<C, K> tk;
      Tile<C, C> tt;
      Tile<C, kSV> tv;
      Bg bg;
      fetch_qk<K>(tk, p.k, w.rk, p, ts, len, hk);
      tt.fetch(w.T + slot * C * C, DELTAC_F32, 0, C, C);
      fetch_v<kSV>(tv, p.v, p.in_dtype, p, ts, len, j, v0);
      bg.fetch<Var>(p, ts, len, j);
      store_f4(static_cast<float*>(w.hs) + slot * K * p.V + v0, p.V, S, K, kSV);
      tk.put(kn);
      tt.put(T);
      tv.put(U);
      bg.put<Var>(b, G, Gx, Ex);  // (barriers)
    }
    // R = β (V - Γ K^ h)
    units<C, kSV, 2>([&](int m0, int n0) {
      float a[2][4];
      zero<2>(a);
      mm<O, false, true, 2>(a, kn, LK, S, LS, m0, n0, K);
      each<2>(m0, n0, [&](int r, int c, int x, int e) {
        R[r * LS + c] = b[r] * (U[r * LS + c] - Gx[r] * a[x][e]);
      });
    });
    __syncthreads();
    // u = T R; U = e ∘ u
    float* ug = static_cast<float*>(w.us) + slot * C * p.V + v0;
    units<C, kSV, 2>([&](int m0, int n0) {
      float a[2][4];
      zero<2>(a);
      mm<O, false, true, 2>(a, T, LC, R, LS, m0, n0, C);
      each<2>(m0, n0, [&](int r, int c, int x, int e) {
        ug[r * p.V + c] = a[x][e];
        U[r * LS + c] = Ex[r] * a[x][e];
      });
    });
    __syncthreads();
    // h = γ h + K^ᵀ U
    const float gam = expf(float(G[C - 1]));
    units<K, kSV, 2>([&](int m0, int n0) {
      float a[2][4];
      zero<2>(a);
      mm<O, true, true, 2>(a, kn, LK, U, LS, m0, n0, C);
      each<2>(m0, n0, [&](int r, int c, int x, int e) {
        S[r * LS + c] = gam * S[r * LS + c] + a[x][e];
      });
    });
  }
}

// Threads of the block reverse scan and grad_kernel (grad16:
// kGrad16Threads): 16 warps with one TF32 product at K = 128 (registers <=
// 128), else 8 (at K = 64 the 16 warps were slower: docs/performance.md,
// Backward (CUDA) version 4).
template <bool F, int K>
__host__ __device__ constexpr int bwd_threads() { return F && K == 128 ? 512 : 256; }

// ---- reverse scan: dh per chunk end, dr, dv, dh0 ---------------------------
template <deltac_variant Var, int K, bool F>
__global__ void __launch_bounds__(bwd_threads<F, K>()) rev_scan_kernel(const __grid_constant__ Ws w) {
  using O = Ops<F>;
  // RT threads, RW warps; unit widths giving >= RW units where the shape
  // allows: C x kSV (NU), K x kSV (NH).
  constexpr int RT = bwd_threads<F, K>(), RW = RT / 32;
  constexpr int NU = RW > 8 ? 1 : 2, NH = (K / 16) * (kSV / 16) >= RW ? 2 : 1;
  using L = ScanSmem<Var, K>;
  constexpr int LK = L::LK;
  extern __shared__ __align__(16) float sm[];
  const deltac_bwd_params& p = w.p;
  const int v0 = blockIdx.x * kSV, j = blockIdx.y, n = blockIdx.z;
  const int hk = j / (p.HV / p.H);
  float *kn = sm + L::kn, *qn = sm + L::qn, *Aq = sm + L::A, *T = sm + L::T;
  float *DH = sm + L::S, *DO = sm + L::X, *DU = sm + L::Y, *DR = sm + L::Z;
  float *b = sm + L::b, *Gx = sm + L::Gx, *Ex = sm + L::Ex;
  double* G = reinterpret_cast<double*>(sm + L::G);
  const int64_t t0 = seq_t0(p, n);
  const int64_t t1 = p.cu_seqlens ? p.cu_seqlens[n + 1] : t0 + p.T;
  const int64_t nc = (t1 - t0 + C - 1) / C, s0 = slot0(p, n);
  for (int e = threadIdx.x; e < K * kSV; e += RT) {
    const int r = e / kSV, c = e % kSV;
    DH[r * LS + c] = p.dht ? static_cast<const float*>(p.dht)[sidx<K>(p, n, j, r, v0 + c)] : 0.f;
  }
  for (int64_t ci = nc - 1; ci >= 0; --ci) {
    const int64_t ts = t0 + ci * C, slot = (s0 + ci) * p.HV + j;
    const int len = int(t1 - ts < C ? t1 - ts : C);
    __syncthreads();
    store_f4<RT>(static_cast<float*>(w.dhs) + slot * K * p.V + v0, p.V, DH, K, kSV);
    {
      Tile<C, K, RT> tk, tq;
      fetch_qk<K>(tk, p.k, w.rk, p, ts, len, hk);
      fetch_qk<K>(tq, p.q, w.rq, p, ts, len, hk);
      tk.put(kn);
      tq.put(qn);
    }
    {
      Tile<C, C, RT> tt, ta;
      Tile<C, kSV, RT> td;
      Bg bg;
      tt.fetch(w.T + slot * C * C, DELTAC_F32, 0, C, C);
      ta.fetch(w.Aqk + slot * C * C, DELTAC_F32, 0, C, C);
      fetch_v<kSV>(td, p.dout, p.out_dtype, p, ts, len, j, v0);
      bg.fetch<Var>(p, ts, len, j);
      tt.put(T);
      ta.put(Aq);
      td.put(DO);
      bg.put<Var>(b, G, Gx, Ex);  // (barriers)
    }
    // du = Aqkᵀ dO + e K^ dh
    units<C, kSV, NU, RW>([&](int m0, int n0) {
      float a[NU][4], c2[NU][4];
      zero<NU>(a);
      zero<NU>(c2);
      mm<O, true, true, NU>(a, Aq, LC, DO, LS, m0, n0, C);
      mm<O, false, true, NU>(c2, kn, LK, DH, LS, m0, n0, K);
      each<NU>(m0, n0, [&](int r, int c, int x, int e) {
        DU[r * LS + c] = a[x][e] + Ex[r] * c2[x][e];
      });
    });
    __syncthreads();
    // dr = Tᵀ du; dv = β dr; DO <- scale Γ dO, DR <- -β Γ dr
    float* drg = static_cast<float*>(w.drs) + slot * C * p.V + v0;
    units<C, kSV, NU, RW>([&](int m0, int n0) {
      float a[NU][4];
      zero<NU>(a);
      mm<O, true, true, NU>(a, T, LC, DU, LS, m0, n0, C);
      each<NU>(m0, n0, [&](int r, int c, int x, int e) {
        const float dr = a[x][e], gr = Gx[r];
        drg[r * p.V + c] = dr;
        if (r < len)
          bwd::st(p.dv, p.in_dtype, ((ts + r) * p.HV + j) * p.V + v0 + c, b[r] * dr);
        DR[r * LS + c] = -b[r] * gr * dr;
        DO[r * LS + c] *= w.scale * gr;
      });
    });
    __syncthreads();
    // dh = γ dh + Q^ᵀ DO + K^ᵀ DR
    const float gam = expf(float(G[C - 1]));
    units<K, kSV, NH, RW>([&](int m0, int n0) {
      float a[NH][4];
      zero<NH>(a);
      mm<O, true, true, NH>(a, qn, LK, DO, LS, m0, n0, C);
      mm<O, true, true, NH>(a, kn, LK, DR, LS, m0, n0, C);
      each<NH>(m0, n0, [&](int r, int c, int x, int e) {
        DH[r * LS + c] = gam * DH[r * LS + c] + a[x][e];
      });
    });
  }
  __syncthreads();
  if (p.dh0)
    for (int e = threadIdx.x; e < K * kSV; e += RT) {
      const int r = e / kSV, c = e % kSV;
      static_cast<float*>(p.dh0)[sidx<K>(p, n, j, r, v0 + c)] = DH[r * LS + c];
    }
}

// ---- gradients per (chunk slot, value head) -------------------------------
template <deltac_variant Var, int K>
struct GradSmem {
  static constexpr int LK = K + 4, BV = grad_bv<K>(), LB = BV + 4;
  // per V step: H, DH [K][LB], DO, U, DR, VV [C][LB]; after the V steps qn
  // [C][LK] in the same place.
  static constexpr int step = 2 * K * LB + 4 * C * LB;
  static constexpr int uni = step > C * LK ? step : C * LK;
  static constexpr int kn = 0, un = kn + C * LK, dQ = un + uni, dK = dQ + C * LK;
  static constexpr int dAq = dK + C * LK, dA = dAq + C * LC;
  static constexpr int b = dA + C * LC, G = b + C, Gx = G + 2 * C, Ex = Gx + C, db = Ex + C;
  static constexpr int dGd = db + C, dG = dGd + C, tt = dG + C;
  static constexpr int misc = tt + C, floats = misc + 4;
  static constexpr size_t bytes = size_t(floats) * 4;
};

// dg_r = (the reverse cumsum of dG)_r + (the exclusive prefix sum of t)_r
// (0 where clamped(r, th): the gate was below kGateFloor) and dβ_r = db_r out
// for the chunk's rows of value head j: warp 0, lane l rows 2l and 2l + 1,
// shuffle scans over the lanes; misc[0] = Σ h ∘ dh (the last row's term).
template <deltac_variant Var, class Clamped>
__device__ __forceinline__ void dg_dbeta(const deltac_bwd_params& p, int j, int64_t ts, int len,
                                         const double* G, const float* misc, const float* dG,
                                         const float* tt, const float* db, Clamped clamped) {
  const int tid = threadIdx.x;
  if (tid < 32) {
    const int r0 = 2 * tid, r1 = r0 + 1;
    const float last = expf(float(G[C - 1])) * misc[0];
    const float d0 = r0 < len ? dG[r0] + (r0 == len - 1 ? last : 0.f) : 0.f;
    const float d1 = r1 < len ? dG[r1] + (r1 == len - 1 ? last : 0.f) : 0.f;
    const float t0 = r0 < len ? tt[r0] : 0.f, t1 = r1 < len ? tt[r1] : 0.f;
    float sx = d0 + d1, px = t0 + t1;  // suffix (over lanes > l) and prefix scans
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const float ys = __shfl_down_sync(0xffffffffu, sx, o);
      const float yp = __shfl_up_sync(0xffffffffu, px, o);
      if (tid + o < 32) sx += ys;
      if (tid >= o) px += yp;
    }
    float se = __shfl_down_sync(0xffffffffu, sx, 1), pe = __shfl_up_sync(0xffffffffu, px, 1);
    se = tid == 31 ? 0.f : se;
    pe = tid == 0 ? 0.f : pe;
    const float run1 = d1 + se, run0 = d0 + run1;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = h ? r1 : r0;
      if (r >= len) continue;
      const int64_t th = (ts + r) * p.HV + j;
      if constexpr (Var == DELTAC_VARIANT_GATED)
        static_cast<float*>(p.dg)[th] = clamped(r, th) ? 0.f : (h ? run1 + pe + t0 : run0 + pe);
      static_cast<float*>(p.dbeta)[th] = db[r];
    }
  }
}

// The dG, dβ terms of an M / N unit (m0, n0) of 16 x 8 NC into dG, db: a
// lane's row sums rg, rb (rows g, g + 8) over the 4 lanes sharing a row and
// its column sums cg (columns 8x + 2t + c) over the 8 sharing a column, then
// one shared atomic each; without DG only rb.
template <int NC, bool DG = true>
__device__ __forceinline__ void mn_sums(int m0, int n0, float (&rg)[2], float (&rb)[2],
                                        float (&cg)[NC][2], float* dG, float* db) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
#pragma unroll
    for (int o = 1; o < 4; o <<= 1) {
      if constexpr (DG)
        rg[h] += __shfl_xor_sync(0xffffffffu, rg[h], o);
      rb[h] += __shfl_xor_sync(0xffffffffu, rb[h], o);
    }
    if (t == 0) {
      if constexpr (DG)
        atomicAdd(dG + m0 + g + 8 * h, rg[h]);
      atomicAdd(db + m0 + g + 8 * h, rb[h]);
    }
  }
  if constexpr (DG) {
#pragma unroll
    for (int x = 0; x < NC; ++x)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
#pragma unroll
        for (int o = 4; o < 32; o <<= 1) cg[x][c] += __shfl_xor_sync(0xffffffffu, cg[x][c], o);
        if (g == 0)
          atomicAdd(dG + n0 + 8 * x + 2 * t + c, cg[x][c]);
      }
  }
}

// M = dAqk ∘ scale e^(G_i - G_j) (lower) and N = dA ∘ β_i e^(G_i - G_j)
// (strictly lower), in place over the unit (m0, n0) of 16 x 8 NC, with their
// dG, dβ terms (the diagonal's cancel exactly: skipped): row and column sums
// reduced over the lanes that share a row (4) or a column (8) before one
// shared atomic each into dG, db. aq, ak: the unit's Q^ Kᵀ^ and K^ K^ᵀ;
// sq(x, i, j), sk(x, i, j) give x times element (i, j)'s factor of them (the
// L2 norm's 1/|x| where the products were of raw rows).
template <int NC, class SQ, class SK>
__device__ __forceinline__ void mn_unit(int m0, int n0, const float (*aq)[4], const float (*ak)[4],
                                        float* dAq, float* dA, const double* G, const float* b,
                                        float scale, float* dG, float* db, SQ sq, SK sk) {
  float rg[2] = {0.f, 0.f}, rb[2] = {0.f, 0.f}, cg[NC][2] = {};
  each<NC>(m0, n0, [&](int i, int jj, int x, int e) {
    const float d = decay(G, i, jj);
    const float M = jj <= i ? dAq[i * LC + jj] * scale * d : 0.f;
    const float P = sq(M, i, jj) * aq[x][e];
    dAq[i * LC + jj] = M;
    const float da = jj < i ? dA[i * LC + jj] : 0.f;
    const float Pa = sk(da * d, i, jj) * ak[x][e];
    dA[i * LC + jj] = da * b[i] * d;
    if (jj < i) {
      rg[e >> 1] += P + b[i] * Pa;
      rb[e >> 1] += Pa;
      cg[x][e & 1] -= P + b[i] * Pa;
    }
  });
  mn_sums<NC>(m0, n0, rg, rb, cg, dG, db);
}

template <deltac_variant Var, int K, bool F>
__global__ void __launch_bounds__(bwd_threads<F, K>()) grad_kernel(const __grid_constant__ Ws w) {
  using O = Ops<F>;
  // GT threads, GW warps; unit widths (8 NT columns) giving >= GW units
  // where the shape allows: C x C (NC), C x K (NK), C x BV (NY).
  constexpr int GT = bwd_threads<F, K>(), GW = GT / 32;
  constexpr int NC = GW > 8 ? 2 : 4, NK = (C / 16) * (K / 32) >= GW ? 4 : 2;
  constexpr int NY = GW > 8 ? 1 : 2;
  using L = GradSmem<Var, K>;
  constexpr int LK = L::LK, BV = L::BV, LB = L::LB;
  extern __shared__ __align__(16) float sm[];
  const deltac_bwd_params& p = w.p;
  const int64_t s = blockIdx.x;
  const int j = blockIdx.y;
  int n, len;
  int64_t ts;
  if (!locate(p, s, n, ts, len))
    return;
  const int hk = j / (p.HV / p.H), tid = threadIdx.x;
  const int64_t slot = s * p.HV + j;
  float *kn = sm + L::kn, *qn = sm + L::un;
  float *Hs = sm + L::un, *DHs = Hs + K * LB, *DO = DHs + K * LB, *U = DO + C * LB;
  float *DR = U + C * LB, *VV = DR + C * LB;
  float *dQ = sm + L::dQ, *dK = sm + L::dK, *dAq = sm + L::dAq, *dA = sm + L::dA;
  float *b = sm + L::b, *Gx = sm + L::Gx, *Ex = sm + L::Ex;
  double* G = reinterpret_cast<double*>(sm + L::G);
  float *db = sm + L::db, *dGd = sm + L::dGd, *dG = sm + L::dG, *tt = sm + L::tt;
  float* misc = sm + L::misc;  // [0]: Σ h ∘ dh
  {
    Tile<C, K, GT> tk;
    Bg bg;
    fetch_qk<K>(tk, p.k, w.rk, p, ts, len, hk);
    bg.fetch<Var>(p, ts, len, j);
    for (int e = tid; e < C * LK; e += GT) dQ[e] = dK[e] = 0.f;
    for (int e = tid; e < C * LC; e += GT) dAq[e] = dA[e] = 0.f;
    if (tid < C)
      db[tid] = dGd[tid] = dG[tid] = 0.f;
    if (tid < 4)
      misc[tid] = 0.f;
    tk.put(kn);
    bg.put<Var>(b, G, Gx, Ex);  // (barriers)
  }
  const float* hg = static_cast<const float*>(w.hs) + slot * K * p.V;
  const float* dhg = static_cast<const float*>(w.dhs) + slot * K * p.V;
  const float* ug = static_cast<const float*>(w.us) + slot * C * p.V;
  const float* drg = static_cast<const float*>(w.drs) + slot * C * p.V;
  // The V steps: the next step's tiles are fetched into registers while
  // this one computes.
  Tile<K, BV, GT> th, tdh;
  Tile<C, BV, GT> tu, tdr, tdo, tv;
  auto fetch = [&](int v0) {
    th.fetch(hg, DELTAC_F32, v0, p.V, K);
    tdh.fetch(dhg, DELTAC_F32, v0, p.V, K);
    tu.fetch(ug, DELTAC_F32, v0, p.V, C);
    tdr.fetch(drg, DELTAC_F32, v0, p.V, C);
    fetch_v<BV>(tdo, p.dout, p.out_dtype, p, ts, len, j, v0);
    fetch_v<BV>(tv, p.v, p.in_dtype, p, ts, len, j, v0);
  };
  fetch(0);
  for (int v0 = 0; v0 < p.V; v0 += BV) {
    th.put(Hs);
    tdh.put(DHs);
    tu.put(U);
    tdr.put(DR);
    tdo.put(DO);
    tv.put(VV);
    __syncthreads();
    if (v0 + BV < p.V)
      fetch(v0 + BV);
    // dAqk += dO uᵀ, dA -= dr uᵀ
    units<C, C, NC, GW>([&](int m0, int n0) {
      float a[NC][4], c2[NC][4];
      zero<NC>(a);
      zero<NC>(c2);
      mm<O, false, false, NC>(a, DO, LB, U, LB, m0, n0, BV);
      mm<O, false, false, NC>(c2, DR, LB, U, LB, m0, n0, BV);
      each<NC>(m0, n0, [&](int r, int c, int x, int e) {
        dAq[r * LC + c] += a[x][e];
        dA[r * LC + c] -= c2[x][e];
      });
    });
    // dQ += dO hᵀ, dK += -βΓ dr hᵀ + e u dhᵀ
    units<C, K, NK, GW>([&](int m0, int n0) {
      float a[NK][4], c2[NK][4], c3[NK][4];
      zero<NK>(a);
      zero<NK>(c2);
      zero<NK>(c3);
      mm<O, false, false, NK>(a, DO, LB, Hs, LB, m0, n0, BV);
      mm<O, false, false, NK>(c2, DR, LB, Hs, LB, m0, n0, BV);
      mm<O, false, false, NK>(c3, U, LB, DHs, LB, m0, n0, BV);
      each<NK>(m0, n0, [&](int r, int c, int x, int e) {
        dQ[r * LK + c] += a[x][e];
        dK[r * LK + c] += -b[r] * Gx[r] * c2[x][e] + Ex[r] * c3[x][e];
      });
    });
    // Y = K^ h: dβ += Σ dr (v - Γ Y), dGd += -β Σ dr Γ Y
    units<C, BV, NY, GW>([&](int m0, int n0) {
      float a[NY][4];
      zero<NY>(a);
      mm<O, false, true, NY>(a, kn, LK, Hs, LB, m0, n0, K);
      float sb[2] = {0.f, 0.f}, sg[2] = {0.f, 0.f};
      each<NY>(m0, n0, [&](int r, int c, int x, int e) {
        const float y = Gx[r] * a[x][e], dr = DR[r * LB + c];
        sb[e >> 1] += dr * (VV[r * LB + c] - y);
        sg[e >> 1] += -b[r] * dr * y;
      });
      const int g = (tid & 31) >> 2;
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // over the row's 4 lanes, then one atomic
#pragma unroll
        for (int o = 1; o < 4; o <<= 1) {
          sb[h] += __shfl_xor_sync(0xffffffffu, sb[h], o);
          sg[h] += __shfl_xor_sync(0xffffffffu, sg[h], o);
        }
        if ((tid & 3) == 0) {
          atomicAdd(db + m0 + g + 8 * h, sb[h]);
          atomicAdd(dGd + m0 + g + 8 * h, sg[h]);
        }
      }
    });
    // Σ h ∘ dh
    {
      float acc = 0.f;
      for (int e = tid; e < K * BV; e += GT) {
        const int r = e / BV, c = e % BV;
        acc += Hs[r * LB + c] * DHs[r * LB + c];
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
      if ((tid & 31) == 0)
        atomicAdd(misc, acc);
    }
    __syncthreads();
  }
  {
    Tile<C, K, GT> tq;
    fetch_qk<K>(tq, p.q, w.rq, p, ts, len, hk);
    tq.put(qn);
  }
  __syncthreads();
  // Row terms: dG_i = scale Γ q^·dQ + dGd; t_i = k^·dK - dGd = e_i k^·(u dhᵀ)_i
  // (it adds to the dg of the rows after i: an exclusive prefix sum below,
  // never t added to the last row and subtracted from row i, which would
  // cancel O(1) terms where the true dg is tiny).
  for (int r = tid / 32; r < C; r += GW) {
    float a = 0.f, kc = 0.f;
    for (int c = tid & 31; c < K; c += 32) {
      a += qn[r * LK + c] * dQ[r * LK + c];
      kc += kn[r * LK + c] * dK[r * LK + c];
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      a += __shfl_xor_sync(0xffffffffu, a, o);
      kc += __shfl_xor_sync(0xffffffffu, kc, o);
    }
    if ((tid & 31) == 0) {
      dG[r] = w.scale * Gx[r] * a + dGd[r];
      tt[r] = r < len ? kc - dGd[r] : 0.f;
    }
  }
  __syncthreads();
  // M = dAqk ∘ scale e^(G_i - G_j) (lower), N = dA ∘ β_i e^(G_i - G_j)
  // (strictly lower), with their dG, dβ terms (the diagonal's cancel exactly:
  // skipped).
  units<C, C, NC, GW>([&](int m0, int n0) {
    float aq[NC][4], ak[NC][4];
    zero<NC>(aq);
    zero<NC>(ak);
    mm<O, false, false, NC>(aq, qn, LK, kn, LK, m0, n0, K);
    mm<O, false, false, NC>(ak, kn, LK, kn, LK, m0, n0, K);
    mn_unit<NC>(m0, n0, aq, ak, dAq, dA, G, b, w.scale, dG, db,
                [](float x, int, int) { return x; }, [](float x, int, int) { return x; });
  });
  __syncthreads();
  // dq^ = scale Γ dQ + M K^;  dk^ = dK + Mᵀ Q^ + N K^ + Nᵀ K^
  units<C, K, NK, GW>([&](int m0, int n0) {
    float a[NK][4], c2[NK][4];
    zero<NK>(a);
    zero<NK>(c2);
    mm<O, false, true, NK>(a, dAq, LC, kn, LK, m0, n0, C);
    mm<O, true, true, NK>(c2, dAq, LC, qn, LK, m0, n0, C);
    mm<O, false, true, NK>(c2, dA, LC, kn, LK, m0, n0, C);
    mm<O, true, true, NK>(c2, dA, LC, kn, LK, m0, n0, C);
    each<NK>(m0, n0, [&](int r, int c, int x, int e) {
      if (r >= len)
        return;
      const int64_t o = ((ts + r) * p.H + hk) * K + c;
      const float dq = w.scale * Gx[r] * dQ[r * LK + c] + a[x][e];
      const float dk = dK[r * LK + c] + c2[x][e];
      if (w.atomic) {
        atomicAdd(w.dqa + o, dq);
        atomicAdd(w.dka + o, dk);
      } else {
        w.dqa[o] = dq;
        w.dka[o] = dk;
      }
    });
  });
  dg_dbeta<Var>(p, j, ts, len, G, misc, dG, tt, db, [&](int, int64_t th) {
    return static_cast<const float*>(p.g)[th] < kGateFloor;
  });
}

}  // namespace deltac::cuda::bwdc

#include "deltac/cuda/backward_grad_bf16.cuh"
#include "deltac/cuda/backward_scan_warp.cuh"

namespace deltac::cuda::bwdc {

// ---- host side -------------------------------------------------------------
struct Layout {
  size_t rq = 0, rk = 0, dqa = 0, dka = 0, T = 0, Aqk = 0, hs = 0, dhs = 0, us = 0,
         drs = 0, F = 0, total = 0;
  int64_t slots = 0;
};

// Measurement overrides (environment): DELTAC_CUDA_BWD_EXACT=scans keeps
// three TF32 products in prep and the block scans (1), =all everywhere (2);
// DELTAC_CUDA_BWD_SCAN=block the block scans for bf16.
inline int exact_mode() {
  const char* ex = std::getenv("DELTAC_CUDA_BWD_EXACT");
  return !ex ? 0 : std::strcmp(ex, "scans") == 0 ? 1 : std::strcmp(ex, "all") == 0 ? 2 : 0;
}

// Measurement override: DELTAC_CUDA_BWD_TLO=1 keeps T's and Aqk's low
// halves for every chunk (the default: only chunks with a β above 1).
inline int lo_always() {
  const char* e = std::getenv("DELTAC_CUDA_BWD_TLO");
  return e && std::strcmp(e, "1") == 0;
}

// Whether the warp scans and grad16 run p (bf16 in and out, no override):
// then the workspace states are bf16, else f32. Dtypes and environment only,
// so a size query and its call agree.
inline bool states16(const deltac_bwd_params& p) {
  const char* sc = std::getenv("DELTAC_CUDA_BWD_SCAN");
  return p.in_dtype == DELTAC_BF16 && p.out_dtype == DELTAC_BF16 && exact_mode() == 0 &&
         !(sc && std::strcmp(sc, "block") == 0);
}

// Whether p's pointers suit the chunked backward (the runtime sends other
// calls to the sweep): every path loads q, k, v, dO rows in 16-byte tiles;
// the bf16 path's warp scans write dv as 16-byte rows and read / write h0,
// dht, dh0 (VK layout) as float pairs, and grad16 writes dq, dk K / 32
// elements at a time.
inline bool aligned(const deltac_bwd_params& p) {
  auto al = [](const void* x, uintptr_t a) { return reinterpret_cast<uintptr_t>(x) % a == 0; };
  if (!(al(p.q, 16) && al(p.k, 16) && al(p.v, 16) && al(p.dout, 16)))
    return false;
  // grad16 writes dq, dk 8 bytes at a time
  return !states16(p) || (al(p.dv, 16) && al(p.h0, 8) && al(p.dht, 8) && al(p.dh0, 8) &&
                          al(p.dq, 8) && al(p.dk, 8));
}

// Whether hs and us live in p's saved states (bf16 states only).
inline bool saved(const deltac_bwd_params& p) { return p.saved_states && states16(p); }

inline Layout layout(const deltac_bwd_params& p, int K) {
  Layout l;
  const int N = p.cu_seqlens ? p.N : p.B;
  const int64_t tokens = int64_t(p.B) * p.T;
  l.slots = bwd_slots(tokens, N);
  const size_t sh = size_t(l.slots) * p.HV, es = states16(p) ? 2 : 4;
  const size_t own = saved(p) ? 0 : 1;  // hs, us: in the saved states
  size_t o = 0;
  auto take = [&](size_t& at, size_t elems, size_t size = 4) {
    at = o;
    o += bwd::align256(elems * size);
  };
  if (p.qk_l2norm) {
    take(l.rq, size_t(tokens) * p.H);
    take(l.rk, size_t(tokens) * p.H);
  }
  // dq^, dk^: grad_kernel's sums, grad16's between value heads (GVA)
  const size_t acc = !states16(p) || p.HV != p.H ? size_t(tokens) * p.H * K : 0;
  take(l.dqa, acc);
  take(l.dka, acc);
  take(l.T, sh * C * C);
  take(l.Aqk, sh * C * C);
  take(l.hs, own * sh * K * p.V, es);
  take(l.dhs, sh * K * p.V, es);
  take(l.us, own * sh * C * p.V, es);
  take(l.drs, sh * C * p.V, es);
  take(l.F, sh * kWF * C);
  l.total = o;
  return l;
}

template <deltac_variant Var, int K>
cudaError_t workspace(const deltac_bwd_params& p, size_t* bytes) {
  *bytes = layout(p, K).total;
  return cudaSuccess;
}

namespace detail2 {

template <class Kern>
cudaError_t allow(Kern k, size_t bytes) {
  return cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
}

// Multiprocessors of the current device (132 where unknown), once per device.
inline int sm_count() {
  static int cached[64] = {};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) {
    cudaGetLastError();
    return 132;
  }
  if (!cached[dev]) {
    int n = 0;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0) {
      cudaGetLastError();
      n = 132;
    }
    cached[dev] = n;
  }
  return cached[dev];
}

// The warp scan (backward_scan_warp.cuh) with V tiles of BV columns.
template <int K, int BV, bool Rev>
cudaError_t wscan(const Ws& w, int N, cudaStream_t st) {
  using Tw = WScan<C, K, BV, Rev>;
  cudaError_t e = allow(wscan_kernel<K, BV, Rev>, Tw::kSmem);
  if (e != cudaSuccess) return e;
  wscan_kernel<K, BV, Rev>
      <<<dim3(unsigned(w.p.V / BV), unsigned(w.p.HV), unsigned(N)), Tw::kThreads, Tw::kSmem, st>>>(w);
  return cudaSuccess;
}

// Both warp scans in one launch (wscan2_kernel), V tiles of 64.
template <int K>
cudaError_t wscan2(const Ws& w, int N, cudaStream_t st) {
  constexpr size_t smem = std::max(WScan<C, K, 64, false>::kSmem, WScan<C, K, 64, true>::kSmem);
  cudaError_t e = allow(wscan2_kernel<K, 64>, smem);
  if (e != cudaSuccess) return e;
  wscan2_kernel<K, 64><<<dim3(unsigned(2 * (w.p.V / 64)), unsigned(w.p.HV), unsigned(N)),
                         WScan<C, K, 64, false>::kThreads, smem, st>>>(w);
  return cudaSuccess;
}

// Both warp scans. Where V allows tiles of 64 and both scans' grids fit one
// wave together (long sequences on few heads): one launch, the two chains
// side by side (wscan2). Else two launches, V tiles of 64 where V allows and
// the grid fills the multiprocessors, else 32. Tests: DELTAC_CUDA_BWD_WBV=32
// or 64 forces two launches at that tile where V allows.
template <int K>
cudaError_t wscans(const Ws& w, int N, cudaStream_t st) {
  const char* f = std::getenv("DELTAC_CUDA_BWD_WBV");
  const int force = f ? std::atoi(f) : 0;
  const int64_t tiles64 = w.p.V % 64 == 0 ? int64_t(w.p.V / 64) * w.p.HV * N : 0;
  if (!force && tiles64 && 2 * tiles64 <= sm_count())
    return wscan2<K>(w, N, st);
  const bool w64 = tiles64 && (force ? force == 64 : tiles64 >= sm_count());
  cudaError_t e = w64 ? wscan<K, 64, false>(w, N, st) : wscan<K, 32, false>(w, N, st);
  if (e != cudaSuccess) return e;
  return w64 ? wscan<K, 64, true>(w, N, st) : wscan<K, 32, true>(w, N, st);
}

// F: one TF32 product in prep and the scans, FG: in the gradient kernel; W:
// the warp scans (bf16; F and FG then one TF32 product too).
template <deltac_variant Var, int K, bool F, bool FG, bool W = false>
cudaError_t run(const deltac_bwd_params& p, const Layout& l, char* ws, cudaStream_t st) {
  Ws w{};
  w.p = p;
  w.scale = p.scale != 0.0f ? p.scale : float(1.0 / std::sqrt(double(K)));
  w.slots = l.slots;
  auto at = [&](size_t o) { return reinterpret_cast<float*>(ws + o); };
  w.dqa = at(l.dqa), w.dka = at(l.dka), w.T = at(l.T), w.Aqk = at(l.Aqk);
  w.hs = ws + l.hs, w.dhs = ws + l.dhs, w.us = ws + l.us, w.drs = ws + l.drs, w.F = at(l.F);
  w.atomic = p.HV != p.H;
  w.lo_always = lo_always();
  if (saved(p)) {
    char* b = static_cast<char*>(p.saved_states);
    const BwdSavedLayout sl = bwd_saved_layout_of(p);
    w.saved_flag = reinterpret_cast<const int32_t*>(b);
    w.hs = b + sl.h, w.us = b + sl.u;
  }
  const int N = p.cu_seqlens ? p.N : p.B;
  const int64_t tokens = int64_t(p.B) * p.T, rows = tokens * p.H;
  cudaError_t e;
  // grad_kernel sums every row over value heads (atomics); grad16 writes dq,
  // dk itself (a block per q/k head); varlen: not every token is in a sequence
  if (W && p.cu_seqlens) {
    const size_t out = size_t(rows) * K * 2;
    if ((e = cudaMemsetAsync(p.dq, 0, out, st)) != cudaSuccess) return e;
    if ((e = cudaMemsetAsync(p.dk, 0, out, st)) != cudaSuccess) return e;
  } else if (!W && (w.atomic || p.cu_seqlens)) {
    const size_t acc = size_t(rows) * K * sizeof(float);
    if ((e = cudaMemsetAsync(w.dqa, 0, acc, st)) != cudaSuccess) return e;
    if ((e = cudaMemsetAsync(w.dka, 0, acc, st)) != cudaSuccess) return e;
  }
  if (p.cu_seqlens) {
    if ((e = cudaMemsetAsync(p.dbeta, 0, size_t(tokens) * p.HV * 4, st)) != cudaSuccess) return e;
    if (Var == DELTAC_VARIANT_GATED &&
        (e = cudaMemsetAsync(p.dg, 0, size_t(tokens) * p.HV * 4, st)) != cudaSuccess)
      return e;
  }
  if (tokens == 0 || N == 0) return cudaGetLastError();
  bwd::Args a{};
  a.p = p;
  a.dqa = w.dqa;
  a.dka = w.dka;
  constexpr int kRowsPerBlock = 8;
  const unsigned row_blocks = unsigned((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  if (p.qk_l2norm) {  // (the bf16 path: prep16 computes 1/|x| from its staged rows)
    if (!W)
      bwd::rnorm<K>(a, at(l.rq), at(l.rk), rows, st);
    w.rq = a.rq = at(l.rq);
    w.rk = a.rk = at(l.rk);
  }
  using PS = PrepSmem<Var, K>;
  using FS = FwdSmem<Var, K>;
  using SS = ScanSmem<Var, K>;
  using GS = GradSmem<Var, K>;
  const dim3 chunks(unsigned(l.slots), unsigned(p.HV));
  if constexpr (W) {
    using P16 = Prep16Smem<K>;
    if ((e = allow(prep16_kernel<Var, K>, P16::bytes)) != cudaSuccess) return e;
    prep16_kernel<Var, K><<<chunks, kThreads, P16::bytes, st>>>(w);
  } else {
    if ((e = allow(prep_kernel<Var, K, F>, PS::bytes)) != cudaSuccess) return e;
    prep_kernel<Var, K, F><<<chunks, kThreads, PS::bytes, st>>>(w);
  }
  if constexpr (W) {
    if ((e = wscans<K>(w, N, st)) != cudaSuccess) return e;
  } else {
    if ((e = allow(fwd_scan_kernel<Var, K, F>, FS::bytes)) != cudaSuccess) return e;
    if ((e = allow(rev_scan_kernel<Var, K, F>, SS::bytes)) != cudaSuccess) return e;
    const dim3 scans(unsigned(p.V / kSV), unsigned(p.HV), unsigned(N));
    fwd_scan_kernel<Var, K, F><<<scans, kThreads, FS::bytes, st>>>(w);
    rev_scan_kernel<Var, K, F><<<scans, bwd_threads<F, K>(), SS::bytes, st>>>(w);
  }
  if constexpr (W) {  // grad16 reads the warp scans' bf16 states
    using G16 = Grad16Smem<K>;
    // persistent: one block a multiprocessor (its 512 threads take every register)
    const int64_t items = l.slots * p.H;
    // (tests: DELTAC_CUDA_BWD_G16_BLOCKS=n caps the grid, so each block takes several items)
    int64_t cap = sm_count();
    if (const char* ev = std::getenv("DELTAC_CUDA_BWD_G16_BLOCKS"))
      cap = std::max(1, std::min(std::atoi(ev), 1 << 20));
    const unsigned blocks = unsigned(std::min<int64_t>(items, cap));
    if ((e = allow(grad16_kernel<Var, K>, G16::bytes)) != cudaSuccess) return e;
    grad16_kernel<Var, K><<<blocks, kGrad16Threads, G16::bytes, st>>>(w);
  } else {
    if ((e = allow(grad_kernel<Var, K, FG>, GS::bytes)) != cudaSuccess) return e;
    grad_kernel<Var, K, FG><<<chunks, bwd_threads<FG, K>(), GS::bytes, st>>>(w);
  }
  if constexpr (!W)
    bwd::finish_kernel<K><<<row_blocks, kRowsPerBlock * 32, 0, st>>>(a, rows);
  return cudaGetLastError();
}

// One TF32 product per step where every input (q, k, v) and dO are 16-bit;
// the warp scans and grad16 where they are all bf16 (states16). Measurement
// only: exact_mode, DELTAC_CUDA_BWD_SCAN=block.
template <deltac_variant Var, int K>
cudaError_t go(const deltac_bwd_params& p, const Layout& l, char* ws, cudaStream_t st) {
  const int mode = exact_mode();
  if (p.in_dtype == DELTAC_F32 || p.out_dtype == DELTAC_F32 || mode == 2)
    return run<Var, K, false, false>(p, l, ws, st);
  if (mode == 1)
    return run<Var, K, false, true>(p, l, ws, st);
  if (states16(p))
    return aligned(p) ? run<Var, K, true, true, true>(p, l, ws, st) : cudaErrorMisalignedAddress;
  return run<Var, K, true, true>(p, l, ws, st);
}

}  // namespace detail2

template <deltac_variant Var, int K>
cudaError_t backward(const deltac_bwd_params& p, cudaStream_t stream, void* ws = nullptr,
                     size_t ws_bytes = 0) {
  static_assert((Var == DELTAC_VARIANT_DELTA || Var == DELTAC_VARIANT_GATED) &&
                    (K == 64 || K == 128),
                "chunked backward: delta or gated, K = 64 or 128");
  const Layout l = layout(p, K);
  if (ws) {
    if (ws_bytes < l.total || reinterpret_cast<uintptr_t>(ws) % 256) return cudaErrorInvalidValue;
    return detail2::go<Var, K>(p, l, static_cast<char*>(ws), stream);
  }
  void* own = nullptr;
  cudaError_t e = cudaMallocAsync(&own, l.total ? l.total : 256, stream);
  if (e != cudaSuccess) return e;
  e = detail2::go<Var, K>(p, l, static_cast<char*>(own), stream);
  const cudaError_t f = cudaFreeAsync(own, stream);
  return e != cudaSuccess ? e : f;
}

}  // namespace deltac::cuda::bwdc

#endif  // DELTAC_CUDA_BACKWARD_CHUNKED_CUH

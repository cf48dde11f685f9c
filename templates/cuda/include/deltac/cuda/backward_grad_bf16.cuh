// The chunked backward's prep (prep16_kernel, below) and gradient kernel
// for bf16 inputs (with the warp scans of backward_scan_warp.cuh). The
// gradient kernel (grad16_kernel): the math of backward_chunked.cuh's
// grad_kernel with every product a bf16 m16n8k16 mma.sync on operands
// loaded by ldmatrix from bf16 shared tiles: q, k, v, dO raw (exact); h,
// dh, u, dr as the warp scans stored them (bf16, as fla's states) and the
// C x C terms M, N rounded to bf16. The L2 norm's 1/|x| multiply the rows
// or columns of results and of the M, N tiles.
// A block per (chunk, q/k head) takes the value heads sharing it in turn,
// sums their dq^, dk^ (in the workspace between heads) and writes dq, dk
// with the L2 norm's backward (no finish kernel). Per
// value head, each V step's bf16 rows arrive by cp.async straight into one
// of two sets of operand tiles while the other set's products run; each
// warp owns one unit of each product for all V steps, so the sums over V
// stay in its accumulators.
// Included by backward_chunked.cuh (its Ws, Tile, Bg, units, each, locate).
#ifndef DELTAC_CUDA_BACKWARD_GRAD_BF16_CUH
#define DELTAC_CUDA_BACKWARD_GRAD_BF16_CUH

#include "deltac/cuda/chunked_scan_warp.cuh"

#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>

namespace deltac::cuda::bwdc {

using b16 = __nv_bfloat16;

// acc[NT][4] += op(A)[m0 + 16) op(B)[n0 + 8 NT)ᵀ over kd (multiple of 16),
// operands in bf16 shared memory at byte addresses (row strides lda, ldb
// elements, 16-byte aligned rows). TA: A stored [k][m] (else [m][k]); TB: B
// stored [k][n] (else [n][k]). NT even.
template <bool TA, bool TB, int NT>
__device__ __forceinline__ void mmb(float (*acc)[4], uint32_t A, int lda, uint32_t B, int ldb,
                                    int m0, int n0, int kd) {
  using namespace deltac::cuda::detail;
  static_assert(NT % 2 == 0, "n-tiles in pairs");
  const int lane = threadIdx.x & 31;
  const uint32_t aoff =
      TA ? uint32_t((((lane & 7) + 8 * (lane >> 4)) * lda + m0 + 8 * ((lane >> 3) & 1)) * 2)
         : uint32_t(((m0 + (lane & 15)) * lda + 8 * (lane >> 4)) * 2);
  const uint32_t boff =
      TB ? uint32_t((((lane & 7) + 8 * ((lane >> 3) & 1)) * ldb + n0 + 8 * (lane >> 4)) * 2)
         : uint32_t(((n0 + (lane & 7) + 8 * (lane >> 4)) * ldb + 8 * ((lane >> 3) & 1)) * 2);
#pragma unroll 2
  for (int k0 = 0; k0 < kd; k0 += 16) {
    const uint32_t ka = aoff + uint32_t(TA ? k0 * lda * 2 : k0 * 2);
    uint32_t ah[4];
    if constexpr (TA) ldsm4t(ah, A + ka); else ldsm4(ah, A + ka);
#pragma unroll
    for (int np = 0; np < NT / 2; ++np) {
      const uint32_t kb =
          boff + uint32_t(TB ? (k0 * ldb + 16 * np) * 2 : (16 * np * ldb + k0) * 2);
      uint32_t bh[4];
      if constexpr (TB) ldsm4t(bh, B + kb); else ldsm4(bh, B + kb);
      wmma16<b16>(acc[2 * np], ah, bh[0], bh[1]);
      wmma16<b16>(acc[2 * np + 1], ah, bh[2], bh[3]);
    }
  }
}

// f(e) for e = threadIdx.x + i NTH < E, i = 0, 1, ... (unrolled)
template <int E, int NTH, class F>
__device__ __forceinline__ void spread(F&& f) {
#pragma unroll
  for (int i = 0; i < (E + NTH - 1) / NTH; ++i) {
    const int e = int(threadIdx.x) + i * NTH;
    if (E % NTH == 0 || e < E)
      f(e);
  }
}

__device__ __forceinline__ uint32_t saddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// The products of the bf16 pairs in x, y, summed (f32).
__device__ __forceinline__ float dot2(uint32_t x, uint32_t y) {
  return __uint_as_float(x << 16) * __uint_as_float(y << 16) +
         __uint_as_float(x & 0xffff0000u) * __uint_as_float(y & 0xffff0000u);
}

// A chunk's raw bf16 k, q rows of q/k head hk into shared rows kb, qb
// (stride ld; rows past len zero) and their 1/|x| (1 without the L2 norm, 0
// past len) into rk, rq [C]; no barrier.
template <int K, int NTH>
__device__ __forceinline__ void stage_qk(const Ws& w, int64_t ts, int len, int hk, b16* kb,
                                         b16* qb, int ld, float* rk, float* rq) {
  const deltac_bwd_params& p = w.p;
  Tile<C, K, NTH> tk, tq;
  fetch_qk<K>(tk, p.k, nullptr, p, ts, len, hk);
  fetch_qk<K>(tq, p.q, nullptr, p, ts, len, hk);
  const int tid = threadIdx.x;
  if (tid < C) {
    const bool in = tid < len;
    const int64_t ri = (ts + tid) * p.H + hk;
    rk[tid] = in ? (w.rk ? w.rk[ri] : 1.f) : 0.f;
    rq[tid] = in ? (w.rq ? w.rq[ri] : 1.f) : 0.f;
  }
  using Tl = Tile<C, K, NTH>;
#pragma unroll
  for (int m = 0; m < Tl::N; ++m) {  // the tiles hold the 16-bit rows as they are
    const int e = tid + m * NTH, r = e / Tl::Q, c = (e % Tl::Q) * 4;
    if (Tl::kPart && e >= Tl::E)
      continue;
    *reinterpret_cast<uint2*>(kb + r * ld + c) =
        make_uint2(__float_as_uint(tk.x[m].x), __float_as_uint(tk.x[m].y));
    *reinterpret_cast<uint2*>(qb + r * ld + c) =
        make_uint2(__float_as_uint(tq.x[m].x), __float_as_uint(tq.x[m].y));
  }
}

// Shared memory (bf16 tiles with rows padded by 8 elements, f32 with 4).
template <int K>
struct Grad16Smem {
  static constexpr int BV = 32, LB = BV + 8, LK = K + 8, LF = K + 4, LC8 = C + 8;
  // bytes: raw K, Q [C][LK]; f32 dQ, dK [C][LF], dAq, dA [C][LC] (after the
  // V steps; during them two sets of a V step's bf16 tiles, each H, DH
  // [BV][LK] and U, DR [BV][LC8] as the warp scans store them (transposed),
  // DO, V [C][LB]); then the M1, M2, Na, Nb tiles [C][LC8]; then the f32
  // vectors.
  static constexpr size_t kb = 0, qb = kb + C * LK * 2, dQ = qb + C * LK * 2;
  static constexpr size_t dK = dQ + C * LF * 4, dAq = dK + C * LF * 4, dA = dAq + C * LC * 4;
  static constexpr size_t uni = dA + C * LC * 4;
  static constexpr size_t set = (2 * size_t(BV) * LK + 2 * BV * LC8 + 2 * C * LB) * 2;
  static_assert(dQ + 2 * set <= uni && set % 16 == 0, "two V-step sets fit in dQ .. dA");
  static constexpr size_t vec = uni + 4 * size_t(C) * LC8 * 2;
  // vectors (floats): b, G (double), Gx, Ex, db, dGd, dG, tt, rk, rq, kc2,
  // rdv, clamped, misc
  static constexpr size_t bytes = vec + (14 * C + 4) * 4;
};

// prep for the warp scans (bf16 inputs), per (chunk slot, value head): A =
// K^ K^ᵀ and Aqk = Q^ K^ᵀ as bf16 mma on the raw rows (exact products, the
// L2 norm's 1/|x| on the results), T by solve_t; T and Aqk out as bf16 hi +
// lo ([C][C] hi then [C][C] lo, in the f32 arrays' place), the factors F by
// store_w.
template <int K>
struct Prep16Smem {
  static constexpr int LK = K + 8;
  // bytes: raw k, q [C][LK] (q's place: solve_t's scratch after the
  // products); f32 A, Tf [C][LC]; then b, G (double), Gx, Ex, rk, rq [C]
  static constexpr size_t kb = 0, qb = C * LK * 2, A = qb + C * LK * 2, Tf = A + C * LC * 4;
  static constexpr size_t b = Tf + C * LC * 4, G = b + C * 4, Gx = G + C * 8, Ex = Gx + C * 4;
  static constexpr size_t rk = Ex + C * 4, rq = rk + C * 4, bytes = rq + C * 4;
  static_assert(4 * 256 * 4 <= C * LK * 2, "solve_t's scratch in q's place");
};

template <deltac_variant Var, int K>
__global__ void __launch_bounds__(kThreads, 3) prep16_kernel(const __grid_constant__ Ws w) {
  using L = Prep16Smem<K>;
  extern __shared__ __align__(16) unsigned char sp[];
  const deltac_bwd_params& p = w.p;
  const int64_t s = blockIdx.x;
  const int j = blockIdx.y;
  int n, len;
  int64_t ts;
  if (!locate(p, s, n, ts, len))
    return;
  const int hk = j / (p.HV / p.H);
  b16 *kb = reinterpret_cast<b16*>(sp + L::kb), *qb = reinterpret_cast<b16*>(sp + L::qb);
  float *A = reinterpret_cast<float*>(sp + L::A), *Tf = reinterpret_cast<float*>(sp + L::Tf);
  float *b = reinterpret_cast<float*>(sp + L::b), *Gx = reinterpret_cast<float*>(sp + L::Gx);
  float *Ex = reinterpret_cast<float*>(sp + L::Ex), *rk = reinterpret_cast<float*>(sp + L::rk);
  float* rq = reinterpret_cast<float*>(sp + L::rq);
  double* G = reinterpret_cast<double*>(sp + L::G);
  {
    Bg bg;
    bg.fetch<Var>(p, ts, len, j);
    stage_qk<K, kThreads>(w, ts, len, hk, kb, qb, L::LK, rk, rq);
    bg.put<Var>(b, G, Gx, Ex);  // (barriers)
  }
  const int64_t slot = s * p.HV + j;
  const uint32_t skb = saddr(kb), sqb = saddr(qb);
  units<C, C, 4>([&](int m0, int n0) {
    float ak[4][4], aq[4][4];
    zero<4>(ak);
    zero<4>(aq);
    mmb<false, false, 4>(ak, skb, L::LK, skb, L::LK, m0, n0, K);
    mmb<false, false, 4>(aq, sqb, L::LK, skb, L::LK, m0, n0, K);
    each<4>(m0, n0, [&](int i, int jj, int x, int e) {
      const float d = decay(G, i, jj) * rk[jj];
      A[i * LC + jj] = jj < i ? b[i] * d * rk[i] * ak[x][e] : 0.f;
      Tf[i * LC + jj] = jj <= i ? w.scale * d * rq[i] * aq[x][e] : 0.f;  // Aqk, staged
    });
  });
  __syncthreads();
  store_hilo(w.Aqk + slot * C * C, Tf);
  __syncthreads();
  solve_t(A, Tf, reinterpret_cast<float*>(qb));
  store_w(w, slot, ts, len, hk, b, G, Gx, Ex, Tf);
}

// 16 warps at K = 64 and 128 (at K = 64 against 8: 2.13 -> 1.92 ms,
// docs/performance.md, backward (CUDA) version 13).
constexpr int kGrad16Threads = 512;

template <deltac_variant Var, int K>
__global__ void __launch_bounds__(kGrad16Threads) grad16_kernel(const __grid_constant__ Ws w) {
  constexpr int GT = kGrad16Threads, GW = GT / 32;
  constexpr int NC = GW > 8 ? 2 : 4, NK = (C / 16) * (K / 32) >= GW ? 4 : 2;
  using L = Grad16Smem<K>;
  constexpr int BV = L::BV, LB = L::LB, LK = L::LK, LF = L::LF, LC8 = L::LC8;
  extern __shared__ __align__(16) unsigned char sg[];
  const deltac_bwd_params& p = w.p;
  const int64_t s = blockIdx.x;
  const int hk = blockIdx.y, R = p.HV / p.H, tid = threadIdx.x;
  int n, len;
  int64_t ts;
  if (!locate(p, s, n, ts, len))
    return;
  b16 *kb = reinterpret_cast<b16*>(sg + L::kb), *qb = reinterpret_cast<b16*>(sg + L::qb);
  float *dQ = reinterpret_cast<float*>(sg + L::dQ), *dK = reinterpret_cast<float*>(sg + L::dK);
  float *dAq = reinterpret_cast<float*>(sg + L::dAq), *dA = reinterpret_cast<float*>(sg + L::dA);
  b16* M1 = reinterpret_cast<b16*>(sg + L::uni);
  b16 *M2 = M1 + C * LC8, *Na = M2 + C * LC8, *Nb = Na + C * LC8;
  float* vf = reinterpret_cast<float*>(sg + L::vec);
  float* b = vf;
  double* G = reinterpret_cast<double*>(vf + C);
  float *Gx = vf + 3 * C, *Ex = vf + 4 * C, *db = vf + 5 * C, *dGd = vf + 6 * C;
  float *dG = vf + 7 * C, *tt = vf + 8 * C, *rk = vf + 9 * C, *rq = vf + 10 * C;
  float *kc2 = vf + 11 * C, *rdv = vf + 12 * C, *clamped = vf + 13 * C;
  float* misc = vf + 14 * C;  // [0]: Σ h ∘ dh
  // Set i of a V step's tiles: H, DH, U, DR, DO, V (element offsets below).
  constexpr int oDH = BV * LK, oU = 2 * BV * LK, oDR = oU + BV * LC8, oDO = oDR + BV * LC8;
  constexpr int oV = oDO + C * LB;
  auto set = [&](int i) { return reinterpret_cast<b16*>(sg + L::dQ + i * L::set); };
  // Value head hk R + jr's V step at v0 into set i by cp.async, 16 bytes a
  // copy (rows of dO, v past the sequence zero-filled).
  auto issue = [&](int jr, int v0, int i) {
    using namespace deltac::cuda::detail;
    const int j = hk * R + jr;
    const int64_t slot = s * p.HV + j;
    const b16* hg = static_cast<const b16*>(w.hs) + slot * K * p.V;
    const b16* dhg = static_cast<const b16*>(w.dhs) + slot * K * p.V;
    const b16* ug = static_cast<const b16*>(w.us) + slot * C * p.V;
    const b16* drg = static_cast<const b16*>(w.drs) + slot * C * p.V;
    b16* d = set(i);
    spread<BV * (K / 8), GT>([&](int e) {  // h, dh: [V][K] rows v0 ..
      const int r = e / (K / 8), c = (e % (K / 8)) * 8;
      cp_async16(d + r * LK + c, hg + int64_t(v0 + r) * K + c);
      cp_async16(d + oDH + r * LK + c, dhg + int64_t(v0 + r) * K + c);
    });
    spread<BV * (C / 8), GT>([&](int e) {  // u, dr: [V][C]
      const int r = e / (C / 8), c = (e % (C / 8)) * 8;
      cp_async16(d + oU + r * LC8 + c, ug + int64_t(v0 + r) * C + c);
      cp_async16(d + oDR + r * LC8 + c, drg + int64_t(v0 + r) * C + c);
    });
    spread<C * (BV / 8), GT>([&](int e) {
      const int r = e / (BV / 8), c = (e % (BV / 8)) * 8;
      const int64_t o = ((ts + r) * p.HV + j) * p.V + v0 + c;
      const bool in = r < len;
      cp_async16_zfill(d + oDO + r * LB + c, static_cast<const b16*>(p.dout) + (in ? o : 0), in);
      cp_async16_zfill(d + oV + r * LB + c, static_cast<const b16*>(p.v) + (in ? o : 0), in);
    });
    cp_async_commit();
  };
  // The first V step's copies fly while q, k are staged; each later head's
  // first step is issued at the end of the head before it.
  issue(0, 0, 0);
  stage_qk<K, GT>(w, ts, len, hk, kb, qb, LK, rk, rq);  // once for its value heads
  // The value heads sharing q/k head hk, in turn (the sums of dq^, dk^: each
  // element by the same thread, no race).
  for (int jr = 0; jr < R; ++jr) {
    const int j = hk * R + jr;
    if (jr > 0)
      __syncthreads();  // the previous head's last reads of shared memory
    {
      Bg bg;
      bg.fetch<Var>(p, ts, len, j);
      if (tid < C) {
        dG[tid] = kc2[tid] = 0.f;
        clamped[tid] = Var == DELTAC_VARIANT_GATED && tid < len &&
                       static_cast<const float*>(p.g)[(ts + tid) * p.HV + j] < kGateFloor;
      }
      if (tid < 4)
        misc[tid] = 0.f;
      bg.put<Var>(b, G, Gx, Ex);  // (barriers)
    }
    const uint32_t skb = saddr(kb), sqb = saddr(qb);
    // Each warp's unit of the C x C and C x K products is the same in every
    // V step, so the sums over V stay in its accumulators: aq = dO uᵀ, ad =
    // dr uᵀ, a = dO hᵀ, c2 = dr hᵀ, c3 = u dhᵀ. Σ h ∘ dh and the rows of
    // Σ dr ∘ v are summed from the bf16 tiles.
    static_assert((C / 16) * (C / (8 * NC)) == GW && (C / 16) * (K / (8 * NK)) == GW,
                  "one unit per warp");
    constexpr int NR = C * (BV / 4) / GT;  // dr, v quads of a thread
    static_assert(C * (BV / 4) % GT == 0 && NR >= 1, "rows of dr, v");
    const int wid = tid / 32;
    const int cm0 = (wid / (C / (8 * NC))) * 16, cn0 = (wid % (C / (8 * NC))) * 8 * NC;
    const int km0 = (wid / (K / (8 * NK))) * 16, kn0 = (wid % (K / (8 * NK))) * 8 * NK;
    float aq[NC][4], ad[NC][4], a[NK][4], c2[NK][4], c3[NK][4];
    zero<NC>(aq);
    zero<NC>(ad);
    zero<NK>(a);
    zero<NK>(c2);
    zero<NK>(c3);
    float hdh = 0.f, drv[NR] = {};
#pragma unroll 1
    for (int v0 = 0, i = 0; v0 < p.V; v0 += BV, i ^= 1) {
      deltac::cuda::detail::cp_async_wait_all();
      __syncthreads();  // set i landed; the last step's reads of set i ^ 1 are done
      if (v0 + BV < p.V)
        issue(jr, v0 + BV, i ^ 1);
      const b16* d = set(i);
      spread<BV * (K / 8), GT>([&](int e) {
        const int r = e / (K / 8), c = (e % (K / 8)) * 8;
        const uint4 x = *reinterpret_cast<const uint4*>(d + r * LK + c);
        const uint4 y = *reinterpret_cast<const uint4*>(d + oDH + r * LK + c);
        hdh += dot2(x.x, y.x) + dot2(x.y, y.y) + dot2(x.z, y.z) + dot2(x.w, y.w);
      });
#pragma unroll
      for (int m = 0; m < NR; ++m) {  // token r, columns c .. c + 3 (DR transposed)
        const int e = tid + m * GT, r = e / (BV / 4), c = (e % (BV / 4)) * 4;
        const uint2 y = *reinterpret_cast<const uint2*>(d + oV + r * LB + c);
        const b16* x = d + oDR + c * LC8 + r;
        drv[m] += __bfloat162float(x[0]) * __uint_as_float(y.x << 16) +
                  __bfloat162float(x[LC8]) * __uint_as_float(y.x & 0xffff0000u) +
                  __bfloat162float(x[2 * LC8]) * __uint_as_float(y.y << 16) +
                  __bfloat162float(x[3 * LC8]) * __uint_as_float(y.y & 0xffff0000u);
      }
      const uint32_t sH = saddr(d), sDH = sH + oDH * 2, sU = sH + oU * 2, sDR = sH + oDR * 2;
      const uint32_t sDO = sH + oDO * 2;
      mmb<false, true, NC>(aq, sDO, LB, sU, LC8, cm0, cn0, BV);
      mmb<true, true, NC>(ad, sDR, LC8, sU, LC8, cm0, cn0, BV);
      mmb<false, true, NK>(a, sDO, LB, sH, LK, km0, kn0, BV);
      mmb<true, true, NK>(c2, sDR, LC8, sH, LK, km0, kn0, BV);
      mmb<true, true, NK>(c3, sU, LC8, sDH, LK, km0, kn0, BV);
    }
    __syncthreads();  // the last step's tiles (in dQ .. dA) are read
    // dAqk = dO uᵀ, dA = -dr uᵀ; dQ = dO hᵀ, dK = -βΓ dr hᵀ + e u dhᵀ; and
    // the rows' k·(dr hᵀ) (= Σ dr ∘ (K h) over V) for dβ, dGd, into kc2
    each<NC>(cm0, cn0, [&](int r, int c, int x, int e) {
      dAq[r * LC + c] = aq[x][e];
      dA[r * LC + c] = -ad[x][e];
    });
    {
      float kr[2] = {0.f, 0.f};
      each<NK>(km0, kn0, [&](int r, int c, int x, int e) {
        dQ[r * LF + c] = a[x][e];
        dK[r * LF + c] = -b[r] * Gx[r] * c2[x][e] + Ex[r] * c3[x][e];
        kr[e >> 1] += __bfloat162float(kb[r * LK + c]) * c2[x][e];
      });
      const int g = (tid & 31) >> 2;
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // over the row's 4 lanes, then one atomic
        kr[h] += __shfl_xor_sync(0xffffffffu, kr[h], 1);
        kr[h] += __shfl_xor_sync(0xffffffffu, kr[h], 2);
        if ((tid & 3) == 0)
          atomicAdd(kc2 + km0 + g + 8 * h, kr[h]);
      }
    }
#pragma unroll
    for (int m = 0; m < NR; ++m) {  // over the row's 8 threads
      drv[m] += __shfl_xor_sync(0xffffffffu, drv[m], 1);
      drv[m] += __shfl_xor_sync(0xffffffffu, drv[m], 2);
      drv[m] += __shfl_xor_sync(0xffffffffu, drv[m], 4);
      if ((tid & 7) == 0)
        rdv[(tid + m * GT) / 8] = drv[m];
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) hdh += __shfl_xor_sync(0xffffffffu, hdh, o);
    if ((tid & 31) == 0)
      atomicAdd(misc, hdh);
    __syncthreads();
    // dβ = Σ dr ∘ (v - Γ K^ h) (+ N's terms below), dGd = -β Σ dr ∘ Γ K^ h
    if (tid < C) {
      const float y = Gx[tid] * rk[tid] * kc2[tid];
      db[tid] = rdv[tid] - y;
      dGd[tid] = -b[tid] * y;
    }
    __syncthreads();
    // Row terms (as grad_kernel): dG_i = scale Γ q^·dQ + dGd; t_i = k^·dK - dGd
    for (int r = tid / 32; r < C; r += GW) {
      float a = 0.f, kc = 0.f;
      for (int c = tid & 31; c < K; c += 32) {
        a += __bfloat162float(qb[r * LK + c]) * dQ[r * LF + c];
        kc += __bfloat162float(kb[r * LK + c]) * dK[r * LF + c];
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        a += __shfl_xor_sync(0xffffffffu, a, o);
        kc += __shfl_xor_sync(0xffffffffu, kc, o);
      }
      if ((tid & 31) == 0) {
        dG[r] = w.scale * Gx[r] * rq[r] * a + dGd[r];
        tt[r] = r < len ? rk[r] * kc - dGd[r] : 0.f;
      }
    }
    __syncthreads();
    // M = dAqk ∘ scale e^(G_i - G_j) (lower), N = dA ∘ β_i e^(G_i - G_j)
    // (strictly lower), with their dG, dβ terms (as grad_kernel).
    units<C, C, NC, GW>([&](int m0, int n0) {
      float aq[NC][4], ak[NC][4];
      zero<NC>(aq);
      zero<NC>(ak);
      mmb<false, false, NC>(aq, sqb, LK, skb, LK, m0, n0, K);
      mmb<false, false, NC>(ak, skb, LK, skb, LK, m0, n0, K);
      mn_unit<NC>(
          m0, n0, aq, ak, dAq, dA, G, b, w.scale, dG, db,
          [&](float x, int i, int jj) { return x * rq[i] * rk[jj]; },
          [&](float x, int i, int jj) { return x * rk[i] * rk[jj]; });
    });
    __syncthreads();
    // The operands of the last products (bf16), row by row: M1 = M diag(rk)
    // ([i][j]), M2 = diag(rq) M ([j][i], read transposed), Na = N diag(rk),
    // Nb = diag(rk) N (read transposed: Nbᵀ = Nᵀ diag(rk)).
    for (int e = tid; e < C * C / 4; e += GT) {
      const int r = e / (C / 4), c = (e % (C / 4)) * 4, o = r * LC8 + c;
      const float4 m = *reinterpret_cast<const float4*>(dAq + r * LC + c);
      const float4 n = *reinterpret_cast<const float4*>(dA + r * LC + c);
      const float4 kc = *reinterpret_cast<const float4*>(rk + c);
      const float qr = rq[r], kr = rk[r];
      auto put = [&](b16* d, float x0, float x1, float x2, float x3) {
        const __nv_bfloat162 lo = __floats2bfloat162_rn(x0, x1), hi = __floats2bfloat162_rn(x2, x3);
        *reinterpret_cast<uint2*>(d + o) = make_uint2(*reinterpret_cast<const uint32_t*>(&lo),
                                                      *reinterpret_cast<const uint32_t*>(&hi));
      };
      put(M1, m.x * kc.x, m.y * kc.y, m.z * kc.z, m.w * kc.w);
      put(M2, m.x * qr, m.y * qr, m.z * qr, m.w * qr);
      put(Na, n.x * kc.x, n.y * kc.y, n.z * kc.z, n.w * kc.w);
      put(Nb, n.x * kr, n.y * kr, n.z * kr, n.w * kr);
    }
    __syncthreads();
    // dq^ = scale Γ dQ + M K^;  dk^ = dK + Mᵀ Q^ + N K^ + Nᵀ K^
    const uint32_t sM1 = saddr(M1), sM2 = saddr(M2), sNa = saddr(Na), sNb = saddr(Nb);
    units<C, K, NK, GW>([&](int m0, int n0) {
      float a[NK][4], c2[NK][4];
      zero<NK>(a);
      zero<NK>(c2);
      mmb<false, true, NK>(a, sM1, LC8, skb, LK, m0, n0, C);
      mmb<true, true, NK>(c2, sM2, LC8, sqb, LK, m0, n0, C);
      mmb<false, true, NK>(c2, sNa, LC8, skb, LK, m0, n0, C);
      mmb<true, true, NK>(c2, sNb, LC8, skb, LK, m0, n0, C);
      // dq^, dk^ of this value head into dQ, dK in place (each element by
      // the thread that read it)
      each<NK>(m0, n0, [&](int r, int c, int x, int e) {
        dQ[r * LF + c] = w.scale * Gx[r] * dQ[r * LF + c] + a[x][e];
        dK[r * LF + c] += c2[x][e];
      });
    });
    if (jr + 1 < R) {
      // GVA: the sums over value heads in dqa, dka (the first head stores,
      // the others add), by float4 rows; the last head's stay in dQ, dK for
      // the L2 norm's backward below. Then the next head's first V step.
      __syncthreads();
      constexpr int Q4 = K / 4;
      for (int e = tid; e < 2 * C * Q4; e += GT) {
        const int r = (e / Q4) % C, c = (e % Q4) * 4;
        if (r >= len)
          continue;
        const bool isk = e >= C * Q4;
        const float4 x = *reinterpret_cast<const float4*>((isk ? dK : dQ) + r * LF + c);
        float* g = (isk ? w.dka : w.dqa) + ((ts + r) * p.H + hk) * K + c;
        if (jr == 0) {
          __stcg(reinterpret_cast<float4*>(g), x);
        } else {
#if __CUDA_ARCH__ >= 900
          atomicAdd(reinterpret_cast<float4*>(g), x);
#else
          atomicAdd(g, x.x), atomicAdd(g + 1, x.y), atomicAdd(g + 2, x.z), atomicAdd(g + 3, x.w);
#endif
        }
      }
      __syncthreads();  // dQ, dK read: the next head's copies may land there
      issue(jr + 1, 0, 0);
    }
    dg_dbeta<Var>(p, j, ts, len, G, misc, dG, tt, db,
                  [&](int r, int64_t) { return clamped[r] != 0.f; });
  }  // value heads
  // dq, dk (bf16) from dq^, dk^ (the last value head's in dQ, dK, plus the
  // earlier heads' sums in dqa, dka), K / 8 lanes a row, each lane elements
  // 4 l' .. 4 l' + 3 and K / 2 + 4 l' ..: with the L2 norm its backward,
  // dx = (dx^ - x^ (x^ · dx^)) / |x|, x^ = x / |x|
  __syncthreads();  // the sums are complete (shared memory, or global: __ldcg)
  {
    constexpr int LR = K / 8, RW = 32 / LR;  // lanes a row, rows a warp at a time
    const int lane = tid & 31, wid = tid / 32, li = lane % LR;
#pragma unroll 1
    for (int r0 = wid * RW; r0 < 2 * C; r0 += GW * RW) {
      const int r = r0 + lane / LR, rr = r % C;
      const bool isk = r >= C, in = rr < len;
      const int c0 = 4 * li, c1 = K / 2 + 4 * li;
      const float* d = (isk ? dK : dQ) + rr * LF;
      float4 g0 = *reinterpret_cast<const float4*>(d + c0);
      float4 g1 = *reinterpret_cast<const float4*>(d + c1);
      if (R > 1 && in) {
        const float* pg = (isk ? w.dka : w.dqa) + ((ts + rr) * p.H + hk) * K;
        const float4 x0 = __ldcg(reinterpret_cast<const float4*>(pg + c0));
        const float4 x1 = __ldcg(reinterpret_cast<const float4*>(pg + c1));
        g0.x += x0.x, g0.y += x0.y, g0.z += x0.z, g0.w += x0.w;
        g1.x += x1.x, g1.y += x1.y, g1.z += x1.z, g1.w += x1.w;
      }
      float g[8] = {g0.x, g0.y, g0.z, g0.w, g1.x, g1.y, g1.z, g1.w};
      const b16* x = (isk ? kb : qb) + rr * LK;
      const uint2 xa = *reinterpret_cast<const uint2*>(x + c0);
      const uint2 xb = *reinterpret_cast<const uint2*>(x + c1);
      const uint32_t xw[4] = {xa.x, xa.y, xb.x, xb.y};
      const float rn = (isk ? rk : rq)[rr];
      float xh[8], dot = 0.f;
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        xh[e] = __uint_as_float(e & 1 ? xw[e / 2] & 0xffff0000u : xw[e / 2] << 16) * rn;
        dot += xh[e] * g[e];
      }
      if (w.rq) {
#pragma unroll
        for (int o = LR / 2; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
#pragma unroll
        for (int e = 0; e < 8; ++e) g[e] = rn * (g[e] - xh[e] * dot);
      }
      if (!in)
        continue;
      uint32_t y[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const __nv_bfloat162 h = __floats2bfloat162_rn(g[2 * e], g[2 * e + 1]);
        y[e] = *reinterpret_cast<const uint32_t*>(&h);
      }
      b16* out = static_cast<b16*>(isk ? p.dk : p.dq) + ((ts + rr) * p.H + hk) * K;
      *reinterpret_cast<uint2*>(out + c0) = make_uint2(y[0], y[1]);
      *reinterpret_cast<uint2*>(out + c1) = make_uint2(y[2], y[3]);
    }
  }
}

}  // namespace deltac::cuda::bwdc

#endif  // DELTAC_CUDA_BACKWARD_GRAD_BF16_CUH

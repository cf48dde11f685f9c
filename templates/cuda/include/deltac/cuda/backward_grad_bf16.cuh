// The chunked backward's prep (prep16_kernel, below) and gradient kernel
// for bf16 inputs (with the warp scans of backward_scan_warp.cuh). The
// gradient kernel (grad16_kernel): the math of backward_chunked.cuh's
// grad_kernel with every product a bf16 m16n8k16 mma.sync on operands
// loaded by ldmatrix from bf16 shared tiles: q, k, v, dO raw (exact); h,
// dh, u, dr (f32 in the workspace) and the C x C terms M, N rounded to bf16
// (as fla's bf16 states), or split into hi + lo (Lo: ~2^-17, a product of
// two split operands hi·hi + lo·hi + hi·lo). The L2 norm's 1/|x| multiply
// the rows or columns of results and of the M, N tiles.
// A block per (chunk, q/k head) takes the value heads sharing it in turn
// and sums their dq^, dk^ in place (the first stores, the others add). Per
// value head, the V steps' rows arrive by cp.async into a staging area and
// are converted to the bf16 tiles; each warp owns one unit of each product
// for all V steps, so the sums over V stay in its accumulators.
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
// stored [k][n] (else [n][k]). AL / BL: the operand has a lo tile at Alo /
// Blo (then hi·hi + lo·hi + hi·lo). NT even.
template <bool TA, bool TB, int NT, bool AL, bool BL>
__device__ __forceinline__ void mmb(float (*acc)[4], uint32_t A, uint32_t Alo, int lda, uint32_t B,
                                    uint32_t Blo, int ldb, int m0, int n0, int kd) {
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
    uint32_t ah[4], al[4];
    if constexpr (TA) ldsm4t(ah, A + ka); else ldsm4(ah, A + ka);
    if constexpr (AL) {
      if constexpr (TA) ldsm4t(al, Alo + ka); else ldsm4(al, Alo + ka);
    }
#pragma unroll
    for (int np = 0; np < NT / 2; ++np) {
      const uint32_t kb =
          boff + uint32_t(TB ? (k0 * ldb + 16 * np) * 2 : (16 * np * ldb + k0) * 2);
      uint32_t bh[4];
      if constexpr (TB) ldsm4t(bh, B + kb); else ldsm4(bh, B + kb);
      wmma16<b16>(acc[2 * np], ah, bh[0], bh[1]);
      wmma16<b16>(acc[2 * np + 1], ah, bh[2], bh[3]);
      if constexpr (AL) {
        wmma16<b16>(acc[2 * np], al, bh[0], bh[1]);
        wmma16<b16>(acc[2 * np + 1], al, bh[2], bh[3]);
      }
      if constexpr (BL) {
        uint32_t bl[4];
        if constexpr (TB) ldsm4t(bl, Blo + kb); else ldsm4(bl, Blo + kb);
        wmma16<b16>(acc[2 * np], ah, bl[0], bl[1]);
        wmma16<b16>(acc[2 * np + 1], ah, bl[2], bl[3]);
      }
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
__device__ __forceinline__ void split_b16(float x, b16& hi, b16& lo) {
  hi = __float2bfloat16_rn(x);
  lo = __float2bfloat16_rn(x - __bfloat162float(hi));
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
  static constexpr int BV = 32, LB = BV + 8, LK = K + 8, LF = K + 4, LC8 = C + 8, LS = BV + 4;
  // bytes: raw K, Q [C][LK]; f32 dQ, dK [C][LF], dAq, dA [C][LC] (after the
  // V steps; during them the staging of a V step's fetch: f32 h, dh [K][LS],
  // u, dr [C][LS], bf16 dO, v [C][LB]); then the union of the V step's
  // tiles (H hi, lo, DH hi, lo [K][LB]; U hi, lo, DR hi, lo, DO [C][LB]) and
  // the M1, M2, P hi / lo tiles [C][LC8]; then the f32 vectors.
  static constexpr size_t kb = 0, qb = kb + C * LK * 2, dQ = qb + C * LK * 2;
  static constexpr size_t dK = dQ + C * LF * 4, dAq = dK + C * LF * 4, dA = dAq + C * LC * 4;
  static constexpr size_t uni = dA + C * LC * 4;
  static constexpr size_t sh = dQ, sdh = sh + size_t(K) * LS * 4, su = sdh + size_t(K) * LS * 4;
  static constexpr size_t sdr = su + C * LS * 4, sdo = sdr + C * LS * 4, sv = sdo + C * LB * 2;
  static_assert(sv + C * LB * 2 <= uni, "the staging fits in dQ .. dA");
  static constexpr size_t step = (4 * size_t(K) * LB + 5 * size_t(C) * LB) * 2;
  static constexpr size_t mtiles = 6 * size_t(C) * LC8 * 2;
  static constexpr size_t vec = uni + (step > mtiles ? step : mtiles);
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
  static_assert(3 * 256 * 4 <= C * LK * 2, "solve_t's scratch in q's place");
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
    mmb<false, false, 4, false, false>(ak, skb, 0, L::LK, skb, 0, L::LK, m0, n0, K);
    mmb<false, false, 4, false, false>(aq, sqb, 0, L::LK, skb, 0, L::LK, m0, n0, K);
    each<4>(m0, n0, [&](int i, int jj, int x, int e) {
      const float d = decay(G, i, jj) * rk[jj];
      A[i * LC + jj] = jj < i ? b[i] * d * rk[i] * ak[x][e] : 0.f;
      Tf[i * LC + jj] = jj <= i ? w.scale * d * rq[i] * aq[x][e] : 0.f;  // Aqk, staged
    });
  });
  __syncthreads();
  store_hilo(w.Aqk + slot * C * C, Tf);
  __syncthreads();
  solve_t(A, Tf, reinterpret_cast<float*>(qb), w.rows64);
  store_w(w, slot, ts, len, hk, b, G, Gx, Ex, Tf);
}

// Lo: the f32 operands (h, dh, u, dr and the M, N tiles) as bf16 hi + lo
// (~f32 products, three mma each), else rounded to bf16 (one mma; ~2^-9
// relative per operand, as fla's bf16 states).
template <deltac_variant Var, int K, bool Lo>
__global__ void __launch_bounds__(bwd_threads<true, K>()) grad16_kernel(const __grid_constant__ Ws w) {
  constexpr int GT = bwd_threads<true, K>(), GW = GT / 32;
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
  b16* Hh = reinterpret_cast<b16*>(sg + L::uni);
  b16 *Hl = Hh + K * LB, *DHh = Hl + K * LB, *DHl = DHh + K * LB;
  b16 *Uh = DHl + K * LB, *Ul = Uh + C * LB, *DRh = Ul + C * LB, *DRl = DRh + C * LB;
  b16* DO = DRl + C * LB;
  b16* M1h = reinterpret_cast<b16*>(sg + L::uni);  // after the V steps
  b16 *M1l = M1h + C * LC8, *M2h = M1l + C * LC8, *M2l = M2h + C * LC8;
  b16 *Ph = M2l + C * LC8, *Pl = Ph + C * LC8;
  float* vf = reinterpret_cast<float*>(sg + L::vec);
  float* b = vf;
  double* G = reinterpret_cast<double*>(vf + C);
  float *Gx = vf + 3 * C, *Ex = vf + 4 * C, *db = vf + 5 * C, *dGd = vf + 6 * C;
  float *dG = vf + 7 * C, *tt = vf + 8 * C, *rk = vf + 9 * C, *rq = vf + 10 * C;
  float *kc2 = vf + 11 * C, *rdv = vf + 12 * C, *clamped = vf + 13 * C;
  float* misc = vf + 14 * C;  // [0]: Σ h ∘ dh
  stage_qk<K, GT>(w, ts, len, hk, kb, qb, LK, rk, rq);  // once for its value heads
  // The value heads sharing q/k head hk, in turn: the first stores dq^, dk^,
  // the others add to them (each element by the same thread: no race).
  for (int jr = 0; jr < R; ++jr) {
    const int j = hk * R + jr;
    const int64_t slot = s * p.HV + j;
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
    const uint32_t sHh = saddr(Hh), sHl = saddr(Hl), sDHh = saddr(DHh), sDHl = saddr(DHl);
    const uint32_t sUh = saddr(Uh), sUl = saddr(Ul), sDRh = saddr(DRh), sDRl = saddr(DRl);
    const uint32_t sDO = saddr(DO);
    const float* hg = w.hs + slot * K * p.V;
    const float* dhg = w.dhs + slot * K * p.V;
    const float* ug = w.us + slot * C * p.V;
    const float* drg = w.drs + slot * C * p.V;
    float *hS = reinterpret_cast<float*>(sg + L::sh), *dhS = reinterpret_cast<float*>(sg + L::sdh);
    float *uS = reinterpret_cast<float*>(sg + L::su), *drS = reinterpret_cast<float*>(sg + L::sdr);
    b16 *doS = reinterpret_cast<b16*>(sg + L::sdo), *vS = reinterpret_cast<b16*>(sg + L::sv);
    // A V step's rows into the staging by cp.async (rows of dO, v past the
    // sequence zero-filled), 16 bytes a copy.
    auto issue = [&](int v0) {
      using namespace deltac::cuda::detail;
      spread<K * (BV / 4), GT>([&](int e) {
        const int r = e / (BV / 4), c = (e % (BV / 4)) * 4;
        cp_async16(hS + r * LS + c, hg + int64_t(r) * p.V + v0 + c);
        cp_async16(dhS + r * LS + c, dhg + int64_t(r) * p.V + v0 + c);
      });
      spread<C * (BV / 4), GT>([&](int e) {
        const int r = e / (BV / 4), c = (e % (BV / 4)) * 4;
        cp_async16(uS + r * LS + c, ug + int64_t(r) * p.V + v0 + c);
        cp_async16(drS + r * LS + c, drg + int64_t(r) * p.V + v0 + c);
      });
      spread<C * (BV / 8), GT>([&](int e) {
        const int r = e / (BV / 8), c = (e % (BV / 8)) * 8;
        const int64_t o = ((ts + r) * p.HV + j) * p.V + v0 + c;
        const bool in = r < len;
        cp_async16_zfill(doS + r * LB + c, static_cast<const b16*>(p.dout) + (in ? o : 0), in);
        cp_async16_zfill(vS + r * LB + c, static_cast<const b16*>(p.v) + (in ? o : 0), in);
      });
      cp_async_commit();
    };
    // f32 staged rows as bf16 hi + lo (4 elements)
    auto split4 = [](const float4 x, b16* hi, b16* lo) {
      const float v[4] = {x.x, x.y, x.z, x.w};
      b16 h[4], l[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) split_b16(v[i], h[i], l[i]);
      *reinterpret_cast<uint2*>(hi) = *reinterpret_cast<const uint2*>(h);
      if constexpr (Lo)
        *reinterpret_cast<uint2*>(lo) = *reinterpret_cast<const uint2*>(l);
    };
    // Each warp's unit of the C x C and C x K products is the same in every
    // V step, so the sums over V stay in its accumulators: aq = dO uᵀ, ad =
    // dr uᵀ, a = dO hᵀ, c2 = dr hᵀ, c3 = u dhᵀ. Σ h ∘ dh and the rows of
    // Σ dr ∘ v are summed from the staged f32 rows.
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
    issue(0);
#pragma unroll 1
    for (int v0 = 0; v0 < p.V; v0 += BV) {
      deltac::cuda::detail::cp_async_wait_all();
      __syncthreads();  // the staging landed; the last step's products are done
      spread<K * (BV / 4), GT>([&](int e) {
        const int r = e / (BV / 4), c = (e % (BV / 4)) * 4;
        const float4 x = *reinterpret_cast<const float4*>(hS + r * LS + c);
        const float4 y = *reinterpret_cast<const float4*>(dhS + r * LS + c);
        hdh += x.x * y.x + x.y * y.y + x.z * y.z + x.w * y.w;
        split4(x, Hh + r * LB + c, Hl + r * LB + c);
        split4(y, DHh + r * LB + c, DHl + r * LB + c);
      });
#pragma unroll
      for (int m = 0; m < NR; ++m) {
        const int e = tid + m * GT, r = e / (BV / 4), c = (e % (BV / 4)) * 4;
        const float4 x = *reinterpret_cast<const float4*>(drS + r * LS + c);
        const uint2 vv = *reinterpret_cast<const uint2*>(vS + r * LB + c);
        drv[m] += x.x * __uint_as_float(vv.x << 16) + x.y * __uint_as_float(vv.x & 0xffff0000u) +
                  x.z * __uint_as_float(vv.y << 16) + x.w * __uint_as_float(vv.y & 0xffff0000u);
        split4(x, DRh + r * LB + c, DRl + r * LB + c);
        split4(*reinterpret_cast<const float4*>(uS + r * LS + c), Uh + r * LB + c, Ul + r * LB + c);
      }
      spread<C * (BV / 8), GT>([&](int e) {
        const int r = e / (BV / 8), c = (e % (BV / 8)) * 8;
        *reinterpret_cast<uint4*>(DO + r * LB + c) = *reinterpret_cast<const uint4*>(doS + r * LB + c);
      });
      __syncthreads();  // the tiles are ready, the staging is free
      if (v0 + BV < p.V)
        issue(v0 + BV);
      mmb<false, false, NC, false, Lo>(aq, sDO, 0, LB, sUh, sUl, LB, cm0, cn0, BV);
      mmb<false, false, NC, Lo, Lo>(ad, sDRh, sDRl, LB, sUh, sUl, LB, cm0, cn0, BV);
      mmb<false, false, NK, false, Lo>(a, sDO, 0, LB, sHh, sHl, LB, km0, kn0, BV);
      mmb<false, false, NK, Lo, Lo>(c2, sDRh, sDRl, LB, sHh, sHl, LB, km0, kn0, BV);
      mmb<false, false, NK, Lo, Lo>(c3, sUh, sUl, LB, sDHh, sDHl, LB, km0, kn0, BV);
    }
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
      mmb<false, false, NC, false, false>(aq, sqb, 0, LK, skb, 0, LK, m0, n0, K);
      mmb<false, false, NC, false, false>(ak, skb, 0, LK, skb, 0, LK, m0, n0, K);
      mn_unit<NC>(
          m0, n0, aq, ak, dAq, dA, G, b, w.scale, dG, db,
          [&](float x, int i, int jj) { return x * rq[i] * rk[jj]; },
          [&](float x, int i, int jj) { return x * rk[i] * rk[jj]; });
    });
    __syncthreads();
    // The operands of the last products (hi + lo): M1 = M diag(rk) ([i][j]),
    // M2 = diag(rq) M ([j][i], read transposed), P = (N + Nᵀ) diag(rk).
    for (int e = tid; e < C * C; e += GT) {
      const int r = e / C, c = e % C, o = r * LC8 + c;
      const float m = dAq[r * LC + c];
      const float x1 = m * rk[c], x2 = m * rq[r], x3 = (dA[r * LC + c] + dA[c * LC + r]) * rk[c];
      if constexpr (Lo) {
        split_b16(x1, M1h[o], M1l[o]);
        split_b16(x2, M2h[o], M2l[o]);
        split_b16(x3, Ph[o], Pl[o]);
      } else {
        M1h[o] = __float2bfloat16_rn(x1);
        M2h[o] = __float2bfloat16_rn(x2);
        Ph[o] = __float2bfloat16_rn(x3);
      }
    }
    __syncthreads();
    // dq^ = scale Γ dQ + M K^;  dk^ = dK + Mᵀ Q^ + N K^ + Nᵀ K^
    const uint32_t sM1h = saddr(M1h), sM1l = saddr(M1l), sM2h = saddr(M2h), sM2l = saddr(M2l);
    const uint32_t sPh = saddr(Ph), sPl = saddr(Pl);
    units<C, K, NK, GW>([&](int m0, int n0) {
      float a[NK][4], c2[NK][4];
      zero<NK>(a);
      zero<NK>(c2);
      mmb<false, true, NK, Lo, false>(a, sM1h, sM1l, LC8, skb, 0, LK, m0, n0, C);
      mmb<true, true, NK, Lo, false>(c2, sM2h, sM2l, LC8, sqb, 0, LK, m0, n0, C);
      mmb<false, true, NK, Lo, false>(c2, sPh, sPl, LC8, skb, 0, LK, m0, n0, C);
      each<NK>(m0, n0, [&](int r, int c, int x, int e) {
        if (r >= len)
          return;
        const int64_t o = ((ts + r) * p.H + hk) * K + c;
        const float dq = w.scale * Gx[r] * dQ[r * LF + c] + a[x][e];
        const float dk = dK[r * LF + c] + c2[x][e];
        if (jr) {  // after this thread's own store of the first head
          atomicAdd(w.dqa + o, dq);
          atomicAdd(w.dka + o, dk);
        } else {
          w.dqa[o] = dq;
          w.dka[o] = dk;
        }
      });
    });
    dg_dbeta<Var>(p, j, ts, len, G, misc, dG, tt, db,
                  [&](int r, int64_t) { return clamped[r] != 0.f; });
  }  // value heads
}

}  // namespace deltac::cuda::bwdc

#endif  // DELTAC_CUDA_BACKWARD_GRAD_BF16_CUH

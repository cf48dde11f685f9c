// The chunked backward's prep (prep16_kernel, below) and gradient kernel
// for bf16 inputs (with the warp scans of backward_scan_warp.cuh). The
// gradient kernel (grad16_kernel): the math of backward_chunked.cuh's
// grad_kernel with every product a bf16 m16n8k16 mma.sync on operands
// loaded by ldmatrix from bf16 shared tiles: q, k, v, dO raw (exact); h,
// dh, u, dr as the warp scans stored them (bf16, as fla's states) and the
// C x C terms M, N rounded to bf16. The L2 norm's 1/|x| multiply the rows
// or columns of results and of the M, N tiles.
// Persistent blocks (one a multiprocessor) take items (chunk, q/k head) in
// turn; an item's value heads sharing the q/k head in turn, their dq^, dk^
// summed (in the workspace between heads), then dq, dk written with the L2
// norm's backward (no finish kernel). Per value head, each V step's bf16
// rows arrive by cp.async straight into one of two sets of operand tiles
// while the other set's products run (the next head's first two steps
// during this head's last products); each warp owns one unit of each
// product for all V steps, so the sums over V stay in its accumulators.
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
// (stride ld; rows past len zero); no barrier.
template <int K, int NTH>
__device__ __forceinline__ void stage_qk(const deltac_bwd_params& p, int64_t ts, int len, int hk,
                                         b16* kb, b16* qb, int ld) {
  Tile<C, K, NTH> tk, tq;
  fetch_qk<K>(tk, p.k, nullptr, p, ts, len, hk);
  fetch_qk<K>(tq, p.q, nullptr, p, ts, len, hk);
  const int tid = threadIdx.x;
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
  // bytes: raw K, Q [C][LK]; f32 dQ, dK [C][LF]; two sets of a V step's
  // bf16 tiles, each H, DH [BV][LK] and U, DR [BV][LC8] as the warp scans
  // store them (transposed), DO, V [C][LB]; the M1, M2, Na, Nb tiles
  // [C][LC8]; the f32 vectors.
  static constexpr size_t kb = 0, qb = kb + C * LK * 2, dQ = qb + C * LK * 2;
  static constexpr size_t dK = dQ + C * LF * 4, sets = dK + C * LF * 4;
  static constexpr size_t set = (2 * size_t(BV) * LK + 2 * BV * LC8 + 2 * C * LB) * 2;
  static_assert(set % 16 == 0, "16-byte copies");
  static constexpr size_t uni = sets + 2 * set;
  static constexpr size_t vec = uni + 4 * size_t(C) * LC8 * 2;
  // vectors (floats): b, G (double), Gx, Ex, db, qd, dG, tt, rk, rq, kc2,
  // rdv, clamped, kd, misc
  static constexpr size_t bytes = vec + (15 * C + 4) * 4;
};

// The L2 norm's 1/|x| (bwd::inv_norm, as bwd::rnorm_kernel) of the
// staged rows kb, qb into rk, rq [C] (1 without the norm, 0 past len), and
// (out) into w.rk, w.rq; two threads a row; ends with a barrier.
template <int K>
__device__ __forceinline__ void row_norms(const Ws& w, int64_t ts, int len, int hk, bool out,
                                          const b16* kb, const b16* qb, int ld, float* rk,
                                          float* rq) {
  static_assert(kThreads == 4 * C, "two threads a row of k and of q");
  const int tid = threadIdx.x, r = (tid >> 1) & (C - 1), half = tid & 1;
  const bool isq = tid >= 2 * C, in = r < len;
  const b16* x = (isq ? qb : kb) + r * ld + half * (K / 2);
  float ss = 0.f;
#pragma unroll
  for (int c = 0; c < K / 2; c += 8) {
    const uint4 u = *reinterpret_cast<const uint4*>(x + c);
    ss += dot2(u.x, u.x) + dot2(u.y, u.y) + dot2(u.z, u.z) + dot2(u.w, u.w);
  }
  ss += __shfl_xor_sync(0xffffffffu, ss, 1);
  const float rn = !in ? 0.f : w.rk ? bwd::inv_norm(ss) : 1.f;
  if (!half) {
    (isq ? rq : rk)[r] = rn;
    if (out && in && w.rk)
      const_cast<float*>(isq ? w.rq : w.rk)[(ts + r) * w.p.H + hk] = rn;  // (workspace arrays)
  }
  __syncthreads();
}

// prep for the warp scans (bf16 inputs), per (chunk slot, value head): A =
// K^ K^ᵀ and Aqk = Q^ K^ᵀ as bf16 mma on the raw rows (exact products, the
// L2 norm's 1/|x| on the results; the 1/|x| from the staged rows), T by
// solve_t; T and Aqk out as bf16 hi (+ lo where a β exceeds 1; [C][C] hi
// then [C][C] lo, in the f32 arrays' place, lower blocks only), the factors
// F by store_w.
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
__global__ void __launch_bounds__(kThreads, 4) prep16_kernel(const __grid_constant__ Ws w) {
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
    stage_qk<K, kThreads>(p, ts, len, hk, kb, qb, L::LK);
    bg.put<Var>(b, G, Gx, Ex);  // (barriers)
  }
  row_norms<K>(w, ts, len, hk, j % (p.HV / p.H) == 0, kb, qb, L::LK, rk, rq);  // (barrier)
  // T's and Aqk's low halves where a β exceeds 1 (docs/performance.md,
  // backward version 16): elsewhere the transitions contract, and bf16 T and
  // Aqk keep the gradients' error near the bf16 operands' own
  const bool lo = __syncthreads_or(w.lo_always || (int(threadIdx.x) < C && b[threadIdx.x] > 1.f));
  const int64_t slot = s * p.HV + j;
  const uint32_t skb = saddr(kb), sqb = saddr(qb);
  units<C, C, 4>([&](int m0, int n0) {
    float ak[4][4], aq[4][4];
    zero<4>(ak);
    zero<4>(aq);
    mmb<false, false, 4>(ak, skb, L::LK, skb, L::LK, m0, n0, K);
    mmb<false, false, 4>(aq, sqb, L::LK, skb, L::LK, m0, n0, K);
    each<4>(m0, n0, [&](int i, int jj, int x, int e) {
      const float d = decay<Var>(G, i, jj) * rk[jj];
      A[i * LC + jj] = jj < i ? b[i] * d * rk[i] * ak[x][e] : 0.f;
      Tf[i * LC + jj] = jj <= i ? w.scale * d * rq[i] * aq[x][e] : 0.f;  // Aqk, staged
    });
  });
  __syncthreads();
  store_hilo(w.Aqk + slot * C * C, Tf, lo);
  __syncthreads();
  solve_t(A, Tf, reinterpret_cast<float*>(qb));
  store_w(w, slot, len, b, G, Gx, Ex, rk, rq, Tf, lo);
}

// M = dAqk ∘ scale e^(G_i - G_j) (j <= i) and N = dA ∘ β_i e^(G_i - G_j) (j
// < i) over the unit (m0, n0) of 16 x 8 NC, dAqk = aq and dA = -ad (dO uᵀ,
// dr uᵀ), with their dG, dβ terms as mn_unit's (pq, pk: the unit's raw Q
// Kᵀ, K Kᵀ, times rq_i rk_j, rk_i rk_j); M and N leave as the bf16 operands
// of the last products ([C][LC8]): M1 = M diag(rk), M2 = diag(rq) M, Na = N
// diag(rk), Nb = diag(rk) N, a lane's column pairs by 4-byte stores; the
// terms' sums by mn_sums, as mn_unit's. The delta rule: no decay, no dG
// terms (pq unread).
template <deltac_variant Var, int NC>
__device__ __forceinline__ void mn16(int m0, int n0, const float (*aq)[4], const float (*ad)[4],
                                     const float (*pq)[4], const float (*pk)[4], const double* G,
                                     const float* b, const float* rq, const float* rk, float scale,
                                     float* dG, float* db, b16* M1, b16* M2, b16* Na, b16* Nb) {
  constexpr int LC8 = C + 8;
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  float rg[2] = {0.f, 0.f}, rb[2] = {0.f, 0.f}, cg[NC][2] = {};
#pragma unroll
  for (int x = 0; x < NC; ++x)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int i = m0 + g + 8 * h, j0 = n0 + 8 * x + 2 * t;
      float mv[2], nv[2];
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int e = 2 * h + c, jj = j0 + c;
        const float d = decay<Var>(G, i, jj);
        const float M = jj <= i ? aq[x][e] * scale * d : 0.f;
        const float da = jj < i ? -ad[x][e] * d : 0.f;
        const float P = Var == DELTAC_VARIANT_DELTA ? 0.f : M * rq[i] * rk[jj] * pq[x][e];
        const float Pa = da * rk[i] * rk[jj] * pk[x][e];
        mv[c] = M;
        nv[c] = da * b[i];
        if (jj < i) {
          if constexpr (Var != DELTAC_VARIANT_DELTA)
            rg[h] += P + b[i] * Pa;
          rb[h] += Pa;
          if constexpr (Var != DELTAC_VARIANT_DELTA)
            cg[x][c] -= P + b[i] * Pa;
        }
      }
      const float k0 = rk[j0], k1 = rk[j0 + 1], ri = rk[i], qi = rq[i];
      auto put = [&](b16* d, float x0, float x1) {
        *reinterpret_cast<__nv_bfloat162*>(d + i * LC8 + j0) = __floats2bfloat162_rn(x0, x1);
      };
      put(M1, mv[0] * k0, mv[1] * k1);
      put(M2, mv[0] * qi, mv[1] * qi);
      put(Na, nv[0] * k0, nv[1] * k1);
      put(Nb, nv[0] * ri, nv[1] * ri);
    }
  mn_sums<NC, Var != DELTAC_VARIANT_DELTA>(m0, n0, rg, rb, cg, dG, db);
}

// 16 warps at K = 64 and 128 (at K = 64 against 8: 2.13 -> 1.92 ms,
// docs/performance.md, backward (CUDA) version 13).
constexpr int kGrad16Threads = 512;

// A (chunk slot, q/k head) item of grad16: slot s, head hk, tokens ts ..
// ts + len; it = s H + hk.
struct G16Item {
  int64_t it, s, ts;
  int hk, len;
};

// The first item from it on (step gridDim.x) that has a chunk; false past the last.
__device__ __forceinline__ bool g16_find(const deltac_bwd_params& p, int64_t items, int64_t it,
                                         G16Item& x) {
  for (; it < items; it += gridDim.x) {
    int n;
    x.it = it;
    x.s = it / p.H;
    x.hk = int(it % p.H);
    if (locate(p, x.s, n, x.ts, x.len))
      return true;
  }
  return false;
}

// Persistent: one block a multiprocessor takes items blockIdx.x, +
// gridDim.x, ... While one value head's products after its V steps run,
// the next head's (or the next item's first head's) first two V steps and
// β, g are in flight; the next item's q, k rows are issued after this
// item's last reads of them and land during its V steps.
template <deltac_variant Var, int K>
__global__ void __launch_bounds__(kGrad16Threads) grad16_kernel(const __grid_constant__ Ws w) {
  constexpr int GT = kGrad16Threads, GW = GT / 32;
  constexpr int NC = GW > 8 ? 2 : 4, NK = (C / 16) * (K / 32) >= GW ? 4 : 2;
  using L = Grad16Smem<K>;
  constexpr int BV = L::BV, LB = L::LB, LK = L::LK, LF = L::LF, LC8 = L::LC8;
  extern __shared__ __align__(16) unsigned char sg[];
  const deltac_bwd_params& p = w.p;
  const int R = p.HV / p.H, tid = threadIdx.x;
  const int64_t items = w.slots * p.H;
  G16Item cur;
  if (!g16_find(p, items, blockIdx.x, cur))
    return;
  __shared__ G16Item nxt;  // the block's next item (it < 0: none), set by thread 0
  b16 *kb = reinterpret_cast<b16*>(sg + L::kb), *qb = reinterpret_cast<b16*>(sg + L::qb);
  float *dQ = reinterpret_cast<float*>(sg + L::dQ), *dK = reinterpret_cast<float*>(sg + L::dK);
  b16* M1 = reinterpret_cast<b16*>(sg + L::uni);
  b16 *M2 = M1 + C * LC8, *Na = M2 + C * LC8, *Nb = Na + C * LC8;
  float* vf = reinterpret_cast<float*>(sg + L::vec);
  float* b = vf;
  double* G = reinterpret_cast<double*>(vf + C);
  float *Gx = vf + 3 * C, *Ex = vf + 4 * C, *db = vf + 5 * C, *qd = vf + 6 * C;
  float *dG = vf + 7 * C, *tt = vf + 8 * C, *rk = vf + 9 * C, *rq = vf + 10 * C;
  float *kc2 = vf + 11 * C, *rdv = vf + 12 * C, *clamped = vf + 13 * C, *kd = vf + 14 * C;
  float* misc = vf + 15 * C;  // [0]: Σ h ∘ dh
  // Set i of a V step's tiles: H, DH, U, DR, DO, V (element offsets below).
  constexpr int oDH = BV * LK, oU = 2 * BV * LK, oDR = oU + BV * LC8, oDO = oDR + BV * LC8;
  constexpr int oV = oDO + C * LB;
  auto set = [&](int i) { return reinterpret_cast<b16*>(sg + L::sets + i * L::set); };
  // Item x's value head hk R + jr, V step at v0 into set i by cp.async, 16
  // bytes a copy (rows of dO, v past the sequence zero-filled).
  auto issue = [&](const G16Item& x, int jr, int v0, int i) {
    using namespace deltac::cuda::detail;
    const int j = x.hk * R + jr;
    const int64_t slot = x.s * p.HV + j;
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
      const int64_t o = ((x.ts + r) * p.HV + j) * p.V + v0 + c;
      const bool in = r < x.len;
      cp_async16_zfill(d + oDO + r * LB + c, static_cast<const b16*>(p.dout) + (in ? o : 0), in);
      cp_async16_zfill(d + oV + r * LB + c, static_cast<const b16*>(p.v) + (in ? o : 0), in);
    });
    cp_async_commit();
  };
  auto issue_first = [&](const G16Item& x, int jr) {  // the head's first two V steps
    issue(x, jr, 0, 0);
    if (BV < p.V)
      issue(x, jr, BV, 1);
  };
  // Item x's raw q, k rows into qb, kb by cp.async (rows past the sequence
  // zero-filled), and its rows' 1/|x| (1 without the L2 norm, 0 past the
  // sequence) into the registers nrk, nrq (thread r < C: row r).
  float nrk = 0.f, nrq = 0.f;
  auto issue_qk = [&](const G16Item& x) {
    using namespace deltac::cuda::detail;
    spread<C * (K / 8), GT>([&](int e) {
      const int r = e / (K / 8), c = (e % (K / 8)) * 8;
      const int64_t o = ((x.ts + r) * p.H + x.hk) * K + c;
      const bool in = r < x.len;
      cp_async16_zfill(kb + r * LK + c, static_cast<const b16*>(p.k) + (in ? o : 0), in);
      cp_async16_zfill(qb + r * LK + c, static_cast<const b16*>(p.q) + (in ? o : 0), in);
    });
    cp_async_commit();
    if (tid < C) {
      const bool in = tid < x.len;
      const int64_t ri = (x.ts + tid) * p.H + x.hk;
      nrk = in ? (w.rk ? w.rk[ri] : 1.f) : 0.f;
      nrq = in ? (w.rq ? w.rq[ri] : 1.f) : 0.f;
    }
  };
  Bg bg;
  issue_first(cur, 0);
  issue_qk(cur);
  bg.fetch<Var>(p, cur.ts, cur.len, cur.hk * R);
#pragma unroll 1
  for (;;) {
    if (tid == 0 && !g16_find(p, items, cur.it + gridDim.x, nxt))  // (read after barriers)
      nxt.it = -1;
    const int64_t ts = cur.ts;
    const int hk = cur.hk, len = cur.len;
    if (tid < C) {  // (read after bg.put's barriers)
      rk[tid] = nrk;
      rq[tid] = nrq;
    }
    // The value heads sharing q/k head hk, in turn (the sums of dq^, dk^: each
    // element by the same thread, no race).
    for (int jr = 0; jr < R; ++jr) {
      const int j = hk * R + jr;
      if (jr > 0)
        __syncthreads();  // the previous head's last reads of shared memory
      if (tid < C) {
        kc2[tid] = qd[tid] = kd[tid] = 0.f;
        clamped[tid] = bg.low;
      }
      if (tid < 4)
        misc[tid] = 0.f;
      bg.put<Var>(b, G, Gx, Ex);  // (barriers)
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
        if (v0 + BV < p.V)
          deltac::cuda::detail::cp_async_wait<1>();  // the next step's may fly on
        else
          deltac::cuda::detail::cp_async_wait_all();
        __syncthreads();  // set i landed
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
        if (v0 + 2 * BV < p.V) {
          __syncthreads();  // every warp's reads of set i are done
          issue(cur, jr, v0 + 2 * BV, i);
        }
      }
      __syncthreads();  // the last step's tiles are read (and q, k landed)
      // The next head's first V steps and β, g fly during this head's products.
      if (jr + 1 < R) {
        issue_first(cur, jr + 1);
        bg.fetch<Var>(p, ts, len, j + 1);
      } else if (nxt.it >= 0) {
        issue_first(nxt, 0);
        bg.fetch<Var>(p, nxt.ts, nxt.len, nxt.hk * R);
      }
      // dQ = dO hᵀ, dK = -βΓ dr hᵀ + e u dhᵀ; and the rows' k·(dr hᵀ) (= Σ dr
      // ∘ (K h) over V, for dβ, dG), q·dQ and k·dK (raw rows) into kc2, qd, kd
      {
        float kr[2] = {0.f, 0.f}, qr[2] = {0.f, 0.f}, kk[2] = {0.f, 0.f};
        each<NK>(km0, kn0, [&](int r, int c, int x, int e) {
          const float dk = -b[r] * Gx[r] * c2[x][e] + Ex[r] * c3[x][e];
          const float kv = __bfloat162float(kb[r * LK + c]);
          dQ[r * LF + c] = a[x][e];
          dK[r * LF + c] = dk;
          kr[e >> 1] += kv * c2[x][e];
          kk[e >> 1] += kv * dk;
          qr[e >> 1] += __bfloat162float(qb[r * LK + c]) * a[x][e];
        });
        const int g = (tid & 31) >> 2;
#pragma unroll
        for (int h = 0; h < 2; ++h) {  // over the row's 4 lanes, then one atomic each
#pragma unroll
          for (int o = 1; o < 4; o <<= 1) {
            kr[h] += __shfl_xor_sync(0xffffffffu, kr[h], o);
            kk[h] += __shfl_xor_sync(0xffffffffu, kk[h], o);
            qr[h] += __shfl_xor_sync(0xffffffffu, qr[h], o);
          }
          if ((tid & 3) == 0) {
            atomicAdd(kc2 + km0 + g + 8 * h, kr[h]);
            atomicAdd(kd + km0 + g + 8 * h, kk[h]);
            atomicAdd(qd + km0 + g + 8 * h, qr[h]);
          }
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
      // Row terms (as grad_kernel): dβ = Σ dr ∘ (v - Γ K^ h) (+ N's terms
      // below); with dGd = -β Σ dr ∘ Γ K^ h, dG_i = scale Γ q^·dQ + dGd and
      // t_i = k^·dK - dGd
      if (tid < C) {
        const float y = Gx[tid] * rk[tid] * kc2[tid], dgd = -b[tid] * y;
        db[tid] = rdv[tid] - y;
        dG[tid] = w.scale * Gx[tid] * rq[tid] * qd[tid] + dgd;
        tt[tid] = tid < len ? rk[tid] * kd[tid] - dgd : 0.f;
      }
      __syncthreads();
      // M = dAqk ∘ scale e^(G_i - G_j) (lower), N = dA ∘ β_i e^(G_i - G_j)
      // (strictly lower), dAqk = dO uᵀ and dA = -dr uᵀ from the warp's sums
      // (the V steps' unit), with their dG, dβ terms (as grad_kernel); M and N
      // go out as the bf16 operands of the last products.
      {
        float pq[NC][4], pk[NC][4];
        zero<NC>(pq);
        zero<NC>(pk);
        if constexpr (Var != DELTAC_VARIANT_DELTA)  // (dG terms only)
          mmb<false, false, NC>(pq, sqb, LK, skb, LK, cm0, cn0, K);
        mmb<false, false, NC>(pk, skb, LK, skb, LK, cm0, cn0, K);
        mn16<Var, NC>(cm0, cn0, aq, ad, pq, pk, G, b, rq, rk, w.scale, dG, db, M1, M2, Na, Nb);
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
        // the L2 norm's backward below.
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
    if (nxt.it < 0)
      break;
    cur = nxt;        // (thread 0 sets nxt again after this barrier)
    __syncthreads();  // this item's last reads of q, k, 1/|x|, dQ, dK
    issue_qk(cur);
  }  // items
}

}  // namespace deltac::cuda::bwdc

#endif  // DELTAC_CUDA_BACKWARD_GRAD_BF16_CUH

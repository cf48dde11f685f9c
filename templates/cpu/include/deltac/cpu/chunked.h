// Chunked (WY/UT) kernel. Per chunk of C tokens (zero-padded at the end of a
// sequence: padded tokens have k = v = q = 0, beta = 0, g = 0, so they leave
// the state alone), with state S at the chunk start and cumulative log-decay
// G_i = sum_{t<=i} g_t inside the chunk (per key channel for kda):
//   A_ij = beta_i k_i^T diag(e^(G_i - G_j)) k_j   (j < i)
//   P_ij = q_i^T diag(e^(G_i - G_j)) k_j           (j <= i)
//   U = (I + A)^-1 diag(beta) (V - Kd S)           Kd_i = e^(G_i) (.) k_i
//   O = scale (Qd S + P U)                         Qd_i = e^(G_i) (.) q_i
//   S <- e^(G_last) (.) S + Kr^T U                 Kr_j = e^(G_last - G_j) (.) k_j
// Every exp() argument is <= 0 except in the kda diagonal blocks, where a
// reference row inside the block is used only when the block's total decay
// is at most e^-60 (else those entries are computed directly).
// G is accumulated in double so that differences of large sums stay exact.
// Gates below kGateFloor (-inf included: a reset, params.h) enter G as
// kGateFloor: e^g is 0 for both in float and in double, so every decay
// across such a gate is still exactly 0, while G stays finite and
// G_i - G_j never becomes (-inf) - (-inf) = NaN. A NaN gate stays NaN in G
// and in every exp() of it (simd::exp keeps NaN), so it reaches the outputs.
#ifndef DELTAC_CPU_CHUNKED_H
#define DELTAC_CPU_CHUNKED_H

#include "deltac/cpu/common.h"
#include "deltac/cpu/gemm.h"

#include <algorithm>

#if DELTAC_CPU_AVX
#include <immintrin.h>
#endif

namespace deltac::cpu { inline namespace DELTAC_CPU_NS {
namespace detail {

constexpr int kSub = 16;           // kda sub-block rows
constexpr double kMaxSpan = 60.0;  // largest e^+x used in kda diagonal blocks
// Smallest gate entering the cumulative sums (see the top). A power of two:
// sums of a chunk's floored gates stay exact in double.
constexpr float kGateFloor = -1024.0f;

// g, or kGateFloor for g < kGateFloor (-inf included); NaN stays NaN.
inline float floor_gate(float g) { return g < kGateFloor ? kGateFloor : g; }

// One token's cumulative gates: g[c] = gp[c] (0 for a null gp) +
// floor_gate(gs[c]), c < n. Explicitly vectorized: GCC does not if-convert
// the scalar floor (a float compare may trap), and kda has K gates a token.
inline void add_gates(double* g, const double* gp, const float* gs, int n) {
  int c = 0;
#if DELTAC_CPU_AVX
  const __m256 lo = _mm256_set1_ps(kGateFloor);
  for (; c + 8 <= n; c += 8) {
    // max(lo, x) is x when x is NaN (maxps returns its second operand).
    const __m256 x = _mm256_max_ps(lo, _mm256_loadu_ps(gs + c));
    __m256d a = _mm256_cvtps_pd(_mm256_castps256_ps128(x));
    __m256d b = _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1));
    if (gp) {
      a = _mm256_add_pd(a, _mm256_loadu_pd(gp + c));
      b = _mm256_add_pd(b, _mm256_loadu_pd(gp + c + 4));
    }
    _mm256_storeu_pd(g + c, a);
    _mm256_storeu_pd(g + c + 4, b);
  }
#endif
  for (; c < n; ++c) g[c] = (gp ? gp[c] : 0.0) + double(floor_gate(gs[c]));
}

// out[j] = exp(x[j]) for j < n (n a multiple of 8).
inline void exp_row(float* out, const float* x, int n) {
  for (int j = 0; j < n; j += simd::W)
    simd::store(out + j, simd::exp(simd::load(x + j)));
}

// dst[k] = src[k] * exp(float(ga[k] - gb[k])), k < K (K a multiple of 8).
inline void scale_exp_diff(float* dst, const float* src, const double* ga,
                           const double* gb, int K, float* tmp) {
  for (int k = 0; k < K; ++k) tmp[k] = float(ga[k] - gb[k]);
  for (int k = 0; k < K; k += simd::W)
    simd::store(dst + k, simd::load(src + k) * simd::exp(simd::load(tmp + k)));
}

// T = (I + A)^-1 for strictly lower triangular A [C][C] (T lower, unit
// diagonal): row i of T = e_i - sum_{m<i} A_im T_m, accumulated in registers.
// Two sets of sums (even and odd m) where registers allow: the chain of
// fmas, not their rate, bounds a row.
template <int C>
inline void unit_lower_inverse(float* T, const float* A) {
  using namespace simd;
  constexpr int NV = C / W, NS = NV <= 4 ? 2 : 1;
  for (int i = 0; i < C; ++i) {
    vf acc[NV], acc2[NV];
    for (int c = 0; c < NV; ++c) acc[c] = acc2[c] = zero();
    int m = 0;
    if (NS == 2)
      for (; m + 1 < i; m += 2) {
        const vf a0 = set1(-A[i * C + m]), a1 = set1(-A[i * C + m + 1]);
        const float* t0 = T + m * C;
#pragma GCC unroll 8
        for (int c = 0; c < NV; ++c) {
          acc[c] = fma(a0, load(t0 + c * W), acc[c]);
          acc2[c] = fma(a1, load(t0 + C + c * W), acc2[c]);
        }
      }
    for (; m < i; ++m) {
      const vf av = set1(-A[i * C + m]);
      const float* tm = T + m * C;
#pragma GCC unroll 8
      for (int c = 0; c < NV; ++c) acc[c] = fma(av, load(tm + c * W), acc[c]);
    }
    if (NS == 2)
      for (int c = 0; c < NV; ++c) acc[c] = acc[c] + acc2[c];
    acc[i / W][i % W] = 1.0f;
    for (int c = 0; c < NV; ++c) store(T + i * C + c * W, acc[c]);
  }
}

// kda, one chunk: A, P, the decayed rows KQd (e^(G_i) (.) k_i, then q) and
// Kr^T [K][C] (column j: e^(G_last - G_j) (.) k_j, in Rt), e^(G_last) in dl.
// Sub-block I (rows i0..i0+15) uses reference row i0:
//   A_ij = (k_i e^(G_i - G_i0)) . (k_j e^(G_i0 - G_j)),
// both factors <= 1 for j < i0; diagonal blocks use the same product only
// when the block's decay span is <= kMaxSpan, else a direct sum. Rt holds the
// right factors as columns; moving the reference from i0 to i0 + 16
// multiplies the old columns by e^(G_i0+16 - G_i0) <= 1 instead of
// recomputing their exps.
template <int C>
inline void kda_chunk(float* A, float* P, const float* KQ, float* KQd,
                      const double* G, const float* beta, int K, float* Lt,
                      float* Rt, float* blk, float* tmp, float* dl) {
  using namespace simd;
  float* ef = tmp + K;      // [K] factor
  vi lane;                  // 0, 1, .., W - 1
  for (int l = 0; l < W; ++l) lane[l] = l;
  float* row = tmp + 2 * K;  // [K]
  int have = 0, ref = 0;    // Rt columns [0, have) relative to row ref
  auto rebase = [&](const double* gnew) {  // Rt columns to a new reference
    if (have == 0)
      return;
    for (int k = 0; k < K; ++k) tmp[k] = float(gnew[k] - G[size_t(ref) * K + k]);
    exp_row(ef, tmp, K);
    for (int k = 0; k < K; ++k) {
      float* r = Rt + size_t(k) * C;
      const float f = ef[k];
      for (int j = 0; j < have; ++j) r[j] *= f;
    }
  };
  auto fresh = [&](const double* gref, int jend) {  // columns [have, jend)
    for (int j = have; j < jend; ++j) {
      scale_exp_diff(row, KQ + size_t(j) * K, gref, G + size_t(j) * K, K, tmp);
      for (int k = 0; k < K; ++k) Rt[size_t(k) * C + j] = row[k];
    }
    if (jend > have)
      have = jend;
  };
  for (int I = 0; I < C / kSub; ++I) {
    const int i0 = I * kSub;
    const double* gr = G + size_t(i0) * K;
    // Left factors, and KQd = left rows * e^(G_i0).
    for (int k = 0; k < K; ++k) tmp[k] = float(gr[k]);
    exp_row(row, tmp, K);
    for (int r = 0; r < kSub; ++r) {
      const int i = i0 + r;
      const double* gi = G + size_t(i) * K;
      for (int k = 0; k < K; ++k) tmp[k] = float(gi[k] - gr[k]);
      exp_row(ef, tmp, K);
      const float* ki = KQ + size_t(i) * K;
      const float* qi = KQ + size_t(C + i) * K;
      float* lk = Lt + size_t(r) * K;
      float* lq = Lt + size_t(kSub + r) * K;
      for (int k = 0; k < K; k += W) {
        const vf e = load(ef + k), e0 = load(row + k);
        const vf xk = load(ki + k) * e, xq = load(qi + k) * e;
        store(lk + k, xk);
        store(lq + k, xq);
        store(KQd + size_t(i) * K + k, xk * e0);
        store(KQd + size_t(C + i) * K + k, xq * e0);
      }
    }
    // The block's decay span: four running maxima (one chain bound the loop).
    double sp[4] = {0.0, 0.0, 0.0, 0.0};
    const double* gl = G + size_t(i0 + kSub - 1) * K;
    for (int k = 0; k < K; k += 4)
      for (int u = 0; u < 4; ++u) sp[u] = std::max(sp[u], std::fabs(gr[k + u] - gl[k + u]));
    const double span = std::max(std::max(sp[0], sp[1]), std::max(sp[2], sp[3]));
    const bool factor_diag = span <= kMaxSpan;
    const int ncols = factor_diag ? i0 + kSub : i0;
    rebase(gr);
    ref = i0;
    fresh(gr, ncols);
    if (ncols)
      gemm<false>(2 * kSub, ncols, K, Lt, K, 1, Rt, C, blk, C);
    if (!factor_diag) {
      // Direct: sum_k x_i[k] k_j[k] e^(G_i[k] - G_j[k]) for i0 <= j <= i.
      for (int r = 0; r < kSub; ++r) {
        const int i = i0 + r;
        const float* ki = KQ + size_t(i) * K;
        const float* qi = KQ + size_t(C + i) * K;
        for (int j = i0; j <= i; ++j) {
          scale_exp_diff(row, KQ + size_t(j) * K, G + size_t(i) * K,
                         G + size_t(j) * K, K, tmp);
          double sk = 0.0, sq = 0.0;
          for (int k = 0; k < K; ++k) {
            sk += ki[k] * row[k];
            sq += qi[k] * row[k];
          }
          blk[r * C + j] = float(sk);
          blk[(kSub + r) * C + j] = float(sq);
        }
      }
    }
    for (int r = 0; r < kSub; ++r) {  // A strictly lower times beta, P lower
      const int i = i0 + r;
      const vf bi = set1(beta[i]);
      for (int j = 0; j < C; j += W) {
        const vi col = lane + j;
        store(A + i * C + j, col < i ? bi * load(blk + r * C + j) : zero());
        store(P + i * C + j, col <= i ? load(blk + (kSub + r) * C + j) : zero());
      }
    }
  }
  // Kr^T: reference G_last for every column.
  const double* glast = G + size_t(C - 1) * K;
  rebase(glast);
  ref = C - 1;
  fresh(glast, C);
  for (int k = 0; k < K; ++k) tmp[k] = float(glast[k]);
  exp_row(dl, tmp, K);
}

template <deltac_variant Var, int C, int KC, int VC>
void chunked_impl(const deltac_fwd_params& p) {
  static_assert(C == 16 || C == 32 || C == 64, "chunk must be 16, 32 or 64");
  const int K = KC ? KC : p.K, V = VC ? VC : p.V;
  const int group = p.HV / p.H;
  const float scale = kernel_scale(p, K);
  constexpr bool kda = Var == DELTAC_VARIANT_KDA;
  constexpr bool gated = Var == DELTAC_VARIANT_GATED;
  const int GK = kda ? K : 1;  // gate values per token

  const size_t nS = pad16(size_t(K) * V), nKQ = pad16(2 * C * size_t(K)),
               nKt = pad16(size_t(K) * C), nV = pad16(size_t(C) * V),
               nG = pad16(2 * size_t(C) * GK), nCC = pad16(C * C),
               nL = pad16(2 * kSub * size_t(K)), nB = pad16(2 * kSub * C),
               nT = pad16(4 * size_t(K > C ? K : C) + 16), nC = pad16(C);
  const int hpg = heads_per_group(p);
  const size_t total = hpg * nS + 2 * nKQ + 2 * nKt + 3 * nV + nG + 3 * nCC +
                       nB + nL + nT + 4 * nC + pad16(K);

  for_each_head_group(p, [&](int n, int j0, int j1) {
    float* Sg = scratch(total);  // [j1 - j0] states [K][V]
    float* KQ = Sg + hpg * nS;  // [2C][K]: k rows, then q rows
    float* KQd = KQ + nKQ;    // kda: e^(G_i) (.) rows of KQ
    float* Kt = KQd + nKQ;    // [K][C]: K^T (delta, gated)
    float* Rt = Kt + nKt;     // [K][C]: kda right factors, then Kr^T
    float* R = Rt + nKt;      // [C][V]: v, then R = diag(beta) (V - Kd S)
    float* O = R + nV;        // [C][V]: Qd S, then O / scale
    float* U = O + nV;        // [C][V]
    double* G = reinterpret_cast<double*>(U + nV);  // [C][GK]
    float* A = U + nV + nG;   // [C][C]
    float* P = A + nCC;       // [C][C], directly after A: AP = [2C][C]
    float* Ti = P + nCC;      // [C][C]
    float* blk = Ti + nCC;    // [2*kSub][C] (kda)
    float* Lt = blk + nB;     // [2*kSub][K] (kda)
    float* tmp = Lt + nL;     // 4 max(K, C) floats
    float* bt = tmp + nT;     // beta [C]
    float* nb = bt + nC;      // -beta e^(G_i) [C]
    float* eg = nb + nC;      // e^(G_i) [C] (gated)
    float* dr = eg + nC;      // e^(G_last - G_i) [C] (gated)
    float* dl = dr + nC;      // e^(G_last) per key channel [K]

    int64_t t0, t1;
    seq_range(p, n, &t0, &t1);
    const size_t hsize = size_t(K) * V;
    for (int j = j0; j < j1; ++j) {
      const size_t sofs = (size_t(n) * p.HV + j) * hsize;
      load_state(Sg + (j - j0) * nS, V,
                 p.h0 ? static_cast<const float*>(p.h0) + sofs : nullptr,
                 p.state_layout, K, V);
    }
    for (int64_t t = t0; t < t0 + C && t < t1; ++t)
      prefetch_token(p, t, j0, j0 / group, K, V);

    for (int64_t c0 = t0; c0 < t1; c0 += C)
    for (int j = j0; j < j1; ++j) {
      float* S = Sg + (j - j0) * nS;
      const int hk = j / group;
      const int nc = int(t1 - c0 < C ? t1 - c0 : C);
      // Touch the rows of the next (chunk, head) in portions between the
      // phases (see prefetch()), so that its load phase finds them cached.
      const int jn = j + 1 < j1 ? j + 1 : j0;
      const int64_t cn = j + 1 < j1 ? c0 : c0 + C;
      int64_t pf = cn;
      const int64_t pf_end = cn + C < t1 ? cn + C : t1;
      auto prefetch_some = [&](int count) {
        for (int c = 0; c < count && pf < pf_end; ++c, ++pf)
          prefetch_token(p, pf, jn, jn / group, K, V);
      };
      // Load the chunk (zero-padded).
      for (int i = 0; i < C; ++i) {
        float* k = KQ + size_t(i) * K;
        float* q = KQ + size_t(C + i) * K;
        float* v = R + size_t(i) * V;
        double* g = G + size_t(i) * GK;
        const double* gp = i ? g - GK : nullptr;
        if (i < nc) {
          const int64_t tok = c0 + i;
          const int64_t qo = (tok * p.H + hk) * K, th = tok * p.HV + j;
          load_qk(q, k, p, qo, K);
          load_row(v, p.v, p.in_dtype, th * V, V);
          bt[i] = p.beta[th];
          if (Var != DELTAC_VARIANT_DELTA) {
            add_gates(g, gp, p.g + th * GK, GK);
          }
        } else {
          std::memset(k, 0, sizeof(float) * K);
          std::memset(q, 0, sizeof(float) * K);
          std::memset(v, 0, sizeof(float) * V);
          bt[i] = 0.0f;
          if (Var != DELTAC_VARIANT_DELTA)
            for (int c = 0; c < GK; ++c) g[c] = gp ? gp[c] : 0.0;
        }
      }
      const double* glast = G + size_t(C - 1) * GK;
      if (gated) {
        for (int i = 0; i < C; ++i) {
          tmp[i] = float(G[i]);
          tmp[C + i] = float(glast[0] - G[i]);
        }
        exp_row(eg, tmp, C);
        exp_row(dr, tmp + C, C);
        for (int k = 0; k < K; ++k) dl[k] = eg[C - 1];
      }
      for (int i = 0; i < C; ++i) nb[i] = -bt[i] * (gated ? eg[i] : 1.0f);

      // A (strictly lower) and P (lower).
      if (kda) {
        kda_chunk<C>(A, P, KQ, KQd, G, bt, K, Lt, Rt, blk, tmp, dl);
      } else {
        transpose8(Kt, KQ, C, K);
        gemm_lower_out(C, C, K, KQ, K, 1, Kt, C, A, C);
        gemm_lower_out(C, C, K, KQ + size_t(C) * K, K, 1, Kt, C, P, C);
        for (int i = 0; i < C; ++i) {
          float* gam = tmp;
          if (gated) {
            for (int jj = 0; jj < C; ++jj)
              tmp[C + jj] = jj <= i ? float(G[i] - G[jj]) : 0.0f;
            exp_row(gam, tmp + C, C);
          }
          for (int jj = 0; jj < C; ++jj) {
            const float d = gated ? gam[jj] : 1.0f;
            A[i * C + jj] = jj < i ? bt[i] * d * A[i * C + jj] : 0.0f;
            P[i * C + jj] = jj <= i ? d * P[i * C + jj] : 0.0f;
          }
        }
      }
      prefetch_some(C / 4);
      unit_lower_inverse<C>(Ti, A);

      // R = diag(beta) (V - Kd S), O = Qd S (gated: Kd = diag(e^G) K).
      const float* kqd = kda ? KQd : KQ;
      gemm<true>(C, V, K, kqd, K, 1, S, V, R, V, nb, bt);
      gemm<false>(C, V, K, kqd + size_t(C) * K, K, 1, S, V, O, V,
                  gated ? eg : nullptr);
      prefetch_some(C / 4);
      // U = (I + A)^-1 R; O += P U.
      gemm<false, true>(C, V, C, Ti, C, 1, R, V, U, V);
      gemm<true, true>(C, V, C, P, C, 1, U, V, O, V);
      for (int i = 0; i < nc; ++i)
        store_row(p.o, p.out_dtype, ((c0 + i) * p.HV + j) * int64_t(V),
                  O + size_t(i) * V, V, scale);

      prefetch_some(C / 4);
      // S <- e^(G_last) S + Kr^T U.
      const float* kr = kda ? Rt : KQ;  // kda: Kr^T [K][C]
      if (gated) {
        for (int i = 0; i < C; ++i) {
          const simd::vf d = simd::set1(dr[i]);
          float* u = U + size_t(i) * V;
          for (int c = 0; c < V; c += simd::W) simd::store(u + c, simd::load(u + c) * d);
        }
      }
      gemm<true>(K, V, C, kr, kda ? C : 1, kda ? 1 : K, U, V, S, V, nullptr,
                 Var == DELTAC_VARIANT_DELTA ? nullptr : dl);
      prefetch_some(C);
    }
    if (p.ht)
      for (int j = j0; j < j1; ++j)
        store_state(static_cast<float*>(p.ht) + (size_t(n) * p.HV + j) * hsize,
                    p.state_layout, Sg + (j - j0) * nS, V, K, V);
  });
}

}  // namespace detail

// Chunked forward, chunk size Chunk (16, 32 or 64). KC/VC as for recurrent.
template <deltac_variant Var, int Chunk, int KC = 0, int VC = 0>
void chunked(const deltac_fwd_params& p) {
  detail::chunked_impl<Var, Chunk, KC, VC>(p);
}

}}  // namespace deltac::cpu::DELTAC_CPU_NS

#endif  // DELTAC_CPU_CHUNKED_H

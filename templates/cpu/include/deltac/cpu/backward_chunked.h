// The chunked (WY / UT) CPU backward of the delta rule, delta and gated (kda
// keeps the sweep of backward.h). Included by deltac/cpu/backward.h after its
// helpers (load_row, l2norm, finish_qk); not a header of its own.
//
// Per sequence and value head (one OpenMP task), chunks of C tokens (rows i,
// j; the last one may be shorter), h the state at the chunk start [K x V],
// a_t the per-token decay (e^g, 0 for a -inf gate, 1 for delta), and the
// decays as products (no cumulative log sums, so resets and strong decay stay
// finite): D_ij = prod_{j<t<=i} a_t, Γ_i = prod_{t<=i} a_t, e_j = D_{last,j},
// γ = Γ_last:
//   A   = strictly-lower(β_i (k^_i . k^_j) D_ij),  u = (I + A)^-1 x,
//   x   = β r,  r = v - w,  w_i = Γ_i h^T k^_i       (forward, u and r saved)
//   Aqk = scale lower((q^_i . k^_j) D_ij),  O = scale Γ Q^ h + Aqk u,
//   h_end = γ h + (e K^)^T u.
// Backward, dh = dL/dh_end:
//   du = Aqk^T dO + e K^ dh,  dx = T^T du (T = (I + A)^-1),  dv = β dx,  dw = -β dx,
//   dh_start = γ dh + (scale Γ Q^)^T dO + (Γ K^)^T dw,
//   dP = dO u^T (lower), dA = -dx u^T (strictly lower),
//   M = scale D ∘ dP, N = β_i D ∘ dA,
//   dq^ = scale Γ dO h^T + M K^,
//   dk^ = Γ dw h^T + e u dh^T + M^T Q^ + (N + N^T) K^,
//   dβ_i = dx_i . r_i + sum_j dA_ij (k^_i . k^_j) D_ij,
//   gated: dG_i (d/d log of every factor ending at i) collects
//   q^_i . (scale Γ_i h dO_i) + k^_i . (Γ_i h dw_i) + sum_j (dP∘Aqk + dA∘A)_ij
//   - sum_j (dP∘Aqk + dA∘A)_ji - k^_i . (e_i dh u_i), and dG_last also
//   γ (dh . h) + sum_j k^_j . (e_j dh u_j); dg_t = sum_{i>=t} dG_i.
// The K x V products run on the forward's GEMM tiles (f32; double and
// widths that are not multiples of 16: plain loops). Per chunk ~8 products
// of n x K x V against the sweep's ~14 K x V passes per token.
#ifndef DELTAC_CPU_BACKWARD_CHUNKED_H
#define DELTAC_CPU_BACKWARD_CHUNKED_H

namespace deltac::cpu { inline namespace DELTAC_CPU_NS { namespace bwd {

// C[M][N] = os_i (A B)_i (+ cs_i C_i with Acc); A(i, p) = A[i rsa + p csa];
// with Lower, A(i, p) = 0 for p > i (not read).
template <bool Acc, bool Lower = false, class R>
inline void mm(int M, int N, int kd, const R* A, long rsa, long csa, const R* B, long ldb,
               R* C, long ldc, const std::common_type_t<R>* os = nullptr,
               const std::common_type_t<R>* cs = nullptr) {
  if constexpr (std::is_same_v<R, float>) {
    if (N % 16 == 0) {
      detail::gemm<Acc, Lower>(M, N, kd, A, rsa, csa, B, ldb, C, ldc, os, cs);
      return;
    }
  }
  static thread_local std::vector<R> t;  // one row; reused (no allocation per call)
  t.resize(static_cast<size_t>(N));
  for (int i = 0; i < M; ++i) {
    std::fill(t.begin(), t.end(), R(0));
    for (int q = 0; q < (Lower ? std::min(kd, i + 1) : kd); ++q) {
      const R a = A[i * rsa + q * csa];
      const R* b = B + q * ldb;
#pragma omp simd
      for (int j = 0; j < N; ++j) t[j] += a * b[j];
    }
    const R o = os ? os[i] : R(1), s = cs ? cs[i] : R(1);
    R* c = C + i * ldc;
    for (int j = 0; j < N; ++j) c[j] = Acc ? s * c[j] + o * t[j] : o * t[j];
  }
}

// x[0..n) to elements off.. of a tensor of dtype dt (the branch outside the loop).
template <class R>
inline void store_row(void* base, int32_t dt, int64_t off, const R* x, int n) {
  if (dt == DELTAC_BWD_F64) {
    double* y = static_cast<double*>(base) + off;
    for (int i = 0; i < n; ++i) y[i] = double(x[i]);
  } else if (dt == DELTAC_BF16) {
    uint16_t* y = static_cast<uint16_t*>(base) + off;
    for (int i = 0; i < n; ++i) y[i] = deltac::f32_to_bf16(float(x[i]));
  } else {
    float* y = static_cast<float*>(base) + off;
    for (int i = 0; i < n; ++i) y[i] = float(x[i]);
  }
}

template <class R>
struct CWork {
  std::vector<R> hs, us, rs;                 // chunk starts; u, r of every token
  std::vector<R> q, k, kt, dout, dq, dk;     // one chunk's rows (kt: k^ transposed)
  std::vector<R> beta, gam, e, gl;           // per row; gl: γ per key row
  std::vector<R> D, KK, A, T, Aqk, dP, dA, M, N, ut;  // C x C, ut: u^T
  std::vector<R> du, dx, st, sd, ht, dht, qkh, dku;
  std::vector<double> a, Dd;
};

template <deltac_variant Var, class R>
struct CTask {
  const deltac_bwd_params& p;
  int K, V, H, HV, C;
  R scale;
  CWork<R>& wk;
  R* dqn;  // [tokens, HV, K]
  R* dkn;
  int32_t ft;

  // Rows of tokens t .. t + n of value head j: k^ (and q^, dO when all),
  // β, decays, and the decay products of the chunk.
  void load(int64_t t, int n, int j, bool all) {
    const int hk = j / (HV / H);
    for (int i = 0; i < n; ++i) {
      const int64_t tt = t + i, th = tt * HV + j, qo = (tt * H + hk) * K;
      R* k = &wk.k[size_t(i) * K];
      load_row(k, p.k, p.in_dtype, qo, K);
      if (p.qk_l2norm) l2norm(k, K);
      wk.beta[i] = bwd::load<R>(p.beta, ft, th);
      if constexpr (Var == DELTAC_VARIANT_GATED) {
        const double g = double(bwd::load<R>(p.g, ft, th));
        wk.a[i] = g == -INFINITY ? 0.0 : std::exp(g);
      } else {
        wk.a[i] = 1.0;
      }
      if (!all) continue;
      R* q = &wk.q[size_t(i) * K];
      load_row(q, p.q, p.in_dtype, qo, K);
      if (p.qk_l2norm) l2norm(q, K);
      load_row(&wk.dout[size_t(i) * V], p.dout, p.out_dtype, th * V, V);
    }
    // Dd row i: prod_{j<t<=i} a_t (j <= i), in double.
    double* Dd = wk.Dd.data();
    double g = 1.0;
    for (int i = 0; i < n; ++i) {
      g *= wk.a[i];
      wk.gam[i] = R(g);
      for (int j = 0; j < i; ++j) Dd[size_t(i) * C + j] = Dd[size_t(i - 1) * C + j] * wk.a[i];
      Dd[size_t(i) * C + i] = 1.0;
      for (int j = i + 1; j < n; ++j) Dd[size_t(i) * C + j] = 0.0;
    }
    for (int i = 0; i < n; ++i) {
      wk.e[i] = R(Dd[size_t(n - 1) * C + i]);
      for (int j = 0; j < n; ++j) wk.D[size_t(i) * n + j] = R(Dd[size_t(i) * C + j]);
    }
    std::fill(wk.gl.begin(), wk.gl.begin() + K, R(g));
    // kt = K^T [K][n]; A = β_i (k_i . k_j) D_ij (j < i), from K K^T.
    detail::transpose(wk.kt.data(), wk.k.data(), n, K);
    R *A = wk.A.data(), *KK = wk.KK.data();
    mm<false>(n, n, K, wk.k.data(), K, 1, wk.kt.data(), n, KK, n);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) {
        const size_t o = size_t(i) * n + j;
        A[o] = j < i ? wk.beta[i] * KK[o] * wk.D[o] : R(0);
      }
    // T = (I + A)^-1, unit lower: row i = e_i - sum_{m<i} A_im T_m.
    R* T = wk.T.data();
    for (int i = 0; i < n; ++i) {
      R* ti = T + size_t(i) * n;
      std::fill(ti, ti + n, R(0));
      for (int m = 0; m < i; ++m) {
        const R am = A[size_t(i) * n + m];
        const R* tm = T + size_t(m) * n;
#pragma omp simd
        for (int c = 0; c <= m; ++c) ti[c] -= am * tm[c];
      }
      ti[i] = R(1);
    }
  }

  void run(int sq, int j) {
    const int64_t t0 = p.cu_seqlens ? p.cu_seqlens[sq] : int64_t(sq) * p.T;
    const int64_t t1 = p.cu_seqlens ? p.cu_seqlens[sq + 1] : int64_t(sq + 1) * p.T;
    const int64_t L = t1 - t0, nc = (L + C - 1) / C;
    const size_t kv = size_t(K) * V;
    const bool vk = p.state_layout == DELTAC_STATE_VK;
    const size_t sbase = (size_t(sq) * HV + j) * kv;
    auto sidx = [&](int c, int e) { return sbase + (vk ? size_t(e) * K + c : size_t(c) * V + e); };
    const size_t CK = size_t(C) * K, CV = size_t(C) * V, CC = size_t(C) * C;
    grow(wk.hs, size_t(std::max<int64_t>(nc, 1)) * kv);
    grow(wk.us, size_t(L) * V);
    grow(wk.rs, size_t(L) * V);
    for (auto* x : {&wk.q, &wk.k, &wk.kt, &wk.dq, &wk.dk}) grow(*x, CK);
    grow(wk.qkh, 2 * CK);
    grow(wk.dku, CK);
    grow(wk.st, 2 * CK);
    for (auto* x : {&wk.dout, &wk.du, &wk.dx}) grow(*x, CV);
    grow(wk.sd, 2 * CV);
    for (auto* x : {&wk.beta, &wk.gam, &wk.e}) grow(*x, size_t(C));
    grow(wk.gl, size_t(K));
    for (auto* x : {&wk.D, &wk.KK, &wk.A, &wk.T, &wk.Aqk, &wk.dP, &wk.dA, &wk.M, &wk.N}) grow(*x, CC);
    grow(wk.ut, CV);
    grow(wk.ht, kv);
    grow(wk.dht, kv);
    if (wk.a.size() < size_t(C)) wk.a.resize(C);
    if (wk.Dd.size() < CC) wk.Dd.resize(CC);

    // 1. Forward: chunk starts, u and r of every token.
    R* h = wk.hs.data();
    for (int c = 0; c < K; ++c)
      for (int e = 0; e < V; ++e) h[size_t(c) * V + e] = p.h0 ? bwd::load<R>(p.h0, ft, sidx(c, e)) : R(0);
    std::vector<R>& xv = wk.du;  // scratch: w = Γ K^ h
    for (int64_t ci = 0; ci < nc; ++ci) {
      const int64_t ts = t0 + ci * C;
      const int n = int(std::min<int64_t>(C, t1 - ts));
      load(ts, n, j, false);
      const R* hc = &wk.hs[size_t(ci) * kv];
      R* u = &wk.us[size_t(ci * C) * V];
      R* r = &wk.rs[size_t(ci * C) * V];
      mm<false>(n, V, K, wk.k.data(), K, 1, hc, V, xv.data(), V, wk.gam.data());
      for (int i = 0; i < n; ++i) {
        const R b = wk.beta[i];
        R* w = &xv[size_t(i) * V];  // w_i, then x_i = β_i r_i
        const int64_t th = (ts + i) * HV + j;
        R* ri = r + size_t(i) * V;
        load_row(ri, p.v, p.in_dtype, th * V, V);
        for (int e = 0; e < V; ++e) {
          ri[e] -= w[e];
          w[e] = b * ri[e];
        }
      }
      mm<false, true>(n, V, n, wk.T.data(), n, 1, xv.data(), V, u, V);  // u = T x
      if (ci == nc - 1) break;  // the last chunk's end state is not needed
      R* hn = &wk.hs[size_t(ci + 1) * kv];
      std::memcpy(hn, hc, kv * sizeof(R));
      // h_end = γ h + (e K^)^T u: A(c, i) = e_i k_i[c] (st = e K^).
      R* st = wk.st.data();
      for (int i = 0; i < n; ++i)
        for (int c = 0; c < K; ++c) st[size_t(i) * K + c] = wk.e[i] * wk.k[size_t(i) * K + c];
      mm<true>(K, V, n, st, 1, K, u, V, hn, V, nullptr, wk.gl.data());
    }

    // 2. Chunks in reverse; dh = dL/d(state at the chunk end).
    std::vector<R> dhv(kv);
    R* dh = dhv.data();
    for (int c = 0; c < K; ++c)
      for (int e = 0; e < V; ++e) dh[size_t(c) * V + e] = p.dht ? bwd::load<R>(p.dht, ft, sidx(c, e)) : R(0);
    for (int64_t ci = nc - 1; ci >= 0; --ci) {
      const int64_t ts = t0 + ci * C;
      const int n = int(std::min<int64_t>(C, t1 - ts));
      load(ts, n, j, true);
      chunk_backward(ts, n, j, &wk.hs[size_t(ci) * kv], &wk.us[size_t(ci * C) * V],
                     &wk.rs[size_t(ci * C) * V], dh);
    }
    if (p.dh0)
      for (int c = 0; c < K; ++c)
        for (int e = 0; e < V; ++e) store<R>(p.dh0, ft, sidx(c, e), dh[size_t(c) * V + e]);
  }

  // One chunk (rows loaded): its gradients, and dh from its end to its start.
  void chunk_backward(int64_t ts, int n, int j, const R* h, const R* u, const R* r, R* dh) {
    const R *q = wk.q.data(), *k = wk.k.data(), *dO = wk.dout.data();
    const R *D = wk.D.data(), *A = wk.A.data();
    R *Aqk = wk.Aqk.data(), *dP = wk.dP.data(), *dA = wk.dA.data(), *M = wk.M.data(),
      *N = wk.N.data(), *ut = wk.ut.data(), *du = wk.du.data(), *dx = wk.dx.data();
    // Aqk = scale (q . k) D (j <= i); dP = dO u^T.
    mm<false>(n, n, K, q, K, 1, wk.kt.data(), n, Aqk, n);
    detail::transpose(ut, u, n, V);
    mm<false>(n, n, V, dO, V, 1, ut, n, dP, n);
    for (int i = 0; i < n; ++i)
      for (int m = 0; m < n; ++m) {
        const size_t o = size_t(i) * n + m;
        Aqk[o] = m <= i ? scale * Aqk[o] * D[o] : R(0);
        dP[o] = m <= i ? dP[o] : R(0);
        M[o] = scale * D[o] * dP[o];
      }
    // du = e K^ dh + Aqk^T dO; dx = T^T du.
    mm<false>(n, V, K, k, K, 1, dh, V, du, V, wk.e.data());
    mm<true>(n, V, n, Aqk, 1, n, dO, V, du, V);
    mm<false>(n, V, n, wk.T.data(), 1, n, du, V, dx, V);
    // dA = -dx u^T (strictly lower); N = β_i D dA.
    mm<false>(n, n, V, dx, V, 1, ut, n, dA, n);
    for (int i = 0; i < n; ++i)
      for (int m = 0; m < n; ++m) {
        const size_t o = size_t(i) * n + m;
        dA[o] = m < i ? -dA[o] : R(0);
        N[o] = wk.beta[i] * D[o] * dA[o];
      }
    // dv, dβ; sd = [scale Γ dO; Γ dw] (dw = -β dx), st = [scale Γ Q^; Γ K^].
    R *sd = wk.sd.data(), *st = wk.st.data();
    const size_t nV = size_t(n) * V, nK = size_t(n) * K;
    R* dbeta_row = wk.dq.data();  // scratch: dβ per row until dq is formed
    for (int i = 0; i < n; ++i) {
      const int64_t th = (ts + i) * HV + j;
      const R b = wk.beta[i], g = wk.gam[i], sg = scale * g, bg = -b * g;
      const R *xi = dx + size_t(i) * V, *ri = r + size_t(i) * V, *di = dO + size_t(i) * V;
      R *s0 = sd + size_t(i) * V, *s1 = sd + nV + size_t(i) * V, *vi = wk.ut.data();
      R db = 0;
#pragma omp simd reduction(+ : db)
      for (int e = 0; e < V; ++e) {
        db += xi[e] * ri[e];
        vi[e] = b * xi[e];
        s0[e] = sg * di[e];
        s1[e] = bg * xi[e];
      }
      store_row(p.dv, p.in_dtype, th * V, vi, V);  // ut: scratch (u^T is used up)
      dbeta_row[i] = db;
      const R *qi = q + size_t(i) * K, *ki = k + size_t(i) * K;
      R *t0 = st + size_t(i) * K, *t1 = st + nK + size_t(i) * K;
      for (int c = 0; c < K; ++c) {
        t0[c] = sg * qi[c];
        t1[c] = g * ki[c];
      }
    }
    // dβ_i += sum_m dA_im (k_i . k_m) D_im.
    for (int i = 0; i < n; ++i) {
      R s = 0;
      for (int m = 0; m < i; ++m) {
        const size_t o = size_t(i) * n + m;
        s += dA[o] * wk.KK[o] * D[o];
      }
      store<R>(p.dbeta, ft, (ts + i) * HV + j, dbeta_row[i] + s);
    }
    // qkh = sd h^T = [scale Γ dO h^T; Γ dw h^T]; dku = e u dh^T.
    detail::transpose(wk.ht.data(), h, K, V);
    detail::transpose(wk.dht.data(), dh, K, V);
    R *qkh = wk.qkh.data(), *dku = wk.dku.data();
    mm<false>(2 * n, K, V, sd, V, 1, wk.ht.data(), K, qkh, K);
    mm<false>(n, K, V, u, V, 1, wk.dht.data(), K, dku, K, wk.e.data());
    // Gated: dg_t sums every term whose decay product contains a_t, each
    // over its own range (no +X at one row and -X at another: those cancel
    // to an absolute error far above a strongly decayed token's dg):
    // Γ_i terms over t <= i, e_j terms over t > j, γ over all t, and the
    // pair terms Y_ij (j < i) over j < t <= i via column suffix sums.
    if constexpr (Var == DELTAC_VARIANT_GATED) {
      R* xg = wk.dk.data();      // scratch (dk is formed below): Γ_i terms
      R* xe = xg + C;            // e_j terms
      R* sg = xg + 2 * C;        // suffix sums of xg
      R* Y = wk.KK.data();       // n x n scratch (KK is used up)
      for (int i = 0; i < n; ++i) {
        const R *qi = q + size_t(i) * K, *ki = k + size_t(i) * K;
        xg[i] = dot(qi, qkh + size_t(i) * K, K) + dot(ki, qkh + nK + size_t(i) * K, K);
        xe[i] = dot(ki, dku + size_t(i) * K, K);
      }
      R hd = 0;
      const size_t kv = size_t(K) * V;
#pragma omp simd reduction(+ : hd)
      for (size_t x = 0; x < kv; ++x) hd += dh[x] * h[x];
      hd *= wk.gl[0];
      // Y[i][m] = sum_{i' >= i} Y_i'm (m < i), from the last row up.
      for (int i = n - 1; i >= 1; --i)
        for (int m = 0; m < i; ++m) {
          const size_t o = size_t(i) * n + m;
          Y[o] = dP[o] * Aqk[o] + dA[o] * A[o] + (i + 1 < n ? Y[o + n] : R(0));
        }
      R acc = 0, se = 0;
      for (int i = n - 1; i >= 0; --i) sg[i] = acc += xg[i];
      for (int t = 0; t < n; ++t) {
        R y = 0;
        for (int m = 0; m < t; ++m) y += Y[size_t(t) * n + m];
        store<R>(p.dg, ft, (ts + t) * HV + j, sg[t] + se + hd + y);
        se += xe[t];
      }
    }
    // dh_start = γ dh + st^T [dO; dw] (A(c, p) = st[p][c]).
    std::memcpy(sd, dO, nV * sizeof(R));  // sd = [dO; dw]: scale Γ moved to st
    for (int i = 0; i < n; ++i) {
      const R b = -wk.beta[i];
      const R* xi = dx + size_t(i) * V;
      R* s1 = sd + nV + size_t(i) * V;
      for (int e = 0; e < V; ++e) s1[e] = b * xi[e];
    }
    mm<true>(K, V, 2 * n, st, 1, K, sd, V, dh, V, nullptr, wk.gl.data());
    // dq^ = qkh_top + M K^; dk^ = qkh_bottom + dku + M^T Q^ + (N + N^T) K^.
    R *dq = wk.dq.data(), *dk = wk.dk.data();
    std::memcpy(dq, qkh, nK * sizeof(R));
    mm<true>(n, K, n, M, n, 1, k, K, dq, K);
    for (size_t x = 0; x < nK; ++x) dk[x] = qkh[nK + x] + dku[x];
    // N + N^T (N is strictly lower).
    for (int i = 0; i < n; ++i)
      for (int m = i + 1; m < n; ++m) N[size_t(i) * n + m] = N[size_t(m) * n + i];
    mm<true>(n, K, n, M, 1, n, q, K, dk, K);
    mm<true>(n, K, n, N, n, 1, k, K, dk, K);
    for (int i = 0; i < n; ++i) {
      const int64_t th = (ts + i) * HV + j;
      std::memcpy(dqn + size_t(th) * K, dq + size_t(i) * K, K * sizeof(R));
      std::memcpy(dkn + size_t(th) * K, dk + size_t(i) * K, K * sizeof(R));
    }
  }
};

}}}  // namespace deltac::cpu::DELTAC_CPU_NS::bwd

#endif  // DELTAC_CPU_BACKWARD_CHUNKED_H

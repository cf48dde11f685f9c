// CPU backward of the delta rule (contract: deltac/backward.h; math:
// deltac/reference_backward.h), portable C++ vectorised by the compiler.
//
// Per sequence and value head (one OpenMP task each), with chunk C:
//  1. the forward recurrence from h0, saving the state at every chunk start;
//  2. chunks in reverse: recompute the chunk's states from its saved start
//     (C states of K x V), then the reverse sweep token by token, one fused
//     pass over the state per token. The sweep of token i also forms du and
//     the u-part of dk of token i - 1 (both need the dh that token i hands
//     back), so the state gradient is read once per token.
// Gradients of the normalised q, k go to a per-value-head scratch; a last
// pass sums them over the value heads of each q/k head (GVA) and applies the
// L2 norm's backward. Decays are e^g per token (no cumulative sums).
// Real = float (f32 / bf16 inputs) or double (DELTAC_BWD_F64 calls).
#ifndef DELTAC_CPU_BACKWARD_H
#define DELTAC_CPU_BACKWARD_H

#include "deltac/backward.h"
#include "deltac/convert.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#ifndef DELTAC_CPU_NS
#define DELTAC_CPU_NS isa_default
#endif

namespace deltac::cpu { inline namespace DELTAC_CPU_NS { namespace bwd {

template <class R>
inline R load(const void* base, int32_t dt, int64_t i) {
  if (dt == DELTAC_BWD_F64) return R(static_cast<const double*>(base)[i]);
  if (dt == DELTAC_BF16) return R(deltac::bf16_to_f32(static_cast<const uint16_t*>(base)[i]));
  return R(static_cast<const float*>(base)[i]);
}

template <class R>
inline void store(void* base, int32_t dt, int64_t i, R x) {
  if (dt == DELTAC_BWD_F64)
    static_cast<double*>(base)[i] = double(x);
  else if (dt == DELTAC_BF16)
    static_cast<uint16_t*>(base)[i] = deltac::f32_to_bf16(float(x));
  else
    static_cast<float*>(base)[i] = float(x);
}

// x *= 1 / sqrt(sum x^2 + 1e-6) (the sum in double, as the forward).
template <class R>
inline void l2norm(R* x, int n) {
  double s = 0.0;
  for (int i = 0; i < n; ++i) s += double(x[i]) * x[i];
  const R r = R(1.0 / std::sqrt(s + 1e-6));
  for (int i = 0; i < n; ++i) x[i] *= r;
}

template <class R>
inline R dot(const R* a, const R* b, int n) {
  R s = 0;
#pragma omp simd reduction(+ : s)
  for (int i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// One task's buffers, kept per thread and grown as needed.
template <class R>
struct Work {
  std::vector<R> ckpt, states;           // chunk starts; one chunk's states
  std::vector<R> q, k, a, beta, v, dout;  // one chunk's token data
  std::vector<R> r, u;                    // v - hp^T k and beta r per token
  std::vector<R> h, dh, w, du, du2, dka, dka2;
};

template <class R>
inline void grow(std::vector<R>& x, size_t n) {
  if (x.size() < n) x.resize(n);
}

template <deltac_variant Var, class R>
struct Task {
  const deltac_bwd_params& p;
  int K, V, H, HV, C;
  R scale;
  Work<R>& wk;
  R* dqn;  // [tokens, HV, K]
  R* dkn;
  int32_t ft;  // dtype of g, beta, states: F32 or DELTAC_BWD_F64

  size_t KV() const { return size_t(K) * V; }

  // Token data of tokens t .. t + len into the chunk buffers.
  void load_tokens(int64_t t, int len, int j, bool all) {
    const int hk = j / (HV / H);
    for (int i = 0; i < len; ++i) {
      const int64_t tt = t + i, th = tt * HV + j, qo = (tt * H + hk) * K;
      R* k = &wk.k[size_t(i) * K];
      for (int c = 0; c < K; ++c) k[c] = load<R>(p.k, p.in_dtype, qo + c);
      if (p.qk_l2norm) l2norm(k, K);
      R* a = &wk.a[size_t(i) * K];
      if constexpr (Var == DELTAC_VARIANT_GATED) {
        const R g = load<R>(p.g, ft, th);
        a[0] = g == R(-INFINITY) ? R(0) : std::exp(g);
      } else if constexpr (Var == DELTAC_VARIANT_KDA) {
        for (int c = 0; c < K; ++c) {
          const R g = load<R>(p.g, ft, th * K + c);
          a[c] = g == R(-INFINITY) ? R(0) : std::exp(g);
        }
      }
      wk.beta[i] = load<R>(p.beta, ft, th);
      R* v = &wk.v[size_t(i) * V];
      for (int c = 0; c < V; ++c) v[c] = load<R>(p.v, p.in_dtype, th * V + c);
      if (!all) continue;
      R* q = &wk.q[size_t(i) * K];
      for (int c = 0; c < K; ++c) q[c] = load<R>(p.q, p.in_dtype, qo + c);
      if (p.qk_l2norm) l2norm(q, K);
      R* d = &wk.dout[size_t(i) * V];
      for (int c = 0; c < V; ++c) d[c] = load<R>(p.dout, p.out_dtype, th * V + c);
    }
  }

  R decay_of(int i, int c) const {
    if constexpr (Var == DELTAC_VARIANT_GATED) return wk.a[size_t(i) * K];
    else if constexpr (Var == DELTAC_VARIANT_KDA) return wk.a[size_t(i) * K + c];
    else return R(1);
  }

  // Token i of the chunk buffers: dst = hp + k u^T with hp = a (.) src (dst
  // may be src; null: only r and u), r = v - hp^T k, u = beta r.
  void step(int i, const R* src, R* dst) {
    const R* k = &wk.k[size_t(i) * K];
    R* w = wk.w.data();
    std::fill(w, w + V, R(0));
    for (int c = 0; c < K; ++c) {
      const R a = decay_of(i, c), kc = k[c];
      const R* s = src + size_t(c) * V;
      if (dst) {
        R* d = dst + size_t(c) * V;
#pragma omp simd
        for (int e = 0; e < V; ++e) {
          const R x = a * s[e];
          d[e] = x;
          w[e] += kc * x;
        }
      } else {
#pragma omp simd
        for (int e = 0; e < V; ++e) w[e] += kc * (a * s[e]);
      }
    }
    const R b = wk.beta[i];
    R* r = &wk.r[size_t(i) * V];
    R* u = &wk.u[size_t(i) * V];
    const R* v = &wk.v[size_t(i) * V];
    for (int e = 0; e < V; ++e) {
      r[e] = v[e] - w[e];
      u[e] = b * r[e];
    }
    if (!dst) return;
    for (int c = 0; c < K; ++c) {
      const R kc = k[c];
      R* d = dst + size_t(c) * V;
#pragma omp simd
      for (int e = 0; e < V; ++e) d[e] += kc * u[e];
    }
  }

  // du and the u-part of dk of token i from dh = dL/d(state after i):
  // du = dh^T k + scale (q.k) do, dka = dh u + scale q (do.u).
  void prepass(int i, R* du, R* dka) {
    const R* k = &wk.k[size_t(i) * K];
    const R* q = &wk.q[size_t(i) * K];
    const R* u = &wk.u[size_t(i) * V];
    const R* d = &wk.dout[size_t(i) * V];
    const R* dh = wk.dh.data();
    std::fill(du, du + V, R(0));
    for (int c = 0; c < K; ++c) {
      const R kc = k[c];
      const R* row = dh + size_t(c) * V;
      R su = 0;
#pragma omp simd reduction(+ : su)
      for (int e = 0; e < V; ++e) {
        du[e] += kc * row[e];
        su += row[e] * u[e];
      }
      dka[c] = su;
    }
    finish_prepass(i, du, dka);
  }

  void finish_prepass(int i, R* du, R* dka) {
    const R* k = &wk.k[size_t(i) * K];
    const R* q = &wk.q[size_t(i) * K];
    const R* u = &wk.u[size_t(i) * V];
    const R* d = &wk.dout[size_t(i) * V];
    const R qk = scale * dot(q, k, K), du_ = scale * dot(d, u, V);
    for (int e = 0; e < V; ++e) du[e] += qk * d[e];
    for (int c = 0; c < K; ++c) dka[c] += q[c] * du_;
  }

  // The reverse sweep's step for token i (state before it: S), with its du
  // and dka; when Next, also du and dka of token i - 1.
  template <bool Next>
  void sweep(int i, const R* S, int64_t th, const R* du, const R* dka, R* dun,
             R* dkan) {
    const R* k = &wk.k[size_t(i) * K];
    const R* q = &wk.q[size_t(i) * K];
    const R* u = &wk.u[size_t(i) * V];
    const R* r = &wk.r[size_t(i) * V];
    const R* d = &wk.dout[size_t(i) * V];
    const R b = wk.beta[i];
    R* dw = wk.w.data();
    R db = 0;
    for (int e = 0; e < V; ++e) {
      db += du[e] * r[e];
      dw[e] = -b * du[e];
    }
    store<R>(p.dbeta, ft, th, db);
    for (int e = 0; e < V; ++e) store<R>(p.dv, p.in_dtype, th * V + e, b * du[e]);
    const R uo = dot(u, d, V);
    const R* kn = Next ? &wk.k[size_t(i - 1) * K] : nullptr;
    const R* un = Next ? &wk.u[size_t(i - 1) * V] : nullptr;
    if (Next) std::fill(dun, dun + V, R(0));
    R* dq = dqn + size_t(th) * K;
    R* dk = dkn + size_t(th) * K;
    R* dh = wk.dh.data();
    R dgs = 0;
    for (int c = 0; c < K; ++c) {
      const R a = decay_of(i, c), kc = k[c], sq = scale * q[c];
      const R* s = S + size_t(c) * V;
      R* row = dh + size_t(c) * V;
      R sdo = 0, sdw = 0, sg = 0, su = 0;
      if (Next) {
        const R knc = kn[c];
#pragma omp simd reduction(+ : sdo, sdw, sg, su)
        for (int e = 0; e < V; ++e) {
          const R hp = a * s[e];
          const R x = row[e] + sq * d[e] + kc * dw[e];
          sdo += hp * d[e];
          sdw += hp * dw[e];
          sg += x * hp;
          const R y = a * x;
          row[e] = y;
          dun[e] += knc * y;
          su += y * un[e];
        }
        dkan[c] = su;
      } else {
#pragma omp simd reduction(+ : sdo, sdw, sg)
        for (int e = 0; e < V; ++e) {
          const R hp = a * s[e];
          const R x = row[e] + sq * d[e] + kc * dw[e];
          sdo += hp * d[e];
          sdw += hp * dw[e];
          sg += x * hp;
          row[e] = a * x;
        }
      }
      dq[c] = scale * (sdo + kc * uo);
      dk[c] = dka[c] + sdw;
      if constexpr (Var == DELTAC_VARIANT_KDA) store<R>(p.dg, ft, th * K + c, sg);
      dgs += sg;
    }
    if constexpr (Var == DELTAC_VARIANT_GATED) store<R>(p.dg, ft, th, dgs);
    if (Next) finish_prepass(i - 1, dun, dkan);
  }

  void run(int n, int j) {
    const int64_t T = p.T;
    const int64_t t0 = p.cu_seqlens ? p.cu_seqlens[n] : n * T;
    const int64_t t1 = p.cu_seqlens ? p.cu_seqlens[n + 1] : (n + 1) * T;
    const int64_t L = t1 - t0;
    const int64_t nc = (L + C - 1) / C;
    const size_t kv = KV();
    const bool vk = p.state_layout == DELTAC_STATE_VK;
    const size_t sbase = (size_t(n) * HV + j) * kv;
    auto sidx = [&](int c, int e) {
      return sbase + (vk ? size_t(e) * K + c : size_t(c) * V + e);
    };
    grow(wk.ckpt, size_t(std::max<int64_t>(nc, 1)) * kv);
    grow(wk.states, size_t(C) * kv);
    grow(wk.q, size_t(C) * K);
    grow(wk.k, size_t(C) * K);
    grow(wk.a, size_t(C) * K);
    grow(wk.beta, size_t(C));
    for (auto* x : {&wk.v, &wk.dout, &wk.r, &wk.u}) grow(*x, size_t(C) * V);
    grow(wk.h, kv);
    grow(wk.dh, kv);
    for (auto* x : {&wk.w, &wk.du, &wk.du2}) grow(*x, size_t(V));
    grow(wk.dka, size_t(K));
    grow(wk.dka2, size_t(K));

    // 1. Forward, saving the chunk starts.
    R* h = wk.h.data();
    for (int c = 0; c < K; ++c)
      for (int e = 0; e < V; ++e)
        h[size_t(c) * V + e] = p.h0 ? load<R>(p.h0, ft, sidx(c, e)) : R(0);
    for (int64_t ci = 0; ci < nc; ++ci) {
      std::memcpy(&wk.ckpt[size_t(ci) * kv], h, kv * sizeof(R));
      if (ci == nc - 1) break;  // the last chunk's end state is not needed
      load_tokens(t0 + ci * C, C, j, false);
      for (int i = 0; i < C; ++i) step(i, h, h);
    }

    // 2. Chunks in reverse.
    R* dh = wk.dh.data();
    for (int c = 0; c < K; ++c)
      for (int e = 0; e < V; ++e)
        dh[size_t(c) * V + e] = p.dht ? load<R>(p.dht, ft, sidx(c, e)) : R(0);
    R *du = wk.du.data(), *dun = wk.du2.data();
    R *dka = wk.dka.data(), *dkan = wk.dka2.data();
    for (int64_t ci = nc - 1; ci >= 0; --ci) {
      const int64_t ts = t0 + ci * C;
      const int len = int(std::min<int64_t>(C, t1 - ts));
      load_tokens(ts, len, j, true);
      // states(i): the state before token i of the chunk.
      const R* start = &wk.ckpt[size_t(ci) * kv];
      auto state = [&](int i) -> R* {
        return i == 0 ? const_cast<R*>(start) : &wk.states[size_t(i) * kv];
      };
      for (int i = 0; i + 1 < len; ++i) step(i, state(i), state(i + 1));
      step(len - 1, state(len - 1), nullptr);
      prepass(len - 1, du, dka);
      for (int i = len - 1; i >= 0; --i) {
        const int64_t th = (ts + i) * HV + j;
        if (i > 0) {
          sweep<true>(i, state(i), th, du, dka, dun, dkan);
          std::swap(du, dun);
          std::swap(dka, dkan);
        } else {
          sweep<false>(i, state(i), th, du, dka, nullptr, nullptr);
        }
      }
    }
    if (p.dh0)
      for (int c = 0; c < K; ++c)
        for (int e = 0; e < V; ++e) store<R>(p.dh0, ft, sidx(c, e), dh[size_t(c) * V + e]);
  }
};

template <deltac_variant Var, class R>
void backward_real(const deltac_bwd_params& p) {
  const int K = p.K, H = p.H, HV = p.HV, group = HV / H;
  const int N = p.cu_seqlens ? p.N : p.B;
  const int64_t tokens = int64_t(p.B) * p.T;
  const int nt = p.threads > 0 ? p.threads : omp_get_max_threads();
  const R scale = p.scale != 0.0f ? R(p.scale) : R(1.0 / std::sqrt(double(K)));
  const int32_t ft = p.in_dtype == DELTAC_BWD_F64 ? DELTAC_BWD_F64 : DELTAC_F32;
  // Tokens outside every sequence (varlen) keep zero gradients.
  std::unique_ptr<R[]> dqn(new R[size_t(tokens) * HV * K]()), dkn(new R[size_t(tokens) * HV * K]());
  const int64_t tasks = int64_t(N) * HV;
#pragma omp parallel num_threads(nt)
  {
    Work<R> wk;
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < tasks; ++task) {
      Task<Var, R> t{p, K, p.V, H, HV, p.chunk > 0 ? p.chunk : 16, scale, wk,
                     dqn.get(), dkn.get(), ft};
      t.run(int(task / HV), int(task % HV));
    }
  }
  // Sum over the value heads of each q/k head, then the L2 norm's backward.
#pragma omp parallel for schedule(static) num_threads(nt)
  for (int64_t th = 0; th < tokens * H; ++th) {
    const int64_t t = th / H;
    const int hk = int(th % H);
    R gq[256], gk[256];
    for (int c = 0; c < K; ++c) gq[c] = gk[c] = 0;
    for (int j = hk * group; j < (hk + 1) * group; ++j) {
      const R* a = dqn.get() + (size_t(t) * HV + j) * K;
      const R* b = dkn.get() + (size_t(t) * HV + j) * K;
      for (int c = 0; c < K; ++c) {
        gq[c] += a[c];
        gk[c] += b[c];
      }
    }
    const int64_t o = th * K;
    for (int which = 0; which < 2; ++which) {
      R* gx = which ? gk : gq;
      const void* x = which ? p.k : p.q;
      void* out = which ? p.dk : p.dq;
      if (p.qk_l2norm) {
        R xs[256];
        double ss = 0.0;
        for (int c = 0; c < K; ++c) {
          xs[c] = load<R>(x, p.in_dtype, o + c);
          ss += double(xs[c]) * xs[c];
        }
        const R rr = R(1.0 / std::sqrt(ss + 1e-6));
        R d = 0;
        for (int c = 0; c < K; ++c) d += xs[c] * rr * gx[c];
        for (int c = 0; c < K; ++c) store<R>(out, p.in_dtype, o + c, rr * (gx[c] - xs[c] * rr * d));
      } else {
        for (int c = 0; c < K; ++c) store<R>(out, p.in_dtype, o + c, gx[c]);
      }
    }
  }
}

// The backward of p (checked by the caller: deltac_backward's rules).
template <deltac_variant Var>
void backward(const deltac_bwd_params& p) {
  if (p.in_dtype == DELTAC_BWD_F64)
    backward_real<Var, double>(p);
  else
    backward_real<Var, float>(p);
}

}}}  // namespace deltac::cpu::DELTAC_CPU_NS::bwd

#endif  // DELTAC_CPU_BACKWARD_H

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
#include "deltac/cpu/gemm.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#ifndef DELTAC_CPU_NS
#define DELTAC_CPU_NS isa_default
#endif

// 32-byte vectors below never cross a library boundary (inline helpers).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace deltac::cpu { inline namespace DELTAC_CPU_NS { namespace bwd {

// 32-byte vectors of Real (GCC/Clang vector extensions) for the register-
// tiled loops: 8 floats or 4 doubles.
template <class R>
struct Vec;
template <>
struct Vec<float> {
  typedef float type __attribute__((vector_size(32)));
  static constexpr int n = 8;
};
template <>
struct Vec<double> {
  typedef double type __attribute__((vector_size(32)));
  static constexpr int n = 4;
};
template <class VT, class R>
inline VT vld(const R* p) {
  VT v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class VT, class R>
inline void vst(R* p, VT v) {
  std::memcpy(p, &v, sizeof v);
}
template <class R, class VT>
inline R vsum(VT v) {
  R s = 0;
  for (int i = 0; i < Vec<R>::n; ++i) s += v[i];
  return s;
}

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

// dst[0..n) = elements off.. of a tensor of dtype dt (the branch outside the loop).
template <class R>
inline void load_row(R* dst, const void* base, int32_t dt, int64_t off, int n) {
  if (dt == DELTAC_BWD_F64) {
    const double* x = static_cast<const double*>(base) + off;
    for (int i = 0; i < n; ++i) dst[i] = R(x[i]);
  } else if (dt == DELTAC_BF16) {
    const uint16_t* x = static_cast<const uint16_t*>(base) + off;
    for (int i = 0; i < n; ++i) dst[i] = R(deltac::bf16_to_f32(x[i]));
  } else {
    const float* x = static_cast<const float*>(base) + off;
    for (int i = 0; i < n; ++i) dst[i] = R(x[i]);
  }
}

// x *= 1 / sqrt(sum x^2 + 1e-6) (the sum in double, as the forward).
template <class R>
inline void l2norm(R* x, int n) {
  double s = 0.0;
#pragma omp simd reduction(+ : s)
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
  std::vector<R> part;  // per key row: 4 vectors of partial sums (sweep)
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
      load_row(k, p.k, p.in_dtype, qo, K);
      if (p.qk_l2norm) l2norm(k, K);
      R* a = &wk.a[size_t(i) * K];
      if constexpr (Var == DELTAC_VARIANT_GATED) {
        const R g = load<R>(p.g, ft, th);
        a[0] = g == R(-INFINITY) ? R(0) : std::exp(g);
      } else if constexpr (Var == DELTAC_VARIANT_KDA) {
        load_row(a, p.g, ft, th * K, K);
        for (int c = 0; c < K; ++c) a[c] = a[c] == R(-INFINITY) ? R(0) : std::exp(a[c]);
      }
      wk.beta[i] = load<R>(p.beta, ft, th);
      load_row(&wk.v[size_t(i) * V], p.v, p.in_dtype, th * V, V);
      if (!all) continue;
      R* q = &wk.q[size_t(i) * K];
      load_row(q, p.q, p.in_dtype, qo, K);
      if (p.qk_l2norm) l2norm(q, K);
      load_row(&wk.dout[size_t(i) * V], p.dout, p.out_dtype, th * V, V);
    }
  }

  // The decays of token i: decay(ai, c) is key row c's (locals, so that the
  // compiler need not reload members after the memcpy-based vector stores).
  const R* decays(int i) const { return &wk.a[size_t(i) * K]; }
  static R decay(const R* ai, int c) {
    if constexpr (Var == DELTAC_VARIANT_GATED) return ai[0];
    else if constexpr (Var == DELTAC_VARIANT_KDA) return ai[c];
    else return R(1);
  }

  R decay_of(int i, int c) const {
    if constexpr (Var == DELTAC_VARIANT_GATED) return wk.a[size_t(i) * K];
    else if constexpr (Var == DELTAC_VARIANT_KDA) return wk.a[size_t(i) * K + c];
    else return R(1);
  }

  // r = v - w and u = beta r of token i from w = hp^T k (in wk.w).
  void finish_w(int i) {
    const R b = wk.beta[i];
    const R* w = wk.w.data();
    R* r = &wk.r[size_t(i) * V];
    R* u = &wk.u[size_t(i) * V];
    const R* v = &wk.v[size_t(i) * V];
    for (int e = 0; e < V; ++e) {
      r[e] = v[e] - w[e];
      u[e] = b * r[e];
    }
  }

  // w = (a (.) S)^T k of token i, then its r and u.
  void first_w(int i, const R* S) {
    const R* k = &wk.k[size_t(i) * K];
    R* w = wk.w.data();
    std::fill(w, w + V, R(0));
    for (int c = 0; c < K; ++c) {
      const R ka = k[c] * decay_of(i, c);
      const R* s = S + size_t(c) * V;
#pragma omp simd
      for (int e = 0; e < V; ++e) w[e] += ka * s[e];
    }
    finish_w(i);
  }

  // The state after token i, dst = a_i (.) src + k_i u_i^T (dst may be src),
  // and in the same pass w of token i + 1 (then its r and u). Tiles of NT
  // vectors along V, w and u of the tile in registers.
  void step(int i, const R* src, R* dst) {
    if (V % (4 * Vec<R>::n) == 0)
      step_tiled<4>(i, src, dst);
    else
      step_tiled<2>(i, src, dst);
    finish_w(i + 1);
  }

  template <int NT>
  void step_tiled(int i, const R* src, R* dst) {
    using VT = typename Vec<R>::type;
    constexpr int n = Vec<R>::n;
    const int K = this->K, V = this->V;
    const R* k = &wk.k[size_t(i) * K];
    const R* kn = &wk.k[size_t(i + 1) * K];
    const R* u = &wk.u[size_t(i) * V];
    const R *ai = decays(i), *an = decays(i + 1);
    R* w = wk.w.data();
    for (int e0 = 0; e0 < V; e0 += NT * n) {
      // Two sets of w accumulators (even and odd rows): twice the FMA
      // chains, so their latency does not bound the loop. K is even.
      VT ut[NT], wt[NT], wt2[NT];
      for (int j = 0; j < NT; ++j) {
        ut[j] = vld<VT>(u + e0 + j * n);
        wt[j] = wt2[j] = VT{};
      }
      for (int c = 0; c < K; c += 2) {
        const R a = decay(ai, c), kc = k[c], ka = kn[c] * decay(an, c);
        const R a2 = decay(ai, c + 1), kc2 = k[c + 1], ka2 = kn[c + 1] * decay(an, c + 1);
        const R* sp = src + size_t(c) * V + e0;
        R* dp = dst + size_t(c) * V + e0;
        for (int j = 0; j < NT; ++j) {
          const VT x = a * vld<VT>(sp + j * n) + kc * ut[j];
          vst(dp + j * n, x);
          wt[j] += ka * x;
          const VT x2 = a2 * vld<VT>(sp + V + j * n) + kc2 * ut[j];
          vst(dp + V + j * n, x2);
          wt2[j] += ka2 * x2;
        }
      }
      for (int j = 0; j < NT; ++j) vst(w + e0 + j * n, wt[j] + wt2[j]);
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
    R* dq = dqn + size_t(th) * K;
    R* dk = dkn + size_t(th) * K;
    R* dh = wk.dh.data();
    R dgs = 0;
    if constexpr (Next) {
      // Tiles of 2 vectors along V: do, dw, u of token i - 1 and du of
      // token i - 1 in registers; the sums over V per key row gather in
      // wk.part as vectors (4 per row), reduced once after the last tile.
      using VT = typename Vec<R>::type;
      constexpr int n = Vec<R>::n;
      const int K = this->K, V = this->V;
      const R* ai = decays(i);
      const R sc = scale;
      R* part = wk.part.data();
      // NT vectors per tile: 4 when V allows (fewer partial-sum updates).
      auto tiles = [&](auto nt) {
        constexpr int NT = decltype(nt)::value;
        for (int e0 = 0; e0 < V; e0 += NT * n) {
          VT dt[NT], dwt[NT], unt[NT], acc[NT];
          for (int j = 0; j < NT; ++j) {
            dt[j] = vld<VT>(d + e0 + j * n);
            dwt[j] = vld<VT>(dw + e0 + j * n);
            unt[j] = vld<VT>(un + e0 + j * n);
            acc[j] = VT{};
          }
          for (int c = 0; c < K; ++c) {
            const R a = decay(ai, c), kc = k[c], sq = sc * q[c], knc = kn[c] * a;
            const R* sp = S + size_t(c) * V + e0;
            R* row = dh + size_t(c) * V + e0;
            VT pdo = VT{}, pdw = VT{}, pg = VT{}, pu = VT{};
            for (int j = 0; j < NT; ++j) {
              const VT sv = vld<VT>(sp + j * n);
              const VT x = vld<VT>(row + j * n) + sq * dt[j] + kc * dwt[j];
              pdo += sv * dt[j];
              pdw += sv * dwt[j];
              pg += x * sv;
              pu += x * unt[j];
              vst(row + j * n, a * x);
              acc[j] += knc * x;
            }
            R* P = part + size_t(c) * 4 * n;
            if (e0 > 0) {
              pdo += vld<VT>(P);
              pdw += vld<VT>(P + n);
              pg += vld<VT>(P + 2 * n);
              pu += vld<VT>(P + 3 * n);
            }
            vst(P, pdo);
            vst(P + n, pdw);
            vst(P + 2 * n, pg);
            vst(P + 3 * n, pu);
          }
          for (int j = 0; j < NT; ++j) vst(dun + e0 + j * n, acc[j]);
        }
      };
      if (V % (4 * n) == 0)
        tiles(std::integral_constant<int, 4>{});
      else
        tiles(std::integral_constant<int, 2>{});
      for (int c = 0; c < K; ++c) {
        const R a = decay(ai, c), kc = k[c];
        const R* P = part + size_t(c) * 4 * n;
        const R sdo = a * vsum<R>(vld<VT>(P)), sdw = a * vsum<R>(vld<VT>(P + n));
        const R sg = a * vsum<R>(vld<VT>(P + 2 * n));
        dkan[c] = a * vsum<R>(vld<VT>(P + 3 * n));
        dq[c] = sc * (sdo + kc * uo);
        dk[c] = dka[c] + sdw;
        if constexpr (Var == DELTAC_VARIANT_KDA) store<R>(p.dg, ft, th * K + c, sg);
        dgs += sg;
      }
    } else {
      for (int c = 0; c < K; ++c) {
        // hp = a s; the sums over s are scaled by a once per row.
        const R a = decay_of(i, c), kc = k[c], sq = scale * q[c];
        const R* s = S + size_t(c) * V;
        R* row = dh + size_t(c) * V;
        R sdo = 0, sdw = 0, sg = 0;
#pragma omp simd reduction(+ : sdo, sdw, sg)
        for (int e = 0; e < V; ++e) {
          const R x = row[e] + sq * d[e] + kc * dw[e];
          sdo += s[e] * d[e];
          sdw += s[e] * dw[e];
          sg += x * s[e];
          row[e] = a * x;
        }
        sdo *= a, sdw *= a, sg *= a;
        dq[c] = scale * (sdo + kc * uo);
        dk[c] = dka[c] + sdw;
        if constexpr (Var == DELTAC_VARIANT_KDA) store<R>(p.dg, ft, th * K + c, sg);
        dgs += sg;
      }
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
    grow(wk.q, size_t(C + 1) * K);
    grow(wk.k, size_t(C + 1) * K);
    grow(wk.a, size_t(C + 1) * K);
    grow(wk.beta, size_t(C + 1));
    for (auto* x : {&wk.v, &wk.dout, &wk.r, &wk.u}) grow(*x, size_t(C + 1) * V);
    grow(wk.h, kv);
    grow(wk.dh, kv);
    for (auto* x : {&wk.w, &wk.du, &wk.du2}) grow(*x, size_t(V));
    grow(wk.dka, size_t(K));
    grow(wk.dka2, size_t(K));
    grow(wk.part, size_t(K) * 4 * Vec<R>::n);

    // 1. Forward, saving the chunk starts. The buffers hold one chunk and
    // the next chunk's first token (step() forms its w).
    R* h = wk.h.data();
    for (int c = 0; c < K; ++c)
      for (int e = 0; e < V; ++e)
        h[size_t(c) * V + e] = p.h0 ? load<R>(p.h0, ft, sidx(c, e)) : R(0);
    for (int64_t ci = 0; ci < nc; ++ci) {
      std::memcpy(&wk.ckpt[size_t(ci) * kv], h, kv * sizeof(R));
      if (ci == nc - 1) break;  // the last chunk's end state is not needed
      const int64_t ts = t0 + ci * C;
      load_tokens(ts, int(std::min<int64_t>(C + 1, t1 - ts)), j, false);
      if (ci == 0) first_w(0, h);
      else finish_w(0);  // w of token 0: the last step of the previous chunk
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
      first_w(0, start);
      for (int i = 0; i + 1 < len; ++i) step(i, state(i), state(i + 1));
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

}}}  // namespace deltac::cpu::DELTAC_CPU_NS::bwd

#include "deltac/cpu/backward_chunked.h"

namespace deltac::cpu { inline namespace DELTAC_CPU_NS { namespace bwd {

// Tokens per chunk of the chunked form: params.chunk where it is 1..256
// (its scratch grows as chunk^2 per thread), else 64.
constexpr int kChunkedChunk = 64, kChunkedMaxChunk = 256;
inline int chunked_chunk(const deltac_bwd_params& p) {
  return p.chunk > 0 && p.chunk <= kChunkedMaxChunk ? p.chunk : kChunkedChunk;
}

// The rule: the chunked form (backward_chunked.h) for delta and gated where
// the sequences average at least two chunks; kda and shorter sequences: the
// sweep (every call; the cross-check of the chunked form).
inline bool use_chunked(const deltac_bwd_params& p) {
  const int64_t C = chunked_chunk(p);
  const int64_t seqs = p.cu_seqlens ? p.N : p.B;
  return p.variant != DELTAC_VARIANT_KDA && seqs > 0 && int64_t(p.B) * p.T >= 2 * C * seqs;
}

template <deltac_variant Var, class R, bool Chunked>
void backward_real(const deltac_bwd_params& p) {
  const int K = p.K, H = p.H, HV = p.HV, group = HV / H;
  const int N = p.cu_seqlens ? p.N : p.B;
  const int64_t tokens = int64_t(p.B) * p.T;
  const int nt = p.threads > 0 ? p.threads : omp_get_max_threads();
  const R scale = p.scale != 0.0f ? R(p.scale) : R(1.0 / std::sqrt(double(K)));
  const int32_t ft = p.in_dtype == DELTAC_BWD_F64 ? DELTAC_BWD_F64 : DELTAC_F32;
  // Written for every token (the sequences cover all B*T tokens).
  std::unique_ptr<R[]> dqn(new R[size_t(tokens) * HV * K]), dkn(new R[size_t(tokens) * HV * K]);
  const int64_t tasks = int64_t(N) * HV;
#pragma omp parallel num_threads(nt)
  {
    std::conditional_t<Chunked, CWork<R>, Work<R>> wk;
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < tasks; ++task) {
      if constexpr (Chunked) {
        CTask<Var, R> t{p, K, p.V, H, HV, chunked_chunk(p), scale, wk,
                        dqn.get(), dkn.get(), ft};
        t.run(int(task / HV), int(task % HV));
      } else {
        Task<Var, R> t{p, K, p.V, H, HV, p.chunk > 0 ? p.chunk : 16, scale, wk,
                       dqn.get(), dkn.get(), ft};
        t.run(int(task / HV), int(task % HV));
      }
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
        load_row(xs, x, p.in_dtype, o, K);
        double ss = 0.0;
#pragma omp simd reduction(+ : ss)
        for (int c = 0; c < K; ++c) ss += double(xs[c]) * xs[c];
        const R rr = R(1.0 / std::sqrt(ss + 1e-6));
        R d = 0;
#pragma omp simd reduction(+ : d)
        for (int c = 0; c < K; ++c) d += xs[c] * rr * gx[c];
        for (int c = 0; c < K; ++c) gx[c] = rr * (gx[c] - xs[c] * rr * d);
      }
      store_row(out, p.in_dtype, o, gx, K);
    }
  }
}

// The sweep for every call.
template <deltac_variant Var>
void backward_sweep(const deltac_bwd_params& p) {
  if (p.in_dtype == DELTAC_BWD_F64)
    backward_real<Var, double, false>(p);
  else
    backward_real<Var, float, false>(p);
}

// The chunked form (delta and gated).
template <deltac_variant Var>
void backward_chunked(const deltac_bwd_params& p) {
  static_assert(Var != DELTAC_VARIANT_KDA, "kda: the sweep only");
  if (p.in_dtype == DELTAC_BWD_F64)
    backward_real<Var, double, true>(p);
  else
    backward_real<Var, float, true>(p);
}

// The backward of p (checked by the caller: deltac_backward's rules), by the
// rule use_chunked().
template <deltac_variant Var>
void backward(const deltac_bwd_params& p) {
  if constexpr (Var != DELTAC_VARIANT_KDA)
    if (use_chunked(p)) return backward_chunked<Var>(p);
  backward_sweep<Var>(p);
}

}}}  // namespace deltac::cpu::DELTAC_CPU_NS::bwd

#endif  // DELTAC_CPU_BACKWARD_H

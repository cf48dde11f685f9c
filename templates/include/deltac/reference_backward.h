// Plain float64 reference of the delta-rule backward (deltac/backward.h):
// per sequence and value head, the forward recurrence keeping every state,
// then one reverse sweep. Slow and simple on purpose; the tests compare the
// kernels with it and it with finite differences of ref::forward.
//
// Forward, per token (h as [K][V]):
//   hp = a (.) h;  r = v - hp^T k;  u = beta r;  hn = hp + k u^T;
//   o = scale hn^T q
// Reverse, with dh = dL/dhn (starting from dht):
//   dh += scale q do^T;   dq = scale hn do;   dk = dh u;   du = dh^T k
//   dv = beta du;   dbeta = du . r;   dw = -beta du
//   dh += k dw^T;   dk += hp dw;   dg = sum_v dh (.) hp (per key row; gated:
//   summed over rows);   dh <- a (.) dh
// then dq, dk summed over the value heads of a q/k head, and through the L2
// norm (x^ = x r): dx = r (dx^ - x^ (x^ . dx^)).
#ifndef DELTAC_REFERENCE_BACKWARD_H
#define DELTAC_REFERENCE_BACKWARD_H

#include "deltac/backward.h"
#include "deltac/convert.h"

#include <cmath>
#include <cstdint>
#include <vector>

namespace deltac::ref {

// Element i of q, k, v, dout (dtype F32, BF16 or DELTAC_BWD_F64).
inline double bwd_load(const void* base, int32_t dt, int64_t i) {
  if (dt == DELTAC_BWD_F64) return static_cast<const double*>(base)[i];
  if (dt == DELTAC_BF16) return deltac::bf16_to_f32(static_cast<const uint16_t*>(base)[i]);
  return static_cast<const float*>(base)[i];
}

// Element i of g, beta, h0, dht: f32, or f64 in a DELTAC_BWD_F64 call.
inline double bwd_load_f(const void* base, const deltac_bwd_params& p, int64_t i) {
  if (p.in_dtype == DELTAC_BWD_F64) return static_cast<const double*>(base)[i];
  return static_cast<const float*>(base)[i];
}

struct Grads {
  std::vector<double> dq, dk, dv, dg, dbeta, dh0;  // the shapes of backward.h
};

inline Grads backward(const deltac_bwd_params& p) {
  const int K = p.K, V = p.V, H = p.H, HV = p.HV, T = p.T;
  const int group = HV / H;
  const bool vk = p.state_layout == DELTAC_STATE_VK;
  const double scale = p.scale != 0.0f ? double(p.scale) : 1.0 / std::sqrt(double(K));
  const int N = p.cu_seqlens ? p.N : p.B;
  const int64_t tokens = int64_t(p.B) * T;
  Grads gr;
  gr.dq.assign(size_t(tokens) * H * K, 0.0);
  gr.dk.assign(size_t(tokens) * H * K, 0.0);
  gr.dv.assign(size_t(tokens) * HV * V, 0.0);
  gr.dbeta.assign(size_t(tokens) * HV, 0.0);
  gr.dg.assign(p.variant == DELTAC_VARIANT_KDA     ? size_t(tokens) * HV * K
               : p.variant == DELTAC_VARIANT_GATED ? size_t(tokens) * HV
                                                   : 0,
               0.0);
  gr.dh0.assign(size_t(N) * HV * K * V, 0.0);
  // Gradients of the normalised q, k per token and value head.
  std::vector<double> dqn(size_t(tokens) * HV * K, 0.0), dkn(dqn.size(), 0.0);
  const size_t KV = size_t(K) * V;

  auto qk = [&](const void* base, int64_t t, int hk, std::vector<double>& x) {
    x.resize(K);
    for (int i = 0; i < K; ++i) x[i] = bwd_load(base, p.in_dtype, (t * H + hk) * K + i);
    if (p.qk_l2norm) {
      double s = 0.0;
      for (double e : x) s += e * e;
      const double r = 1.0 / std::sqrt(s + 1e-6);
      for (double& e : x) e *= r;
    }
  };
  auto decay = [](double g) { return g == -INFINITY ? 0.0 : std::exp(g); };

  std::vector<double> q, k, a(K), u(V), r(V), du(V), dw(V), dh(KV);
  for (int n = 0; n < N; ++n) {
    const int64_t t0 = p.cu_seqlens ? p.cu_seqlens[n] : int64_t(n) * T;
    const int64_t t1 = p.cu_seqlens ? p.cu_seqlens[n + 1] : int64_t(n + 1) * T;
    const int64_t L = t1 - t0;
    for (int j = 0; j < HV; ++j) {
      const int hk = j / group;
      const size_t sbase = (size_t(n) * HV + j) * KV;
      auto sidx = [&](int kk, int vv) {
        return sbase + (vk ? size_t(vv) * K + kk : size_t(kk) * V + vv);
      };
      // states[i] = the state before token t0 + i; states[L] = ht.
      std::vector<std::vector<double>> states(L + 1, std::vector<double>(KV, 0.0));
      std::vector<std::vector<double>> as(L, std::vector<double>(K)), rs(L, std::vector<double>(V));
      if (p.h0)
        for (int kk = 0; kk < K; ++kk)
          for (int vv = 0; vv < V; ++vv) states[0][size_t(kk) * V + vv] = bwd_load_f(p.h0, p, sidx(kk, vv));
      for (int64_t i = 0; i < L; ++i) {
        const int64_t t = t0 + i, th = t * HV + j;
        qk(p.k, t, hk, k);
        for (int kk = 0; kk < K; ++kk)
          as[i][kk] = p.variant == DELTAC_VARIANT_GATED ? decay(bwd_load_f(p.g, p, th))
                      : p.variant == DELTAC_VARIANT_KDA ? decay(bwd_load_f(p.g, p, th * K + kk))
                                                        : 1.0;
        const double b = bwd_load_f(p.beta, p, th);
        std::vector<double>& h = states[i + 1];
        for (int kk = 0; kk < K; ++kk)
          for (int vv = 0; vv < V; ++vv) h[size_t(kk) * V + vv] = as[i][kk] * states[i][size_t(kk) * V + vv];
        for (int vv = 0; vv < V; ++vv) {
          double w = 0.0;
          for (int kk = 0; kk < K; ++kk) w += h[size_t(kk) * V + vv] * k[kk];
          rs[i][vv] = bwd_load(p.v, p.in_dtype, th * V + vv) - w;
        }
        for (int kk = 0; kk < K; ++kk)
          for (int vv = 0; vv < V; ++vv) h[size_t(kk) * V + vv] += k[kk] * b * rs[i][vv];
      }
      // Reverse sweep.
      for (int kk = 0; kk < K; ++kk)
        for (int vv = 0; vv < V; ++vv)
          dh[size_t(kk) * V + vv] = p.dht ? bwd_load_f(p.dht, p, sidx(kk, vv)) : 0.0;
      for (int64_t i = L - 1; i >= 0; --i) {
        const int64_t t = t0 + i, th = t * HV + j;
        qk(p.q, t, hk, q);
        qk(p.k, t, hk, k);
        const double b = bwd_load_f(p.beta, p, th);
        for (int vv = 0; vv < V; ++vv) u[vv] = b * rs[i][vv];
        const std::vector<double>& hn = states[i + 1];
        std::vector<double> dov(V);
        for (int vv = 0; vv < V; ++vv) dov[vv] = bwd_load(p.dout, p.out_dtype, th * V + vv);
        double* dq = &dqn[size_t(th) * K];
        double* dk = &dkn[size_t(th) * K];
        for (int kk = 0; kk < K; ++kk) {
          double s = 0.0;
          for (int vv = 0; vv < V; ++vv) {
            dh[size_t(kk) * V + vv] += scale * q[kk] * dov[vv];
            s += hn[size_t(kk) * V + vv] * dov[vv];
          }
          dq[kk] = scale * s;
        }
        for (int vv = 0; vv < V; ++vv) {
          double s = 0.0;
          for (int kk = 0; kk < K; ++kk) s += dh[size_t(kk) * V + vv] * k[kk];
          du[vv] = s;
        }
        double db = 0.0;
        for (int vv = 0; vv < V; ++vv) {
          gr.dv[size_t(th) * V + vv] = b * du[vv];
          db += du[vv] * rs[i][vv];
          dw[vv] = -b * du[vv];
        }
        gr.dbeta[th] = db;
        double dgs = 0.0;
        for (int kk = 0; kk < K; ++kk) {
          double s = 0.0, sg = 0.0;
          for (int vv = 0; vv < V; ++vv) {
            const size_t e = size_t(kk) * V + vv;
            const double hp = as[i][kk] * states[i][e];
            s += dh[e] * u[vv];  // dk from hn = hp + k u^T (dh before += k dw)
            dh[e] += k[kk] * dw[vv];
            s += hp * dw[vv];
            sg += dh[e] * hp;
            dh[e] *= as[i][kk];
          }
          dk[kk] = s;
          if (p.variant == DELTAC_VARIANT_KDA) gr.dg[size_t(th) * K + kk] = sg;
          dgs += sg;
        }
        if (p.variant == DELTAC_VARIANT_GATED) gr.dg[th] = dgs;
      }
      for (int kk = 0; kk < K; ++kk)
        for (int vv = 0; vv < V; ++vv) gr.dh0[sidx(kk, vv)] = dh[size_t(kk) * V + vv];
    }
  }
  // Sum over value heads, then the L2 norm's backward.
  std::vector<double> x(K), gx(K);
  for (int64_t t = 0; t < tokens; ++t)
    for (int hk = 0; hk < H; ++hk)
      for (int which = 0; which < 2; ++which) {
        const std::vector<double>& dn = which ? dkn : dqn;
        std::vector<double>& out = which ? gr.dk : gr.dq;
        for (int kk = 0; kk < K; ++kk) {
          double s = 0.0;
          for (int j = hk * group; j < (hk + 1) * group; ++j) s += dn[(size_t(t) * HV + j) * K + kk];
          gx[kk] = s;
        }
        const size_t o = (size_t(t) * H + hk) * K;
        if (p.qk_l2norm) {
          double ss = 0.0;
          for (int kk = 0; kk < K; ++kk) {
            x[kk] = bwd_load(which ? p.k : p.q, p.in_dtype, int64_t(o) + kk);
            ss += x[kk] * x[kk];
          }
          const double rr = 1.0 / std::sqrt(ss + 1e-6);
          double dot = 0.0;
          for (int kk = 0; kk < K; ++kk) dot += x[kk] * rr * gx[kk];
          for (int kk = 0; kk < K; ++kk) out[o + kk] = rr * (gx[kk] - x[kk] * rr * dot);
        } else {
          for (int kk = 0; kk < K; ++kk) out[o + kk] = gx[kk];
        }
      }
  return gr;
}

}  // namespace deltac::ref

#endif  // DELTAC_REFERENCE_BACKWARD_H

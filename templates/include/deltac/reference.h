// Plain float64 reference of the delta-rule forward pass (token-by-token
// recurrence). Slow and simple on purpose: every test compares against it.
//
// It defines the semantics of non-finite values (params.h, "Non-finite
// values") with plain IEEE double arithmetic: the decay is exp(g), 0 for
// g = -inf, so a -inf gate multiplies the state (kda: its key row) by exactly
// 0: a finite state becomes exactly 0 (a reset), while NaN or +-inf in the
// state stays NaN (0 * NaN, 0 * inf). Nothing is masked or clamped, so a NaN
// or +-inf in any input reaches every output that depends on it as NaN or
// +-inf. (Built without -ffast-math, as all of deltac.)
#ifndef DELTAC_REFERENCE_H
#define DELTAC_REFERENCE_H

#include "deltac/convert.h"
#include "deltac/fp8.h"
#include "deltac/params.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace deltac::ref {

// bf16 (raw uint16) <-> float, as everywhere in deltac.
inline float bf16_to_float(uint16_t x) { return deltac::bf16_to_f32(x); }
inline uint16_t float_to_bf16(float f) { return deltac::f32_to_bf16(f); }

// Element i of an input tensor of dtype `dt` (F32 or BF16).
inline double load_in(const void* base, int32_t dt, int64_t i) {
  if (dt == DELTAC_BF16)
    return bf16_to_float(static_cast<const uint16_t*>(base)[i]);
  return static_cast<const float*>(base)[i];
}

// The decay e^g of a gate: 0 for g = -inf (a reset), NaN for NaN. (What
// std::exp gives under IEEE 754 / C Annex F; spelled out as the contract.)
inline double decay(double g) { return g == -INFINITY ? 0.0 : std::exp(g); }

// The scale the kernels use: p.scale, or 1/sqrt(K) when p.scale == 0.
inline double effective_scale(const deltac_fwd_params& p) {
  return p.scale != 0.0f ? double(p.scale) : 1.0 / std::sqrt(double(p.K));
}

// The fp8 state scale of value head j (params.h: 1 without state_scale).
inline float state_scale(const deltac_fwd_params& p, int j) {
  return p.state_scale ? p.state_scale[j] : 1.0f;
}

// Element i of a state tensor (state_dtype F32, BF16 or FP8_E4M3; fp8
// elements times `scale`, their head's state_scale).
inline double load_state(const void* base, int32_t dt, int64_t i, float scale = 1.0f) {
  if (dt == DELTAC_FP8_E4M3)
    return double(deltac::fp8e4m3_to_f32(static_cast<const uint8_t*>(base)[i])) * scale;
  return load_in(base, dt, i);
}

// x as a kernel stores it in a state of dtype dt and reads it back: f32 as
// is, bf16 rounded, fp8 as e4m3(x * (1 / scale)) * scale (params.h), all
// from x rounded to f32 first (the kernels compute in f32).
inline double stored_state(double x, int32_t dt, float scale = 1.0f) {
  const float f = float(x);
  if (dt == DELTAC_BF16)
    return bf16_to_float(float_to_bf16(f));
  if (dt == DELTAC_FP8_E4M3)
    return double(deltac::fp8e4m3_to_f32(deltac::f32_to_fp8e4m3(f * (1.0f / scale)))) * scale;
  return f;
}

// Slot sequence n reads (-1: the zero state) and writes (-1: none) under p's
// pool (params.h); without a pool, n and n (h0 / ht null: -1).
inline int32_t read_slot(const deltac_fwd_params& p, int n) {
  if (!p.read_slots)
    return p.h0 ? n : -1;
  const int32_t s = p.read_slots[n];
  return s >= 0 && s < p.num_slots ? s : -1;
}
inline int32_t write_slot(const deltac_fwd_params& p, int n) {
  if (!p.read_slots)
    return p.ht ? n : -1;
  const int32_t s = (p.write_slots ? p.write_slots : p.read_slots)[n];
  return s >= 0 && s < p.num_slots ? s : -1;
}

// Runs the recurrence over host pointers in p. in_dtype F32 or BF16, state
// in state_dtype (F32, BF16 or FP8_E4M3) and p.state_layout, from h0 or its pool slot
// (params.h). Writes o as [B, T, HV, V] and ht as [N, HV, K, V] (or
// [N, HV, V, K] for DELTAC_STATE_VK), both double: ht[n] is the state the call
// leaves for sequence n (after accepted[n] tokens), whatever its write slot
// (pool_after puts it in place). steps: the state after every token,
// [B*T, HV, K, V] in the layout. Any output pointer may be null.
inline void forward(const deltac_fwd_params& p, std::vector<double>* o,
                    std::vector<double>* ht,
                    std::vector<double>* steps = nullptr) {
  const int K = p.K, V = p.V, H = p.H, HV = p.HV, T = p.T;
  const int group = HV / H;
  const bool vk = p.state_layout == DELTAC_STATE_VK;
  const double scale = effective_scale(p);
  const int N = p.cu_seqlens ? p.N : p.B;
  if (o)
    o->assign(size_t(p.B) * T * HV * V, 0.0);
  if (ht)
    ht->assign(size_t(N) * HV * K * V, 0.0);
  if (steps)
    steps->assign(size_t(p.B) * T * HV * K * V, 0.0);
  // (Stored state index of element (kk, vv) of head block `base`.)
  auto at = [&](size_t base, int kk, int vv) {
    return base + (vk ? size_t(vv) * K + kk : size_t(kk) * V + vv);
  };
  std::vector<double> keep(size_t(K) * V);  // the state after `accepted` tokens

  std::vector<double> h(size_t(K) * V), q(K), k(K), u(V), a(K);
  for (int n = 0; n < N; ++n) {
    // Token range, as rows of the flattened [B*T] token axis.
    int64_t t0 = p.cu_seqlens ? p.cu_seqlens[n] : int64_t(n) * T;
    int64_t t1 = p.cu_seqlens ? p.cu_seqlens[n + 1] : int64_t(n + 1) * T;
    for (int j = 0; j < HV; ++j) {
      const int hk = j / group;
      const size_t sbase = (size_t(n) * HV + j) * K * V;
      const int32_t rs = read_slot(p, n);
      const size_t rbase = (size_t(rs) * HV + j) * K * V;
      const int64_t acc = p.accepted ? p.accepted[n] : t1 - t0;
      // h is kept as [K][V] here whatever the layout.
      for (int kk = 0; kk < K; ++kk)
        for (int vv = 0; vv < V; ++vv)
          h[size_t(kk) * V + vv] =
              rs >= 0 && p.h0
                  ? load_state(p.h0, p.state_dtype, int64_t(at(rbase, kk, vv)),
                               state_scale(p, j))
                  : 0.0;
      if (acc == 0)
        keep = h;
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t qk_off = (t * H + hk) * K;
        for (int kk = 0; kk < K; ++kk) {
          q[kk] = load_in(p.q, p.in_dtype, qk_off + kk);
          k[kk] = load_in(p.k, p.in_dtype, qk_off + kk);
        }
        if (p.qk_l2norm) {
          double sq = 0.0, sk = 0.0;
          for (int kk = 0; kk < K; ++kk) {
            sq += q[kk] * q[kk];
            sk += k[kk] * k[kk];
          }
          double rq = 1.0 / std::sqrt(sq + 1e-6), rk = 1.0 / std::sqrt(sk + 1e-6);
          for (int kk = 0; kk < K; ++kk) {
            q[kk] *= rq;
            k[kk] *= rk;
          }
        }
        const int64_t th = t * HV + j;
        // Decay (multiplied in even when 0: a NaN state stays NaN).
        if (p.variant == DELTAC_VARIANT_GATED) {
          double e = decay(double(p.g[th]));
          for (int kk = 0; kk < K; ++kk) a[kk] = e;
        } else if (p.variant == DELTAC_VARIANT_KDA) {
          for (int kk = 0; kk < K; ++kk) a[kk] = decay(double(p.g[th * K + kk]));
        } else {
          for (int kk = 0; kk < K; ++kk) a[kk] = 1.0;
        }
        for (int kk = 0; kk < K; ++kk)
          for (int vv = 0; vv < V; ++vv) h[size_t(kk) * V + vv] *= a[kk];
        // u = beta (v - h^T k)
        const double b = p.beta[th];
        for (int vv = 0; vv < V; ++vv) {
          double s = 0.0;
          for (int kk = 0; kk < K; ++kk) s += h[size_t(kk) * V + vv] * k[kk];
          u[vv] = b * (load_in(p.v, p.in_dtype, th * V + vv) - s);
        }
        // h += k u^T
        for (int kk = 0; kk < K; ++kk)
          for (int vv = 0; vv < V; ++vv) h[size_t(kk) * V + vv] += k[kk] * u[vv];
        // o = scale h^T q
        if (o)
          for (int vv = 0; vv < V; ++vv) {
            double s = 0.0;
            for (int kk = 0; kk < K; ++kk) s += h[size_t(kk) * V + vv] * q[kk];
            (*o)[size_t(th) * V + vv] = scale * s;
          }
        if (steps)
          for (int kk = 0; kk < K; ++kk)
            for (int vv = 0; vv < V; ++vv)
              (*steps)[at(size_t(th) * K * V, kk, vv)] = h[size_t(kk) * V + vv];
        if (t - t0 + 1 == acc)
          keep = h;
      }
      if (ht)
        for (int kk = 0; kk < K; ++kk)
          for (int vv = 0; vv < V; ++vv)
            (*ht)[at(sbase, kk, vv)] = keep[size_t(kk) * V + vv];
    }
  }
}

// The pool ht after the call: `before` (its contents before the call, as
// double; h0's when h0 == ht) with the slot each sequence writes replaced by
// that sequence's state from forward()'s ht.
inline std::vector<double> pool_after(const deltac_fwd_params& p,
                                      const std::vector<double>& ht_ref,
                                      std::vector<double> before) {
  const size_t hs = size_t(p.HV) * p.K * p.V;
  for (int n = 0; n < p.N; ++n) {
    const int32_t s = write_slot(p, n);
    if (s >= 0)
      for (size_t i = 0; i < hs; ++i) before[size_t(s) * hs + i] = ht_ref[size_t(n) * hs + i];
  }
  return before;
}

// ||x - ref|| / ||ref|| over ref.size() elements (0 when both are zero).
inline double rel_rms(const float* x, const std::vector<double>& ref) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    double d = double(x[i]) - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  if (den == 0.0)
    return num == 0.0 ? 0.0 : INFINITY;
  return std::sqrt(num / den);
}

// Same for a bf16 (raw uint16) array.
inline double rel_rms(const uint16_t* x, const std::vector<double>& ref) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    double d = double(bf16_to_float(x[i])) - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  if (den == 0.0)
    return num == 0.0 ? 0.0 : INFINITY;
  return std::sqrt(num / den);
}

}  // namespace deltac::ref

#endif  // DELTAC_REFERENCE_H

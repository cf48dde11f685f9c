#include "harness.h"

#include "deltac/convert.h"
#include "deltac/reference.h"
#include "kernels.h"
#include "kernels_chunked.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>

namespace deltac::test {

KernelFn find_kernel(deltac_variant var, int K, int V, bool bf16) {
  switch (var) {
    case DELTAC_VARIANT_DELTA: return find_delta(K, V, bf16);
    case DELTAC_VARIANT_GATED: return find_gated(K, V, bf16);
    case DELTAC_VARIANT_KDA: return find_kda(K, V, bf16);
  }
  return nullptr;
}

int scan_env() {
  static const int scan = [] {
    const char* s = std::getenv("DELTAC_TEST_WARP_SCAN");
    const int w = s && s[0] >= '1' && s[0] <= '4' && !s[1] ? s[0] - '0' : 0;
    return w == 0 ? 1 : w == 1 ? 0 : w;
  }();
  return scan;
}

ChunkedFns find_chunked(deltac_variant var, int K, int V, int dtype, int config) {
  switch (var) {
    case DELTAC_VARIANT_DELTA: return find_chunked_delta(K, V, dtype, config);
    case DELTAC_VARIANT_GATED: return find_chunked_gated(K, V, dtype, config);
    case DELTAC_VARIANT_KDA: return find_chunked_kda(K, V, dtype, config);
  }
  return {};
}

bool have_gpu() {
  static const bool ok = [] {
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
  }();
  return ok;
}

namespace {

// A device allocation of `bytes` plus one spare element at the front when
// the case asks for misaligned pointers.
struct DevBuf {
  void* base = nullptr;
  char* ptr = nullptr;
  size_t bytes = 0;
  cudaError_t alloc(size_t n, size_t offset) {
    bytes = n;
    cudaError_t e = cudaMalloc(&base, n + 16);
    ptr = static_cast<char*>(base) + offset;
    return e;
  }
  ~DevBuf() {
    if (base)
      cudaFree(base);
  }
};

// Host copy of an input in the kernel's dtype: f32 as is, bf16 / f16 as raw
// bits. For f16, f holds the rounded values (the reference reads them as f32).
struct HostIn {
  std::vector<float> f;
  std::vector<uint16_t> b;
  const void* data(bool bits) const {
    return bits ? static_cast<const void*>(b.data()) : static_cast<const void*>(f.data());
  }
};

HostIn make_in(std::vector<float> x, bool bf16, bool f16) {
  HostIn r;
  if (bf16 || f16) {
    r.b.resize(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      r.b[i] = bf16 ? ref::float_to_bf16(x[i]) : deltac::f32_to_f16(x[i]);
      if (f16)
        x[i] = deltac::f16_to_f32(r.b[i]);
    }
  }
  r.f = std::move(x);
  return r;
}

#define TRY(call)                                                              \
  do {                                                                         \
    cudaError_t e_ = (call);                                                   \
    if (e_ != cudaSuccess) {                                                   \
      r.error = std::string(#call) + ": " + cudaGetErrorString(e_);            \
      return r;                                                                \
    }                                                                          \
  } while (0)

}  // namespace

double rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double d = double(a[i]) - double(b[i]);
    num += d * d;
    den += double(b[i]) * double(b[i]);
  }
  if (a.size() != b.size())
    return INFINITY;
  return den == 0.0 ? (num == 0.0 ? 0.0 : INFINITY) : std::sqrt(num / den);
}

uint64_t test_seed() {
  if (const char* s = std::getenv("DELTAC_TEST_SEED"))
    return std::strtoull(s, nullptr, 10);
  static std::random_device rd;
  return (uint64_t(rd()) << 32) ^ rd();
}

Result run_case(const Case& c, uint64_t seed) {
  Result r;
  const int in_dt = c.f16 ? DELTAC_F16 : c.bf16 ? DELTAC_BF16 : DELTAC_F32;
  KernelFn fn = nullptr;
  ChunkedFns cfn{};
  if (c.chunked) {
    cfn = find_chunked(c.var, c.K, c.V, in_dt, c.config);
    if (!cfn.run) {
      r.error = "no chunked instantiation for this variant, K, V, dtype, config";
      return r;
    }
  } else {
    fn = find_kernel(c.var, c.K, c.V, c.bf16);
    if (!fn || c.f16) {
      r.error = "no instantiation for this K, V";
      return r;
    }
  }
  const bool bits = c.bf16 || c.f16;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  auto uniform = [&](float lo, float hi) {
    return std::uniform_real_distribution<float>(lo, hi)(rng);
  };

  const bool varlen = !c.cu_seqlens.empty();
  const int N = varlen ? int(c.cu_seqlens.size()) - 1 : c.B;
  const int B = varlen ? 1 : c.B;
  const int T = varlen ? int(c.cu_seqlens.back()) : c.T;
  const size_t tokens = size_t(B) * T;
  const size_t nqk = tokens * c.H * c.K, nv = tokens * c.HV * c.V;
  const size_t nbeta = tokens * c.HV;
  const size_t ng = c.var == DELTAC_VARIANT_KDA ? nbeta * c.K : nbeta;
  const size_t nstate = size_t(N) * c.HV * c.K * c.V;
  const float qk_std = c.l2norm ? 1.f : 1.f / std::sqrt(float(c.K));

  std::vector<float> q(nqk), k(nqk), v(nv), beta(nbeta), g(ng), h0(nstate);
  for (float& x : q) x = qk_std * normal(rng);
  for (float& x : k) x = qk_std * normal(rng);
  for (float& x : v) x = normal(rng);
  for (float& x : beta) x = uniform(c.beta_lo, c.beta_hi);
  for (float& x : g) x = uniform(c.g_lo, c.g_hi);
  for (float& x : h0) x = 0.5f * normal(rng);
  if (c.neg_inf_at >= 0 && size_t(c.neg_inf_at) < tokens) {
    const size_t per = ng / tokens;
    for (size_t i = 0; i < per; ++i) g[size_t(c.neg_inf_at) * per + i] = -INFINITY;
  }
  if (c.nan_at >= 0 && size_t(c.nan_at) < tokens)
    v[size_t(c.nan_at) * c.HV * c.V] = NAN;
  HostIn hq = make_in(q, c.bf16, c.f16), hk = make_in(k, c.bf16, c.f16),
         hv = make_in(v, c.bf16, c.f16);

  deltac_fwd_params p{};
  p.variant = c.var;
  p.B = B, p.T = T, p.H = c.H, p.HV = c.HV, p.K = c.K, p.V = c.V, p.N = N;
  p.in_dtype = p.out_dtype = in_dt;
  p.state_dtype = DELTAC_F32;
  p.state_layout = c.layout;
  p.scale = c.scale;
  p.qk_l2norm = c.l2norm;

  // Reference on host pointers.
  deltac_fwd_params hp = p;
  if (c.f16)
    hp.in_dtype = hp.out_dtype = DELTAC_F32;  // the rounded values, as f32
  hp.q = hq.data(c.bf16), hp.k = hk.data(c.bf16), hp.v = hv.data(c.bf16);
  hp.beta = beta.data();
  hp.g = c.var == DELTAC_VARIANT_DELTA ? nullptr : g.data();
  hp.h0 = c.h0 ? h0.data() : nullptr;
  hp.cu_seqlens = varlen ? c.cu_seqlens.data() : nullptr;
  std::vector<double> ref_o, ref_ht;
  ref::forward(hp, &ref_o, c.ht ? &ref_ht : nullptr);

  // Device copies.
  const size_t in_size = bits ? 2 : 4;
  const size_t off_in = c.misaligned ? in_size : 0, off_st = c.misaligned ? 4 : 0;
  DevBuf dq, dk, dv, dbeta, dg, dh0, dht, d_o, dcu;
  TRY(dq.alloc(nqk * in_size, 0));
  TRY(dk.alloc(nqk * in_size, 0));
  TRY(dv.alloc(nv * in_size, off_in));
  TRY(d_o.alloc(nv * in_size, off_in));
  TRY(dbeta.alloc(nbeta * 4, 0));
  TRY(dg.alloc(ng * 4, 0));
  TRY(dh0.alloc(nstate * 4, off_st));
  TRY(dht.alloc(nstate * 4, off_st));
  TRY(dcu.alloc((N + 1) * 8, 0));
  TRY(cudaMemcpy(dq.ptr, hq.data(bits), dq.bytes, cudaMemcpyHostToDevice));
  TRY(cudaMemcpy(dk.ptr, hk.data(bits), dk.bytes, cudaMemcpyHostToDevice));
  TRY(cudaMemcpy(dv.ptr, hv.data(bits), dv.bytes, cudaMemcpyHostToDevice));
  TRY(cudaMemcpy(dbeta.ptr, beta.data(), dbeta.bytes, cudaMemcpyHostToDevice));
  TRY(cudaMemcpy(dg.ptr, g.data(), dg.bytes, cudaMemcpyHostToDevice));
  if (varlen)
    TRY(cudaMemcpy(dcu.ptr, c.cu_seqlens.data(), dcu.bytes, cudaMemcpyHostToDevice));

  deltac_fwd_params dp = p;
  dp.q = dq.ptr, dp.k = dk.ptr, dp.v = dv.ptr, dp.o = d_o.ptr;
  dp.beta = reinterpret_cast<const float*>(dbeta.ptr);
  dp.g = c.var == DELTAC_VARIANT_DELTA ? nullptr : reinterpret_cast<const float*>(dg.ptr);
  dp.h0 = c.h0 ? dh0.ptr : nullptr;
  dp.ht = c.ht ? (c.inplace ? dh0.ptr : dht.ptr) : nullptr;
  dp.cu_seqlens = varlen ? reinterpret_cast<const int64_t*>(dcu.ptr) : nullptr;

  DevBuf dws;
  size_t ws_bytes = 0;
  if (c.chunked) {
    ws_bytes = cfn.ws(dp);
    TRY(dws.alloc(ws_bytes, 0));
  }

  std::vector<char> o_out[2], ht_out[2];
  for (int run = 0; run < 2; ++run) {
    // Fresh h0 (an in-place run overwrote it) and NaN-poisoned outputs.
    TRY(cudaMemcpy(dh0.ptr, h0.data(), dh0.bytes, cudaMemcpyHostToDevice));
    TRY(cudaMemset(d_o.ptr, 0xff, d_o.bytes));
    if (!c.inplace)
      TRY(cudaMemset(dht.ptr, 0xff, dht.bytes));
    if (c.chunked) {
      // Poisoned workspace: a read of anything the kernels did not write
      // shows up as NaN.
      TRY(cudaMemset(dws.ptr, 0xff, ws_bytes));
      TRY(cfn.run(dp, dws.ptr, ws_bytes, nullptr, nullptr));
    } else {
      TRY(fn(dp, nullptr, c.bv));
    }
    TRY(cudaDeviceSynchronize());
    o_out[run].resize(d_o.bytes);
    TRY(cudaMemcpy(o_out[run].data(), d_o.ptr, d_o.bytes, cudaMemcpyDeviceToHost));
    if (c.ht) {
      ht_out[run].resize(nstate * 4);
      TRY(cudaMemcpy(ht_out[run].data(), dp.ht, nstate * 4, cudaMemcpyDeviceToHost));
    }
  }
  r.repeat_identical = o_out[0] == o_out[1] && ht_out[0] == ht_out[1];

  std::vector<float> o_f(nv);
  if (bits) {
    const uint16_t* raw = reinterpret_cast<const uint16_t*>(o_out[0].data());
    for (size_t i = 0; i < nv; ++i)
      o_f[i] = c.bf16 ? ref::bf16_to_float(raw[i]) : deltac::f16_to_f32(raw[i]);
  } else {
    std::memcpy(o_f.data(), o_out[0].data(), nv * 4);
  }
  for (float x : o_f) r.o_finite = r.o_finite && std::isfinite(x);
  for (size_t i = 0; i < nv; ++i)
    if (!std::isfinite(ref_o[i]) && std::isfinite(o_f[i]))
      r.nan_kept = false;
  r.o_err = ref::rel_rms(o_f.data(), ref_o);
  r.o = o_f;
  if (c.ht) {
    const float* ht_f = reinterpret_cast<const float*>(ht_out[0].data());
    for (size_t i = 0; i < nstate; ++i) {
      r.ht_finite = r.ht_finite && std::isfinite(ht_f[i]);
      if (!std::isfinite(ref_ht[i]) && std::isfinite(ht_f[i]))
        r.nan_kept = false;
    }
    r.ht_err = ref::rel_rms(ht_f, ref_ht);
    r.ht.assign(ht_f, ht_f + nstate);
  }
  return r;
}

}  // namespace deltac::test

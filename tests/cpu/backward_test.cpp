// The delta-rule backward: the float64 reference against finite differences
// of ref::forward, the CPU kernels (the sweep and the chunked form; f32,
// bf16, f64) against the reference and each other, and deltac_backward's
// argument checks.
#include "deltac/cpu/backward.h"
#include "deltac/reference.h"
#include "deltac/reference_backward.h"
#include "deltac/runtime.h"
#include "deltac/test_seed.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace {

struct Case {
  deltac_variant var = DELTAC_VARIANT_GATED;
  int B = 2, T = 37, H = 2, HV = 4, K = 32, V = 16;
  std::vector<int64_t> lens;  // varlen when non-empty (B = 1)
  bool h0 = true, dht = true, l2 = true;
  int layout = DELTAC_STATE_KV;
  int dtype = DELTAC_F32;  // q, k, v, dout: F32, BF16 or DELTAC_BWD_F64
  float beta_hi = 1.0f;
  float g_lo = -1.0f;  // gates uniform in [g_hi + g_lo, g_hi]
  float g_hi = 0.0f;
  float g_spike = 0.0f;  // < 0: each gate is this with probability 1/8
  int chunk = 0;
  float scale = 0.0f;
  int threads = 0;
};

std::string describe(const Case& c) {
  static const char* vars[] = {"delta", "gated", "kda"};
  std::string s = std::string(vars[c.var]) + " B" + std::to_string(c.B) + " T" +
                  std::to_string(c.T) + " H" + std::to_string(c.H) + "/" + std::to_string(c.HV) +
                  " K" + std::to_string(c.K) + " V" + std::to_string(c.V) + " chunk" +
                  std::to_string(c.chunk) + " dtype" + std::to_string(c.dtype);
  if (!c.lens.empty()) s += " varlen";
  if (c.layout) s += " vk";
  if (!c.l2) s += " no-l2";
  if (!c.h0) s += " no-h0";
  if (!c.dht) s += " no-dht";
  return s;
}

// Inputs in float (exactly what a f32 call sees; bf16-rounded for bf16).
struct Data {
  Case c;
  int N = 0;
  int64_t tokens = 0;
  std::vector<float> q, k, v, g, beta, h0, dout, dht;
  std::vector<int64_t> cu;
};

float bf16_round(float x) { return deltac::bf16_to_f32(deltac::f32_to_bf16(x)); }

Data make(const Case& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_real_distribution<float> ud(0.0f, 1.0f);
  Data d;
  d.c = c;
  if (!c.lens.empty()) {
    d.c.B = 1;
    d.c.T = 0;
    d.cu.push_back(0);
    for (int64_t l : c.lens) d.cu.push_back(d.cu.back() + l);
    d.c.T = int(d.cu.back());
    d.N = int(c.lens.size());
  } else {
    d.N = c.B;
  }
  const Case& e = d.c;
  d.tokens = int64_t(e.B) * e.T;
  auto fill = [&](std::vector<float>& x, size_t n, float s) {
    x.resize(n);
    for (auto& y : x) {
      y = s * nd(rng);
      if (c.dtype == DELTAC_BF16) y = bf16_round(y);
    }
  };
  fill(d.q, d.tokens * e.H * e.K, 1.0f);
  fill(d.k, d.tokens * e.H * e.K, c.l2 ? 1.0f : 1.0f / std::sqrt(float(e.K)));
  fill(d.v, d.tokens * e.HV * e.V, 1.0f);
  fill(d.dout, d.tokens * e.HV * e.V, 1.0f);
  d.beta.resize(d.tokens * e.HV);
  for (auto& b : d.beta) b = 0.05f + (c.beta_hi - 0.1f) * ud(rng);
  if (e.var != DELTAC_VARIANT_DELTA) {
    d.g.resize(d.tokens * e.HV * (e.var == DELTAC_VARIANT_KDA ? e.K : 1));
    for (auto& g : d.g) {
      g = c.g_hi + c.g_lo * ud(rng);
      if (c.g_spike < 0 && ud(rng) < 0.125f) g = c.g_spike;
    }
  }
  const size_t ns = size_t(d.N) * e.HV * e.K * e.V;
  if (c.h0) {
    d.h0.resize(ns);
    for (auto& x : d.h0) x = 0.5f * nd(rng);
  }
  if (c.dht) {
    d.dht.resize(ns);
    for (auto& x : d.dht) x = nd(rng);
  }
  return d;
}

// A forward params struct over d (f32 inputs), outputs unset.
deltac_fwd_params fwd_params(const Data& d) {
  deltac_fwd_params p{};
  const Case& c = d.c;
  p.variant = c.var;
  p.B = c.B, p.T = c.T, p.H = c.H, p.HV = c.HV, p.K = c.K, p.V = c.V, p.N = d.N;
  p.in_dtype = p.out_dtype = p.state_dtype = DELTAC_F32;
  p.state_layout = c.layout;
  p.q = d.q.data(), p.k = d.k.data(), p.v = d.v.data();
  p.g = d.g.empty() ? nullptr : d.g.data();
  p.beta = d.beta.data();
  p.h0 = d.h0.empty() ? nullptr : d.h0.data();
  p.cu_seqlens = d.cu.empty() ? nullptr : d.cu.data();
  p.scale = c.scale;
  p.qk_l2norm = c.l2;
  return p;
}

// Typed copies of the inputs and output buffers of one backward call.
struct Call {
  std::vector<double> q64, k64, v64, g64, b64, h064, do64, dht64;
  std::vector<uint16_t> qb, kb, vb, dob;
  std::vector<float> dq, dk, dv, dg, dbeta, dh0;
  std::vector<uint16_t> dqb, dkb, dvb;
  std::vector<double> dq64, dk64, dv64, dg64, dbeta64, dh064;
  deltac_bwd_params p{};
};

std::vector<double> to64(const std::vector<float>& x) { return {x.begin(), x.end()}; }
std::vector<uint16_t> to16(const std::vector<float>& x) {
  std::vector<uint16_t> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = deltac::f32_to_bf16(x[i]);
  return y;
}

void setup(const Data& d, Call& call) {
  const Case& c = d.c;
  deltac_bwd_params& p = call.p;
  p = deltac_bwd_params{};
  p.variant = c.var;
  p.B = c.B, p.T = c.T, p.H = c.H, p.HV = c.HV, p.K = c.K, p.V = c.V, p.N = d.N;
  p.in_dtype = p.out_dtype = c.dtype;
  p.state_layout = c.layout;
  p.cu_seqlens = d.cu.empty() ? nullptr : d.cu.data();
  p.scale = c.scale;
  p.qk_l2norm = c.l2;
  p.chunk = c.chunk;
  p.threads = c.threads;
  const size_t nqk = d.q.size(), nv = d.v.size(), ns = size_t(d.N) * c.HV * c.K * c.V;
  if (c.dtype == DELTAC_BWD_F64) {
    call.q64 = to64(d.q), call.k64 = to64(d.k), call.v64 = to64(d.v), call.do64 = to64(d.dout);
    call.g64 = to64(d.g), call.b64 = to64(d.beta), call.h064 = to64(d.h0), call.dht64 = to64(d.dht);
    p.q = call.q64.data(), p.k = call.k64.data(), p.v = call.v64.data(), p.dout = call.do64.data();
    p.g = d.g.empty() ? nullptr : call.g64.data();
    p.beta = call.b64.data();
    p.h0 = d.h0.empty() ? nullptr : call.h064.data();
    p.dht = d.dht.empty() ? nullptr : call.dht64.data();
    call.dq64.assign(nqk, NAN), call.dk64.assign(nqk, NAN), call.dv64.assign(nv, NAN);
    call.dg64.assign(d.g.size(), NAN), call.dbeta64.assign(d.beta.size(), NAN);
    call.dh064.assign(ns, NAN);
    p.dq = call.dq64.data(), p.dk = call.dk64.data(), p.dv = call.dv64.data();
    p.dg = call.dg64.data(), p.dbeta = call.dbeta64.data(), p.dh0 = call.dh064.data();
    return;
  }
  if (c.dtype == DELTAC_BF16) {
    call.qb = to16(d.q), call.kb = to16(d.k), call.vb = to16(d.v), call.dob = to16(d.dout);
    p.q = call.qb.data(), p.k = call.kb.data(), p.v = call.vb.data(), p.dout = call.dob.data();
    call.dqb.assign(nqk, 0x7fc0), call.dkb.assign(nqk, 0x7fc0), call.dvb.assign(nv, 0x7fc0);
    p.dq = call.dqb.data(), p.dk = call.dkb.data(), p.dv = call.dvb.data();
  } else {
    p.q = d.q.data(), p.k = d.k.data(), p.v = d.v.data(), p.dout = d.dout.data();
    call.dq.assign(nqk, NAN), call.dk.assign(nqk, NAN), call.dv.assign(nv, NAN);
    p.dq = call.dq.data(), p.dk = call.dk.data(), p.dv = call.dv.data();
  }
  p.g = d.g.empty() ? nullptr : d.g.data();
  p.beta = d.beta.data();
  p.h0 = d.h0.empty() ? nullptr : d.h0.data();
  p.dht = d.dht.empty() ? nullptr : d.dht.data();
  call.dg.assign(d.g.size(), NAN), call.dbeta.assign(d.beta.size(), NAN), call.dh0.assign(ns, NAN);
  p.dg = call.dg.data(), p.dbeta = call.dbeta.data(), p.dh0 = call.dh0.data();
}

double rel(const std::vector<double>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double e = got[i] - want[i];
    num += std::isfinite(got[i]) ? e * e : INFINITY;
    den += want[i] * want[i];
  }
  return den == 0 ? (num == 0 ? 0 : INFINITY) : std::sqrt(num / den);
}
std::vector<double> as64(const std::vector<float>& x) { return to64(x); }
std::vector<double> as64(const std::vector<uint16_t>& x) {
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = deltac::bf16_to_f32(x[i]);
  return y;
}

// Relative RMS errors of the kernel against the reference, per gradient.
struct Errs {
  double dq, dk, dv, dg, dbeta, dh0;
  double max() const { return std::max({dq, dk, dv, dg, dbeta, dh0}); }
};

template <class Fn>
Errs kernel_vs_ref(const Case& c, uint64_t seed, Fn&& kernel) {
  Data d = make(c, seed);
  Call call;
  setup(d, call);
  kernel(call.p);
  // The reference on the same (rounded) values, in f64.
  Call rc;
  Case c64 = c;
  c64.dtype = DELTAC_BWD_F64;
  Data d64 = d;
  d64.c.dtype = DELTAC_BWD_F64;
  setup(d64, rc);
  const deltac::ref::Grads gr = deltac::ref::backward(rc.p);
  Errs e{};
  if (c.dtype == DELTAC_BWD_F64) {
    e = {rel(call.dq64, gr.dq), rel(call.dk64, gr.dk), rel(call.dv64, gr.dv),
         rel(call.dg64, gr.dg), rel(call.dbeta64, gr.dbeta), rel(call.dh064, gr.dh0)};
  } else if (c.dtype == DELTAC_BF16) {
    e = {rel(as64(call.dqb), gr.dq), rel(as64(call.dkb), gr.dk), rel(as64(call.dvb), gr.dv),
         rel(as64(call.dg), gr.dg), rel(as64(call.dbeta), gr.dbeta), rel(as64(call.dh0), gr.dh0)};
  } else {
    e = {rel(as64(call.dq), gr.dq), rel(as64(call.dk), gr.dk), rel(as64(call.dv), gr.dv),
         rel(as64(call.dg), gr.dg), rel(as64(call.dbeta), gr.dbeta), rel(as64(call.dh0), gr.dh0)};
  }
  return e;
}

void run_kernel(const deltac_bwd_params& p) {
  using namespace deltac::cpu::bwd;
  switch (p.variant) {
    case DELTAC_VARIANT_DELTA: backward<DELTAC_VARIANT_DELTA>(p); break;
    case DELTAC_VARIANT_GATED: backward<DELTAC_VARIANT_GATED>(p); break;
    default: backward<DELTAC_VARIANT_KDA>(p); break;
  }
}

void run_sweep(const deltac_bwd_params& p) {
  using namespace deltac::cpu::bwd;
  switch (p.variant) {
    case DELTAC_VARIANT_DELTA: backward_sweep<DELTAC_VARIANT_DELTA>(p); break;
    case DELTAC_VARIANT_GATED: backward_sweep<DELTAC_VARIANT_GATED>(p); break;
    default: backward_sweep<DELTAC_VARIANT_KDA>(p); break;
  }
}

void run_chunked(const deltac_bwd_params& p) {
  using namespace deltac::cpu::bwd;
  if (p.variant == DELTAC_VARIANT_DELTA)
    backward_chunked<DELTAC_VARIANT_DELTA>(p);
  else
    backward_chunked<DELTAC_VARIANT_GATED>(p);
}

void run_runtime(const deltac_bwd_params& p) {
  ASSERT_EQ(deltac_backward(&p, nullptr), 0) << deltac_last_error();
}

// L = sum o . dout + ht . dht, by ref::forward (inputs f32 as given).
double loss(const Data& d) {
  std::vector<double> o, ht;
  deltac_fwd_params p = fwd_params(d);
  deltac::ref::forward(p, &o, d.dht.empty() ? nullptr : &ht);
  double s = 0;
  for (size_t i = 0; i < o.size(); ++i) s += o[i] * d.dout[i];
  for (size_t i = 0; i < ht.size(); ++i) s += ht[i] * d.dht[i];
  return s;
}

// The reference's gradients against central differences of loss() along
// one random direction per input tensor.
TEST(BackwardReference, MatchesFiniteDifferences) {
  for (auto var : {DELTAC_VARIANT_DELTA, DELTAC_VARIANT_GATED, DELTAC_VARIANT_KDA})
    for (int layout : {0, 1})
      for (bool varlen : {false, true}) {
        Case c;
        c.var = var;
        c.B = 2, c.T = 6, c.H = 1, c.HV = 2, c.K = 16, c.V = 16;
        c.layout = layout;
        c.beta_hi = 2.0f;
        c.scale = layout ? 0.3f : 0.0f;
        if (varlen) c.lens = {3, 0, 5};
        const uint64_t seed = deltac::test_seed();
        SCOPED_TRACE(deltac::test_seed_note(seed) + " " + describe(c));
        Data d = make(c, seed);
        Call rc;
        Data d64 = d;
        d64.c.dtype = DELTAC_BWD_F64;
        setup(d64, rc);
        const deltac::ref::Grads gr = deltac::ref::backward(rc.p);
        std::mt19937_64 rng(seed ^ 0x5eed);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        struct Input {
          const char* name;
          std::vector<float>* x;
          const std::vector<double>* grad;
        };
        const Input inputs[] = {{"q", &d.q, &gr.dq},     {"k", &d.k, &gr.dk},
                                {"v", &d.v, &gr.dv},     {"beta", &d.beta, &gr.dbeta},
                                {"g", &d.g, &gr.dg},     {"h0", &d.h0, &gr.dh0}};
        for (const Input& in : inputs) {
          if (in.x->empty()) continue;
          std::vector<float> dir(in.x->size()), x0 = *in.x;
          for (auto& e : dir) e = nd(rng);
          const float eps = 1e-2f;
          std::vector<float> xp(x0), xm(x0);
          double proj = 0, dnorm = 0;
          for (size_t i = 0; i < dir.size(); ++i) {
            xp[i] = x0[i] + eps * dir[i];
            xm[i] = x0[i] - eps * dir[i];
            const double step = double(xp[i]) - double(xm[i]);
            proj += (*in.grad)[i] * step;
            dnorm += step * step;
          }
          *in.x = xp;
          const double lp = loss(d);
          *in.x = xm;
          const double lm = loss(d);
          *in.x = x0;
          // (L(x+) - L(x-)) vs grad . (x+ - x-), relative to |grad| |x+ - x-|.
          double gn = 0;
          for (double e : *in.grad) gn += e * e;
          const double scale = std::sqrt(gn * dnorm) + 1e-12;
          EXPECT_LE(std::fabs((lp - lm) - proj) / scale, 2e-3) << in.name;
        }
      }
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (auto var : {DELTAC_VARIANT_DELTA, DELTAC_VARIANT_GATED, DELTAC_VARIANT_KDA}) {
    Case c;
    c.var = var;
    out.push_back(c);  // GVA, l2, h0, dht
    Case a = c;
    a.chunk = 1;
    a.layout = DELTAC_STATE_VK;
    a.l2 = false;
    a.beta_hi = 2.0f;
    a.scale = 0.2f;
    out.push_back(a);
    Case b = c;
    b.lens = {1, 40, 0, 17, 64};
    b.chunk = 7;
    b.h0 = false;
    b.HV = 2;
    b.K = 64, b.V = 48;
    out.push_back(b);
    Case e = c;
    e.dht = false;
    e.chunk = 64;
    e.T = 200;
    e.B = 1;
    e.H = e.HV = 3;
    out.push_back(e);
    Case w = c;  // extreme head dims (vector tiles of 2 and 4)
    w.K = 256, w.V = 16, w.T = 9, w.chunk = 4;
    out.push_back(w);
    Case x = c;
    x.K = 16, x.V = 256, x.T = 9, x.HV = 2, x.threads = 1;
    out.push_back(x);
    Case s = c;  // resets and near-underflow gates
    s.g_spike = var == DELTAC_VARIANT_DELTA ? 0.0f : -INFINITY;
    s.g_lo = -30.0f;
    out.push_back(s);
    Case s2 = s;  // every gate strong (dg ~ 1e-13: no cancellation may show)
    s2.g_hi = -28.0f, s2.g_lo = -2.0f;
    s2.B = 1, s2.T = 200, s2.H = s2.HV = 1, s2.K = s2.V = 16;
    out.push_back(s2);
    Case t = c;  // one token
    t.T = 1, t.B = 3;
    out.push_back(t);
    Case g8 = c;  // GVA 8, a 6-token tail chunk, gates near 0
    g8.H = 1, g8.HV = 8, g8.T = 70, g8.chunk = 16, g8.g_lo = -1e-3f, g8.dht = false;
    out.push_back(g8);
    Case g4 = c;  // GVA 4 at K = V = 128 (the GEMM tiles), default chunk, 2-token tail
    g4.B = 1, g4.H = 1, g4.HV = 4, g4.K = g4.V = 128, g4.T = 130, g4.h0 = false;
    g4.layout = DELTAC_STATE_VK;
    out.push_back(g4);
  }
  return out;
}

class BackwardKernel : public ::testing::TestWithParam<Case> {};

TEST_P(BackwardKernel, F32MatchesReference) {
  Case c = GetParam();
  const uint64_t seed = deltac::test_seed();
  SCOPED_TRACE(deltac::test_seed_note(seed) + " " + describe(c));
  Errs e = kernel_vs_ref(c, seed, run_kernel);
  EXPECT_LE(e.max(), 1e-5) << e.dq << " " << e.dk << " " << e.dv << " " << e.dg << " "
                           << e.dbeta << " " << e.dh0;
}

TEST_P(BackwardKernel, F64MatchesReference) {
  Case c = GetParam();
  c.dtype = DELTAC_BWD_F64;
  const uint64_t seed = deltac::test_seed();
  SCOPED_TRACE(deltac::test_seed_note(seed) + " " + describe(c));
  Errs e = kernel_vs_ref(c, seed, run_kernel);
  EXPECT_LE(e.max(), 1e-11);
}

TEST_P(BackwardKernel, SweepF32MatchesReference) {
  Case c = GetParam();
  const uint64_t seed = deltac::test_seed();
  SCOPED_TRACE(deltac::test_seed_note(seed) + " " + describe(c));
  Errs e = kernel_vs_ref(c, seed, run_sweep);
  EXPECT_LE(e.max(), 1e-5) << e.dq << " " << e.dk << " " << e.dv << " " << e.dg << " "
                           << e.dbeta << " " << e.dh0;
}

TEST_P(BackwardKernel, ChunkedF32MatchesReference) {
  Case c = GetParam();
  if (c.var == DELTAC_VARIANT_KDA) GTEST_SKIP() << "kda: the sweep only";
  const uint64_t seed = deltac::test_seed();
  SCOPED_TRACE(deltac::test_seed_note(seed) + " " + describe(c));
  Errs e = kernel_vs_ref(c, seed, run_chunked);
  EXPECT_LE(e.max(), 1e-5) << e.dq << " " << e.dk << " " << e.dv << " " << e.dg << " "
                           << e.dbeta << " " << e.dh0;
}

TEST_P(BackwardKernel, ChunkedF64MatchesReference) {
  Case c = GetParam();
  if (c.var == DELTAC_VARIANT_KDA) GTEST_SKIP() << "kda: the sweep only";
  c.dtype = DELTAC_BWD_F64;
  const uint64_t seed = deltac::test_seed();
  SCOPED_TRACE(deltac::test_seed_note(seed) + " " + describe(c));
  Errs e = kernel_vs_ref(c, seed, run_chunked);
  EXPECT_LE(e.max(), 1e-11) << e.dq << " " << e.dk << " " << e.dv << " " << e.dg << " "
                            << e.dbeta << " " << e.dh0;
}

// The chunked form against the sweep on the same f32 inputs.
TEST_P(BackwardKernel, ChunkedMatchesSweep) {
  Case c = GetParam();
  if (c.var == DELTAC_VARIANT_KDA) GTEST_SKIP() << "kda: the sweep only";
  const uint64_t seed = deltac::test_seed();
  SCOPED_TRACE(deltac::test_seed_note(seed) + " " + describe(c));
  Data d = make(c, seed);
  Call a, b;
  setup(d, a);
  setup(d, b);
  run_sweep(a.p);
  run_chunked(b.p);
  const double e = std::max({rel(as64(b.dq), as64(a.dq)), rel(as64(b.dk), as64(a.dk)),
                             rel(as64(b.dv), as64(a.dv)), rel(as64(b.dg), as64(a.dg)),
                             rel(as64(b.dbeta), as64(a.dbeta)), rel(as64(b.dh0), as64(a.dh0))});
  EXPECT_LE(e, 1e-5);
}

// deltac_backward: the rule's path in the machine's (or DELTAC_CPU_ISA's)
// instruction-set build.
TEST_P(BackwardKernel, F32RuntimeMatchesReference) {
  Case c = GetParam();
  const uint64_t seed = deltac::test_seed();
  SCOPED_TRACE(deltac::test_seed_note(seed) + " " + describe(c));
  Errs e = kernel_vs_ref(c, seed, run_runtime);
  EXPECT_LE(e.max(), 1e-5) << e.dq << " " << e.dk << " " << e.dv << " " << e.dg << " "
                           << e.dbeta << " " << e.dh0;
}

TEST_P(BackwardKernel, F64RuntimeMatchesReference) {
  Case c = GetParam();
  c.dtype = DELTAC_BWD_F64;
  const uint64_t seed = deltac::test_seed();
  SCOPED_TRACE(deltac::test_seed_note(seed) + " " + describe(c));
  Errs e = kernel_vs_ref(c, seed, run_runtime);
  EXPECT_LE(e.max(), 1e-11);
}

TEST_P(BackwardKernel, Bf16RuntimeMatchesReference) {
  Case c = GetParam();
  c.dtype = DELTAC_BF16;
  const uint64_t seed = deltac::test_seed();
  SCOPED_TRACE(deltac::test_seed_note(seed) + " " + describe(c));
  Errs e = kernel_vs_ref(c, seed, run_runtime);
  // Gradients are rounded to bf16 (2^-9 relative) on output.
  EXPECT_LE(e.max(), 5e-3) << e.dq << " " << e.dk << " " << e.dv << " " << e.dg << " "
                           << e.dbeta << " " << e.dh0;
}

std::string name(const ::testing::TestParamInfo<Case>& info) {
  static const char* vars[] = {"delta", "gated", "kda"};
  return std::string(vars[info.param.var]) + "_" + std::to_string(info.index);
}

INSTANTIATE_TEST_SUITE_P(Cases, BackwardKernel, ::testing::ValuesIn(cases()), name);

// The rule: chunked for delta / gated averaging >= 2 chunks per sequence.
TEST(CpuBackwardRule, ChunkedWhereSequencesAreLong) {
  using deltac::cpu::bwd::use_chunked;
  deltac_bwd_params p{};
  p.variant = DELTAC_VARIANT_GATED, p.B = 2, p.T = 128;
  EXPECT_TRUE(use_chunked(p));
  p.T = 127;
  EXPECT_FALSE(use_chunked(p));
  p.chunk = 16;
  EXPECT_TRUE(use_chunked(p));
  p.variant = DELTAC_VARIANT_KDA;
  EXPECT_FALSE(use_chunked(p));
  // The chunked form's chunk: params.chunk in 1..256, else 64 (its scratch
  // grows as chunk^2); the sweep's interval keeps any 1..4096.
  using deltac::cpu::bwd::chunked_chunk;
  EXPECT_EQ(chunked_chunk(p), 16);
  p.chunk = 0;
  EXPECT_EQ(chunked_chunk(p), 64);
  p.chunk = 256;
  EXPECT_EQ(chunked_chunk(p), 256);
  p.chunk = 4096;
  EXPECT_EQ(chunked_chunk(p), 64);
  p.variant = DELTAC_VARIANT_GATED, p.T = 128;
  EXPECT_TRUE(use_chunked(p));
}

// Long sequence with strong decay and resets: finite, and f32 still close.
TEST(BackwardKernelLong, StrongDecayStaysFinite) {
  for (auto var : {DELTAC_VARIANT_GATED, DELTAC_VARIANT_KDA}) {
    Case c;
    c.var = var;
    c.B = 1, c.T = 1024, c.H = 1, c.HV = 2, c.K = 32, c.V = 32;
    c.g_lo = -30.0f;
    c.g_spike = -INFINITY;
    const uint64_t seed = deltac::test_seed();
    SCOPED_TRACE(deltac::test_seed_note(seed) + " " + describe(c));
    Errs e = kernel_vs_ref(c, seed, run_runtime);
    EXPECT_LE(e.max(), 1e-5);
  }
}

deltac_bwd_params valid(Data& d, Call& call) {
  setup(d, call);
  return call.p;
}

TEST(BackwardRuntime, ChecksArguments) {
  Case c;
  Data d = make(c, 1);
  Call call;
  struct Bad {
    void (*edit)(deltac_bwd_params&);
    const char* field;
  };
  const Bad bads[] = {
      {[](deltac_bwd_params& p) { p.dq = nullptr; }, "params.dq"},
      {[](deltac_bwd_params& p) { p.dout = nullptr; }, "params.dout"},
      {[](deltac_bwd_params& p) { p.dg = nullptr; }, "params.dg"},
      {[](deltac_bwd_params& p) { p.K = 24; }, "params.K"},
      {[](deltac_bwd_params& p) { p.HV = 3; }, "params.HV"},
      {[](deltac_bwd_params& p) { p.in_dtype = DELTAC_F16; }, "params.in_dtype"},
      {[](deltac_bwd_params& p) { p.out_dtype = DELTAC_BWD_F64; }, "params.out_dtype"},
      {[](deltac_bwd_params& p) { p.chunk = -1; }, "params.chunk"},
      {[](deltac_bwd_params& p) { p.scale = -1; }, "params.scale"},
  };
  for (const Bad& b : bads) {
    deltac_bwd_params p = valid(d, call);
    b.edit(p);
    EXPECT_NE(deltac_backward(&p, nullptr), 0) << b.field;
    EXPECT_NE(std::string(deltac_last_error()).find(b.field), std::string::npos)
        << deltac_last_error();
  }
  deltac_bwd_params p = valid(d, call);
  deltac_options opt = deltac_default_options();
  opt.device = DELTAC_DEVICE_CUDA;
  EXPECT_NE(deltac_backward(&p, &opt), 0);
  EXPECT_NE(std::string(deltac_last_error()).find("device_pointers"),
            std::string::npos)
      << deltac_last_error();
  EXPECT_EQ(deltac_backward(&p, nullptr), 0) << deltac_last_error();
  EXPECT_STREQ(deltac_last_error(), "");
  EXPECT_NE(deltac_backward(nullptr, nullptr), 0);
}

}  // namespace

// The autotuner's inputs (bench.h).
#include "bench.h"

#include "deltac/convert.h"
#include "deltac/reference.h"

#include <cmath>
#include <cstdio>

namespace deltac::tune {
namespace {

// xorshift64*: fast, reproducible inputs (the values only need to be a
// stable recurrence, not a particular distribution).
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1) {}
  uint64_t next() {
    s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
    return s * 0x2545F4914F6CDD1Dull;
  }
  float uni() { return float(next() >> 40) * (1.0f / 16777216.0f); }
  float sym() { return 2.0f * uni() - 1.0f; }
};

} // namespace

Tensors make_tensors(const Spec &sp, int32_t B, int32_t T, uint64_t seed) {
  Tensors t;
  t.B = B, t.T = T;
  Rng rng(seed);
  const size_t rows = size_t(B) * T;
  auto unitRows = [&](std::vector<float> &x) {
    x.resize(rows * sp.H * sp.K);
    for (size_t r = 0; r < x.size() / sp.K; ++r) {
      double s = 0;
      for (int i = 0; i < sp.K; ++i) {
        const float z = rng.sym();
        x[r * sp.K + i] = z;
        s += double(z) * z;
      }
      const float inv = float(1.0 / std::sqrt(s + 1e-12));
      for (int i = 0; i < sp.K; ++i)
        x[r * sp.K + i] *= inv;
    }
  };
  unitRows(t.q);
  unitRows(t.k);
  t.v.resize(rows * sp.HV * sp.V);
  for (float &x : t.v)
    x = 1.7f * rng.sym();
  t.beta.resize(rows * sp.HV);
  for (float &x : t.beta)
    x = rng.uni();
  if (sp.variant != DELTAC_VARIANT_DELTA) {
    t.g.resize(rows * sp.HV * (sp.variant == DELTAC_VARIANT_KDA ? sp.K : 1));
    for (float &x : t.g)
      x = -0.2f * rng.uni();
  }
  t.h0.resize(size_t(B) * sp.HV * sp.K * sp.V);
  for (float &x : t.h0)
    x = 0.3f * rng.sym();
  t.ht.assign(t.h0.size(), 0.0f);
  if (sp.in_dtype == DELTAC_BF16) {
    auto toBf16 = [](const std::vector<float> &x, std::vector<uint16_t> &y) {
      y.resize(x.size());
      for (size_t i = 0; i < x.size(); ++i)
        y[i] = f32_to_bf16(x[i]);
    };
    toBf16(t.q, t.qb), toBf16(t.k, t.kb), toBf16(t.v, t.vb);
    std::vector<float>().swap(t.q);
    std::vector<float>().swap(t.k);
    std::vector<float>().swap(t.v);
  }
  if (sp.out_dtype == DELTAC_BF16)
    t.ob.assign(rows * sp.HV * sp.V, 0);
  else
    t.o.assign(rows * sp.HV * sp.V, 0.0f);
  return t;
}

deltac_fwd_params params_of(const Spec &sp, Tensors &t) {
  deltac_fwd_params p{};
  p.variant = sp.variant;
  p.B = t.B, p.T = t.T, p.H = sp.H, p.HV = sp.HV, p.K = sp.K, p.V = sp.V;
  p.N = t.B;
  p.in_dtype = sp.in_dtype, p.out_dtype = sp.out_dtype;
  p.state_dtype = DELTAC_F32, p.state_layout = DELTAC_STATE_KV;
  const bool bf = sp.in_dtype == DELTAC_BF16;
  p.q = bf ? (const void *)t.qb.data() : t.q.data();
  p.k = bf ? (const void *)t.kb.data() : t.k.data();
  p.v = bf ? (const void *)t.vb.data() : t.v.data();
  p.g = t.g.empty() ? nullptr : t.g.data();
  p.beta = t.beta.data();
  p.h0 = t.h0.data();
  p.o = sp.out_dtype == DELTAC_BF16 ? (void *)t.ob.data() : t.o.data();
  p.ht = t.ht.data();
  p.qk_l2norm = sp.qk_l2norm ? 1 : 0;
  return p;
}

namespace {

double tolerance_o(const Spec &sp) {
  // The kernel tests' limits: bf16 5e-3; f32 1e-5 on the CPU, 1e-4 on CUDA
  // (the chunked kernel's TF32 products, issue 7).
  if (sp.out_dtype != DELTAC_F32 || sp.in_dtype != DELTAC_F32)
    return 5e-3;
  return sp.device == Device::CPU ? 1e-5 : 1e-4;
}

double tolerance_ht(const Spec &sp) {
  if (sp.device == Device::CPU)
    return 1e-5;
  return sp.in_dtype == DELTAC_F32 ? 1e-4 : 5e-3;
}

} // namespace

std::string judge(const Spec &sp, const Settings &s, const Candidate &c, Tensors *t,
                  const std::vector<double> &o, const std::vector<double> &ht, double *eo,
                  double *eh) {
  if (!s.corrupt.empty() && candidate_string(c) == s.corrupt) {
    if (!t->o.empty())
      t->o[t->o.size() / 2] += 1.0f;
    if (!t->ob.empty())
      t->ob[t->ob.size() / 2] ^= 0x4000;
  }
  *eo = t->ob.empty() ? ref::rel_rms(t->o.data(), o) : ref::rel_rms(t->ob.data(), o);
  *eh = ref::rel_rms(t->ht.data(), ht);
  const double tolO = tolerance_o(sp), tolH = tolerance_ht(sp);
  if (!(*eo <= tolO) || !(*eh <= tolH)) {
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "wrong answer: relative RMS error o %.3g (limit %.0e), ht %.3g (limit %.0e)",
                  *eo, tolO, *eh, tolH);
    return buf;
  }
  return "";
}

} // namespace deltac::tune

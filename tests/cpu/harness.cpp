#include "harness.h"

#include "deltac/cpu/isa.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <sstream>

namespace deltac::test {
namespace {

// Says once, before the tests, that DELTAC_TEST_SEED fixes every random
// problem (and aborts early on a malformed value, see test_seed()).
class SeedEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    if (std::getenv("DELTAC_TEST_SEED"))
      std::printf("deltac: every random problem uses %s\n",
                  seed_note(fresh_seed()).c_str());
  }
};
::testing::Environment* const kSeedEnvironment =
    ::testing::AddGlobalTestEnvironment(new SeedEnvironment);

}  // namespace

Data make_data(const Case& c, std::mt19937_64& rng) {
  Data d;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uni(0.0f, 1.0f);
  int B = c.B, T = c.T;
  if (!c.lens.empty()) {
    B = 1;
    T = 0;
    d.cu.push_back(0);
    for (int64_t l : c.lens) {
      T += int(l);
      d.cu.push_back(T);
    }
  }
  d.N = c.lens.empty() ? B : int(c.lens.size());
  d.rows = int64_t(B) * T;
  const size_t nqk = size_t(d.rows) * c.H * c.K, nv = size_t(d.rows) * c.HV * c.V;
  d.q.resize(nqk);
  d.k.resize(nqk);
  d.v.resize(nv);
  // Without the L2 norm keep |k| ~ 1 so that the recurrence stays bounded.
  const float ks = c.l2norm ? 1.0f : 1.0f / std::sqrt(float(c.K));
  for (auto& x : d.q) x = normal(rng);
  for (auto& x : d.k) x = normal(rng) * ks;
  for (auto& x : d.v) x = normal(rng);
  d.beta.resize(size_t(d.rows) * c.HV);
  for (auto& x : d.beta) x = c.beta_lo + (c.beta_hi - c.beta_lo) * uni(rng);
  if (c.var != DELTAC_VARIANT_DELTA) {
    d.g.resize(size_t(d.rows) * c.HV * (c.var == DELTAC_VARIANT_KDA ? c.K : 1));
    for (auto& x : d.g) {
      x = c.g_lo + (c.g_hi - c.g_lo) * uni(rng);
      if (c.g_spike < 0.0f && uni(rng) < 0.125f)
        x = c.g_spike;
    }
  }
  const size_t ns = size_t(d.N) * c.HV * c.K * c.V;
  if (c.h0) {
    d.h0.resize(ns);
    for (auto& x : d.h0) x = normal(rng) * 0.5f;
  }
  if (c.ht)
    d.ht.resize(ns + 16);  // room to start ht on a 64-byte line (below)
  if (c.bf16_in) {
    auto conv = [](const std::vector<float>& src, std::vector<uint16_t>* dst) {
      dst->resize(src.size());
      for (size_t i = 0; i < src.size(); ++i) (*dst)[i] = ref::float_to_bf16(src[i]);
    };
    conv(d.q, &d.qb);
    conv(d.k, &d.kb);
    conv(d.v, &d.vb);
  }
  if (c.bf16_out)
    d.ob.resize(nv);
  else
    d.o.resize(nv);

  deltac_fwd_params& p = d.p;
  p.variant = c.var;
  p.B = B;
  p.T = T;
  p.H = c.H;
  p.HV = c.HV;
  p.K = c.K;
  p.V = c.V;
  p.N = d.N;
  p.in_dtype = c.bf16_in ? DELTAC_BF16 : DELTAC_F32;
  p.out_dtype = c.bf16_out ? DELTAC_BF16 : DELTAC_F32;
  p.state_dtype = DELTAC_F32;
  p.state_layout = c.layout;
  p.q = c.bf16_in ? static_cast<const void*>(d.qb.data()) : d.q.data();
  p.k = c.bf16_in ? static_cast<const void*>(d.kb.data()) : d.k.data();
  p.v = c.bf16_in ? static_cast<const void*>(d.vb.data()) : d.v.data();
  p.g = d.g.empty() ? nullptr : d.g.data();
  p.beta = d.beta.data();
  p.h0 = c.h0 ? d.h0.data() : nullptr;
  p.o = c.bf16_out ? static_cast<void*>(d.ob.data()) : d.o.data();
  // ht on a 64-byte line, as aligned allocators give (the decode kernel
  // streams large, aligned states).
  p.ht = c.ht ? d.ht.data() + (16 - (reinterpret_cast<uintptr_t>(d.ht.data()) % 64) / 4) % 16
              : nullptr;
  if (c.inplace && c.h0 && c.ht)
    p.ht = d.h0.data();
  p.cu_seqlens = d.cu.empty() ? nullptr : d.cu.data();
  p.scale = c.scale;
  p.qk_l2norm = c.l2norm ? 1 : 0;
  p.threads = c.threads;
  poison_outputs(&d);
  return d;
}

void poison_outputs(Data* d) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (auto& x : d->o) x = nan;
  // Only the live part of ht: the padding before it (see make_data) stays 0.
  if (!d->ht.empty() && d->p.ht && d->p.ht != d->p.h0) {
    float* ht = static_cast<float*>(d->p.ht);
    std::fill(ht, ht + (d->ht.size() - 16), nan);
  }
  for (auto& x : d->ob) x = 0x7fc0;
}

// Through the run-time dispatch point (deltac/cpu/isa.h): every family on
// the instance of the instruction set the machine has, or DELTAC_CPU_ISA's
// (ctest runs the suite both ways), whatever the catalogue's rule runs it
// with: the tuner may pick any instance.
template <deltac_variant V, int Mode>
static void isa_kernel(const deltac_fwd_params& p) {
  cpu::isa::forward(V, Mode, p, cpu::isa::active());
}

KernelFn kernel_for(deltac_variant var, int mode) {
#define DELTAC_MODES(V)                       \
  switch (mode) {                             \
    case 0: return &isa_kernel<V, 0>;         \
    case 16: return &isa_kernel<V, 16>;       \
    case 32: return &isa_kernel<V, 32>;       \
    case 64: return &isa_kernel<V, 64>;       \
    default: return nullptr;                  \
  }
  switch (var) {
    case DELTAC_VARIANT_DELTA: DELTAC_MODES(DELTAC_VARIANT_DELTA)
    case DELTAC_VARIANT_GATED: DELTAC_MODES(DELTAC_VARIANT_GATED)
    case DELTAC_VARIANT_KDA: DELTAC_MODES(DELTAC_VARIANT_KDA)
  }
#undef DELTAC_MODES
  return nullptr;
}

double o_tolerance(const Case& c) { return c.bf16_out ? 5e-3 : 1e-5; }

Errors run_vs_reference(const Case& c, KernelFn fn) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  Data d = make_data(c, rng);
  if (!fn)
    fn = kernel_for(c.var, c.mode);
  // Reference first: with c.inplace the kernel overwrites h0.
  std::vector<double> o, ht;
  ref::forward(d.p, &o, c.ht ? &ht : nullptr);
  fn(d.p);
  Errors e;
  e.seed = seed;
  e.o = c.bf16_out ? ref::rel_rms(d.ob.data(), o) : ref::rel_rms(d.o.data(), o);
  if (c.ht)
    e.ht = ref::rel_rms(static_cast<const float*>(d.p.ht), ht);
  if (std::isnan(e.o))
    e.o = INFINITY;
  if (std::isnan(e.ht))
    e.ht = INFINITY;
  return e;
}

std::string describe(const Case& c) {
  static const char* vars[] = {"delta", "gated", "kda"};
  std::ostringstream s;
  s << vars[c.var] << (c.mode ? "_chunk" + std::to_string(c.mode) : std::string("_rec"))
    << "_B" << c.B << "_T" << c.T << "_H" << c.H << "_HV" << c.HV << "_K" << c.K
    << "_V" << c.V;
  if (!c.lens.empty()) {
    s << "_lens";
    for (auto l : c.lens) s << "_" << l;
  }
  if (c.bf16_in) s << "_bf16in";
  if (c.bf16_out) s << "_bf16out";
  if (c.layout == DELTAC_STATE_VK) s << "_vk";
  if (!c.h0) s << "_noh0";
  if (!c.ht) s << "_noht";
  if (!c.l2norm) s << "_nonorm";
  if (c.scale != 0.0f) s << "_scale";
  if (c.inplace) s << "_inplace";
  if (c.threads > 0) s << "_threads" << c.threads;
  s << "_beta" << int(c.beta_lo * 100) << "to" << int(c.beta_hi * 100);
  if (c.var != DELTAC_VARIANT_DELTA)
    s << "_g" << int(c.g_lo) << "to" << int(c.g_hi) << (c.g_spike < 0 ? "spikes" : "");
  return s.str();
}

}  // namespace deltac::test

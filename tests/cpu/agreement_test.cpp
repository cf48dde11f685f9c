// Chunked and recurrent kernels agree with each other on the same inputs, and
// the result does not depend on the thread count.
#include "harness.h"

#include <gtest/gtest.h>

#include <cmath>

namespace deltac::test {
namespace {

double rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    double d = double(a[i]) - b[i];
    num += d * d;
    den += double(b[i]) * b[i];
  }
  double r = std::sqrt(num / den);
  return std::isnan(r) ? INFINITY : r;
}

class Agreement : public ::testing::TestWithParam<deltac_variant> {};

TEST_P(Agreement, ChunkedMatchesRecurrent) {
  Case c;
  c.var = GetParam();
  c.lens = {5, 200, 64, 1};
  c.H = 2;
  c.HV = 4;
  c.K = 64;
  c.V = 96;
  c.g_spike = -30.0f;
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Data d = make_data(c, rng);
  kernel_for(c.var, 0)(d.p);
  const std::vector<float> o_rec = d.o, ht_rec = d.ht;
  for (int chunk : {16, 32, 64}) {
    poison_outputs(&d);
    kernel_for(c.var, chunk)(d.p);
    EXPECT_LE(rel_diff(d.o, o_rec), 2e-5) << "chunk " << chunk;
    EXPECT_LE(rel_diff(d.ht, ht_rec), 2e-5) << "chunk " << chunk;
  }
}

// A decode loop (one token per call, state updated in place: decode.h)
// gives what one recurrent call over all tokens gives, in both layouts.
TEST_P(Agreement, DecodeLoopMatchesRecurrent) {
  for (int layout : {DELTAC_STATE_KV, DELTAC_STATE_VK}) {
    Case c;
    c.var = GetParam();
    c.T = 60;
    c.H = 2;
    c.HV = 4;
    c.K = 64;
    c.V = 96;
    c.layout = layout;
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed_note(seed));
    std::mt19937_64 rng(seed);
    Data d = make_data(c, rng);
    kernel_for(c.var, 0)(d.p);
    const float* ht = static_cast<const float*>(d.p.ht);
    const std::vector<float> o_rec = d.o, ht_rec(ht, ht + d.h0.size());
    poison_outputs(&d);
    std::vector<float> state = d.h0;
    const size_t gw = c.var == DELTAC_VARIANT_KDA ? c.K : 1;
    for (int t = 0; t < c.T; ++t) {
      deltac_fwd_params p = d.p;
      p.T = 1;
      p.q = d.q.data() + size_t(t) * c.H * c.K;
      p.k = d.k.data() + size_t(t) * c.H * c.K;
      p.v = d.v.data() + size_t(t) * c.HV * c.V;
      p.beta = d.beta.data() + size_t(t) * c.HV;
      if (p.g)
        p.g = d.g.data() + size_t(t) * c.HV * gw;
      p.o = d.o.data() + size_t(t) * c.HV * c.V;
      p.h0 = p.ht = state.data();
      kernel_for(c.var, 0)(p);
    }
    EXPECT_LE(rel_diff(d.o, o_rec), 2e-5) << "layout " << layout;
    EXPECT_LE(rel_diff(state, ht_rec), 2e-5) << "layout " << layout;
  }
}

TEST_P(Agreement, ThreadCountDoesNotChangeResults) {
  Case c;
  c.var = GetParam();
  c.B = 3;
  c.T = 77;
  c.H = 2;
  c.HV = 4;
  c.K = c.V = 32;
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Data d = make_data(c, rng);
  for (int mode : {0, 32}) {
    d.p.threads = 1;
    kernel_for(c.var, mode)(d.p);
    const std::vector<float> o1 = d.o, ht1 = d.ht;
    for (int threads : {2, 0}) {
      poison_outputs(&d);
      d.p.threads = threads;
      kernel_for(c.var, mode)(d.p);
      EXPECT_EQ(d.o, o1) << "mode " << mode << " threads " << threads;
      EXPECT_EQ(d.ht, ht1) << "mode " << mode << " threads " << threads;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, Agreement,
                         ::testing::Values(DELTAC_VARIANT_DELTA, DELTAC_VARIANT_GATED,
                                           DELTAC_VARIANT_KDA));

}  // namespace
}  // namespace deltac::test

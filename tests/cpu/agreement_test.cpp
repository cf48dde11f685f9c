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
  std::mt19937_64 rng(fresh_seed());
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

TEST_P(Agreement, ThreadCountDoesNotChangeResults) {
  Case c;
  c.var = GetParam();
  c.B = 3;
  c.T = 77;
  c.H = 2;
  c.HV = 4;
  c.K = c.V = 32;
  std::mt19937_64 rng(fresh_seed());
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

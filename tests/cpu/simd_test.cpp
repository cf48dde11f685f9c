// deltac::cpu::simd::exp against std::exp, special values included: the CPU
// kernels' decays (params.h, "Non-finite values") rest on it.
#include "deltac/cpu/simd.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace {

using namespace deltac::cpu;

float exp1(float x) {
  const simd::vf r = simd::exp(simd::set1(x));
  for (int i = 1; i < simd::W; ++i) EXPECT_TRUE(r[i] == r[0] || (r[i] != r[i] && r[0] != r[0]));
  return r[0];
}

TEST(SimdExp, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(exp1(-inf), 0.0f);
  EXPECT_EQ(exp1(-1e30f), 0.0f);
  EXPECT_EQ(exp1(-1024.0f), 0.0f);
  EXPECT_EQ(exp1(-87.4f), 0.0f);
  EXPECT_EQ(exp1(0.0f), 1.0f);
  EXPECT_TRUE(std::isnan(exp1(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isnan(exp1(-std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(exp1(inf), inf);
  EXPECT_EQ(exp1(1e30f), inf);
  EXPECT_EQ(exp1(89.0f), inf);
  EXPECT_EQ(exp1(88.4f), inf);  // overflows a little early (see simd.h)
  EXPECT_TRUE(std::isfinite(exp1(88.3f)));
  // Mixed lanes: each lane on its own.
  const simd::vf x = {-inf, std::numeric_limits<float>::quiet_NaN(), 0.0f, 1.0f,
                      -1.0f, inf, -100.0f, 60.0f};
  const simd::vf r = simd::exp(x);
  EXPECT_EQ(r[0], 0.0f);
  EXPECT_TRUE(std::isnan(r[1]));
  EXPECT_EQ(r[2], 1.0f);
  EXPECT_NEAR(r[3], std::exp(1.0f), 1e-6f);
  EXPECT_NEAR(r[4], std::exp(-1.0f), 1e-7f);
  EXPECT_EQ(r[5], inf);
  EXPECT_EQ(r[6], 0.0f);
  EXPECT_NEAR(r[7] / std::exp(60.0), 1.0, 3e-7);
}

TEST(SimdExp, RelativeErrorOverTheRange) {
  double worst = 0.0;
  float at = 0.0f;
  for (float x = -87.0f; x <= 88.3f; x += 0.000731f * (1.0f + std::fabs(x))) {
    const double ref = std::exp(double(x)), got = exp1(x);
    const double e = std::fabs(got - ref) / ref;
    if (e > worst) {
      worst = e;
      at = x;
    }
  }
  EXPECT_LE(worst, 4e-7) << "at x = " << at;
}

}  // namespace

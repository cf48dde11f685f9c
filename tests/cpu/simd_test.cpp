// deltac::cpu::simd::exp against std::exp, special values included: the CPU
// kernels' decays (params.h, "Non-finite values") rest on it. The bf16 and
// fp8 e4m3 vector conversions against the scalar ones (convert.h, fp8.h),
// bit for bit.
#include "deltac/cpu/simd.h"
#include "deltac/convert.h"
#include "deltac/fp8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

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

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// The listed f32 bit patterns, then a deterministic sweep over all of them
// (stride prime to 2^32), padded to whole vectors.
std::vector<uint32_t> with_sweep(std::vector<uint32_t> v) {
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 65521) v.push_back(uint32_t(u));
  while (v.size() % simd::W) v.push_back(0x3f800000u);
  return v;
}

// store(dst, x) on the f32 bit patterns v, a vector at a time, equals
// ref(f) for every element f.
template <typename T, typename Store, typename Ref>
void expect_stores_match(const std::vector<uint32_t>& v, Store store, Ref ref) {
  for (size_t i = 0; i < v.size(); i += simd::W) {
    simd::vf x;
    std::memcpy(&x, &v[i], sizeof x);
    T got[simd::W];
    store(got, x);
    for (int l = 0; l < simd::W; ++l)
      ASSERT_EQ(int(got[l]), int(ref(from_bits(v[i + l])))) << "bits 0x" << std::hex << v[i + l];
  }
}

TEST(SimdBf16, StoreMatchesScalarBitForBit) {
  // Ties (odd and even), the largest finite value and the ones that round
  // to inf, infinities, NaNs (signalling and quiet, both signs), denormals.
  const std::vector<uint32_t> v = with_sweep(
      {0x00000000u, 0x80000000u, 0x3f800000u, 0x3f808000u, 0x3f818000u, 0x3f80ffffu,
       0x3f807fffu, 0x7f7fffffu, 0x7f7f8000u, 0x7f7f7fffu, 0xff7fffffu, 0x7f800000u,
       0xff800000u, 0x7f800001u, 0x7fc00000u, 0xffc00001u, 0x7fffffffu, 0x00000001u,
       0x00008000u, 0x00018000u, 0x807fffffu, 0x00800000u, 0xc0490fdbu, 0x3eaaaaabu});
  expect_stores_match<uint16_t>(v, simd::store_bf16, deltac::f32_to_bf16);
}

TEST(SimdBf16, LoadIsExactForEveryPattern) {
  for (uint32_t h0 = 0; h0 < 65536; h0 += simd::W) {
    uint16_t h[simd::W];
    for (int i = 0; i < simd::W; ++i) h[i] = uint16_t(h0 + i);
    const simd::vf x = simd::load_bf16(h);
    for (int i = 0; i < simd::W; ++i)
      ASSERT_EQ(bits(x[i]), bits(deltac::bf16_to_f32(h[i]))) << "bf16 0x" << std::hex << h[i];
  }
}

TEST(SimdFp8, LoadIsExactForEveryByte) {
  for (int b0 = 0; b0 < 256; b0 += simd::W) {
    uint8_t b[simd::W];
    for (int i = 0; i < simd::W; ++i) b[i] = uint8_t(b0 + i);
    const simd::vf x = simd::load_fp8e4m3(b);
    for (int i = 0; i < simd::W; ++i)
      ASSERT_EQ(bits(x[i]), bits(deltac::fp8e4m3_to_f32(b[i])))
          << "e4m3 0x" << std::hex << int(b[i]);
  }
}

TEST(SimdFp8, StoreMatchesScalarBitForBit) {
  // Subnormal steps and their ties, 2^-6, the saturation edge (448, 464),
  // infinities, NaNs.
  const std::vector<uint32_t> v = with_sweep(
      {0x00000000u, 0x80000000u, 0x3a800000u, 0x3b000000u, 0x3ac00000u, 0x3b400000u,
       0x3c7fffffu, 0x3c800000u, 0x3f880000u, 0x3f980000u, 0x43e00000u, 0x43e7ffffu,
       0x43e80000u, 0x43f00000u, 0x7f7fffffu, 0x7f800000u, 0xff800000u, 0x7fc00000u,
       0xffc00001u, 0x00000001u, 0xc3dfffffu, 0xbf800000u});
  expect_stores_match<uint8_t>(v, simd::store_fp8e4m3, deltac::f32_to_fp8e4m3);
}

}  // namespace

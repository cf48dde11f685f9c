// deltac/convert.h against known bit patterns (the kernels, the reference
// and the generated code all share it, so it is checked on its own here).
#include "deltac/convert.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace {

TEST(Convert, Bf16KnownPatterns) {
  EXPECT_EQ(deltac::f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(deltac::f32_to_bf16(-2.0f), 0xc000);
  EXPECT_EQ(deltac::f32_to_bf16(0.0f), 0x0000);
  EXPECT_EQ(deltac::bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(deltac::bf16_to_f32(0x7f80), std::numeric_limits<float>::infinity());
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even 1.0.
  EXPECT_EQ(deltac::f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: ties go up to even.
  EXPECT_EQ(deltac::f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
  EXPECT_EQ(deltac::f32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
  EXPECT_TRUE(std::isnan(deltac::bf16_to_f32(deltac::f32_to_bf16(NAN))));
}

TEST(Convert, F16KnownPatterns) {
  EXPECT_EQ(deltac::f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(deltac::f16_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(deltac::f16_to_f32(0x0001), 0x1p-24f);
  EXPECT_EQ(deltac::f16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(deltac::f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(deltac::f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(deltac::f32_to_f16(65520.0f), 0x7c00); // rounds to infinity
  EXPECT_EQ(deltac::f32_to_f16(0x1p-24f), 0x0001);
  EXPECT_EQ(deltac::f32_to_f16(0x1p-26f), 0x0000); // below half the smallest
  EXPECT_EQ(deltac::f32_to_f16(1.0f + 0x1p-11f), 0x3c00); // tie to even
  EXPECT_TRUE(std::isnan(deltac::f16_to_f32(deltac::f32_to_f16(NAN))));
}

TEST(Convert, F16RoundTripsEveryFiniteHalf) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00) continue; // inf / NaN
    EXPECT_EQ(deltac::f32_to_f16(deltac::f16_to_f32(uint16_t(h))), h) << std::hex << h;
  }
}

} // namespace

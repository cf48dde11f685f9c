// The catalogue's table: every listed knob value is legal somewhere, other
// values and foreign knobs are refused, defaults are legal everywhere.
#include "deltac/catalogue.h"

#include <gtest/gtest.h>

using namespace deltac;

namespace {

Problem problem(int K, int V, int64_t len = 100) {
  Problem p;
  p.K = K, p.V = V, p.H = 2, p.HV = 4;
  p.in_dtype = p.out_dtype = DELTAC_BF16;
  p.max_seqlen = len;
  p.seqs = 3;
  p.sm_count = 132;
  return p;
}

TEST(Catalogue, FamiliesAreInEnumOrderAndNamedUniquely) {
  for (int i = 0; i < kFamilyCount; ++i) {
    EXPECT_EQ(static_cast<int>(kFamilies[i].family), i);
    EXPECT_EQ(family_by_name(kFamilies[i].name), &kFamilies[i]);
    for (int k = 0; k < kKnobCount; ++k)
      EXPECT_EQ(kFamilies[i].values[k].n > 0,
                bool(kFamilies[i].knobs & (1u << k)))
          << kFamilies[i].name << " " << kKnobNames[k]
          << ": a knob is offered exactly when it has values";
  }
  EXPECT_EQ(family_by_name("cuda_nothing"), nullptr);
}

TEST(Catalogue, DefaultsAreLegalForEveryDims) {
  for (int K = 16; K <= 256; K += 16)
    for (int V = 16; V <= 256; V += 16)
      for (const FamilyInfo &f : kFamilies) {
        Problem p = problem(K, V, f.max_tokens ? f.max_tokens : 100);
        if (!check_family(f.family, p).empty())
          continue; // e.g. cuda_chunked where V is much larger than K
        for (int sms : {0, 132}) {
          p.sm_count = sms;
          KernelConfig c = default_config(f.family, p);
          EXPECT_EQ(check_config(c, p), "")
              << f.name << " K=" << K << " V=" << V;
        }
      }
}

TEST(Catalogue, RefusesForeignKnobsAndUnlistedValues) {
  Problem p = problem(128, 128);
  KernelConfig c = default_config(Family::CpuChunked, p);
  c.warps = 4;
  EXPECT_NE(check_config(c, p).find("no knob 'warps'"), std::string::npos);
  c = default_config(Family::CpuChunked, p);
  c.chunk = 48;
  EXPECT_NE(check_config(c, p).find("chunk = 48, expected one of 16, 32, 64"),
            std::string::npos);
  c = default_config(Family::CudaRecurrent, p);
  c.tile_v = 32;
  p.V = 48;
  EXPECT_NE(check_config(c, p).find("must divide V"), std::string::npos);
}

TEST(Catalogue, CudaRecurrentWarpsRule) {
  Problem p = problem(256, 128);
  KernelConfig c = default_config(Family::CudaRecurrent, p);
  c.tile_v = 32;
  for (int w : {1, 2, 4, 8}) {
    c.warps = w;
    // K = 256, tile_v 32: 4 rows per warp step, 64 row groups; one warp
    // would hold 64 rows (too many), two 32, four 16: legal from 4 up.
    EXPECT_EQ(check_config(c, p).empty(), w >= 4) << w;
  }
}

TEST(Catalogue, FamilyRules) {
  Problem p = problem(128, 128, 1);
  Family f;
  std::string why;
  ASSERT_TRUE(default_family(Device::CPU, Mode::Auto, p, &f, &why));
  EXPECT_EQ(f, Family::CpuDecode);
  p.max_seqlen = 2;
  ASSERT_TRUE(default_family(Device::CPU, Mode::Auto, p, &f, &why));
  EXPECT_EQ(f, Family::CpuRecurrent);
  ASSERT_TRUE(default_family(Device::CPU, Mode::Chunked, p, &f, &why));
  EXPECT_EQ(f, Family::CpuChunked);
  ASSERT_TRUE(default_family(Device::CUDA, Mode::Auto, p, &f, &why));
  EXPECT_EQ(f, Family::CudaRecurrent);
  p.state_dtype = DELTAC_BF16;
  EXPECT_FALSE(default_family(Device::CPU, Mode::Auto, p, &f, &why));
  EXPECT_NE(why.find("state must be f32"), std::string::npos) << why;
  p = problem(128, 128);
  p.out_dtype = DELTAC_F32; // CUDA recurrent writes o in the input dtype
  EXPECT_FALSE(default_family(Device::CUDA, Mode::Auto, p, &f, &why));
  p = problem(136, 128);
  EXPECT_FALSE(default_family(Device::CPU, Mode::Auto, p, &f, &why));
  EXPECT_NE(why.find("K = 136"), std::string::npos) << why;
}

TEST(Catalogue, PrecompiledCudaInstances) {
  Problem p = problem(128, 128);
  KernelConfig c = default_config(Family::CudaRecurrent, p);
  EXPECT_TRUE(precompiled(c, p));
  c.warps = c.warps == 4 ? 8 : 4;
  if (check_config(c, p).empty())
    EXPECT_FALSE(precompiled(c, p)) << "only the default warps ship";
  p = problem(96, 96);
  EXPECT_FALSE(precompiled(default_config(Family::CudaRecurrent, p), p));
  EXPECT_TRUE(precompiled(default_config(Family::CpuRecurrent, p), p));
}

} // namespace

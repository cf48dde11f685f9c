// GPU tests of deltac::cuda::recurrent against the float64 reference.
// Cases that need a GPU skip when no CUDA device (or no driver) is found;
// the argument checks run everywhere.
#include "harness.h"
#include "kernels.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <random>

namespace deltac::test {
namespace {

const char* variant_name(deltac_variant v) {
  return v == DELTAC_VARIANT_DELTA ? "delta" : v == DELTAC_VARIANT_GATED ? "gated" : "kda";
}

const deltac_variant kVariants[] = {DELTAC_VARIANT_DELTA, DELTAC_VARIANT_GATED,
                                    DELTAC_VARIANT_KDA};

// Names the case after its variant and dtype plus `what`.
Case make(deltac_variant var, bool bf16, const std::string& what) {
  Case c;
  c.var = var;
  c.bf16 = bf16;
  c.name = std::string(variant_name(var)) + (bf16 ? "_bf16_" : "_f32_") + what;
  return c;
}

std::vector<Case> all_cases() {
  std::vector<Case> cs;
  for (deltac_variant var : kVariants) {
    for (bool bf16 : {false, true}) {
      // Sequence lengths, K = V = 128, GVA 2.
      for (int T : {1, 2, 8, 33}) {
        Case c = make(var, bf16, "T" + std::to_string(T));
        c.T = T;
        cs.push_back(c);
      }
      // Varlen with an empty sequence and a 1-token tail.
      Case c = make(var, bf16, "varlen");
      c.K = c.V = 64, c.H = 1, c.HV = 2;
      c.cu_seqlens = {0, 5, 5, 17, 18};
      cs.push_back(c);
      // Transposed (VK) state.
      c = make(var, bf16, "vk_layout");
      c.layout = DELTAC_STATE_VK;
      c.T = 3;
      cs.push_back(c);
      // Wide grid: 16-column and 32-column tiles, each forced.
      for (int bv : {16, 32}) {
        c = make(var, bf16, "bv" + std::to_string(bv));
        c.B = 3, c.T = 5, c.bv = bv;
        cs.push_back(c);
      }
      // The knobs (tile_v, warps) = (32, 2) and (16, 1), one and 5 tokens.
      for (int knobs : {kKnobs32x2, kKnobs16x1})
        for (int T : {1, 5}) {
          c = make(var, bf16, std::string(knobs == kKnobs32x2 ? "tile32_warps2" : "tile16_warps1") +
                                  "_T" + std::to_string(T));
          c.B = 3, c.T = T, c.bv = knobs;
          cs.push_back(c);
        }
    }
    // Head sizes, K != V both ways, non-power-of-two sizes.
    const int shapes[][2] = {{16, 16}, {64, 64}, {256, 256}, {128, 256},
                             {256, 128}, {64, 16}, {48, 80}};
    for (auto& s : shapes) {
      for (bool bf16 : {false, true}) {
        Case c = make(var, bf16, "K" + std::to_string(s[0]) + "_V" + std::to_string(s[1]));
        c.K = s[0], c.V = s[1], c.T = 6;
        cs.push_back(c);
        // One token: the one-token kernels (the library's choice; the
        // device runs also force the strip form, staged where it fits).
        c.name += "_T1";
        c.T = 1;
        cs.push_back(c);
      }
    }
    // GVA group sizes 1, 2, 4, 8.
    for (int group : {1, 2, 4, 8}) {
      Case c = make(var, false, "gva" + std::to_string(group));
      c.K = c.V = 64, c.HV = 8, c.H = 8 / group, c.T = 5;
      cs.push_back(c);
    }
    // Initial / final state present or not.
    {
      Case c = make(var, false, "no_h0");
      c.h0 = false;
      cs.push_back(c);
      c = make(var, false, "no_ht");
      c.ht = false;
      cs.push_back(c);
      c = make(var, false, "no_h0_no_ht");
      c.h0 = c.ht = false;
      cs.push_back(c);
      c = make(var, false, "inplace");
      c.inplace = true;
      cs.push_back(c);
      // The same at one token (with the strip form forced: the staged
      // kernel, rows zero-filled without h0).
      for (const char* what : {"no_h0", "no_ht", "inplace"}) {
        c = make(var, false, std::string(what) + "_T1");
        c.T = 1;
        c.h0 = std::string(what) != "no_h0";
        c.ht = std::string(what) != "no_ht";
        c.inplace = std::string(what) == "inplace";
        cs.push_back(c);
      }
      c = make(var, false, "misaligned");
      c.misaligned = true;
      cs.push_back(c);
      c = make(var, true, "misaligned");
      c.misaligned = true;
      cs.push_back(c);
    }
    // beta near 0, 1 and 2.
    const float betas[][2] = {{0.f, 0.01f}, {0.99f, 1.f}, {1.99f, 2.f}};
    const char* beta_names[] = {"beta0", "beta1", "beta2"};
    for (int i = 0; i < 3; ++i) {
      Case c = make(var, false, beta_names[i]);
      c.beta_lo = betas[i][0], c.beta_hi = betas[i][1], c.T = 8;
      cs.push_back(c);
    }
    // No L2 norm, explicit scale.
    {
      Case c = make(var, false, "no_l2norm_scale");
      c.l2norm = 0, c.scale = 0.3f, c.T = 8;
      cs.push_back(c);
      c = make(var, true, "no_l2norm_scale");
      c.l2norm = 0, c.scale = 0.3f, c.T = 8;
      cs.push_back(c);
    }
    // Gates near 0 and near -30.
    if (var != DELTAC_VARIANT_DELTA) {
      for (bool bf16 : {false, true}) {
        Case c = make(var, bf16, "gate_near0");
        c.g_lo = -1e-4f, c.g_hi = 0.f, c.T = 8;
        cs.push_back(c);
        c = make(var, bf16, "gate_near_m30");
        c.g_lo = -30.f, c.g_hi = -29.f, c.T = 8;
        cs.push_back(c);
        // A -inf gate is an exact reset (exp(-inf) = 0, never NaN).
        c = make(var, bf16, "neg_inf_gate");
        c.neg_inf_at = 5, c.T = 12;
        cs.push_back(c);
      }
    }
  }
  return cs;
}

uint64_t fresh_seed() {
  if (const char* s = std::getenv("DELTAC_TEST_SEED"))
    return std::strtoull(s, nullptr, 10);
  static std::random_device rd;
  return (uint64_t(rd()) << 32) ^ rd();
}

class Recurrent : public ::testing::TestWithParam<Case> {};

TEST_P(Recurrent, MatchesFloat64Reference) {
  if (!have_gpu())
    GTEST_SKIP() << "no CUDA device";
  const Case& c = GetParam();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (DELTAC_TEST_SEED reproduces it)");
  Result r = run_case(c, seed);
  ASSERT_TRUE(r.error.empty()) << r.error;
  const double tol = c.bf16 ? 5e-3 : 1e-5;
  EXPECT_TRUE(r.o_finite) << "o has unwritten (NaN) or non-finite elements";
  EXPECT_LE(r.o_err, tol) << "o relative RMS error";
  if (c.ht) {
    EXPECT_TRUE(r.ht_finite) << "ht has unwritten (NaN) or non-finite elements";
    // The state stays f32 whatever the input dtype.
    EXPECT_LE(r.ht_err, 1e-5) << "ht relative RMS error";
  }
  EXPECT_TRUE(r.repeat_identical) << "a second run on the same inputs differed";
  std::printf("  %-32s o %.2e  ht %.2e\n", c.name.c_str(), r.o_err, r.ht_err);
}

INSTANTIATE_TEST_SUITE_P(Cuda, Recurrent, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

// Argument checks: rejected before any CUDA call, so they run without a GPU.
deltac_fwd_params valid_params() {
  static float dummy[64];
  deltac_fwd_params p{};
  p.variant = DELTAC_VARIANT_GATED;
  p.B = 1, p.T = 1, p.H = 1, p.HV = 1, p.K = 64, p.V = 64, p.N = 1;
  p.in_dtype = p.out_dtype = DELTAC_F32;
  p.state_dtype = DELTAC_F32;
  p.q = p.k = p.v = dummy;
  p.g = p.beta = dummy;
  p.o = dummy;
  return p;
}

TEST(RecurrentArgs, RejectsMismatchedParams) {
  KernelFn fn = find_kernel(DELTAC_VARIANT_GATED, 64, 64, false);
  ASSERT_NE(fn, nullptr);
  auto expect_invalid = [&](deltac_fwd_params p, const char* what) {
    EXPECT_EQ(fn(p, nullptr, 0), cudaErrorInvalidValue) << what;
  };
  deltac_fwd_params p = valid_params();
  p.K = 128;
  expect_invalid(p, "K differs from the template");
  p = valid_params();
  p.V = 32;
  expect_invalid(p, "V differs from the template");
  p = valid_params();
  p.variant = DELTAC_VARIANT_KDA;
  expect_invalid(p, "variant differs");
  p = valid_params();
  p.in_dtype = p.out_dtype = DELTAC_BF16;
  expect_invalid(p, "dtype differs");
  p = valid_params();
  p.out_dtype = DELTAC_BF16;
  expect_invalid(p, "o dtype differs from the inputs");
  p = valid_params();
  p.state_dtype = DELTAC_F16;
  expect_invalid(p, "state neither f32 nor bf16");
  p = valid_params();
  p.num_slots = 4;
  expect_invalid(p, "num_slots without read_slots");
  p = valid_params();
  p.g = nullptr;
  expect_invalid(p, "gated without g");
  p = valid_params();
  p.HV = 3, p.H = 2;
  expect_invalid(p, "HV not a multiple of H");
  p = valid_params();
  p.N = 2;
  expect_invalid(p, "N != B without cu_seqlens");
  p = valid_params();
  EXPECT_EQ(fn(p, nullptr, 48), cudaErrorInvalidValue) << "bad tile width";
}

}  // namespace
}  // namespace deltac::test

// CPU kernels (recurrent, chunked 16/32/64) against the float64 reference.
#include "harness.h"

#include <gtest/gtest.h>

#include <cctype>

namespace deltac::test {
namespace {

const deltac_variant kVars[] = {DELTAC_VARIANT_DELTA, DELTAC_VARIANT_GATED,
                                DELTAC_VARIANT_KDA};
const int kModes[] = {0, 16, 32, 64};

class Kernels : public ::testing::TestWithParam<Case> {};

TEST_P(Kernels, MatchesReference) {
  const Case& c = GetParam();
  Errors e = run_vs_reference(c);
  SCOPED_TRACE(seed_note(e.seed));
  EXPECT_LE(e.o, o_tolerance(c)) << describe(c);
  if (c.ht) {
    EXPECT_LE(e.ht, 1e-5) << describe(c);
  }
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string s = describe(info.param);
  for (char& ch : s)
    if (ch == '-')
      ch = 'm';
    else if (!std::isalnum(static_cast<unsigned char>(ch)))
      ch = '_';
  return s + "_" + std::to_string(info.index);
}

// Every variant x mode x sequence length; B = 2 (one row for T = 1000).
std::vector<Case> lengths() {
  std::vector<Case> out;
  for (auto v : kVars)
    for (int m : kModes)
      for (int T : {1, 7, 63, 64, 65, 1000}) {
        Case c;
        c.var = v;
        c.mode = m;
        c.T = T;
        c.B = T == 1000 ? 1 : 2;
        c.H = 2;
        c.HV = 4;
        c.K = c.V = 64;
        out.push_back(c);
      }
  return out;
}

std::vector<Case> varlen() {
  std::vector<Case> out;
  for (auto v : kVars)
    for (int m : kModes)
      for (auto lens : {std::vector<int64_t>{1, 64, 130, 3},
                        std::vector<int64_t>{17, 0, 33, 96}}) {
        Case c;
        c.var = v;
        c.mode = m;
        c.lens = lens;
        c.H = 1;
        c.HV = 2;
        c.K = 32;
        c.V = 48;
        out.push_back(c);
      }
  return out;
}

std::vector<Case> gva() {
  std::vector<Case> out;
  for (auto v : kVars)
    for (int m : {0, 32})
      for (int group : {1, 2, 4, 8}) {
        Case c;
        c.var = v;
        c.mode = m;
        c.T = 50;
        c.H = 2;
        c.HV = 2 * group;
        c.K = c.V = 32;
        out.push_back(c);
      }
  return out;
}

std::vector<Case> dims() {
  std::vector<Case> out;
  std::vector<std::pair<int, int>> kv;
  for (int d : {16, 64, 96, 128, 192, 256}) kv.push_back({d, d});
  for (auto x : {std::pair<int, int>{16, 256}, {256, 16}, {64, 192}, {128, 96},
                 {48, 80}})
    kv.push_back(x);
  for (auto v : kVars)
    for (int m : {0, 16, 64})
      for (auto [K, V] : kv) {
        Case c;
        c.var = v;
        c.mode = m;
        c.T = 70;
        c.H = 1;
        c.HV = 2;
        c.K = K;
        c.V = V;
        out.push_back(c);
      }
  return out;
}

std::vector<Case> betas() {
  std::vector<Case> out;
  for (auto v : kVars)
    for (int m : {0, 16, 64})
      for (auto [lo, hi] : {std::pair<float, float>{0.0f, 0.01f}, {0.98f, 1.02f},
                            {1.98f, 2.0f}}) {
        Case c;
        c.var = v;
        c.mode = m;
        c.T = 200;
        c.H = 1;
        c.HV = 2;
        c.K = c.V = 64;
        c.beta_lo = lo;
        c.beta_hi = hi;
        out.push_back(c);
      }
  return out;
}

std::vector<Case> gates() {
  std::vector<Case> out;
  struct G {
    float lo, hi, spike;
  };
  for (auto v : {DELTAC_VARIANT_GATED, DELTAC_VARIANT_KDA})
    for (int m : kModes)
      for (G g : {G{-1e-3f, 0.0f, 0.0f}, G{-30.0f, -29.0f, 0.0f},
                  G{-30.0f, 0.0f, 0.0f}, G{-0.05f, 0.0f, -30.0f}}) {
        Case c;
        c.var = v;
        c.mode = m;
        c.T = 300;
        c.H = 1;
        c.HV = 2;
        c.K = c.V = 64;
        c.g_lo = g.lo;
        c.g_hi = g.hi;
        c.g_spike = g.spike;
        out.push_back(c);
      }
  return out;
}

std::vector<Case> options() {
  std::vector<Case> out;
  for (auto v : kVars)
    for (int m : kModes)
      for (int opt = 0; opt < 10; ++opt) {
        Case c;
        c.var = v;
        c.mode = m;
        c.B = 2;
        c.T = 45;
        c.H = 2;
        c.HV = 2;
        c.K = 32;
        c.V = 64;
        switch (opt) {
          case 0: c.h0 = false; break;
          case 1: c.ht = false; break;
          case 2: c.layout = DELTAC_STATE_VK; break;
          case 3: c.layout = DELTAC_STATE_VK; c.h0 = false; break;
          case 4: c.l2norm = false; c.scale = 0.7f; break;
          case 5: c.bf16_in = true; break;
          case 6: c.bf16_in = true; c.bf16_out = true; break;
          case 7: c.threads = 1; c.bf16_out = true; break;
          case 8: c.inplace = true; break;
          case 9: c.inplace = true; c.layout = DELTAC_STATE_VK; c.T = 1; c.B = 5; break;
        }
        out.push_back(c);
      }
  return out;
}

// Decode path (recurrent, every sequence at most one token; see decode.h):
// options, both state layouts, thread splits of one head's tiles, VB 16, 32.
std::vector<Case> decode() {
  std::vector<Case> out;
  for (auto v : kVars)
    for (int opt = 0; opt < 20; ++opt) {
      Case c;
      c.var = v;
      c.mode = 0;
      c.B = 3;
      c.T = 1;
      c.H = 2;
      c.HV = 4;
      c.K = c.V = 64;
      c.inplace = true;
      switch (opt) {
        case 0: break;
        case 1: c.inplace = false; break;
        case 2: c.h0 = false; break;
        case 3: c.ht = false; break;
        case 4: c.B = 1; c.HV = c.H = 1; c.K = c.V = 128; c.threads = 2; break;
        case 5: c.B = 1; c.HV = 3; c.H = 1; c.V = 96; c.threads = 2; break;
        case 6: c.V = 48; c.K = 32; break;  // 16-column tiles
        case 7: c.bf16_in = true; c.bf16_out = true; break;
        case 8: c.l2norm = false; c.scale = 0.7f; c.threads = 1; break;
        case 9: c.lens = {1, 0, 1, 1}; c.B = 1; break;
        case 10: c.lens = {0, 1, 0}; c.B = 1; c.inplace = false; c.h0 = false; break;
        case 11: c.lens = {1, 0}; c.B = 1; c.inplace = false; break;
        case 12: c.g_lo = -30.0f; c.g_hi = -29.0f; break;
        case 13: c.K = 256; c.V = 16; c.threads = 2; break;
        case 14: c.layout = DELTAC_STATE_VK; break;
        case 15: c.layout = DELTAC_STATE_VK; c.h0 = false; c.V = 48; break;
        case 16: c.layout = DELTAC_STATE_VK; c.ht = false; break;
        case 17: c.layout = DELTAC_STATE_VK; c.inplace = false; c.lens = {1, 0, 1}; c.B = 1; break;
        case 18: c.layout = DELTAC_STATE_VK; c.B = 1; c.HV = 3; c.H = 1; c.K = 128; c.V = 96; c.threads = 2; break;
        case 19:  // a separate 16 MiB ht: written with streaming stores
          c.B = 16; c.H = 4; c.HV = 16; c.K = c.V = 128; c.inplace = false; break;
      }
      out.push_back(c);
    }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Lengths, Kernels, ::testing::ValuesIn(lengths()), case_name);
INSTANTIATE_TEST_SUITE_P(Varlen, Kernels, ::testing::ValuesIn(varlen()), case_name);
INSTANTIATE_TEST_SUITE_P(Gva, Kernels, ::testing::ValuesIn(gva()), case_name);
INSTANTIATE_TEST_SUITE_P(Dims, Kernels, ::testing::ValuesIn(dims()), case_name);
INSTANTIATE_TEST_SUITE_P(Beta, Kernels, ::testing::ValuesIn(betas()), case_name);
INSTANTIATE_TEST_SUITE_P(Gates, Kernels, ::testing::ValuesIn(gates()), case_name);
INSTANTIATE_TEST_SUITE_P(Options, Kernels, ::testing::ValuesIn(options()), case_name);
INSTANTIATE_TEST_SUITE_P(Decode, Kernels, ::testing::ValuesIn(decode()), case_name);

}  // namespace
}  // namespace deltac::test

// deltac::check_params: a valid call passes; every broken field fails with a
// message naming that field.
#include "deltac/check.h"

#include "test_util.h"

#include <cmath>
#include <functional>
#include <limits>

namespace deltac {
namespace {

class CheckParams : public ::testing::Test {
protected:
  void SetUp() override {
    prob.variant = DELTAC_VARIANT_KDA;
    prob.B = 2;
    prob.T = 5;
    prob.H = 2;
    prob.HV = 4;
    prob.K = 32;
    prob.V = 48;
    prob.fill(1);
    o.resize(prob.oCount());
    ht.resize(prob.stateCount());
    p = prob.params(o.data(), ht.data());
  }

  // Applies mutate to a valid params and expects a failure whose message
  // contains every string of `mention`.
  void expectFail(const std::function<void(deltac_fwd_params &)> &mutate,
                  std::vector<std::string> mention) {
    deltac_fwd_params bad = p;
    mutate(bad);
    std::string err;
    EXPECT_FALSE(check_params(bad, &err));
    EXPECT_EQ(err.find('\n'), std::string::npos) << err;
    for (const std::string &m : mention)
      EXPECT_NE(err.find(m), std::string::npos)
          << "message '" << err << "' lacks '" << m << "'";
    // A null error pointer is allowed.
    EXPECT_FALSE(check_params(bad, nullptr));
  }

  test::Problem prob;
  std::vector<float> o, ht;
  deltac_fwd_params p;
};

TEST_F(CheckParams, ValidPasses) {
  std::string err = "untouched";
  EXPECT_TRUE(check_params(p, &err));
  EXPECT_EQ(err, "untouched");
  EXPECT_TRUE(check_params(p, nullptr));
}

TEST_F(CheckParams, OptionalPointersMayBeNull) {
  p.h0 = nullptr;
  p.ht = nullptr;
  EXPECT_TRUE(check_params(p, nullptr));
}

TEST_F(CheckParams, DeltaNeedsNoGate) {
  p.variant = DELTAC_VARIANT_DELTA;
  p.g = nullptr;
  EXPECT_TRUE(check_params(p, nullptr));
}

TEST_F(CheckParams, ZeroScaleMeansDefault) {
  p.scale = 0.0f;
  EXPECT_TRUE(check_params(p, nullptr));
}

TEST_F(CheckParams, Variant) {
  expectFail([](auto &x) { x.variant = 3; }, {"variant", "3"});
  expectFail([](auto &x) { x.variant = -1; }, {"variant"});
}

TEST_F(CheckParams, PositiveDims) {
  expectFail([](auto &x) { x.B = 0; x.N = 0; }, {"params.B", "> 0"});
  expectFail([](auto &x) { x.T = 0; }, {"params.T"});
  expectFail([](auto &x) { x.H = -2; }, {"params.H"});
  expectFail([](auto &x) { x.HV = 0; }, {"params.HV"});
}

TEST_F(CheckParams, HeadGroups) {
  expectFail([](auto &x) { x.HV = 3; }, {"HV = 3", "multiple of H = 2"});
}

TEST_F(CheckParams, HeadDims) {
  for (int bad : {0, 8, 17, 272, 100, -16})
    expectFail([bad](auto &x) { x.K = bad; }, {"params.K", "multiple of 16"});
  for (int bad : {15, 264, 1000})
    expectFail([bad](auto &x) { x.V = bad; }, {"params.V", "[16, 256]"});
  for (int good : {16, 64, 80, 256}) {
    deltac_fwd_params x = p;
    x.K = good;
    x.V = good;
    EXPECT_TRUE(check_params(x, nullptr)) << good;
  }
}

TEST_F(CheckParams, NWithoutCuSeqlens) {
  expectFail([](auto &x) { x.N = 3; }, {"params.N", "B = 2"});
}

TEST_F(CheckParams, CuSeqlens) {
  static const int64_t good[] = {0, 2, 2, 5};
  static const int64_t start1[] = {1, 2, 5};
  static const int64_t decreasing[] = {0, 3, 2, 5};
  static const int64_t shortEnd[] = {0, 2, 4};
  auto varlen = [](deltac_fwd_params &x, const int64_t *cu, int n) {
    x.B = 1;
    x.T = 5;
    x.N = n;
    x.cu_seqlens = cu;
  };
  deltac_fwd_params ok = p;
  varlen(ok, good, 3);
  EXPECT_TRUE(check_params(ok, nullptr));

  expectFail([&](auto &x) { varlen(x, start1, 2); }, {"cu_seqlens[0]", "0"});
  expectFail([&](auto &x) { varlen(x, decreasing, 3); },
             {"cu_seqlens[2]", "non-decreasing"});
  expectFail([&](auto &x) { varlen(x, shortEnd, 2); },
             {"cu_seqlens[N=2]", "T = 5"});
  expectFail([&](auto &x) { varlen(x, good, 3); x.B = 2; },
             {"params.B", "1 when cu_seqlens"});
  expectFail([&](auto &x) { varlen(x, good, 0); }, {"params.N"});
}

TEST_F(CheckParams, CuSeqlensAlignment) {
  static int64_t store[5] = {0, 2, 5, 0, 0};
  const int64_t *misaligned = reinterpret_cast<const int64_t *>(
      reinterpret_cast<const char *>(store) + 4);
  expectFail(
      [&](auto &x) {
        x.B = 1;
        x.T = 5;
        x.N = 1;
        x.cu_seqlens = misaligned;
      },
      {"cu_seqlens", "alignment"});
}

TEST_F(CheckParams, Dtypes) {
  expectFail([](auto &x) { x.in_dtype = 3; }, {"in_dtype"});
  expectFail([](auto &x) { x.in_dtype = 7; }, {"in_dtype"});
  expectFail([](auto &x) { x.out_dtype = -1; }, {"out_dtype"});
  expectFail([](auto &x) { x.state_dtype = DELTAC_F16; }, {"state_dtype", "0 (f32), 1 (bf16) or 3 (fp8 e4m3)"});
  expectFail([](auto &x) { x.state_layout = 2; }, {"state_layout"});
  deltac_fwd_params x = p;
  x.in_dtype = DELTAC_BF16;
  x.out_dtype = DELTAC_BF16;
  x.state_layout = DELTAC_STATE_VK;
  EXPECT_TRUE(check_params(x, nullptr));
}

TEST_F(CheckParams, RequiredPointers) {
  expectFail([](auto &x) { x.q = nullptr; }, {"params.q", "null"});
  expectFail([](auto &x) { x.k = nullptr; }, {"params.k"});
  expectFail([](auto &x) { x.v = nullptr; }, {"params.v"});
  expectFail([](auto &x) { x.beta = nullptr; }, {"params.beta"});
  expectFail([](auto &x) { x.o = nullptr; }, {"params.o"});
  expectFail([](auto &x) { x.g = nullptr; }, {"params.g", "gated and kda"});
  expectFail(
      [](auto &x) {
        x.variant = DELTAC_VARIANT_GATED;
        x.g = nullptr;
      },
      {"params.g"});
}

TEST_F(CheckParams, PointerAlignment) {
  auto off = [](const void *ptr, int bytes) {
    return static_cast<const void *>(static_cast<const char *>(ptr) + bytes);
  };
  expectFail([&](auto &x) { x.q = off(x.q, 2); }, {"params.q", "4-byte"});
  expectFail([&](auto &x) { x.v = off(x.v, 1); }, {"params.v"});
  expectFail(
      [&](auto &x) { x.beta = static_cast<const float *>(off(x.beta, 2)); },
      {"params.beta"});
  expectFail([&](auto &x) { x.h0 = off(x.h0, 1); }, {"params.h0"});
  expectFail([&](auto &x) { x.o = const_cast<void *>(off(x.o, 2)); },
             {"params.o"});
  // bf16 needs only 2-byte alignment.
  deltac_fwd_params x = p;
  x.in_dtype = DELTAC_BF16;
  x.q = off(x.q, 2);
  EXPECT_TRUE(check_params(x, nullptr));
  x.q = off(x.q, 1);
  EXPECT_FALSE(check_params(x, nullptr));
}

TEST_F(CheckParams, Scale) {
  expectFail([](auto &x) { x.scale = -1.0f; }, {"scale"});
  expectFail([](auto &x) { x.scale = std::numeric_limits<float>::infinity(); },
             {"scale"});
  expectFail([](auto &x) { x.scale = std::nanf(""); }, {"scale", "finite"});
}

TEST_F(CheckParams, FlagsAndThreads) {
  expectFail([](auto &x) { x.qk_l2norm = 2; }, {"qk_l2norm"});
  expectFail([](auto &x) { x.threads = -1; }, {"threads"});
}

// One bound on N, with or without cu_seqlens, checked before cu_seqlens is
// read.
TEST_F(CheckParams, SequenceCountBound) {
  const int32_t over = int32_t(kMaxSequences + 1);
  expectFail([&](auto &x) { x.B = over; x.N = over; },
             {"params.N", "16777216"});
  static const int64_t cu[2] = {0, 5}; // far shorter than N + 1
  expectFail(
      [&](auto &x) {
        x.B = 1;
        x.T = 5;
        x.N = over;
        x.cu_seqlens = cu;
      },
      {"params.N", "[1, 16777216]"});
  // The state N*HV*K*V is bounded too.
  expectFail(
      [&](auto &x) {
        x.B = 1;
        x.T = 1;
        x.H = 1;
        x.HV = 1 << 30;
        x.K = x.V = 256;
        x.N = int32_t(kMaxSequences);
        x.cu_seqlens = cu;
      },
      {"N*HV*K*V"});
  deltac_fwd_params ok = p;
  ok.B = ok.N = int32_t(kMaxSequences);
  EXPECT_TRUE(check_params(ok, nullptr));
}

// cu_seqlens_on_host = false: everything but the contents of cu_seqlens is
// checked, and they are never read (the pointer here is unmapped).
TEST_F(CheckParams, DeviceCuSeqlensNotRead) {
  const int64_t *unmapped = reinterpret_cast<const int64_t *>(uintptr_t(8));
  deltac_fwd_params x = p;
  x.B = 1;
  x.T = 5;
  x.N = 3;
  x.cu_seqlens = unmapped;
  std::string err;
  EXPECT_TRUE(check_params(x, &err, /*cu_seqlens_on_host=*/false)) << err;
  static const int64_t decreasing[] = {0, 3, 2, 5};
  x.cu_seqlens = decreasing;
  EXPECT_TRUE(check_params(x, &err, false)) << err;
  EXPECT_FALSE(check_params(x, &err, true));
  EXPECT_NE(err.find("non-decreasing"), std::string::npos) << err;
  x.cu_seqlens = unmapped;

  auto bad = [&](const std::function<void(deltac_fwd_params &)> &mutate,
                 const std::string &mention) {
    deltac_fwd_params y = x;
    mutate(y);
    std::string e;
    EXPECT_FALSE(check_params(y, &e, false)) << mention;
    EXPECT_NE(e.find(mention), std::string::npos) << e;
  };
  bad([](auto &y) { y.B = 2; }, "1 when cu_seqlens");
  bad([](auto &y) { y.N = 0; }, "params.N");
  bad([](auto &y) { y.N = int32_t(kMaxSequences + 1); }, "params.N");
  bad([](auto &y) {
        y.cu_seqlens = reinterpret_cast<const int64_t *>(uintptr_t(12));
      },
      "alignment");
  bad([](auto &y) { y.K = 8; }, "params.K");
  bad([](auto &y) { y.o = nullptr; }, "params.o");
  // Without cu_seqlens the flag changes nothing.
  deltac_fwd_params z = p;
  EXPECT_TRUE(check_params(z, &err, false)) << err;
  z.N = 3;
  EXPECT_FALSE(check_params(z, &err, false));
  EXPECT_NE(err.find("B = 2"), std::string::npos) << err;
}

TEST_F(CheckParams, HugeDimsRejected) {
  expectFail(
      [](auto &x) {
        x.B = 1 << 30;
        x.N = x.B;
        x.T = 1 << 30;
        x.HV = 1 << 20;
        x.H = 1;
      },
      {"overflows"});
}

} // namespace
} // namespace deltac

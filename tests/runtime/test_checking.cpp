// The checking mode (deltac_options.check_values) on host memory, the value
// rule of deltac/check.h, and the binder (deltac/bind.h) naming tensors.
#include "deltac/bind.h"
#include "deltac/check.h"
#include "deltac/runtime.h"

#include "test_util.h"

#include <cmath>
#include <functional>

namespace deltac {
namespace {

test::Problem problem(int variant) {
  test::Problem pr;
  pr.variant = variant;
  pr.B = 1;
  pr.T = 12;
  pr.H = 1;
  pr.HV = 2;
  pr.K = 16;
  pr.V = 32;
  pr.cu = {0, 5, 12};
  pr.fill(test::freshSeed());
  return pr;
}

deltac_options checking(int negEig = 0) {
  deltac_options opt = deltac_default_options();
  opt.device = DELTAC_DEVICE_CPU;
  opt.check_values = 1;
  opt.allow_neg_eigval = negEig;
  return opt;
}

struct BadValueCase {
  const char *name;
  int variant;
  std::function<void(test::Problem &)> breakIt;
  std::string mention;
};

// Every rule: the call fails before running, names tensor and element, and
// writes nothing. Without check_values the same call runs (values are not
// read on the hot path).
TEST(CheckingMode, RejectsEachBadValue) {
  const BadValueCase cases[] = {
      {"q_nan", 1, [](test::Problem &p) { p.q[3] = NAN; }, "params.q[3] = nan"},
      {"k_inf", 1, [](test::Problem &p) { p.k[0] = INFINITY; }, "params.k[0] = inf"},
      {"v_ninf", 0, [](test::Problem &p) { p.v[7] = -INFINITY; }, "params.v[7] = -inf"},
      {"h0_nan", 2, [](test::Problem &p) { p.h0[5] = NAN; }, "params.h0[5] = nan"},
      {"g_positive", 1, [](test::Problem &p) { p.g[2] = 0.5f; }, "params.g[2] = 0.5"},
      {"g_nan", 2, [](test::Problem &p) { p.g[9] = NAN; }, "params.g[9] = nan"},
      {"g_plus_inf", 1, [](test::Problem &p) { p.g[1] = INFINITY; }, "params.g[1] = inf"},
      {"beta_above", 1, [](test::Problem &p) { p.beta[4] = 1.25f; },
       "params.beta[4] = 1.25: expected values in [0, 1]"},
      {"beta_negative", 0, [](test::Problem &p) { p.beta[0] = -0.f - 1e-3f; },
       "params.beta[0]"},
      {"beta_nan", 0, [](test::Problem &p) { p.beta[1] = NAN; }, "params.beta[1] = nan"},
  };
  for (const BadValueCase &c : cases) {
    SCOPED_TRACE(c.name);
    test::Problem pr = problem(c.variant);
    c.breakIt(pr);
    std::vector<float> o(pr.oCount(), -3.f), ht(pr.stateCount(), -3.f);
    deltac_fwd_params p = pr.params(o.data(), ht.data());
    deltac_options opt = checking();
    EXPECT_NE(deltac_forward(&p, &opt), 0);
    const std::string err = deltac_last_error();
    EXPECT_EQ(err.rfind("checking mode: ", 0), 0u) << err;
    EXPECT_NE(err.find(c.mention), std::string::npos) << err;
    for (float x : o)
      ASSERT_EQ(x, -3.f) << "o written after a failed check";
    opt.check_values = 0; // off: runs
    EXPECT_EQ(deltac_forward(&p, &opt), 0) << deltac_last_error();
  }
}

TEST(CheckingMode, AcceptsValidValuesAndResets) {
  for (int variant : {0, 1, 2}) {
    test::Problem pr = problem(variant);
    if (!pr.g.empty())
      pr.g[pr.g.size() / 2] = -INFINITY; // a reset is legal
    pr.beta[0] = 0.f;
    pr.beta[1] = 1.f; // closed range
    std::vector<float> o(pr.oCount()), ht(pr.stateCount());
    deltac_fwd_params p = pr.params(o.data(), ht.data());
    deltac_options opt = checking();
    opt.mode = DELTAC_MODE_RECURRENT;
    ASSERT_EQ(deltac_forward(&p, &opt), 0) << deltac_last_error();
    std::vector<double> oRef, htRef;
    ref::forward(p, &oRef, &htRef);
    EXPECT_LE(ref::rel_rms(o.data(), oRef), 1e-5) << variant;
    EXPECT_LE(ref::rel_rms(ht.data(), htRef), 1e-5) << variant;
  }
}

TEST(CheckingMode, NegativeEigenvaluesWidenTheBetaRange) {
  test::Problem pr = problem(1);
  pr.beta[3] = 1.9f;
  std::vector<float> o(pr.oCount());
  deltac_fwd_params p = pr.params(o.data(), nullptr);
  deltac_options opt = checking(0);
  EXPECT_NE(deltac_forward(&p, &opt), 0);
  EXPECT_NE(std::string(deltac_last_error()).find("[0, 1]"), std::string::npos);
  opt = checking(1);
  EXPECT_EQ(deltac_forward(&p, &opt), 0) << deltac_last_error();
  pr.beta[3] = 2.5f;
  EXPECT_NE(deltac_forward(&p, &opt), 0);
  EXPECT_NE(std::string(deltac_last_error()).find("[0, 2]"), std::string::npos);
}

TEST(CheckingMode, Bf16InputsAreCheckedInTheirBits) {
  test::Problem pr = problem(1);
  std::vector<uint16_t> q = test::toBf16(pr.q), k = test::toBf16(pr.k),
                        v = test::toBf16(pr.v);
  k[6] = 0x7f80; // +inf
  v[2] = 0x7fc1; // NaN
  std::vector<float> o(pr.oCount());
  deltac_fwd_params p = pr.params(o.data(), nullptr);
  p.in_dtype = DELTAC_BF16;
  p.q = q.data();
  p.k = k.data();
  p.v = v.data();
  deltac_options opt = checking();
  EXPECT_NE(deltac_forward(&p, &opt), 0);
  EXPECT_NE(std::string(deltac_last_error()).find("params.k[6] = inf"),
            std::string::npos)
      << deltac_last_error();
  k[6] = 0;
  EXPECT_NE(deltac_forward(&p, &opt), 0);
  EXPECT_NE(std::string(deltac_last_error()).find("params.v[2] = nan"),
            std::string::npos)
      << deltac_last_error();
}

TEST(CheckingMode, OptionsAreValidated) {
  test::Problem pr = problem(1);
  std::vector<float> o(pr.oCount());
  deltac_fwd_params p = pr.params(o.data(), nullptr);
  deltac_options opt = checking();
  opt.check_values = 2;
  EXPECT_NE(deltac_forward(&p, &opt), 0);
  EXPECT_NE(std::string(deltac_last_error()).find("options.check_values = 2"),
            std::string::npos);
  opt = checking();
  opt.allow_neg_eigval = -1;
  EXPECT_NE(deltac_forward(&p, &opt), 0);
  EXPECT_NE(std::string(deltac_last_error()).find("options.allow_neg_eigval"),
            std::string::npos);
  // Device pointers need a flag to report into (checked before any device
  // is touched, so this holds without a GPU too).
  opt = checking();
  opt.device = DELTAC_DEVICE_CUDA;
  opt.device_pointers = 1;
  EXPECT_NE(deltac_forward(&p, &opt), 0);
  EXPECT_NE(std::string(deltac_last_error()).find("options.check_flag is null"),
            std::string::npos)
      << deltac_last_error();
}

TEST(CheckingMode, DefaultIsOff) {
  deltac_options opt = deltac_default_options();
  EXPECT_EQ(opt.check_values, 0);
  EXPECT_EQ(opt.allow_neg_eigval, 0);
  EXPECT_EQ(opt.check_flag, nullptr);
}

TEST(CheckingMode, FlagString) {
  EXPECT_STREQ(deltac_check_flag_string(0), "");
  EXPECT_STREQ(deltac_check_flag_string(DELTAC_CHECK_Q | DELTAC_CHECK_BETA),
               "q, beta");
  EXPECT_STREQ(deltac_check_flag_string(DELTAC_CHECK_CU_SEQLENS), "cu_seqlens");
  EXPECT_STREQ(deltac_check_flag_string(DELTAC_CHECK_G | 1024), "g, unknown bits");
}

// --- the binder --------------------------------------------------------------

TEST(Bind, DerivesEveryDimension) {
  test::Problem pr = problem(2);
  std::vector<float> o(pr.oCount()), ht(pr.stateCount());
  ForwardTensors t = pr.tensors(o.data(), ht.data());
  deltac_fwd_params p;
  std::string err;
  ASSERT_TRUE(bind_params(t, &p, &err)) << err;
  EXPECT_EQ(p.variant, 2);
  EXPECT_EQ(p.B, 1);
  EXPECT_EQ(p.T, 12);
  EXPECT_EQ(p.H, 1);
  EXPECT_EQ(p.HV, 2);
  EXPECT_EQ(p.K, 16);
  EXPECT_EQ(p.V, 32);
  EXPECT_EQ(p.N, 2);
  EXPECT_EQ(p.cu_seqlens, pr.cu.data());
  EXPECT_EQ(p.o, o.data());
  EXPECT_EQ(o_shape(p), pr.vShape());
  EXPECT_EQ(state_shape(p), pr.stateShape());
  EXPECT_TRUE(check_params(p, &err)) << err;
}

struct BindCase {
  const char *name;
  std::function<void(ForwardTensors &)> breakIt;
  std::vector<std::string> mention;
};

TEST(Bind, MessagesNameTheTensor) {
  test::Problem pr = problem(1);
  std::vector<float> o(pr.oCount()), ht(pr.stateCount());
  std::vector<int64_t> badCu = {0, 7, 3, 12}, hugeCu(3);
  const BindCase cases[] = {
      {"q_rank", [](ForwardTensors &t) { t.q.shape = {1, 12, 16}; },
       {"q: shape (1, 12, 16): expected rank 4 [B, T, H, K]"}},
      {"q_label", [](ForwardTensors &t) {
         t.q.shape = {1, 12, 1, 24};
         t.q.label = "query";
       },
       {"query: K = 24"}},
      {"k_shape", [](ForwardTensors &t) { t.k.shape = {1, 12, 1, 32}; },
       {"k: shape (1, 12, 1, 32): expected (1, 12, 1, 16)", "(as q)"}},
      {"k_dtype", [](ForwardTensors &t) { t.k.dtype = ElemType::BF16; },
       {"k: dtype bfloat16: expected float32"}},
      {"v_heads", [](ForwardTensors &t) { t.v.shape = {1, 12, 0, 32}; },
       {"v: HV = 0"}},
      {"beta_missing", [](ForwardTensors &t) { t.beta = TensorArg{}; },
       {"beta: missing"}},
      {"g_missing", [](ForwardTensors &t) { t.g = TensorArg{}; }, {"g: missing"}},
      {"g_for_delta", [](ForwardTensors &t) { t.variant = 0; },
       {"g: given, but the delta variant takes no gate"}},
      {"h0_shape", [](ForwardTensors &t) { t.h0.shape = {1, 2, 16, 32}; },
       {"h0: shape (1, 2, 16, 32): expected (2, 2, 16, 32) [N, HV, K, V]",
        "(N from cu_seqlens)"}},
      {"cu_dtype", [](ForwardTensors &t) { t.cu_seqlens.dtype = ElemType::I32; },
       {"cu_seqlens: dtype int32: expected int64"}},
      {"cu_contents", [&](ForwardTensors &t) { t.cu_seqlens.data = badCu.data(); },
       {"cu_seqlens: cu_seqlens[2] = 3 < cu_seqlens[1] = 7"}},
      {"cu_huge", [&](ForwardTensors &t) {
         t.cu_seqlens.data = hugeCu.data();
         t.cu_seqlens.shape = {kMaxSequences + 2};
       },
       {"cu_seqlens: N = 16777217 sequences: expected at most 16777216"}},
      {"o_shape", [](ForwardTensors &t) { t.o.shape = {1, 12, 2, 16}; },
       {"o: shape (1, 12, 2, 16): expected (1, 12, 2, 32) [B, T, HV, V]"}},
      {"o_dtype", [](ForwardTensors &t) { t.o.dtype = ElemType::F16; },
       {"o: dtype float16: expected float32 or bfloat16"}},
      {"ht_dtype", [](ForwardTensors &t) { t.ht.dtype = ElemType::BF16; },
       {"ht: dtype bfloat16: expected float32"}},
      {"null_data", [](ForwardTensors &t) { t.v.data = nullptr; },
       {"v: null data pointer"}},
  };
  for (const BindCase &c : cases) {
    SCOPED_TRACE(c.name);
    ForwardTensors t = pr.tensors(o.data(), ht.data());
    c.breakIt(t);
    deltac_fwd_params p;
    std::string err;
    EXPECT_FALSE(bind_params(t, &p, &err));
    for (const std::string &m : c.mention)
      EXPECT_NE(err.find(m), std::string::npos) << "'" << m << "' in: " << err;
  }
}

TEST(Bind, DeviceCuSeqlensAreNotRead) {
  test::Problem pr = problem(1);
  std::vector<float> o(pr.oCount());
  ForwardTensors t = pr.tensors(o.data(), nullptr);
  std::vector<int64_t> garbage = {5, 1, 99};
  t.cu_seqlens.data = garbage.data();
  t.cu_seqlens_on_host = false;
  deltac_fwd_params p;
  std::string err;
  EXPECT_TRUE(bind_params(t, &p, &err)) << err;
  t.cu_seqlens_on_host = true;
  EXPECT_FALSE(bind_params(t, &p, &err));
}

TEST(Bind, VkStateLayout) {
  test::Problem pr = problem(1);
  std::vector<float> o(pr.oCount()), ht(pr.stateCount());
  ForwardTensors t = pr.tensors(o.data(), ht.data());
  t.state_layout = DELTAC_STATE_VK;
  deltac_fwd_params p;
  std::string err;
  EXPECT_FALSE(bind_params(t, &p, &err)); // h0 given as [N, HV, K, V]
  EXPECT_NE(err.find("[N, HV, V, K]"), std::string::npos) << err;
  t.h0.shape = {2, 2, 32, 16};
  t.ht.shape = {2, 2, 32, 16};
  EXPECT_TRUE(bind_params(t, &p, &err)) << err;
  EXPECT_EQ(p.state_layout, DELTAC_STATE_VK);
}

} // namespace
} // namespace deltac

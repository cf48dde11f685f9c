// The C API (deltac_forward) against the float64 reference, and its errors.
#include "deltac/catalogue.h"
#include "deltac/runtime.h"

#include "test_util.h"

#include <thread>

namespace deltac {
namespace {

struct Shape {
  const char *name;
  int B, T, H, HV, K, V;
  int seqs; // > 0: cu_seqlens with that many sequences (B must be 1)
  bool h0;
  bool specialized; // K = V in {64, 128}
};

const Shape kShapes[] = {
    {"K64_gva_h0", 2, 67, 2, 4, 64, 64, 0, true, true},
    {"K32V48_varlen", 1, 100, 1, 2, 32, 48, 4, true, false},
    {"K128_noh0", 1, 40, 1, 1, 128, 128, 0, false, true},
    {"K128V64_mixed", 2, 33, 1, 2, 128, 64, 0, true, false},
    {"K16V256_varlen", 1, 50, 2, 2, 16, 256, 3, false, false},
};

struct RunMode {
  const char *name;
  int mode, chunk;
};
const RunMode kModes[] = {{"recurrent", DELTAC_MODE_RECURRENT, 0},
                       {"chunk16", DELTAC_MODE_CHUNKED, 16},
                       {"chunk32", DELTAC_MODE_CHUNKED, 32},
                       {"chunk64", DELTAC_MODE_CHUNKED, 64},
                       {"auto", DELTAC_MODE_AUTO, 0}};

const char *variantName(int v) {
  return v == 0 ? "delta" : v == 1 ? "gated" : "kda";
}

test::Problem makeProblem(int variant, const Shape &s, uint64_t seed) {
  test::Problem pr;
  pr.variant = variant;
  pr.B = s.B;
  pr.T = s.T;
  pr.H = s.H;
  pr.HV = s.HV;
  pr.K = s.K;
  pr.V = s.V;
  pr.withH0 = s.h0;
  if (s.seqs > 0)
    pr.cu = test::randomCuSeqlens(s.T, s.seqs, seed ^ 0x5eed);
  pr.fill(seed);
  return pr;
}

// Runs p on the CPU and compares o and ht with the reference.
void expectMatchesReference(const deltac_fwd_params &p, const deltac_options &opt,
                            double tol, deltac_run_info *info = nullptr) {
  std::vector<double> oRef, htRef;
  ref::forward(p, &oRef, &htRef);
  deltac_run_info local{};
  ASSERT_EQ(deltac_forward_info(&p, &opt, info ? info : &local), 0)
      << deltac_last_error();
  EXPECT_STREQ(deltac_last_error(), "");
  double eo = p.out_dtype == DELTAC_BF16
                  ? ref::rel_rms(static_cast<const uint16_t *>(p.o), oRef)
                  : ref::rel_rms(static_cast<const float *>(p.o), oRef);
  EXPECT_LE(eo, tol) << "o";
  if (p.ht) {
    double eh = ref::rel_rms(static_cast<const float *>(p.ht), htRef);
    EXPECT_LE(eh, tol) << "ht";
  }
}

class ApiVsReference
    : public ::testing::TestWithParam<std::tuple<int, Shape, RunMode>> {};

TEST_P(ApiVsReference, F32) {
  auto [variant, shape, mode] = GetParam();
  uint64_t seed = test::freshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  test::Problem pr = makeProblem(variant, shape, seed);
  std::vector<float> o(pr.oCount(), -7.f), ht(pr.stateCount(), -7.f);
  deltac_fwd_params p = pr.params(o.data(), ht.data());
  deltac_options opt = deltac_default_options();
  opt.device = DELTAC_DEVICE_CPU;
  opt.mode = mode.mode;
  opt.chunk = mode.chunk;
  deltac_run_info info{};
  expectMatchesReference(p, opt, 1e-5, &info);
  EXPECT_EQ(info.device, DELTAC_DEVICE_CPU);
  if (mode.mode == DELTAC_MODE_AUTO) {
    // The catalogue's default rule, and the knobs it gives, ran.
    const deltac::Problem prob = problem_of(p, max_seqlen(p));
    Family f;
    ASSERT_TRUE(default_family(Device::CPU, Mode::Auto, prob, &f, nullptr));
    const KernelConfig c = default_config(f, prob);
    EXPECT_STREQ(info.family, family_info(f).name);
    EXPECT_EQ(info.chunk, c.chunk);
    EXPECT_EQ(info.tile_v, c.tile_v);
    EXPECT_EQ(info.tuned, 0);
    // A varlen call where a sequence's own length picks another family is a
    // mixed batch (runtime.cpp): each run of such sequences ran that family
    // and the note says so.
    bool mixed = false;
    for (int n = 0; p.cu_seqlens && p.N > 1 && n < p.N; ++n) {
      Family fn;
      ASSERT_TRUE(default_family(Device::CPU, Mode::Auto,
                                 problem_of(p, p.cu_seqlens[n + 1] - p.cu_seqlens[n]), &fn,
                                 nullptr));
      mixed = mixed || !(default_config(fn, prob) == c);
    }
    if (mixed)
      EXPECT_EQ(std::string(info.note).rfind("mixed batch:", 0), 0u) << info.note;
    else
      EXPECT_STREQ(info.note, "");
  } else {
    EXPECT_EQ(info.mode, mode.mode);
    EXPECT_EQ(info.chunk, mode.chunk);
  }
  EXPECT_EQ(info.specialized, shape.specialized ? 1 : 0);
}

INSTANTIATE_TEST_SUITE_P(
    Cpu, ApiVsReference,
    ::testing::Combine(::testing::Values(0, 1, 2), ::testing::ValuesIn(kShapes),
                       ::testing::ValuesIn(kModes)),
    [](const auto &info) {
      return std::string(variantName(std::get<0>(info.param))) + "_" +
             std::get<1>(info.param).name + "_" + std::get<2>(info.param).name;
    });

class ApiBf16 : public ::testing::TestWithParam<std::tuple<int, RunMode>> {};

TEST_P(ApiBf16, MatchesReference) {
  auto [variant, mode] = GetParam();
  uint64_t seed = test::freshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  test::Problem pr = makeProblem(variant, kShapes[0], seed);
  std::vector<uint16_t> q = test::toBf16(pr.q), k = test::toBf16(pr.k),
                        v = test::toBf16(pr.v);
  std::vector<uint16_t> o(pr.oCount());
  std::vector<float> ht(pr.stateCount());
  deltac_fwd_params p = pr.params(o.data(), ht.data());
  p.in_dtype = DELTAC_BF16;
  p.out_dtype = DELTAC_BF16;
  p.q = q.data();
  p.k = k.data();
  p.v = v.data();
  deltac_options opt = deltac_default_options();
  opt.device = DELTAC_DEVICE_CPU;
  opt.mode = mode.mode;
  opt.chunk = mode.chunk;
  expectMatchesReference(p, opt, 5e-3);
}

INSTANTIATE_TEST_SUITE_P(Cpu, ApiBf16,
                         ::testing::Combine(::testing::Values(0, 1, 2),
                                            ::testing::Values(kModes[0],
                                                              kModes[3])),
                         [](const auto &info) {
                           return std::string(
                                      variantName(std::get<0>(info.param))) +
                                  "_" + std::get<1>(info.param).name;
                         });

deltac_options cpuOpts(int mode = DELTAC_MODE_AUTO, int chunk = 0) {
  deltac_options opt = deltac_default_options();
  opt.device = DELTAC_DEVICE_CPU;
  opt.mode = mode;
  opt.chunk = chunk;
  return opt;
}

TEST(Api, L2NormAndScaleOnUnnormalisedInputs) {
  for (int variant : {0, 1, 2}) {
    uint64_t seed = test::freshSeed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    test::Problem pr = makeProblem(variant, kShapes[0], seed);
    for (float &x : pr.q)
      x *= 5.f;
    for (float &x : pr.k)
      x *= 3.f;
    std::vector<float> o(pr.oCount()), ht(pr.stateCount());
    deltac_fwd_params p = pr.params(o.data(), ht.data());
    p.qk_l2norm = 1;
    p.scale = 0.37f;
    expectMatchesReference(p, cpuOpts(DELTAC_MODE_CHUNKED, 32), 1e-5);
    expectMatchesReference(p, cpuOpts(DELTAC_MODE_RECURRENT), 1e-5);
  }
}

TEST(Api, ZeroScaleMeansInverseSqrtK) {
  uint64_t seed = test::freshSeed();
  test::Problem pr = makeProblem(1, kShapes[1], seed);
  std::vector<float> o1(pr.oCount()), o2(pr.oCount());
  deltac_fwd_params p = pr.params(o1.data(), nullptr);
  p.scale = 0.0f;
  deltac_options opt = cpuOpts(DELTAC_MODE_RECURRENT);
  ASSERT_EQ(deltac_forward(&p, &opt), 0) << deltac_last_error();
  p.o = o2.data();
  p.scale = float(1.0 / std::sqrt(double(pr.K)));
  ASSERT_EQ(deltac_forward(&p, &opt), 0) << deltac_last_error();
  EXPECT_EQ(o1, o2);
}

TEST(Api, VkStateLayout) {
  uint64_t seed = test::freshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  test::Problem pr = makeProblem(2, kShapes[3], seed);
  std::vector<float> o(pr.oCount()), ht(pr.stateCount());
  deltac_fwd_params p = pr.params(o.data(), ht.data());
  p.state_layout = DELTAC_STATE_VK;
  expectMatchesReference(p, cpuOpts(DELTAC_MODE_CHUNKED, 64), 1e-5);
  expectMatchesReference(p, cpuOpts(DELTAC_MODE_RECURRENT), 1e-5);
}

TEST(Api, ThreadCountDoesNotChangeResults) {
  uint64_t seed = test::freshSeed();
  test::Problem pr = makeProblem(1, kShapes[0], seed);
  std::vector<float> o1(pr.oCount()), o2(pr.oCount());
  deltac_fwd_params p = pr.params(o1.data(), nullptr);
  p.threads = 1;
  deltac_options opt = cpuOpts(DELTAC_MODE_CHUNKED, 64);
  ASSERT_EQ(deltac_forward(&p, &opt), 0) << deltac_last_error();
  p.threads = 0;
  p.o = o2.data();
  ASSERT_EQ(deltac_forward(&p, &opt), 0) << deltac_last_error();
  EXPECT_EQ(o1, o2);
}

TEST(Api, DecodeStepAndAutoSchedule) {
  // Under auto (catalogue.h): one-token calls run cpu_decode, longer ones
  // cpu_recurrent (up to the CPU rule's recurrent_max_tokens: 2048 on
  // avx512, no bound on avx2).
  for (int T : {1, 8, 9, 200}) {
    Shape s{"decode", 3, T, 1, 2, 64, 64, 0, true, true};
    uint64_t seed = test::freshSeed();
    test::Problem pr = makeProblem(1, s, seed);
    std::vector<float> o(pr.oCount()), ht(pr.stateCount());
    deltac_fwd_params p = pr.params(o.data(), ht.data());
    deltac_run_info info{};
    deltac_options opt = deltac_default_options(); // device auto
    if (deltac_cuda_available())
      opt.device = DELTAC_DEVICE_CPU;
    expectMatchesReference(p, opt, 1e-5, &info);
    EXPECT_EQ(info.device, DELTAC_DEVICE_CPU);
    EXPECT_EQ(info.mode, DELTAC_MODE_RECURRENT) << "T = " << T;
    EXPECT_EQ(info.chunk, 0) << "T = " << T;
    EXPECT_STREQ(info.family, T == 1 ? "cpu_decode" : "cpu_recurrent");
    // V = 64: cpu_decode runs whole rows on avx512 (catalogue.h, kCpuRules).
    const bool rows = T == 1 && std::string(info.isa) == "avx512";
    EXPECT_EQ(info.tile_v, rows ? 64 : 32);
  }
}

TEST(Api, EmptySequencesKeepTheirState) {
  test::Problem pr;
  pr.variant = 1;
  pr.B = 1;
  pr.T = 10;
  pr.H = 1;
  pr.HV = 1;
  pr.K = 16;
  pr.V = 16;
  pr.cu = {0, 0, 10, 10};
  pr.fill(test::freshSeed());
  std::vector<float> o(pr.oCount()), ht(pr.stateCount());
  deltac_fwd_params p = pr.params(o.data(), ht.data());
  expectMatchesReference(p, cpuOpts(DELTAC_MODE_CHUNKED, 16), 1e-5);
  const size_t per = size_t(pr.K) * pr.V;
  for (size_t i = 0; i < per; ++i) {
    EXPECT_EQ(ht[i], pr.h0[i]);
    EXPECT_EQ(ht[2 * per + i], pr.h0[2 * per + i]);
  }
}

TEST(Api, ChunkedWithoutChunkUsesTheDefault) {
  test::Problem pr = makeProblem(1, kShapes[0], test::freshSeed());
  std::vector<float> o(pr.oCount()), ht(pr.stateCount());
  deltac_fwd_params p = pr.params(o.data(), ht.data());
  deltac_run_info info{};
  expectMatchesReference(p, cpuOpts(DELTAC_MODE_CHUNKED, 0), 1e-5, &info);
  EXPECT_EQ(info.mode, DELTAC_MODE_CHUNKED);
  EXPECT_EQ(info.chunk, kCpuDefaultChunk);
}

// --- errors -----------------------------------------------------------------

class ApiErrors : public ::testing::Test {
protected:
  void SetUp() override {
    pr = makeProblem(1, kShapes[0], test::freshSeed());
    o.resize(pr.oCount());
    ht.resize(pr.stateCount());
    p = pr.params(o.data(), ht.data());
  }
  void expectError(const deltac_fwd_params *pp, const deltac_options *opt,
                   const std::string &mention) {
    EXPECT_NE(deltac_forward(pp, opt), 0);
    std::string err = deltac_last_error();
    EXPECT_NE(err.find(mention), std::string::npos)
        << "'" << err << "' lacks '" << mention << "'";
  }
  test::Problem pr;
  std::vector<float> o, ht;
  deltac_fwd_params p;
};

TEST_F(ApiErrors, NullParams) { expectError(nullptr, nullptr, "null"); }

TEST_F(ApiErrors, BadOptions) {
  deltac_options opt = cpuOpts();
  opt.device = 5;
  expectError(&p, &opt, "options.device");
  opt = cpuOpts();
  opt.mode = -1;
  expectError(&p, &opt, "options.mode");
  opt = cpuOpts(DELTAC_MODE_CHUNKED, 48);
  expectError(&p, &opt, "options.chunk = 48");
  opt = cpuOpts(DELTAC_MODE_RECURRENT, 32);
  expectError(&p, &opt, "recurrent");
  opt = cpuOpts();
  opt.device_pointers = 1;
  expectError(&p, &opt, "device_pointers");
}

TEST_F(ApiErrors, InvalidParamsAreRejectedBeforeRunning) {
  p.K = 24;
  expectError(&p, nullptr, "params.K = 24");
  p = pr.params(o.data(), ht.data());
  p.g = nullptr;
  expectError(&p, nullptr, "params.g");
  for (float x : o)
    ASSERT_EQ(x, 0.f) << "nothing may be written on error";
}

TEST_F(ApiErrors, SuccessClearsLastError) {
  expectError(nullptr, nullptr, "null");
  deltac_options opt = cpuOpts();
  ASSERT_EQ(deltac_forward(&p, &opt), 0);
  EXPECT_STREQ(deltac_last_error(), "");
}

TEST_F(ApiErrors, LastErrorIsPerThread) {
  expectError(nullptr, nullptr, "null");
  std::string other = "unset";
  std::thread t([&] { other = deltac_last_error(); });
  t.join();
  EXPECT_EQ(other, "");
  EXPECT_NE(std::string(deltac_last_error()), "");
}

TEST_F(ApiErrors, CudaForcedWithoutGpu) {
  if (deltac_cuda_available())
    GTEST_SKIP() << "a GPU is present";
  deltac_options opt = deltac_default_options();
  opt.device = DELTAC_DEVICE_CUDA;
  expectError(&p, &opt, "device cuda");
  // Auto falls back to the CPU.
  deltac_run_info info{};
  opt.device = DELTAC_DEVICE_AUTO;
  ASSERT_EQ(deltac_forward_info(&p, &opt, &info), 0) << deltac_last_error();
  EXPECT_EQ(info.device, DELTAC_DEVICE_CPU);
}

TEST_F(ApiErrors, F16RunsOnNoCpuKernel) {
  deltac_options opt = deltac_default_options();
  opt.device = DELTAC_DEVICE_CPU;
  p.in_dtype = DELTAC_F16;
  expectError(&p, &opt, "f32 or bf16");
}

extern "C" int deltac_c_smoke(float *o_out);

TEST(Api, UsableFromC) {
  std::vector<float> o(3 * 16, -1.f);
  EXPECT_EQ(deltac_c_smoke(o.data()), 0) << deltac_last_error();
  EXPECT_FLOAT_EQ(o[0], 0.25f);
}

TEST(Api, CudaSupportedSet) {
#ifdef DELTAC_TEST_HAVE_CUDA
  const int cuda = 1;
#else
  const int cuda = 0;
#endif
  EXPECT_EQ(deltac_cuda_supports(DELTAC_VARIANT_GATED, 128, 128, DELTAC_F32), cuda);
  EXPECT_EQ(deltac_cuda_supports(DELTAC_VARIANT_KDA, 64, 64, DELTAC_BF16), cuda);
  EXPECT_EQ(deltac_cuda_supports(DELTAC_VARIANT_DELTA, 128, 256, DELTAC_F32), cuda);
  // Every K, V in 16..256 (multiples of 16): other pairs run padded.
  EXPECT_EQ(deltac_cuda_supports(DELTAC_VARIANT_GATED, 32, 48, DELTAC_F32), cuda);
  EXPECT_EQ(deltac_cuda_supports(DELTAC_VARIANT_KDA, 16, 256, DELTAC_BF16), cuda);
  // f16: the chunked kernel (padded too).
  EXPECT_EQ(deltac_cuda_supports(DELTAC_VARIANT_GATED, 128, 128, DELTAC_F16), cuda);
  EXPECT_EQ(deltac_cuda_supports(DELTAC_VARIANT_GATED, 96, 96, DELTAC_F16), cuda);
  EXPECT_EQ(deltac_cuda_supports(DELTAC_VARIANT_GATED, 40, 64, DELTAC_F32), 0);
  EXPECT_EQ(deltac_cuda_supports(DELTAC_VARIANT_GATED, 64, 272, DELTAC_F32), 0);
}

} // namespace
} // namespace deltac

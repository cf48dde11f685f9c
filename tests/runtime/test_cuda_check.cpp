// The CUDA side of the checking mode and of config choice, on a GPU:
// device pointers never synchronise or copy to the host (the call is
// captured into a CUDA graph), the device check sets its flag bits and the
// forward kernel then writes nothing, and a tuning-database record changes
// the CUDA kernel that runs. Every test skips without a usable GPU.
#include "deltac/catalogue.h"
#include "deltac/convert.h"
#include "deltac/runtime.h"
#include "dispatch.h" // runtime/src: cuda_jit_enabled

#include "test_util.h"

#include <cuda_runtime.h>

#include <cmath>
#include <fstream>
#include <functional>

namespace deltac {
namespace {

#define SKIP_WITHOUT_GPU()                                                     \
  if (!deltac_cuda_available())                                                \
  GTEST_SKIP() << "no CUDA device"

void *toDevice(const void *src, size_t bytes) {
  void *d = nullptr;
  EXPECT_EQ(cudaMalloc(&d, bytes + 16), cudaSuccess);
  if (src && bytes)
    EXPECT_EQ(cudaMemcpy(d, src, bytes, cudaMemcpyHostToDevice), cudaSuccess);
  return d;
}

// A problem's tensors in device memory; o and ht start as 0x7f bytes (a
// sentinel that shows whether the kernel wrote them); flag is a zeroed
// device int32.
struct DeviceProblem {
  test::Problem pr;
  std::vector<void *> owned;
  deltac_fwd_params p{};
  int32_t *flag = nullptr;

  explicit DeviceProblem(const test::Problem &problem) : pr(problem) {
    p = pr.params(pr.v.data(), nullptr); // shapes only: o replaced below
    auto up = [&](const void *src, size_t bytes) {
      owned.push_back(toDevice(src, bytes));
      return owned.back();
    };
    p.q = up(pr.q.data(), pr.q.size() * 4);
    p.k = up(pr.k.data(), pr.k.size() * 4);
    p.v = up(pr.v.data(), pr.v.size() * 4);
    p.beta = static_cast<const float *>(up(pr.beta.data(), pr.beta.size() * 4));
    p.g = pr.g.empty() ? nullptr
                       : static_cast<const float *>(up(pr.g.data(), pr.g.size() * 4));
    p.h0 = pr.withH0 ? up(pr.h0.data(), pr.h0.size() * 4) : nullptr;
    p.cu_seqlens = pr.cu.empty() ? nullptr
                                 : static_cast<const int64_t *>(
                                       up(pr.cu.data(), pr.cu.size() * 8));
    p.o = up(nullptr, pr.oCount() * 4);
    p.ht = up(nullptr, pr.stateCount() * 4);
    EXPECT_EQ(cudaMemset(p.o, 0x7f, pr.oCount() * 4), cudaSuccess);
    EXPECT_EQ(cudaMemset(p.ht, 0x7f, pr.stateCount() * 4), cudaSuccess);
    flag = static_cast<int32_t *>(up(nullptr, 4));
    EXPECT_EQ(cudaMemset(flag, 0, 4), cudaSuccess);
  }
  ~DeviceProblem() {
    for (void *d : owned)
      cudaFree(d);
  }
  // p with q, k, v replaced by device copies of 16-bit host data (dtype
  // DELTAC_BF16 or DELTAC_F16 for inputs and o); the copies are owned.
  deltac_fwd_params with16(int32_t dtype, const std::vector<uint16_t> &q16,
                           const std::vector<uint16_t> &k16,
                           const std::vector<uint16_t> &v16) {
    deltac_fwd_params x = p;
    x.in_dtype = x.out_dtype = dtype;
    x.q = toDevice(q16.data(), q16.size() * 2);
    x.k = toDevice(k16.data(), k16.size() * 2);
    x.v = toDevice(v16.data(), v16.size() * 2);
    owned.insert(owned.end(), {const_cast<void *>(x.q), const_cast<void *>(x.k),
                               const_cast<void *>(x.v)});
    return x;
  }
  // Overwrites element i of a device f32 tensor.
  void poke(const void *dev, size_t i, float x) {
    EXPECT_EQ(cudaMemcpy(static_cast<float *>(const_cast<void *>(dev)) + i, &x,
                         4, cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  int32_t readFlag() {
    int32_t f = -1;
    EXPECT_EQ(cudaMemcpy(&f, flag, 4, cudaMemcpyDeviceToHost), cudaSuccess);
    return f;
  }
  std::vector<float> readO() {
    std::vector<float> o(pr.oCount());
    EXPECT_EQ(cudaMemcpy(o.data(), p.o, o.size() * 4, cudaMemcpyDeviceToHost),
              cudaSuccess);
    return o;
  }
};

test::Problem gpuProblem(int variant) {
  test::Problem pr;
  pr.variant = variant;
  pr.B = 1;
  pr.T = 21;
  pr.H = 2;
  pr.HV = 4;
  pr.K = 128;
  pr.V = 128;
  pr.cu = {0, 1, 1, 13, 21};
  pr.fill(test::freshSeed());
  return pr;
}

deltac_options deviceOptions(cudaStream_t s, int32_t *flag) {
  deltac_options opt = deltac_default_options();
  opt.device = DELTAC_DEVICE_CUDA;
  opt.device_pointers = 1;
  opt.cuda_stream = s;
  opt.check_values = flag ? 1 : 0;
  opt.check_flag = flag;
  return opt;
}

// With device pointers nothing may synchronise or copy to the host: inside
// a global-mode stream capture any such call fails (before, the blocking
// cudaMemcpy of cu_seqlens did). The captured graph then runs correctly.
TEST(CudaNoSync, DevicePointerCallIsGraphCapturable) {
  SKIP_WITHOUT_GPU();
  for (bool check : {false, true}) {
    SCOPED_TRACE(check ? "checking mode" : "plain");
    DeviceProblem d(gpuProblem(DELTAC_VARIANT_GATED));
    cudaStream_t s;
    ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    deltac_options opt = deviceOptions(s, check ? d.flag : nullptr);
    // Once outside the capture, so that lazily loaded kernel modules are
    // loaded before it (module loading is not what this test is about).
    ASSERT_EQ(deltac_forward(&d.p, &opt), 0) << deltac_last_error();
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    ASSERT_EQ(cudaMemset(d.p.o, 0x7f, d.pr.oCount() * 4), cudaSuccess);
    ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
    const int rc = deltac_forward(&d.p, &opt);
    const std::string err = deltac_last_error();
    cudaGraph_t graph = nullptr;
    ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
    ASSERT_EQ(rc, 0) << err;
    cudaGraphExec_t exec;
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(s);
    std::vector<double> oRef, htRef;
    deltac_fwd_params hp = d.pr.params(d.pr.v.data(), nullptr);
    ref::forward(hp, &oRef, &htRef);
    EXPECT_LE(ref::rel_rms(d.readO().data(), oRef), 1e-5);
    if (check)
      EXPECT_EQ(d.readFlag(), 0);
  }
}

struct DeviceBad {
  const char *name;
  int32_t bit;
  std::function<void(DeviceProblem &)> breakIt;
};

// Each bad input sets its bit; the forward kernel then writes nothing; a
// valid call after it on the same flag is skipped too (the flag is sticky).
TEST(CudaCheck, FlagsEachBadInputAndSkipsTheKernel) {
  SKIP_WITHOUT_GPU();
  const DeviceBad cases[] = {
      {"q_nan", DELTAC_CHECK_Q, [](DeviceProblem &d) { d.poke(d.p.q, 5, NAN); }},
      {"k_inf", DELTAC_CHECK_K, [](DeviceProblem &d) { d.poke(d.p.k, 0, INFINITY); }},
      {"v_nan", DELTAC_CHECK_V, [](DeviceProblem &d) { d.poke(d.p.v, 77, NAN); }},
      {"h0_inf", DELTAC_CHECK_H0, [](DeviceProblem &d) { d.poke(d.p.h0, 3, -INFINITY); }},
      {"g_positive", DELTAC_CHECK_G, [](DeviceProblem &d) { d.poke(d.p.g, 9, 0.25f); }},
      {"g_nan", DELTAC_CHECK_G, [](DeviceProblem &d) { d.poke(d.p.g, 2, NAN); }},
      {"beta_above", DELTAC_CHECK_BETA, [](DeviceProblem &d) { d.poke(d.p.beta, 4, 1.5f); }},
      {"cu_decreasing", DELTAC_CHECK_CU_SEQLENS,
       [](DeviceProblem &d) {
         const int64_t bad = 14; // {0, 1, 14, 13, 21}
         EXPECT_EQ(cudaMemcpy(const_cast<int64_t *>(d.p.cu_seqlens) + 2, &bad, 8,
                              cudaMemcpyHostToDevice),
                   cudaSuccess);
       }},
      {"cu_end", DELTAC_CHECK_CU_SEQLENS,
       [](DeviceProblem &d) {
         const int64_t bad = 20;
         EXPECT_EQ(cudaMemcpy(const_cast<int64_t *>(d.p.cu_seqlens) + 4, &bad, 8,
                              cudaMemcpyHostToDevice),
                   cudaSuccess);
       }},
  };
  for (const DeviceBad &c : cases) {
    SCOPED_TRACE(c.name);
    DeviceProblem d(gpuProblem(DELTAC_VARIANT_GATED));
    c.breakIt(d);
    deltac_options opt = deviceOptions(nullptr, d.flag);
    ASSERT_EQ(deltac_forward(&d.p, &opt), 0) << deltac_last_error();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(d.readFlag(), c.bit) << deltac_check_flag_string(d.readFlag());
    for (float x : d.readO())
      ASSERT_TRUE(std::isnan(x) || x > 1e38f) << "o written despite the flag";
  }
  // bf16 inputs: the check reads their bits.
  DeviceProblem d(gpuProblem(DELTAC_VARIANT_KDA));
  std::vector<uint16_t> q16 = test::toBf16(d.pr.q), k16 = test::toBf16(d.pr.k),
                        v16 = test::toBf16(d.pr.v);
  v16[10] = 0x7fc0; // NaN
  deltac_fwd_params p = d.with16(DELTAC_BF16, q16, k16, v16);
  deltac_options opt = deviceOptions(nullptr, d.flag);
  ASSERT_EQ(deltac_forward(&p, &opt), 0) << deltac_last_error();
  EXPECT_EQ(d.readFlag(), DELTAC_CHECK_V);
}

// f16 inputs (the chunked kernel takes them): the check reads 16-bit
// elements with f16's exponent, within the buffers (memcheck runs this).
TEST(CudaCheck, F16InputsAreReadAsHalves) {
  SKIP_WITHOUT_GPU();
  for (bool poisoned : {false, true}) {
    SCOPED_TRACE(poisoned ? "NaN in q" : "valid");
    DeviceProblem d(gpuProblem(DELTAC_VARIANT_GATED));
    auto half = [](const std::vector<float> &x) {
      std::vector<uint16_t> h(x.size());
      for (size_t i = 0; i < x.size(); ++i)
        h[i] = f32_to_f16(x[i]);
      return h;
    };
    std::vector<uint16_t> q16 = half(d.pr.q), k16 = half(d.pr.k),
                          v16 = half(d.pr.v);
    if (poisoned)
      q16[q16.size() - 1] = 0x7e00; // NaN, the last element
    deltac_fwd_params p = d.with16(DELTAC_F16, q16, k16, v16);
    deltac_options opt = deviceOptions(nullptr, d.flag);
    deltac_run_info info{};
    ASSERT_EQ(deltac_forward_info(&p, &opt, &info), 0) << deltac_last_error();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_STREQ(info.family, "cuda_chunked");
    EXPECT_EQ(d.readFlag(), poisoned ? DELTAC_CHECK_Q : 0)
        << deltac_check_flag_string(d.readFlag());
  }
}

TEST(CudaCheck, ValidInputsRunAndResetsAreLegal) {
  SKIP_WITHOUT_GPU();
  test::Problem pr = gpuProblem(DELTAC_VARIANT_KDA);
  pr.g[100] = -INFINITY;
  DeviceProblem d(pr);
  deltac_options opt = deviceOptions(nullptr, d.flag);
  ASSERT_EQ(deltac_forward(&d.p, &opt), 0) << deltac_last_error();
  EXPECT_EQ(d.readFlag(), 0);
  std::vector<double> oRef, htRef;
  ref::forward(d.pr.params(d.pr.v.data(), nullptr), &oRef, &htRef);
  EXPECT_LE(ref::rel_rms(d.readO().data(), oRef), 1e-5);
}

TEST(CudaCheck, HostPointersAreCheckedOnTheHost) {
  SKIP_WITHOUT_GPU();
  test::Problem pr = gpuProblem(DELTAC_VARIANT_GATED);
  pr.beta[6] = 3.f;
  std::vector<float> o(pr.oCount());
  deltac_fwd_params p = pr.params(o.data(), nullptr);
  deltac_options opt = deltac_default_options();
  opt.device = DELTAC_DEVICE_CUDA;
  opt.check_values = 1;
  EXPECT_NE(deltac_forward(&p, &opt), 0);
  EXPECT_NE(std::string(deltac_last_error()).find("params.beta[6] = 3"),
            std::string::npos)
      << deltac_last_error();
}

// A tuning-database record picks the CUDA tile; a record that is legal but
// not precompiled (non-default warps) runs compiled at run time (NVRTC),
// or with DELTAC_JIT=0 the default config with a note.
TEST(CudaTuning, RecordChangesTheKernel) {
  SKIP_WITHOUT_GPU();
  test::TempDir dir;
  auto db = [&](int tileV, int warps) {
    std::ofstream(dir.file("db.json"))
        << R"({"format": "deltac-tuning-db", "version": 2, "records": [)"
        << R"({"family": "cuda_recurrent", "variant": "gated", "key_dim": 128,)"
        << R"("value_dim": 128, "in_dtype": "f32", "tile_v": )" << tileV
        << R"(, "warps": )" << warps << "}]}";
    ASSERT_EQ(deltac_load_tuning_db(dir.file("db.json").c_str()), 0)
        << deltac_last_error();
  };
  test::Problem pr = gpuProblem(DELTAC_VARIANT_GATED);
  std::vector<float> o(pr.oCount()), ht(pr.stateCount());
  deltac_fwd_params p = pr.params(o.data(), ht.data());
  deltac_options opt = deltac_default_options();
  opt.device = DELTAC_DEVICE_CUDA;
  std::vector<double> oRef, htRef;
  ref::forward(p, &oRef, &htRef);
  for (int tileV : {16, 32}) {
    db(tileV, cuda_recurrent_default_warps(128, tileV));
    deltac_run_info info{};
    ASSERT_EQ(deltac_forward_info(&p, &opt, &info), 0) << deltac_last_error();
    EXPECT_STREQ(info.family, "cuda_recurrent");
    EXPECT_EQ(info.tile_v, tileV);
    EXPECT_EQ(info.warps, cuda_recurrent_default_warps(128, tileV));
    EXPECT_EQ(info.tuned, 1);
    EXPECT_LE(ref::rel_rms(o.data(), oRef), 1e-5) << tileV;
  }
  db(32, 8); // legal (32 row groups / 8 warps), not shipped
  {
    test::JitEnv jitOff("0");
    deltac_run_info info{};
    ASSERT_EQ(deltac_forward_info(&p, &opt, &info), 0) << deltac_last_error();
    EXPECT_EQ(info.tuned, 0);
    EXPECT_EQ(info.warps, cuda_recurrent_default_warps(128, info.tile_v));
    EXPECT_NE(std::string(info.note).find("not precompiled"), std::string::npos)
        << info.note;
  }
  // With run-time compilation (NVRTC) the record itself runs.
  test::JitEnv jitOn(nullptr);
  std::string why;
  if (rt::cuda_jit_enabled(Family::CudaRecurrent, &why)) {
    std::fill(o.begin(), o.end(), 0.f);
    deltac_run_info info{};
    ASSERT_EQ(deltac_forward_info(&p, &opt, &info), 0) << deltac_last_error();
    EXPECT_EQ(info.tuned, 1);
    EXPECT_EQ(info.tile_v, 32);
    EXPECT_EQ(info.warps, 8);
    EXPECT_NE(std::string(info.note).find("compiled at run time by NVRTC"), std::string::npos)
        << info.note;
    EXPECT_LE(ref::rel_rms(o.data(), oRef), 1e-5);
  } else {
    std::printf("run-time compilation not checked: %s\n", why.c_str());
  }
  EXPECT_EQ(deltac_load_tuning_db(nullptr), 0);
}

} // namespace
} // namespace deltac

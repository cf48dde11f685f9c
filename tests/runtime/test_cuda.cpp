// The CUDA side of the runtime, on a GPU: host-pointer and device-pointer
// paths of deltac_forward against the float64 reference, auto device choice
// and `deltac run --device=cuda`. Every test skips without a usable GPU.
#include "deltac/catalogue.h"
#include "deltac/cli.h"
#include "deltac/npy.h"
#include "deltac/runtime.h"

#include "test_cuda_util.h"
#include "test_util.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <utility>

namespace deltac {
namespace {

#define SKIP_WITHOUT_GPU()                                                     \
  if (!deltac_cuda_available())                                                \
  GTEST_SKIP() << "no CUDA device"

const char *variantName(int v) {
  return v == 0 ? "delta" : v == 1 ? "gated" : "kda";
}

struct CudaShape {
  int K, V;
};
const CudaShape kCudaShapes[] = {{64, 64}, {128, 128}, {256, 256}, {128, 256},
                                 {256, 128}};

test::Problem cudaProblem(int variant, int K, int V, uint64_t seed,
                          bool varlen) {
  test::Problem pr;
  pr.variant = variant;
  pr.B = varlen ? 1 : 2;
  pr.T = 21;
  pr.H = 2;
  pr.HV = 4;
  pr.K = K;
  pr.V = V;
  if (varlen)
    pr.cu = {0, 1, 1, 13, 21};
  pr.fill(seed);
  return pr;
}

// pr's problem with bf16 q, k, v and o (f32 final state), in buffers it owns.
struct Bf16Call {
  std::vector<uint16_t> q, k, v, o;
  std::vector<float> ht;
  deltac_fwd_params p;
  explicit Bf16Call(const test::Problem &pr)
      : q(test::toBf16(pr.q)), k(test::toBf16(pr.k)), v(test::toBf16(pr.v)),
        o(pr.oCount()), ht(pr.stateCount()), p(pr.params(o.data(), ht.data())) {
    p.in_dtype = p.out_dtype = DELTAC_BF16;
    p.q = q.data(), p.k = k.data(), p.v = v.data();
  }
  Bf16Call(const Bf16Call &) = delete;
  // Relative RMS errors of o and ht against the float64 reference of the
  // same (rounded) inputs.
  std::pair<double, double> errors() const {
    std::vector<double> oRef, htRef;
    ref::forward(p, &oRef, &htRef);
    return {ref::rel_rms(o.data(), oRef), ref::rel_rms(ht.data(), htRef)};
  }
};

// opt.config pinned to cuda_chunked at the catalogue's default knobs for p.
void pinChunkedDefault(const deltac_fwd_params &p, deltac_options &opt) {
  const KernelConfig d = default_config(Family::CudaChunked, problem_of(p, max_seqlen(p)));
  opt.config.family = "cuda_chunked";
  opt.config.chunk = d.chunk, opt.config.tile_v = d.tile_v;
  opt.config.warps = d.warps, opt.config.stages = d.stages;
}

class CudaHostPointers
    : public ::testing::TestWithParam<std::tuple<int, CudaShape, bool, bool>> {
};

TEST_P(CudaHostPointers, MatchesReference) {
  SKIP_WITHOUT_GPU();
  auto [variant, shape, bf16, varlen] = GetParam();
  uint64_t seed = test::freshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  test::Problem pr = cudaProblem(variant, shape.K, shape.V, seed, varlen);
  std::vector<uint16_t> q16 = test::toBf16(pr.q), k16 = test::toBf16(pr.k),
                        v16 = test::toBf16(pr.v), o16(pr.oCount());
  std::vector<float> o(pr.oCount()), ht(pr.stateCount());
  deltac_fwd_params p = pr.params(bf16 ? (void *)o16.data() : o.data(), ht.data());
  if (bf16) {
    p.in_dtype = p.out_dtype = DELTAC_BF16;
    p.q = q16.data();
    p.k = k16.data();
    p.v = v16.data();
  }
  p.state_layout = seed % 2 ? DELTAC_STATE_VK : DELTAC_STATE_KV;
  p.qk_l2norm = int(seed / 2 % 2);
  std::vector<double> oRef, htRef;
  ref::forward(p, &oRef, &htRef);

  deltac_options opt = deltac_default_options();
  opt.device = DELTAC_DEVICE_CUDA;
  deltac_run_info info{};
  ASSERT_EQ(deltac_forward_info(&p, &opt, &info), 0) << deltac_last_error();
  EXPECT_EQ(info.device, DELTAC_DEVICE_CUDA);
  // The catalogue's rule: chunked beyond kCudaAutoRecurrentMaxTokens where
  // this build ships a chunked instance (not K = 256, V = 128), else the
  // recurrence.
  const Problem prob = problem_of(p, max_seqlen(p));
  const bool chunked =
      max_seqlen(p) > kCudaAutoRecurrentMaxTokens &&
      check_family(Family::CudaChunked, prob).empty() &&
      precompiled(default_config(Family::CudaChunked, prob), prob);
  EXPECT_EQ(info.mode, chunked ? DELTAC_MODE_CHUNKED : DELTAC_MODE_RECURRENT);
  double eo = bf16 ? ref::rel_rms(o16.data(), oRef) : ref::rel_rms(o.data(), oRef);
  EXPECT_LE(eo, bf16 ? 5e-3 : 1e-5) << "o";
  // bf16: the chunked kernel's products are bf16 tensor-core products.
  EXPECT_LE(ref::rel_rms(ht.data(), htRef), bf16 ? 5e-3 : 1e-5) << "ht";
}

INSTANTIATE_TEST_SUITE_P(
    Gpu, CudaHostPointers,
    ::testing::Combine(::testing::Values(0, 1, 2), ::testing::ValuesIn(kCudaShapes),
                       ::testing::Bool(), ::testing::Bool()),
    [](const auto &info) {
      auto s = std::get<1>(info.param);
      return std::string(variantName(std::get<0>(info.param))) + "_K" +
             std::to_string(s.K) + "_V" + std::to_string(s.V) +
             (std::get<2>(info.param) ? "_bf16" : "_f32") +
             (std::get<3>(info.param) ? "_varlen" : "_batch");
    });

// cuda_chunked's run-time knobs through options.config: every split (0 =
// the kernel's rule) with and without the fused launch, batch and varlen
// (the fused launch runs for batch calls only), the scan's rule (0: the TMA
// or warp scan where no split > 1 or fused launch is asked for), the block
// scan (1) and the TMA scan (3: unsplit, unfused; the rule's scans where it
// does not run), against float64. 5 chunks of 64 tokens per sequence, so the forced
// splits run several segments.
class CudaChunkedKnobs
    : public ::testing::TestWithParam<std::tuple<int, int, bool, int>> {};

TEST_P(CudaChunkedKnobs, MatchesReference) {
  SKIP_WITHOUT_GPU();
  auto [split, fuse, varlen, scan] = GetParam();
  uint64_t seed = test::freshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  test::Problem pr;
  pr.variant = DELTAC_VARIANT_GATED;
  pr.B = varlen ? 1 : 2;
  pr.T = 300;
  pr.H = 2;
  pr.HV = 4;
  pr.K = pr.V = 128;
  if (varlen)
    pr.cu = {0, 17, 300};
  pr.fill(seed);
  Bf16Call c(pr);
  deltac_fwd_params &p = c.p;
  deltac_options opt = deltac_default_options();
  opt.device = DELTAC_DEVICE_CUDA;
  pinChunkedDefault(p, opt);
  opt.config.split = split, opt.config.fuse = fuse, opt.config.scan = scan;
  deltac_run_info info{};
  ASSERT_EQ(deltac_forward_info(&p, &opt, &info), 0) << deltac_last_error();
  EXPECT_STREQ(info.family, "cuda_chunked");
  EXPECT_EQ(info.split, split);
  EXPECT_EQ(info.fuse, fuse);
  EXPECT_EQ(info.scan, scan);
  const auto [eo, eh] = c.errors();
  EXPECT_LE(eo, 5e-3) << "o";
  EXPECT_LE(eh, 5e-3) << "ht";
}

INSTANTIATE_TEST_SUITE_P(
    Gpu, CudaChunkedKnobs,
    ::testing::Combine(::testing::Values(0, 1, 2, 4, 16), ::testing::Values(0, 1),
                       ::testing::Bool(), ::testing::Values(0, 1, 3)),
    [](const auto &info) {
      return "split" + std::to_string(std::get<0>(info.param)) + "_fuse" +
             std::to_string(std::get<1>(info.param)) +
             (std::get<2>(info.param) ? "_varlen" : "_batch") + "_scan" +
             std::to_string(std::get<3>(info.param));
    });

using test::DevMem;
using test::upload;

TEST(CudaDevicePointers, MatchesReferenceOnAStream) {
  SKIP_WITHOUT_GPU();
  for (int variant : {0, 1, 2}) {
    uint64_t seed = test::freshSeed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    test::Problem pr = cudaProblem(variant, 128, 128, seed, true);
    std::vector<float> o(pr.oCount()), ht(pr.stateCount());
    deltac_fwd_params hp = pr.params(o.data(), ht.data());
    std::vector<double> oRef, htRef;
    ref::forward(hp, &oRef, &htRef);

    DevMem q = upload(pr.q), k = upload(pr.k), v = upload(pr.v),
           beta = upload(pr.beta), h0 = upload(pr.h0), cu = upload(pr.cu);
    DevMem g(pr.g.size() * 4 + 4), dO(o.size() * 4), dHt(ht.size() * 4);
    if (!pr.g.empty())
      ASSERT_EQ(cudaMemcpy(g.ptr, pr.g.data(), pr.g.size() * 4,
                           cudaMemcpyHostToDevice),
                cudaSuccess);
    deltac_fwd_params p = hp;
    p.q = q.ptr;
    p.k = k.ptr;
    p.v = v.ptr;
    p.beta = static_cast<const float *>(beta.ptr);
    p.g = pr.g.empty() ? nullptr : static_cast<const float *>(g.ptr);
    p.h0 = h0.ptr;
    p.o = dO.ptr;
    p.ht = dHt.ptr;
    p.cu_seqlens = static_cast<const int64_t *>(cu.ptr);
    cudaStream_t stream;
    ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
    deltac_options opt = deltac_default_options();
    opt.device = DELTAC_DEVICE_CUDA;
    opt.device_pointers = 1;
    opt.cuda_stream = stream;
    ASSERT_EQ(deltac_forward(&p, &opt), 0) << deltac_last_error();
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    cudaStreamDestroy(stream);
    ASSERT_EQ(cudaMemcpy(o.data(), dO.ptr, o.size() * 4, cudaMemcpyDeviceToHost),
              cudaSuccess);
    ASSERT_EQ(cudaMemcpy(ht.data(), dHt.ptr, ht.size() * 4,
                         cudaMemcpyDeviceToHost),
              cudaSuccess);
    EXPECT_LE(ref::rel_rms(o.data(), oRef), 1e-5);
    EXPECT_LE(ref::rel_rms(ht.data(), htRef), 1e-5);
  }
}

// Beta near 2 (allow_neg_eigval) on bf16 inputs over 2000 tokens, gates
// near 0: the runtime runs scan 5 (call_knobs: the block scan with two-term
// products, unsplit) whatever the config says, within 5e-3 of float64 where
// the other 16-bit scans' error grows with T (an H100 measured 1.1e-2 at
// 1000 tokens). A tuned-looking config (scan 4, split 2) is overridden.
// Delta and GDN: kda keeps its scan (below).
// 2000 tokens, 2 / 4 heads, K = V = 128, beta in [1.99, 2], gates near 0.
test::Problem betaNearTwo(int variant, uint64_t seed) {
  test::Problem pr;
  pr.variant = variant;
  pr.B = 1, pr.T = 2000, pr.H = 2, pr.HV = 4, pr.K = pr.V = 128;
  pr.fill(seed);
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
  std::uniform_real_distribution<float> u01(0.f, 1.f);
  for (float &b : pr.beta)
    b = 1.99f + 0.01f * u01(rng);
  for (float &x : pr.g)
    x = -1e-4f * u01(rng);
  return pr;
}

class CudaBetaTwo : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(CudaBetaTwo, RunsScan5WithinTolerance) {
  SKIP_WITHOUT_GPU();
  auto [variant, pinned] = GetParam();
  uint64_t seed = test::freshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  test::Problem pr = betaNearTwo(variant, seed);
  Bf16Call c(pr);
  deltac_fwd_params &p = c.p;
  deltac_options opt = deltac_default_options();
  opt.device = DELTAC_DEVICE_CUDA;
  opt.mode = DELTAC_MODE_CHUNKED;
  opt.allow_neg_eigval = 1;
  if (pinned) {
    pinChunkedDefault(p, opt);
    opt.config.split = 2, opt.config.scan = 4;
  }
  deltac_run_info info{};
  ASSERT_EQ(deltac_forward_info(&p, &opt, &info), 0) << deltac_last_error();
  EXPECT_EQ(info.device, DELTAC_DEVICE_CUDA);
  EXPECT_STREQ(info.family, "cuda_chunked");
  EXPECT_EQ(info.scan, 5);
  const auto [eo, eh] = c.errors();
  EXPECT_LE(eo, 5e-3) << "o";
  EXPECT_LE(eh, 5e-3) << "ht";
  std::printf("  %s%s: o %.2e ht %.2e (%s)\n", variantName(variant), pinned ? " pinned" : "",
              eo, eh, deltac::test_seed_note(seed).c_str());
}

INSTANTIATE_TEST_SUITE_P(Gpu, CudaBetaTwo,
                         ::testing::Combine(::testing::Values(0, 1), ::testing::Bool()),
                         [](const auto &info) {
                           return std::string(variantName(std::get<0>(info.param))) +
                                  (std::get<1>(info.param) ? "_pinned" : "_default");
                         });

// kda does not run scan 5 (its decayed k operands are 16-bit too: an H100
// measured o 1.7e-2, ht 2.3e-2 there at 2000 tokens near beta 2): with
// allow_neg_eigval on 16-bit inputs the runtime runs its f32 chunked kernel
// on f32 copies of q, k, v (o rounded back), within 5e-3 of float64; host
// and device pointers, and a pinned 16-bit config (replaced by f32's).
class CudaBetaTwoKda : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

TEST_P(CudaBetaTwoKda, RunsOnF32CopiesWithinTolerance) {
  SKIP_WITHOUT_GPU();
  auto [device_pointers, pinned] = GetParam();
  uint64_t seed = test::freshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  test::Problem pr = betaNearTwo(DELTAC_VARIANT_KDA, seed);
  Bf16Call c(pr);
  deltac_fwd_params &p = c.p;
  deltac_options opt = deltac_default_options();
  opt.device = DELTAC_DEVICE_CUDA;
  opt.mode = DELTAC_MODE_CHUNKED;
  opt.allow_neg_eigval = 1;
  if (pinned)
    pinChunkedDefault(p, opt);
  deltac_run_info info{};
  ASSERT_EQ(deltac_forward_info(&p, &opt, &info), 0) << deltac_last_error();
  EXPECT_STREQ(info.family, "cuda_chunked");
  EXPECT_NE(std::string(info.note).find("f32 copies"), std::string::npos) << info.note;
  if (device_pointers) { // the same call again on device copies
    DevMem q = upload(c.q), k = upload(c.k), v = upload(c.v), beta = upload(pr.beta),
           g = upload(pr.g), h0 = upload(pr.h0), o(c.o.size() * 2), ht(c.ht.size() * 4);
    deltac_fwd_params d = p;
    d.q = q.ptr, d.k = k.ptr, d.v = v.ptr, d.o = o.ptr, d.ht = ht.ptr;
    d.beta = static_cast<const float *>(beta.ptr), d.g = static_cast<const float *>(g.ptr);
    d.h0 = p.h0 ? h0.ptr : nullptr;
    ASSERT_EQ(p.cu_seqlens, nullptr);
    deltac_options od = opt;
    od.device_pointers = 1;
    ASSERT_EQ(deltac_forward(&d, &od), 0) << deltac_last_error();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::fill(c.o.begin(), c.o.end(), uint16_t(0));
    std::fill(c.ht.begin(), c.ht.end(), 0.f);
    ASSERT_EQ(cudaMemcpy(c.o.data(), o.ptr, c.o.size() * 2, cudaMemcpyDeviceToHost),
              cudaSuccess);
    ASSERT_EQ(cudaMemcpy(c.ht.data(), ht.ptr, c.ht.size() * 4, cudaMemcpyDeviceToHost),
              cudaSuccess);
  }
  const auto [eo, eh] = c.errors();
  EXPECT_LE(eo, 5e-3) << "o";
  EXPECT_LE(eh, 5e-3) << "ht";
  std::printf("  kda%s%s: o %.2e ht %.2e (%s)\n", device_pointers ? " device" : " host",
              pinned ? " pinned" : "", eo, eh, deltac::test_seed_note(seed).c_str());
}

INSTANTIATE_TEST_SUITE_P(Gpu, CudaBetaTwoKda,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool()),
                         [](const auto &info) {
                           return std::string(std::get<0>(info.param) ? "device" : "host") +
                                  (std::get<1>(info.param) ? "_pinned" : "_default");
                         });

TEST(CudaAuto, PicksTheGpuWhenAKernelExists) {
  SKIP_WITHOUT_GPU();
  deltac_run_info info{};
  deltac_options opt = deltac_default_options();
  // Supported: GPU.
  test::Problem pr = cudaProblem(2, 128, 128, test::freshSeed(), false);
  std::vector<float> o(pr.oCount()), ht(pr.stateCount());
  deltac_fwd_params p = pr.params(o.data(), ht.data());
  ASSERT_EQ(deltac_forward_info(&p, &opt, &info), 0) << deltac_last_error();
  EXPECT_EQ(info.device, DELTAC_DEVICE_CUDA);
  // Chunked requested: the GPU's chunked kernel.
  opt.mode = DELTAC_MODE_CHUNKED;
  ASSERT_EQ(deltac_forward_info(&p, &opt, &info), 0) << deltac_last_error();
  EXPECT_EQ(info.device, DELTAC_DEVICE_CUDA);
  EXPECT_STREQ(info.family, "cuda_chunked");
  // No instance has K = 32: the GPU still, padded to one that exists
  // (test_cuda_pad.cpp; DELTAC_JIT=0, else decode compiles K = 32 at run time).
  test::JitEnv jitOff("0");
  test::Problem small = cudaProblem(2, 32, 32, test::freshSeed(), false);
  std::vector<float> o2(small.oCount()), ht2(small.stateCount());
  deltac_fwd_params p2 = small.params(o2.data(), ht2.data());
  opt = deltac_default_options();
  ASSERT_EQ(deltac_forward_info(&p2, &opt, &info), 0) << deltac_last_error();
  EXPECT_EQ(info.device, DELTAC_DEVICE_CUDA);
  EXPECT_NE(std::string(info.note).find("padded K=32,V=32 to 64/64"),
            std::string::npos)
      << info.note;
}

TEST(CudaCli, DeviceCudaMatchesReference) {
  SKIP_WITHOUT_GPU();
  for (bool bf16 : {false, true}) {
    uint64_t seed = test::freshSeed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    test::TempDir dir;
    test::Problem pr = cudaProblem(1, 128, 128, seed, true);
    std::string err;
    auto w = [&](const char *name, const std::vector<int64_t> &shape,
                 const std::vector<float> &x) {
      ASSERT_TRUE(npy::write_file(dir.file(name), npy::DType::F32, shape,
                                  x.data(), &err))
          << err;
    };
    w("q.npy", pr.qShape(), pr.q);
    w("k.npy", pr.qShape(), pr.k);
    w("v.npy", pr.vShape(), pr.v);
    w("beta.npy", pr.betaShape(), pr.beta);
    w("g.npy", pr.gShape(), pr.g);
    w("h0.npy", pr.stateShape(), pr.h0);
    ASSERT_TRUE(npy::write_file(dir.file("cu_seqlens.npy"), npy::DType::I64,
                                {int64_t(pr.cu.size())}, pr.cu.data(), &err));
    std::vector<std::string> args = {"run", "--variant=gated",
                                     "--inputs=" + dir.path(),
                                     "--outputs=" + dir.file("out"),
                                     "--device=cuda", "--stats"};
    if (bf16)
      args.push_back("--dtype=bf16");
    std::vector<char *> argv;
    for (auto &a : args)
      argv.push_back(&a[0]);
    ::testing::internal::CaptureStdout();
    int rc = run_command(int(argv.size()), argv.data());
    std::string out = ::testing::internal::GetCapturedStdout();
    ASSERT_EQ(rc, 0);
    EXPECT_NE(out.find("device=cuda"), std::string::npos) << out;

    std::vector<uint16_t> q16 = test::toBf16(pr.q), k16 = test::toBf16(pr.k),
                          v16 = test::toBf16(pr.v);
    deltac_fwd_params p = pr.params(nullptr, nullptr);
    if (bf16) {
      p.in_dtype = DELTAC_BF16;
      p.q = q16.data();
      p.k = k16.data();
      p.v = v16.data();
    }
    std::vector<double> oRef, htRef;
    ref::forward(p, &oRef, &htRef);
    npy::Array o, ht;
    ASSERT_TRUE(npy::read_file(dir.file("out/o.npy"), &o, &err)) << err;
    ASSERT_TRUE(npy::read_file(dir.file("out/ht.npy"), &ht, &err)) << err;
    EXPECT_LE(ref::rel_rms(o.as<float>(), oRef), bf16 ? 5e-3 : 1e-5);
    EXPECT_LE(ref::rel_rms(ht.as<float>(), htRef), 1e-5);
  }
}

} // namespace
} // namespace deltac

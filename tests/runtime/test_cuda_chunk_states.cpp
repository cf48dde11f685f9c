// Chunk-end states (deltac_options.chunk_states) on CUDA: cuda_chunked's
// block scan writes them. Host and device pointers against the float64
// reference's state after each chunk's last token, and the calls CUDA must
// refuse. Every test skips without a usable GPU.
#include "deltac/catalogue.h"
#include "deltac/runtime.h"

#include "dispatch.h"
#include "test_cuda_util.h"
#include "test_util.h"

#include <cuda_runtime.h>

#include <cstdlib>

#include <string>
#include <tuple>
#include <vector>

namespace deltac {
namespace {

#define SKIP_WITHOUT_GPU()                                                     \
  if (!deltac_cuda_available())                                                \
  GTEST_SKIP() << "no CUDA device"

struct Dims {
  int K, V;
};
const Dims kDims[] = {{64, 64}, {128, 128}, {256, 256}, {128, 256}};

// Varlen: a 1-token sequence, an empty one, 69 tokens (not a multiple of
// any chunk) and 64; batch: 2 x 67 tokens. GVA 2 either way.
test::Problem csProblem(int variant, Dims d, bool varlen, uint64_t seed) {
  test::Problem pr;
  pr.variant = variant;
  pr.B = varlen ? 1 : 2;
  pr.T = varlen ? 134 : 67;
  pr.H = 2, pr.HV = 4, pr.K = d.K, pr.V = d.V;
  if (varlen)
    pr.cu = {0, 1, 1, 70, 134};
  pr.fill(seed);
  return pr;
}

// The chunk of cuda_chunked's default config for p (the precompiled one).
int cudaChunk(const deltac_fwd_params &p) {
  return default_config(Family::CudaChunked, problem_of(p, max_seqlen(p))).chunk;
}

class CudaChunkStates
    : public ::testing::TestWithParam<std::tuple<int, Dims, bool, bool>> {};

TEST_P(CudaChunkStates, HostPointersMatchReference) {
  SKIP_WITHOUT_GPU();
  auto [variant, dims, bf16, varlen] = GetParam();
  const uint64_t seed = test::freshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  test::Problem pr = csProblem(variant, dims, varlen, seed);
  std::vector<uint16_t> q16 = test::toBf16(pr.q), k16 = test::toBf16(pr.k),
                        v16 = test::toBf16(pr.v), o16(pr.oCount());
  std::vector<float> o(pr.oCount()), ht(pr.stateCount(), -7.f);
  deltac_fwd_params p = pr.params(bf16 ? (void *)o16.data() : o.data(), ht.data());
  if (bf16) {
    p.in_dtype = p.out_dtype = DELTAC_BF16;
    p.q = q16.data(), p.k = k16.data(), p.v = v16.data();
  }
  p.state_layout = seed % 2 ? DELTAC_STATE_VK : DELTAC_STATE_KV;
  p.qk_l2norm = int(seed / 2 % 2);
  const int chunk = cudaChunk(p);
  ASSERT_GT(chunk, 0);
  deltac_options opt = deltac_default_options();
  opt.device = DELTAC_DEVICE_CUDA;
  opt.chunk = chunk;
  int64_t count = -1;
  ASSERT_EQ(deltac_chunk_states_count(&p, &opt, &count), 0) << deltac_last_error();
  std::vector<double> oRef, htRef;
  const std::vector<double> want = test::expectedChunkStates(p, chunk, &oRef, &htRef);
  const size_t hs = size_t(p.HV) * p.K * p.V;
  ASSERT_EQ(size_t(count) * hs, want.size());
  std::vector<float> cs((size_t(count) + 1) * hs, -9.f); // a spare entry
  opt.chunk_states = cs.data();
  opt.chunk_states_count = count + 1;
  deltac_run_info info{};
  ASSERT_EQ(deltac_forward_info(&p, &opt, &info), 0) << deltac_last_error();
  EXPECT_EQ(info.device, DELTAC_DEVICE_CUDA);
  EXPECT_STREQ(info.family, "cuda_chunked");
  EXPECT_EQ(info.chunk, chunk);
  EXPECT_EQ(info.scan, 1);
  EXPECT_EQ(info.split, 1);
  EXPECT_EQ(info.fuse, 0);
  const double tol = bf16 ? 5e-3 : 1e-4; // f32: three TF32 products, as test_cuda_pad.cpp
  EXPECT_LE(ref::rel_rms(cs.data(), want), tol) << "chunk states";
  EXPECT_LE(bf16 ? ref::rel_rms(o16.data(), oRef) : ref::rel_rms(o.data(), oRef), tol) << "o";
  EXPECT_LE(ref::rel_rms(ht.data(), htRef), tol) << "ht";
  for (size_t i = size_t(count) * hs; i < cs.size(); ++i)
    ASSERT_EQ(cs[i], -9.f) << "written past the call's chunks at " << i;
}

INSTANTIATE_TEST_SUITE_P(
    Gpu, CudaChunkStates,
    ::testing::Combine(::testing::Values(0, 1, 2), ::testing::ValuesIn(kDims),
                       ::testing::Bool(), ::testing::Bool()),
    [](const auto &info) {
      const int v = std::get<0>(info.param);
      const Dims d = std::get<1>(info.param);
      return std::string(v == 0 ? "delta" : v == 1 ? "gated" : "kda") + "_K" +
             std::to_string(d.K) + "_V" + std::to_string(d.V) +
             (std::get<2>(info.param) ? "_bf16" : "_f32") +
             (std::get<3>(info.param) ? "_varlen" : "_batch");
    });

using test::DevMem;
using test::upload;

// Device pointers, device cu_seqlens (the count is the bound), a caller
// workspace and stream, bf16 GDN 128/128 with an initial state: the states
// against the reference, the entries past the call's chunks untouched.
TEST(CudaChunkStatesDevice, MatchReferenceOnAStream) {
  SKIP_WITHOUT_GPU();
  const uint64_t seed = test::freshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  test::Problem pr = csProblem(DELTAC_VARIANT_GATED, {128, 128}, true, seed);
  std::vector<uint16_t> q16 = test::toBf16(pr.q), k16 = test::toBf16(pr.k),
                        v16 = test::toBf16(pr.v);
  std::vector<uint16_t> o16(pr.oCount());
  std::vector<float> ht(pr.stateCount());
  deltac_fwd_params hp = pr.params(o16.data(), ht.data());
  hp.in_dtype = hp.out_dtype = DELTAC_BF16;
  hp.q = q16.data(), hp.k = k16.data(), hp.v = v16.data();
  const int chunk = cudaChunk(hp);
  std::vector<double> oRef, htRef;
  const std::vector<double> want = test::expectedChunkStates(hp, chunk, &oRef, &htRef);
  const size_t hs = size_t(hp.HV) * hp.K * hp.V;
  const size_t real = want.size() / hs;

  DevMem q = upload(q16), k = upload(k16), v = upload(v16), beta = upload(pr.beta),
         g = upload(pr.g), h0 = upload(pr.h0), cu = upload(pr.cu);
  DevMem o(o16.size() * 2), dht(ht.size() * 4);
  deltac_fwd_params p = hp;
  p.q = q.ptr, p.k = k.ptr, p.v = v.ptr, p.o = o.ptr, p.h0 = h0.ptr, p.ht = dht.ptr;
  p.beta = static_cast<const float *>(beta.ptr);
  p.g = static_cast<const float *>(g.ptr);
  p.cu_seqlens = static_cast<const int64_t *>(cu.ptr);

  deltac_options opt = deltac_default_options();
  opt.device = DELTAC_DEVICE_CUDA;
  opt.device_pointers = 1;
  opt.chunk = chunk;
  int64_t count = -1;
  ASSERT_EQ(deltac_chunk_states_count(&p, &opt, &count), 0) << deltac_last_error();
  ASSERT_GE(size_t(count), real);
  std::vector<float> poison(size_t(count) * hs, -9.f);
  DevMem cs = upload(poison);
  opt.chunk_states = static_cast<float *>(cs.ptr);
  opt.chunk_states_count = count;
  size_t wsBytes = 0;
  ASSERT_EQ(deltac_workspace_size(&p, &opt, &wsBytes), 0) << deltac_last_error();
  DevMem ws(wsBytes ? wsBytes : 256);
  opt.workspace = ws.ptr;
  opt.workspace_bytes = wsBytes;
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  opt.cuda_stream = stream;
  deltac_run_info info{};
  ASSERT_EQ(deltac_forward_info(&p, &opt, &info), 0) << deltac_last_error();
  EXPECT_EQ(info.scan, 1);
  EXPECT_EQ(info.split, 1);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  cudaStreamDestroy(stream);
  std::vector<float> got(poison.size());
  ASSERT_EQ(cudaMemcpy(got.data(), cs.ptr, got.size() * 4, cudaMemcpyDeviceToHost),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpy(o16.data(), o.ptr, o16.size() * 2, cudaMemcpyDeviceToHost),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpy(ht.data(), dht.ptr, ht.size() * 4, cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_LE(ref::rel_rms(got.data(), want), 5e-3) << "chunk states";
  EXPECT_LE(ref::rel_rms(o16.data(), oRef), 5e-3) << "o";
  EXPECT_LE(ref::rel_rms(ht.data(), htRef), 5e-3) << "ht";
  for (size_t i = real * hs; i < got.size(); ++i)
    ASSERT_EQ(got[i], -9.f) << "written past the call's chunks at " << i;
}

// What CUDA refuses, writing nothing: K, V with no instance (a padded run
// writes no states; under device auto such calls run on the CPU), and a
// count below the bound for device cu_seqlens.
TEST(CudaChunkStatesDevice, RefusesAShortBoundAndPaddedDims) {
  SKIP_WITHOUT_GPU();
  test::JitEnv off("0"); // unpinned dims with no instance pad either way
  test::Problem pr = csProblem(DELTAC_VARIANT_GATED, {48, 80}, true, 11);
  std::vector<float> o(pr.oCount(), -7.f), ht(pr.stateCount(), -7.f);
  deltac_fwd_params p = pr.params(o.data(), ht.data());
  deltac_options opt = deltac_default_options();
  opt.device = DELTAC_DEVICE_CUDA;
  // Every chunk is refused; the padded instance's own chunk says why.
  bool padded = false;
  for (int chunk : {16, 32, 64}) {
    opt.chunk = chunk;
    int64_t count = -1;
    ASSERT_EQ(deltac_chunk_states_count(&p, &opt, &count), 0) << deltac_last_error();
    std::vector<float> cs(size_t(count) * p.HV * p.K * p.V, -9.f);
    opt.chunk_states = cs.data();
    opt.chunk_states_count = count;
    EXPECT_NE(deltac_forward(&p, &opt), 0);
    padded = padded || std::string(deltac_last_error()).find("would run padded") !=
                           std::string::npos;
    for (float x : cs)
      ASSERT_EQ(x, -9.f);
    for (float x : o)
      ASSERT_EQ(x, -7.f);
  }
  EXPECT_TRUE(padded) << "no chunk named the padded run: " << deltac_last_error();
  // Under device auto the same call runs on the CPU (cpu_chunked) instead.
  opt.device = DELTAC_DEVICE_AUTO;
  opt.chunk = 16;
  int64_t n16 = -1;
  ASSERT_EQ(deltac_chunk_states_count(&p, &opt, &n16), 0) << deltac_last_error();
  std::vector<float> cs16(size_t(n16) * p.HV * p.K * p.V, -9.f);
  opt.chunk_states = cs16.data();
  opt.chunk_states_count = n16;
  deltac_run_info info{};
  ASSERT_EQ(deltac_forward_info(&p, &opt, &info), 0) << deltac_last_error();
  EXPECT_EQ(info.device, DELTAC_DEVICE_CPU);
  EXPECT_STREQ(info.family, "cpu_chunked");
  std::vector<double> oRef, htRef;
  const std::vector<double> want = test::expectedChunkStates(p, 16, &oRef, &htRef);
  EXPECT_LE(ref::rel_rms(cs16.data(), want), 1e-5) << "chunk states (CPU)";
  opt.device = DELTAC_DEVICE_CUDA;

  // 128/128 on the device with device cu_seqlens: the call's own count is
  // below the bound for any split, so it is refused before anything runs.
  test::Problem pq = csProblem(DELTAC_VARIANT_GATED, {128, 128}, true, 12);
  deltac_fwd_params hp = pq.params(nullptr, nullptr);
  opt.chunk = cudaChunk(hp);
  int64_t exact = -1, bound = -1;
  ASSERT_EQ(deltac_chunk_states_count(&hp, &opt, &exact), 0) << deltac_last_error();
  DevMem q = upload(pq.q), k = upload(pq.k), v = upload(pq.v), beta = upload(pq.beta),
         g = upload(pq.g), cu = upload(pq.cu);
  DevMem dO(pq.oCount() * 4), dcs(16);
  deltac_fwd_params dp = hp;
  dp.q = q.ptr, dp.k = k.ptr, dp.v = v.ptr, dp.o = dO.ptr, dp.h0 = nullptr, dp.ht = nullptr;
  dp.beta = static_cast<const float *>(beta.ptr);
  dp.g = static_cast<const float *>(g.ptr);
  dp.cu_seqlens = static_cast<const int64_t *>(cu.ptr);
  opt.device_pointers = 1;
  ASSERT_EQ(deltac_chunk_states_count(&dp, &opt, &bound), 0) << deltac_last_error();
  ASSERT_GT(bound, exact);
  opt.chunk_states = static_cast<float *>(dcs.ptr);
  opt.chunk_states_count = exact;
  EXPECT_NE(deltac_forward(&dp, &opt), 0);
  EXPECT_NE(std::string(deltac_last_error()).find("the bound for device cu_seqlens"),
            std::string::npos)
      << deltac_last_error();
}

// K, V with no instance through a pinned config: NVRTC compiles it at the
// call's own dims and its block scan writes the states (f32 inputs: three
// TF32 products, 1e-4 as the other run-time compiled f32 cases).
TEST(CudaChunkStatesDevice, PinnedConfigCompiledByNvrtc) {
  SKIP_WITHOUT_GPU();
  test::JitEnv env(nullptr);
  std::string why;
  if (!rt::cuda_jit_enabled(Family::CudaChunked, &why)) {
    if (std::getenv("DELTAC_TEST_REQUIRE_JIT"))
      FAIL() << why;
    GTEST_SKIP() << why;
  }
  const uint64_t seed = test::freshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  test::Problem pr = csProblem(DELTAC_VARIANT_DELTA, {96, 80}, true, seed);
  std::vector<float> o(pr.oCount()), ht(pr.stateCount());
  deltac_fwd_params p = pr.params(o.data(), ht.data());
  p.qk_l2norm = 1;
  deltac_options opt = deltac_default_options();
  opt.device = DELTAC_DEVICE_CUDA;
  opt.config.family = "cuda_chunked";
  opt.config.chunk = 32, opt.config.tile_v = 16, opt.config.warps = 4, opt.config.stages = 2;
  int64_t count = -1;
  ASSERT_EQ(deltac_chunk_states_count(&p, &opt, &count), 0) << deltac_last_error();
  std::vector<double> oRef, htRef;
  const std::vector<double> want = test::expectedChunkStates(p, 32, &oRef, &htRef);
  std::vector<float> cs(want.size(), -9.f);
  opt.chunk_states = cs.data();
  opt.chunk_states_count = count;
  deltac_run_info info{};
  ASSERT_EQ(deltac_forward_info(&p, &opt, &info), 0) << deltac_last_error();
  EXPECT_NE(std::string(info.note).find("compiled at run time by NVRTC"), std::string::npos)
      << info.note;
  EXPECT_EQ(info.scan, 1);
  EXPECT_LE(ref::rel_rms(cs.data(), want), 1e-4) << "chunk states";
  EXPECT_LE(ref::rel_rms(o.data(), oRef), 1e-4) << "o";
  EXPECT_LE(ref::rel_rms(ht.data(), htRef), 1e-4) << "ht";
}

} // namespace
} // namespace deltac

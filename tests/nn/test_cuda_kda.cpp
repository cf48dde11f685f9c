// deltac::nn::CudaKimiDeltaAttention against the CPU KimiDeltaAttention
// (which nn_vs_pytorch holds to the PyTorch module within 1e-5) on the same
// safetensors weights and inputs, relative RMS ||y_cuda - y_cpu|| / ||y_cpu||,
// with the bounds of test_cuda_layers.cpp and for the same reasons: f32 <=
// 1e-4, bf16 <= 1e-2 (bf16 rule) and <= 5e-3 (f32 rule), weights and x
// rounded to bf16 first. Prompt + decode steps through the device cache ==
// the whole sequence, the device cache == the CPU cache. GPU cases skip
// without a usable GPU; the weight checks run without one.
#include "cuda_fixtures.h"
#include "deltac/test_seed.h"

#include <gtest/gtest.h>

#include <random>

namespace {

using namespace deltac::nn;
using namespace deltac::nn::testing;
using deltac::SafeTensors;

constexpr int64_t kHidden = 256;

KimiDeltaAttentionConfig kda_config_small() {
  KimiDeltaAttentionConfig c;
  c.hidden_size = kHidden;
  c.num_heads = 4;
  c.head_dim = 64;
  c.conv_kernel = 4;
  return c;
}

void kda_vs_cpu(ElemType dt, double tol, bool f32_rule = false) {
  SKIP_WITHOUT_GPU();
  const bool bf16 = dt == ElemType::BF16;
  const uint64_t seed = deltac::test_seed();
  SCOPED_TRACE(deltac::test_seed_note(seed));
  std::printf("NnCudaKda %s%s: DELTAC_TEST_SEED=%llu\n", deltac::elem_name(dt),
              f32_rule ? " f32 rule" : "", (unsigned long long)seed);
  std::mt19937_64 rng(seed);
  const KimiDeltaAttentionConfig c = kda_config_small();
  const SafeTensors st = kda_weights(rng, c, bf16).file();
  KimiDeltaAttention cpu(c, st);
  CudaKimiDeltaAttention gpu(c, st, "", options(dt, f32_rule));
  const Tensor x = random_x(rng, 2, 100, kHidden, bf16);
  const Tensor want = cpu.forward(x);
  expect_near_cpu(x, want, dt, tol,
                  [&](const DeviceTensor &in, const DeviceTensor &out) { gpu.forward(in, out); },
                  true);
}

TEST(NnCudaKda, F32MatchesCpu) { kda_vs_cpu(ElemType::F32, 1e-4); }
TEST(NnCudaKda, Bf16MatchesCpu) { kda_vs_cpu(ElemType::BF16, 1e-2); }
TEST(NnCudaKda, Bf16F32RuleMatchesCpu) { kda_vs_cpu(ElemType::BF16, 5e-3, true); }

TEST(NnCudaKda, DecodeStepsEqualWholeSequence) {
  SKIP_WITHOUT_GPU();
  const uint64_t seed = deltac::test_seed();
  SCOPED_TRACE(deltac::test_seed_note(seed));
  std::printf("NnCudaKda decode: DELTAC_TEST_SEED=%llu\n", (unsigned long long)seed);
  std::mt19937_64 rng(seed);
  const KimiDeltaAttentionConfig c = kda_config_small();
  const SafeTensors st = kda_weights(rng, c).file();
  KimiDeltaAttention cpu(c, st);
  CudaKimiDeltaAttention gpu(c, st, "", options(ElemType::F32));
  const Tensor x = random_x(rng, 2, 48, kHidden, false);
  GatedDeltaNetCache cpu_cache;
  const Tensor want = cpu.forward(x, &cpu_cache);
  CudaGatedDeltaNetCache cache;
  expect_decode_matches(x, want, cpu_cache, cache,
                        [&](const DeviceTensor &in, const DeviceTensor &out,
                            CudaGatedDeltaNetCache *c) { gpu.forward(in, out, c); });
  const Tensor x1 = random_x(rng, 1, 1, kHidden, false);
  DevTensor d1(x1, ElemType::F32), o1(x1.shape, ElemType::F32);
  EXPECT_EQ(error_of([&] { gpu.forward(d1.t, o1.t, &cache); }),
            "CudaKimiDeltaAttention: the cached state has batch 2 but x has batch 1");
  cache.reset();
  EXPECT_NO_THROW(gpu.forward(d1.t, o1.t, &cache));
}

// Weight errors come from the CPU layer's loader, the conv size check
// before any device work (no GPU needed).
TEST(NnCudaKda, WeightsAndConfig) {
  std::mt19937_64 rng(6);
  KimiDeltaAttentionConfig c = kda_config_small();
  EXPECT_EQ(error_of([&] { CudaKimiDeltaAttention l(c, kda_weights(rng, c).file("g_b_proj.weight")); }),
            "w.safetensors: tensor 'g_b_proj.weight' is missing");
  c.conv_kernel = 9;
  EXPECT_EQ(error_of([&] { CudaKimiDeltaAttention l(c, kda_weights(rng, c).file()); }),
            "CudaKimiDeltaAttention: short_conv_kernel_size = 9: the CUDA conv takes at most 8");
}

TEST(NnCudaKda, NoGpu) {
  if (have_gpu()) GTEST_SKIP() << "a CUDA device is usable";
  std::mt19937_64 rng(7);
  const KimiDeltaAttentionConfig c = kda_config_small();
  const std::string e = error_of([&] { CudaKimiDeltaAttention l(c, kda_weights(rng, c).file()); });
  EXPECT_NE(e.find("CudaKimiDeltaAttention: no usable CUDA device"), std::string::npos) << e;
}

} // namespace

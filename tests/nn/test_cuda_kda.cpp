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
  DevTensor dx(x, dt), dy(x.shape, dt);
  gpu.forward(dx.t, dy.t);
  const double err = rel_rms(dy.host().data, want.data);
  std::printf("  rel RMS vs CPU: %.3g\n", err);
  EXPECT_LE(err, tol);
  // y may be x.
  gpu.forward(dx.t, dx.t);
  EXPECT_LE(rel_rms(dx.host().data, want.data), tol);
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
  DevTensor dx(x, ElemType::F32), dy(x.shape, ElemType::F32);
  gpu.forward(dx.t, dy.t);
  const Tensor whole = dy.host();
  EXPECT_LE(rel_rms(whole.data, want.data), 1e-4);
  // Tokens 0-1 (shorter than the conv window), 2-36 (chunked), 37-41
  // (recurrent), then one at a time, through the device cache.
  CudaGatedDeltaNetCache cache;
  std::vector<std::pair<int64_t, int64_t>> calls{{0, 2}, {2, 37}, {37, 42}};
  for (int64_t t = 42; t < 48; ++t) calls.push_back({t, t + 1});
  std::vector<Tensor> parts;
  for (auto [t0, t1] : calls) {
    const Tensor xs = slice_t(x, t0, t1);
    DevTensor px(xs, ElemType::F32), py(xs.shape, ElemType::F32);
    gpu.forward(px.t, py.t, &cache);
    parts.push_back(py.host());
  }
  EXPECT_EQ(cache.batch(), 2);
  const double err = rel_rms(join_t(parts).data, whole.data);
  std::printf("  prompt + steps vs whole: %.3g\n", err);
  EXPECT_LE(err, 1e-4);
  const double cerr = rel_rms(device_floats(cache.conv(), cpu_cache.conv.size()), cpu_cache.conv);
  const double rerr =
      rel_rms(device_floats(cache.recurrent(), cpu_cache.recurrent.size()), cpu_cache.recurrent);
  std::printf("  cache vs CPU: conv %.3g, recurrent %.3g\n", cerr, rerr);
  EXPECT_LE(cerr, 1e-5);
  EXPECT_LE(rerr, 1e-4);
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

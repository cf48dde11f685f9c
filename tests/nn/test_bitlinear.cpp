// The BitLinear int8 GEMM (runtime/src/bitlinear.h), once per kernel
// (generic, avx2, avx512vnni; a kernel this CPU lacks shows as skipped):
// quantisation as bitlinear.py (round half to even, NaN rows), the int32
// sums exact (every SIMD kernel equals the generic one bit for bit, and the
// generic one the float64 product of the quantised values within f32
// rounding), the int16 worst case, 1 vs 2 threads, and Linear::forward against the
// f32 GEMM of the dequantised values.
#include "bitlinear.h"
#include "nn_internal.h"

#include "deltac/test_seed.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <ostream>
#include <random>

namespace {

using namespace deltac::nn;
namespace bl = deltac::nn::bitlinear;

// bitlinear.py activation_quant of one row, in float as PyTorch computes it.
void ref_quant(const float *x, int64_t k, std::vector<int> *q, float *s) {
  float m = 0;
  for (int64_t j = 0; j < k; ++j) m = std::max(m, std::fabs(x[j]));
  *s = 127.0f / std::max(m, 1e-5f);
  q->resize(size_t(k));
  for (int64_t j = 0; j < k; ++j)
    (*q)[size_t(j)] = int(std::min(127.0f, std::max(-128.0f, std::nearbyint(x[j] * *s))));
}

std::vector<float> randn(std::mt19937_64 &rng, size_t n, float scale = 1) {
  std::normal_distribution<float> nd(0, scale);
  std::vector<float> v(n);
  for (float &e : v) e = nd(rng);
  return v;
}

} // namespace

namespace deltac::nn::bitlinear {
// gtest prints the parameter by this (ctest's test list) instead of its bytes.
void PrintTo(Kernel k, std::ostream *os) { *os << name(k); }
} // namespace deltac::nn::bitlinear

namespace {

class BitLinear : public ::testing::TestWithParam<bl::Kernel> {
protected:
  void SetUp() override {
    if (!bl::supported(GetParam())) GTEST_SKIP() << bl::name(GetParam()) << ": not supported by this CPU";
  }
};

TEST_P(BitLinear, QuantizeAsPyTorch) {
  const uint64_t seed = deltac::test_seed();
  SCOPED_TRACE(deltac::test_seed_note(seed));
  std::mt19937_64 rng(seed);
  for (int64_t k : {1, 7, 32, 33, 64, 100, 2048}) {
    const int64_t m = 3;
    auto x = randn(rng, size_t(m * k), 3.0f);
    if (k >= 8) { // row 1: max 127 (s = 1), so x * s lands on exact halves
      for (int64_t j = 0; j < k; ++j) x[size_t(k + j)] = float(int(j % 9) - 4) + 0.5f;
      x[size_t(k)] = 127.0f;
    }
    for (int64_t j = 0; j < k; ++j) x[size_t(2 * k + j)] = 0.0f; // row 2: zeros
    bl::Acts a;
    bl::quantize(GetParam(), x.data(), m, k, 1e-5f, &a);
    ASSERT_EQ(a.kp % 64, 0);
    for (int64_t i = 0; i < m; ++i) {
      std::vector<int> q;
      float s;
      ref_quant(x.data() + i * k, k, &q, &s);
      EXPECT_EQ(a.r[size_t(i)], float(1.0 / double(s))) << "row " << i << " k " << k;
      for (int64_t j = 0; j < a.kp; ++j)
        ASSERT_EQ(int(a.a.data()[i * a.kp + j]) - 128, j < k ? q[size_t(j)] : 0)
            << "row " << i << " k " << k << " j " << j << " x " << (j < k ? x[size_t(i * k + j)] : 0);
    }
  }
  // A NaN or an infinity makes the row's scale NaN (PyTorch: every output NaN).
  for (float bad : {NAN, INFINITY, -INFINITY}) {
    std::vector<float> x(70, 1.0f);
    x[65] = bad;
    bl::Acts a;
    bl::quantize(GetParam(), x.data(), 1, 70, 1e-5f, &a);
    EXPECT_TRUE(std::isnan(a.r[0])) << bad;
  }
}

// y from the quantised values in float64: sum q t * gamma / s.
std::vector<double> ref_gemm(const bl::Acts &a, const bl::Weights &w) {
  std::vector<double> y(size_t(a.m * w.n));
  const auto *t = reinterpret_cast<const int8_t *>(w.t.data());
  for (int64_t i = 0; i < a.m; ++i)
    for (int64_t n = 0; n < w.n; ++n) {
      int64_t acc = 0;
      for (int64_t k = 0; k < w.k; ++k)
        acc += (int64_t(a.a.data()[i * a.kp + k]) - 128) * t[n * w.kp + k];
      y[size_t(i * w.n + n)] = double(acc) * double(w.gamma[size_t(n)]) * double(a.r[size_t(i)]);
    }
  return y;
}

TEST_P(BitLinear, GemmExact) {
  const uint64_t seed = deltac::test_seed();
  SCOPED_TRACE(deltac::test_seed_note(seed));
  std::printf("BitLinear.GemmExact: %s DELTAC_TEST_SEED=%llu\n", bl::name(GetParam()),
              (unsigned long long)seed);
  std::mt19937_64 rng(seed);
  for (int64_t k : {1, 31, 64, 100, 2049, 4100})
    for (int64_t m : {1, 2, 3, 4, 5, 9})
      for (int64_t n : {1, 2, 3, 5, 67, 130}) {
        auto x = randn(rng, size_t(m * k)), wf = randn(rng, size_t(n * k), 0.05f);
        const bl::Weights w = bl::pack(wf.data(), n, k, 1e-5f);
        bl::Acts a;
        bl::quantize(GetParam(), x.data(), m, k, 1e-5f, &a);
        const auto ref = ref_gemm(a, w);
        std::vector<float> y0(size_t(m * n), -1.0f);
        bl::gemm(bl::Kernel::generic, a, w, y0.data(), n, 1);
        for (int threads : {1, 2}) {
          std::vector<float> y(size_t(m * (n + 3)), -1.0f); // ldy n + 3
          bl::gemm(GetParam(), a, w, y.data(), n + 3, threads);
          for (int64_t i = 0; i < m; ++i)
            for (int64_t c = 0; c < n; ++c) {
              const float v = y[size_t(i * (n + 3) + c)], v0 = y0[size_t(i * n + c)];
              const double e = ref[size_t(i * n + c)];
              ASSERT_EQ(v, v0) << "vs generic: m " << m << " n " << n << " k " << k << " at " << i << "," << c;
              ASSERT_LE(std::fabs(v - e), 5e-7 * std::fabs(e))
                  << "vs float64: m " << m << " n " << n << " k " << k << " at " << i << "," << c;
            }
          for (int64_t i = 0; i < m; ++i)
            for (int64_t c = n; c < n + 3; ++c) ASSERT_EQ(y[size_t(i * (n + 3) + c)], -1.0f) << "wrote past n";
        }
      }
}

// Above gemm's single-thread cut (64 M multiply-adds) two threads split the
// column blocks: the same numbers as one thread and as the generic kernel.
TEST_P(BitLinear, Threads) {
  const uint64_t seed = deltac::test_seed();
  SCOPED_TRACE(deltac::test_seed_note(seed));
  std::mt19937_64 rng(seed);
  const int64_t m = 66, n = 530, k = 2048; // 71.6 M, blocks with a tail
  auto x = randn(rng, size_t(m * k)), wf = randn(rng, size_t(n * k), 0.05f);
  const bl::Weights w = bl::pack(wf.data(), n, k, 1e-5f);
  bl::Acts a;
  bl::quantize(GetParam(), x.data(), m, k, 1e-5f, &a);
  std::vector<float> y1(size_t(m * n)), y2(size_t(m * n)), y0(size_t(m * n));
  bl::gemm(GetParam(), a, w, y1.data(), n, 1);
  bl::gemm(GetParam(), a, w, y2.data(), n, 2);
  bl::gemm(bl::Kernel::generic, a, w, y0.data(), n, 1);
  for (size_t i = 0; i < y1.size(); ++i) {
    ASSERT_EQ(y1[i], y2[i]) << "1 vs 2 threads at " << i;
    ASSERT_EQ(y1[i], y0[i]) << "vs generic at " << i;
  }
}

// The avx2 kernel's int16 stage at its bound: |q| = 127 (u8 255 or 1) times
// weights of one sign for 64 steps, K > 2048 so that it widens twice.
TEST_P(BitLinear, WorstCaseSums) {
  const int64_t k = 2 * 2048 + 64, m = 2, n = 2;
  std::vector<float> x(size_t(m * k));
  for (int64_t j = 0; j < k; ++j) x[size_t(j)] = 1.0f, x[size_t(k + j)] = -1.0f;
  std::vector<float> wf(size_t(n * k));
  for (int64_t j = 0; j < k; ++j) wf[size_t(j)] = 0.5f, wf[size_t(k + j)] = -0.5f;
  const bl::Weights w = bl::pack(wf.data(), n, k, 1e-5f);
  bl::Acts a;
  bl::quantize(GetParam(), x.data(), m, k, 1e-5f, &a);
  std::vector<float> y(4);
  bl::gemm(GetParam(), a, w, y.data(), n, 1);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t c = 0; c < n; ++c) {
      const int32_t acc = (i == c ? 1 : -1) * 127 * int32_t(k);
      EXPECT_EQ(y[size_t(i * n + c)], float(acc) * w.gamma[size_t(c)] * a.r[size_t(i)]) << i << "," << c;
    }
  // A NaN row gives NaN outputs.
  x[3] = NAN;
  bl::quantize(GetParam(), x.data(), m, k, 1e-5f, &a);
  bl::gemm(GetParam(), a, w, y.data(), n, 2);
  EXPECT_TRUE(std::isnan(y[0]) && std::isnan(y[1]));
  EXPECT_FALSE(std::isnan(y[2]) || std::isnan(y[3]));
}

INSTANTIATE_TEST_SUITE_P(Kernels, BitLinear,
                         ::testing::Values(bl::Kernel::generic, bl::Kernel::avx2, bl::Kernel::avx512vnni),
                         [](const ::testing::TestParamInfo<bl::Kernel> &i) {
                           return std::string(bl::name(i.param));
                         });

// Linear::forward (the active kernel) against the f32 GEMM of the
// dequantised values, as bitlinear.py computes it: within f32 rounding.
TEST(BitLinearLayer, MatchesF32Path) {
  const uint64_t seed = deltac::test_seed();
  SCOPED_TRACE(deltac::test_seed_note(seed));
  std::printf("BitLinearLayer.MatchesF32Path: %s DELTAC_TEST_SEED=%llu\n", bl::name(bl::active()),
              (unsigned long long)seed);
  std::mt19937_64 rng(seed);
  const int64_t m = 7, k = 300, n = 2 * 45;
  auto x = randn(rng, size_t(m * k));
  auto w1 = randn(rng, size_t(45 * k), 0.05f), w2 = randn(rng, size_t(45 * k), 0.2f);
  std::map<std::string, deltac::SafeTensorF32> t{{"a", {{45, k}, w1}}, {"b", {{45, k}, w2}}};
  const auto bytes = deltac::safetensors_bytes(t);
  deltac::SafeTensors st;
  std::string err;
  ASSERT_TRUE(st.parse(bytes.data(), bytes.size(), "w.safetensors", &err)) << err;
  const Linear l = detail::stack({detail::load_linear(st, "a", k, 45, true),
                                  detail::load_linear(st, "b", k, 45, true)});
  std::vector<float> y(size_t(m * n));
  l.forward(x.data(), m, y.data(), n);
  // weight_quant per matrix (its own gamma), activation_quant per token.
  std::vector<float> wq(size_t(n * k));
  for (int part = 0; part < 2; ++part) {
    const auto &w = part ? w2 : w1;
    double s = 0;
    for (float v : w) s += std::fabs(v);
    const float g = std::max(float(s / double(w.size())), 1e-5f);
    for (size_t i = 0; i < w.size(); ++i)
      wq[size_t(part) * w.size() + i] = std::min(1.0f, std::max(-1.0f, std::nearbyint(w[i] / g))) * g;
  }
  double num = 0, den = 0;
  for (int64_t i = 0; i < m; ++i) {
    std::vector<int> q;
    float s;
    ref_quant(x.data() + i * k, k, &q, &s);
    for (int64_t c = 0; c < n; ++c) {
      float acc = 0;
      for (int64_t j = 0; j < k; ++j) acc += (float(q[size_t(j)]) / s) * wq[size_t(c * k + j)];
      num = std::max(num, std::fabs(double(y[size_t(i * n + c)]) - acc));
      den = std::max(den, std::fabs(double(acc)));
    }
  }
  EXPECT_LE(num / den, 1e-5);
}

} // namespace

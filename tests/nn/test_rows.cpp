// The layers' vectorised elementwise passes (runtime/src/nn_rows.h), generic
// and avx2 (skipped where the CPU lacks AVX2), against float64: the SIMD exp
// inside silu, sigmoid and softplus (including the clamped ends, NaN), the conv tap
// sum, the norms (RMSNorm with a silu or sigmoid gate, LayerNorm); lengths
// with and without a tail past the 8-lane vectors.
#include "bitlinear.h"
#include "nn_rows.h"

#include "deltac/test_seed.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace {

using namespace deltac::nn;

double silu(double x) { return x / (1.0 + std::exp(-x)); }

void expect_close(const std::vector<float> &got, const std::vector<double> &ref, double rel,
                  const char *what) {
  ASSERT_EQ(got.size(), ref.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_LE(std::fabs(got[i] - ref[i]), rel * std::fabs(ref[i]) + 1e-30)
        << what << " at " << i << ": " << got[i] << " vs " << ref[i];
}

class Rows : public ::testing::TestWithParam<const char *> {
protected:
  const rows::Ops *o = nullptr;
  void SetUp() override {
    if (std::string(GetParam()) == "generic") {
      o = &rows::generic_ops;
      return;
    }
    if (!bitlinear::supported(bitlinear::Kernel::avx2)) GTEST_SKIP() << "no AVX2";
#if defined(__x86_64__)
    o = &rows::avx2_ops;
#endif
  }
};

TEST_P(Rows, Sigmoid) {
  std::vector<float> x;
  for (int i = -4000; i <= 4000; ++i) x.push_back(float(i) * 0.025f); // [-100, 100]
  x.push_back(0.0f);
  std::vector<double> ref;
  for (float v : x) ref.push_back(2.0 / (1.0 + std::exp(-double(v))));
  std::vector<float> y = x;
  o->sigmoid(y.data(), int64_t(y.size()), 2.0f);
  // Below -87 the exp is clamped: sigmoid is then 1e-38 instead of less.
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i] < -87.0f) ref[i] = y[i] <= 2e-38f ? y[i] : ref[i];
  expect_close(y, ref, 1e-6, "sigmoid");
  std::vector<float> nan(9, NAN);
  o->sigmoid(nan.data(), 9, 1.0f);
  for (float v : nan) EXPECT_TRUE(std::isnan(v));
}

TEST_P(Rows, ScaledSoftplus) {
  std::vector<float> x, bias;
  for (int i = -4000; i <= 4000; ++i) { // x + bias over [-100, 100], 20 and its neighbours
    x.push_back(float(i) * 0.02f);
    bias.push_back(float(i % 7) * 0.3f - 0.9f + float(i) * 0.005f);
  }
  for (float v : {20.0f, std::nextafter(20.0f, 0.0f), std::nextafter(20.0f, 30.0f), 0.0f}) {
    x.push_back(v);
    bias.push_back(0.0f);
  }
  const float scale = -1.7f;
  std::vector<double> ref;
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = double(x[i] + bias[i]); // the f32 sum, as the kernel adds
    ref.push_back(scale * (v > 20.0 ? v : std::log1p(std::exp(v))));
  }
  std::vector<float> y = x;
  o->scaled_softplus(y.data(), bias.data(), scale, int64_t(y.size()));
  // Below -87 the exp is clamped: softplus is then ~1e-38 instead of less.
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i] + bias[i] < -87.0f) ref[i] = std::fabs(y[i]) <= 4e-38f ? y[i] : ref[i];
  expect_close(y, ref, 1e-6, "scaled_softplus");
  std::vector<float> nan(9, NAN), zero(9, 0.0f);
  o->scaled_softplus(nan.data(), zero.data(), 1.0f, 9);
  for (float v : nan) EXPECT_TRUE(std::isnan(v));
}

TEST_P(Rows, ConvSilu) {
  const uint64_t seed = deltac::test_seed();
  SCOPED_TRACE(deltac::test_seed_note(seed));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0, 4);
  for (int64_t n : {8, 37, 256})
    for (bool with_bias : {false, true}) {
      const int64_t taps = 4, ldw = n + 5;
      const size_t nn = static_cast<size_t>(n);
      std::vector<float> w(nn * taps + 5 * taps), bias(nn), in(nn * taps);
      for (float &v : w) v = nd(rng);
      for (float &v : bias) v = nd(rng);
      for (float &v : in) v = nd(rng);
      const float *src[4] = {in.data(), in.data() + n, in.data() + 2 * n, in.data() + 3 * n};
      std::vector<float> out(nn);
      o->conv_silu(src, w.data(), ldw, taps, with_bias ? bias.data() : nullptr, n, out.data());
      std::vector<double> ref(nn);
      double mag = 0;
      for (int64_t c = 0; c < n; ++c) {
        double a = with_bias ? bias[size_t(c)] : 0.0, m = 0;
        for (int64_t i = 0; i < taps; ++i) {
          a += double(w[size_t(i * ldw + c)]) * src[i][c];
          m += std::fabs(double(w[size_t(i * ldw + c)]) * src[i][c]);
        }
        ref[size_t(c)] = silu(a);
        mag = std::max(mag, m);
      }
      // The f32 tap sum rounds: compare against the sum's magnitude.
      for (int64_t c = 0; c < n; ++c)
        ASSERT_LE(std::fabs(out[size_t(c)] - ref[size_t(c)]), 1e-6 * mag) << "n " << n << " c " << c;
    }
}

TEST_P(Rows, Norms) {
  const uint64_t seed = deltac::test_seed();
  SCOPED_TRACE(deltac::test_seed_note(seed));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0, 1);
  for (int64_t n : {16, 20, 128}) {
    const size_t nn = static_cast<size_t>(n);
    std::vector<float> x(nn), z(nn), w(nn), b(nn);
    for (auto *v : {&x, &z, &w, &b})
      for (float &e : *v) e = nd(rng) * 2.0f + 0.5f;
    // Gated RMSNorm, silu gate (GatedDeltaNet) and sigmoid gate (KDA).
    std::vector<float> y = x;
    double ss = 0;
    for (float v : x) ss += double(v) * v;
    const double rs = 1.0 / std::sqrt(ss / double(n) + 1e-6);
    std::vector<double> ref(nn);
    for (bool sig : {false, true}) {
      y = x;
      (sig ? o->sigmoid_rmsnorm : o->gated_rmsnorm)(y.data(), z.data(), w.data(), n, 1e-6f);
      for (int64_t d = 0; d < n; ++d) {
        const double zd = z[size_t(d)];
        ref[size_t(d)] = w[size_t(d)] * x[size_t(d)] * rs * (sig ? 1.0 / (1.0 + std::exp(-zd)) : silu(zd));
      }
      expect_close(y, ref, 2e-6, sig ? "sigmoid_rmsnorm" : "gated_rmsnorm");
    }
    // LayerNorm + silu gate.
    y = x;
    o->layernorm_gate(y.data(), z.data(), w.data(), b.data(), n, 1e-5f);
    double mean = 0, var = 0;
    for (float v : x) mean += v;
    mean /= double(n);
    for (float v : x) var += (v - mean) * (v - mean);
    const double rstd = 1.0 / std::sqrt(var / double(n) + 1e-5);
    double mag = 0;
    for (int64_t d = 0; d < n; ++d) {
      const double ln = (x[size_t(d)] - mean) * rstd * w[size_t(d)] + b[size_t(d)];
      ref[size_t(d)] = ln * silu(z[size_t(d)]);
      mag = std::max(mag, std::fabs(ref[size_t(d)]));
    }
    // (x - mean) cancels: compare against the row's magnitude.
    for (int64_t d = 0; d < n; ++d)
      ASSERT_LE(std::fabs(y[size_t(d)] - ref[size_t(d)]), 2e-6 * mag) << "layernorm_gate n " << n << " d " << d;
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, Rows, ::testing::Values("generic", "avx2"),
                         [](const ::testing::TestParamInfo<const char *> &i) {
                           return std::string(i.param);
                         });

} // namespace

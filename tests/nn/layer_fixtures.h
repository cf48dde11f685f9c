// Random layer weights and inputs for the deltac::nn tests (CPU and CUDA):
// safetensors files as the PyTorch modules' state_dict names them.
#ifndef DELTAC_TESTS_NN_LAYER_FIXTURES_H
#define DELTAC_TESTS_NN_LAYER_FIXTURES_H

#include "deltac/nn.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace deltac::nn::testing {

// f rounded to the nearest bf16 (ties to even), as a float.
inline float bf16_round(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  std::memcpy(&f, &u, 4);
  return f;
}

struct Weights {
  std::map<std::string, SafeTensorF32> t;
  std::mt19937_64 *rng;
  bool bf16 = false;  // values rounded to bf16
  void add(const std::string &name, std::vector<int64_t> shape, float scale, float mean = 0) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::normal_distribution<float> nd(mean, scale);
    SafeTensorF32 v{shape, std::vector<float>(size_t(n))};
    for (float &e : v.data) e = bf16 ? bf16_round(nd(*rng)) : nd(*rng);
    t[name] = v;
  }
  // The weights as a parsed safetensors file, without `skip`.
  SafeTensors file(const std::string &skip = "") const {
    auto m = t;
    m.erase(skip);
    auto b = safetensors_bytes(m);
    SafeTensors st;
    std::string err;
    EXPECT_TRUE(st.parse(b.data(), b.size(), "w.safetensors", &err)) << err;
    return st;
  }
};

inline Tensor random_x(std::mt19937_64 &rng, int64_t B, int64_t T, int64_t C, bool bf16 = false) {
  Tensor x{{B, T, C}, std::vector<float>(size_t(B * T * C))};
  std::normal_distribution<float> nd(0, 1);
  for (float &e : x.data) e = bf16 ? bf16_round(nd(rng)) : nd(rng);
  return x;
}

// Tokens [t0, t1) of every sequence of x [B, T, C].
inline Tensor slice_t(const Tensor &x, int64_t t0, int64_t t1) {
  const int64_t B = x.shape[0], T = x.shape[1], C = x.shape[2];
  Tensor s{{B, t1 - t0, C}, {}};
  for (int64_t b = 0; b < B; ++b)
    s.data.insert(s.data.end(), x.data.begin() + (b * T + t0) * C, x.data.begin() + (b * T + t1) * C);
  return s;
}

// DeltaNetAttention of hidden size hs and H heads.
inline Weights deltanet_weights(std::mt19937_64 &rng, int64_t hs, int64_t H, bool bf16 = false) {
  Weights w{{}, &rng, bf16};
  const float s = 1.0f / std::sqrt(float(hs));
  for (const char *n : {"q_proj", "k_proj", "v_proj", "g_proj"})
    w.add(std::string(n) + ".weight", {hs, hs}, s);
  w.add("beta_proj.weight", {H, hs}, s);
  w.add("out_proj.weight", {hs, hs}, s);
  w.add("norm.weight", {hs / H}, 0.3f, 1.0f);
  w.add("norm.bias", {hs / H}, 0.3f);
  return w;
}

// GatedDeltaNet of config c (its layout's parameter names); bias: conv1d.bias.
inline Weights gated_weights(std::mt19937_64 &rng, const GatedDeltaNetConfig &c, bool bias = false,
                             bool bf16 = false) {
  Weights w{{}, &rng, bf16};
  const int64_t hs = c.hidden_size, kd = c.num_k_heads * c.head_k_dim,
                vd = c.num_v_heads * c.head_v_dim, HV = c.num_v_heads, W = c.conv_kernel;
  const float s = 1.0f / std::sqrt(float(hs));
  if (c.layout == "qwen3_next") {
    w.add("in_proj_qkvz.weight", {2 * kd + 2 * vd, hs}, s);
    w.add("in_proj_ba.weight", {2 * HV, hs}, s);
  } else if (c.layout == "qwen3_5") {
    w.add("in_proj_qkv.weight", {2 * kd + vd, hs}, s);
    w.add("in_proj_z.weight", {vd, hs}, s);
    w.add("in_proj_b.weight", {HV, hs}, s);
    w.add("in_proj_a.weight", {HV, hs}, s);
  } else {
    w.add("q_proj.weight", {kd, hs}, s);
    w.add("k_proj.weight", {kd, hs}, s);
    w.add("v_proj.weight", {vd, hs}, s);
    w.add("g_proj.weight", {vd, hs}, s);
    w.add("b_proj.weight", {HV, hs}, s);
    w.add("a_proj.weight", {HV, hs}, s);
    w.add("q_conv1d.weight", {kd, 1, W}, 0.5f);
    w.add("k_conv1d.weight", {kd, 1, W}, 0.5f);
    w.add("v_conv1d.weight", {vd, 1, W}, 0.5f);
  }
  if (c.layout != "olmo_hybrid") w.add("conv1d.weight", {2 * kd + vd, 1, W}, 0.5f);
  if (bias) w.add("conv1d.bias", {2 * kd + vd}, 0.3f);
  w.add(c.layout == "olmo_hybrid" ? "o_norm.weight" : "norm.weight", {c.head_v_dim}, 0.3f, 1.0f);
  w.add(c.layout == "olmo_hybrid" ? "o_proj.weight" : "out_proj.weight", {hs, vd}, s);
  w.add("dt_bias", {HV}, 0.5f, 1.0f);
  w.add("A_log", {HV}, 0.5f, 1.0f);
  return w;
}

// KimiDeltaAttention of config c (Kimi-Linear's parameter names).
inline Weights kda_weights(std::mt19937_64 &rng, const KimiDeltaAttentionConfig &c,
                           bool bf16 = false) {
  Weights w{{}, &rng, bf16};
  const int64_t hs = c.hidden_size, H = c.num_heads, D = c.head_dim, hd = H * D,
                W = c.conv_kernel;
  const float s = 1.0f / std::sqrt(float(hs));
  for (const char *n : {"q_proj", "k_proj", "v_proj"}) {
    w.add(std::string(n) + ".weight", {hd, hs}, s);
    w.add(std::string(n).substr(0, 1) + "_conv1d.weight", {hd, 1, W}, 0.5f);
  }
  w.add("b_proj.weight", {H, hs}, s);
  w.add("f_a_proj.weight", {D, hs}, s);
  w.add("f_b_proj.weight", {hd, D}, 1.0f / std::sqrt(float(D)));
  w.add("g_a_proj.weight", {D, hs}, s);
  w.add("g_b_proj.weight", {hd, D}, 1.0f / std::sqrt(float(D)));
  w.add("A_log", {1, 1, H, 1}, 0.5f, 1.0f);
  w.add("dt_bias", {hd}, 0.5f);
  w.add("o_norm.weight", {D}, 0.3f, 1.0f);
  w.add("o_proj.weight", {hs, hd}, s);
  return w;
}

}  // namespace deltac::nn::testing

#endif  // DELTAC_TESTS_NN_LAYER_FIXTURES_H

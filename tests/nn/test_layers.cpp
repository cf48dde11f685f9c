// deltac::nn layers on random weights: prompt + one token at a time through
// the state cache == the whole sequence at once (DeltaNetAttention, the
// GatedDeltaNet layouts, KimiDeltaAttention); weight, config and input errors
// name the tensor or field. (Agreement with the PyTorch modules:
// nn_vs_pytorch.py, ctest nn_vs_pytorch.)
#include "deltac/nn.h"
#include "deltac/test_seed.h"
#include "layer_fixtures.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace {

using namespace deltac::nn;
using namespace deltac::nn::testing;
using deltac::SafeTensorF32;
using deltac::SafeTensors;

// Concatenates per-call outputs along T.
void expect_same_as_whole(const Tensor &whole, const std::vector<Tensor> &parts,
                          double tol = 1e-5) {
  const int64_t B = whole.shape[0], T = whole.shape[1], C = whole.shape[2];
  int64_t t0 = 0;
  double num = 0, den = 0;
  for (const Tensor &p : parts) {
    const int64_t tn = p.shape[1];
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < tn * C; ++i) {
        const double a = p.data[size_t(b * tn * C + i)], e = whole.data[size_t((b * T + t0) * C + i)];
        num = std::max(num, std::fabs(a - e));
        den = std::max(den, std::fabs(e));
      }
    t0 += tn;
  }
  EXPECT_EQ(t0, T);
  EXPECT_LE(num / den, tol) << "prompt + decode steps vs whole sequence";
}

TEST(NnDeltaNet, DecodeStepsEqualWholeSequence) {
  for (bool bitnet : {false, true}) {
    const uint64_t seed = deltac::test_seed();
    SCOPED_TRACE(deltac::test_seed_note(seed));
    std::printf("NnDeltaNet: bitnet %d DELTAC_TEST_SEED=%llu\n", int(bitnet), (unsigned long long)seed);
    std::mt19937_64 rng(seed);
    auto st = deltanet_weights(rng, 64, 2).file();
    DeltaNetConfig c;
    c.hidden_size = 64;
    c.num_heads = 2;
    c.use_bitnet = bitnet;
    c.mode = "decoder";
    DeltaNetAttention layer(c, st);
    Tensor x = random_x(rng, 2, 12, 64);
    Tensor whole = layer.forward(x);
    EXPECT_EQ(whole.shape, (std::vector<int64_t>{2, 12, 64}));
    EXPECT_EQ(layer.state().size(), size_t(2 * 2 * 32 * 32));
    layer.reset_state();
    std::vector<Tensor> parts{layer.forward(slice_t(x, 0, 5))};
    for (int64_t t = 5; t < 12; ++t) parts.push_back(layer.forward(slice_t(x, t, t + 1)));
    // BitLinear's 8-bit activations may round a readout value computed 1e-7
    // apart to the adjacent step (nn_vs_pytorch.py says more).
    expect_same_as_whole(whole, parts, bitnet ? 1e-2 : 1e-5);
    // A batch of another size than the cached state's is an error.
    EXPECT_THROW(layer.forward(slice_t(random_x(rng, 1, 12, 64), 0, 1)), Error);
  }
}

TEST(NnDeltaNet, Errors) {
  std::mt19937_64 rng(1);
  auto w = deltanet_weights(rng, 64, 2);
  DeltaNetConfig c;
  c.hidden_size = 64;
  c.num_heads = 2;
  try {
    DeltaNetAttention l(c, w.file("norm.bias"));
    FAIL() << "no error";
  } catch (const Error &e) {
    EXPECT_STREQ(e.what(), "w.safetensors: tensor 'norm.bias' is missing");
  }
  try {
    DeltaNetAttention l(c, w.file(), "model.");
    FAIL() << "no error";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("'model.q_proj.weight' is missing"), std::string::npos);
  }
  c.num_heads = 3;
  EXPECT_THROW(DeltaNetAttention(c, w.file()), Error);
  c.num_heads = 2;
  c.mode = "bidirectional";
  EXPECT_THROW(DeltaNetAttention(c, w.file()), Error);
  c.mode = "encoder";
  c.hidden_size = 32; // weights of hidden 64: shapes do not match
  c.num_heads = 2;
  try {
    DeltaNetAttention l(c, w.file());
    FAIL() << "no error";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("shape (64, 64), expected (32, 32)"), std::string::npos) << e.what();
  }
  c.hidden_size = 64;
  DeltaNetAttention l(c, w.file());
  Tensor bad{{1, 3, 32}, std::vector<float>(96)};
  EXPECT_THROW(l.forward(bad), Error);
}

TEST(NnGatedDeltaNet, DecodeStepsEqualWholeSequence) {
  for (const char *layout : {"qwen3_next", "qwen3_5", "olmo_hybrid"}) {
    const uint64_t seed = deltac::test_seed();
    SCOPED_TRACE(std::string(layout) + " " + deltac::test_seed_note(seed));
    std::printf("NnGatedDeltaNet: %s DELTAC_TEST_SEED=%llu\n", layout, (unsigned long long)seed);
    std::mt19937_64 rng(seed);
    GatedDeltaNetConfig c;
    c.hidden_size = 48;
    c.num_k_heads = 2;
    c.num_v_heads = 4;
    c.head_k_dim = 16;
    c.head_v_dim = 32;
    c.layout = layout;
    GatedDeltaNet layer(c, gated_weights(rng, c).file());
    Tensor x = random_x(rng, 2, 10, 48);
    Tensor whole = layer.forward(x);
    GatedDeltaNetCache cache;
    std::vector<Tensor> parts{layer.forward(slice_t(x, 0, 2), &cache)};
    EXPECT_EQ(cache.batch, 2);
    parts.push_back(layer.forward(slice_t(x, 2, 6), &cache)); // a chunked prefill
    for (int64_t t = 6; t < 10; ++t) parts.push_back(layer.forward(slice_t(x, t, t + 1), &cache));
    expect_same_as_whole(whole, parts);
  }
}

TEST(NnGatedDeltaNet, Errors) {
  std::mt19937_64 rng(2);
  GatedDeltaNetConfig c;
  c.hidden_size = 48;
  c.num_k_heads = 2;
  c.num_v_heads = 4;
  c.head_k_dim = 16;
  c.head_v_dim = 32;
  auto w = gated_weights(rng, c);
  try {
    GatedDeltaNet l(c, w.file("A_log"));
    FAIL() << "no error";
  } catch (const Error &e) {
    EXPECT_STREQ(e.what(), "w.safetensors: tensor 'A_log' is missing");
  }
  c.layout = "mamba";
  EXPECT_THROW(GatedDeltaNet(c, w.file()), Error);
  c.layout = "qwen3_next";
  c.num_v_heads = 3;
  EXPECT_THROW(GatedDeltaNet(c, w.file()), Error);
}

KimiDeltaAttentionConfig small_kda() {
  KimiDeltaAttentionConfig c;
  c.hidden_size = 48;
  c.num_heads = 2;
  c.head_dim = 32;
  c.conv_kernel = 4;
  return c;
}

TEST(NnKda, DecodeStepsEqualWholeSequence) {
  const uint64_t seed = deltac::test_seed();
  SCOPED_TRACE(deltac::test_seed_note(seed));
  std::printf("NnKda: DELTAC_TEST_SEED=%llu\n", (unsigned long long)seed);
  std::mt19937_64 rng(seed);
  const KimiDeltaAttentionConfig c = small_kda();
  KimiDeltaAttention layer(c, kda_weights(rng, c).file());
  Tensor x = random_x(rng, 2, 10, 48);
  Tensor whole = layer.forward(x);
  GatedDeltaNetCache cache;
  std::vector<Tensor> parts{layer.forward(slice_t(x, 0, 2), &cache)}; // shorter than the conv
  EXPECT_EQ(cache.batch, 2);
  EXPECT_EQ(cache.conv.size(), size_t(2 * 3 * 64 * 4));
  EXPECT_EQ(cache.recurrent.size(), size_t(2 * 2 * 32 * 32));
  parts.push_back(layer.forward(slice_t(x, 2, 6), &cache)); // a chunked prefill
  for (int64_t t = 6; t < 10; ++t) parts.push_back(layer.forward(slice_t(x, t, t + 1), &cache));
  expect_same_as_whole(whole, parts);
  try {
    layer.forward(slice_t(random_x(rng, 1, 10, 48), 0, 1), &cache);
    FAIL() << "no error";
  } catch (const Error &e) {
    EXPECT_STREQ(e.what(), "KimiDeltaAttention: the cached state has batch 2 but hidden_states "
                           "has batch 1");
  }
  // A cache of another layer's shape (same batch) is refused, never read.
  KimiDeltaAttentionConfig wide = c;
  wide.hidden_size = 96, wide.num_heads = 3;
  KimiDeltaAttention other(wide, kda_weights(rng, wide).file());
  try {
    other.forward(slice_t(random_x(rng, 2, 1, 96), 0, 1), &cache);
    FAIL() << "no error";
  } catch (const Error &e) {
    EXPECT_STREQ(e.what(), "KimiDeltaAttention: the cache holds states of another layer's shape "
                           "(1536 conv and 4096 recurrent floats; this layer's are 2304 and "
                           "6144)");
  }
}

// The message of constructing KimiDeltaAttention(c, st, prefix).
std::string kda_error(const KimiDeltaAttentionConfig &c, const SafeTensors &st,
                      const std::string &prefix = "") {
  try {
    KimiDeltaAttention l(c, st, prefix);
  } catch (const Error &e) {
    return e.what();
  }
  return "no error";
}

TEST(NnKda, WeightErrors) {
  std::mt19937_64 rng(3);
  KimiDeltaAttentionConfig c = small_kda();
  auto w = kda_weights(rng, c);
  EXPECT_EQ(kda_error(c, w.file("f_b_proj.weight")),
            "w.safetensors: tensor 'f_b_proj.weight' is missing");
  EXPECT_EQ(kda_error(c, w.file("v_conv1d.weight")),
            "w.safetensors: tensor 'v_conv1d.weight' is missing");
  EXPECT_EQ(kda_error(c, w.file(), "model.layers.0.self_attn."),
            "w.safetensors: tensor 'model.layers.0.self_attn.q_proj.weight' is missing");
  auto bad = w;
  bad.t["A_log"] = SafeTensorF32{{2}, {0.5f, 0.5f}}; // GatedDeltaNet's [HV], not Kimi's [1, 1, H, 1]
  EXPECT_EQ(kda_error(c, bad.file()), "w.safetensors: tensor 'A_log': shape (2,), expected (1, 1, 2, 1)");
  bad = w;
  bad.t["dt_bias"] = SafeTensorF32{{2}, {0.5f, 0.5f}};
  EXPECT_EQ(kda_error(c, bad.file()), "w.safetensors: tensor 'dt_bias': shape (2,), expected (64,)");
  c.hidden_size = 32; // the weights' hidden size is 48
  EXPECT_EQ(kda_error(c, w.file()), "w.safetensors: tensor 'q_proj.weight': shape (64, 48), "
                                    "expected (64, 32)");
  c = small_kda();
  c.head_dim = 24;
  EXPECT_EQ(kda_error(c, w.file()), "KimiDeltaAttention: head_dim = 24: deltac's kernels need a "
                                    "multiple of 16 in [16, 256]");
  // A wrong dtype: dt_bias's header entry says I32 (same byte size).
  c = small_kda();
  auto bytes = deltac::safetensors_bytes(w.t);
  std::string head(bytes.begin(), bytes.begin() + 8 + int64_t(bytes[0] | bytes[1] << 8));
  const size_t at = head.find("\"F32\"", head.find("\"dt_bias\""));
  ASSERT_NE(at, std::string::npos);
  bytes[at + 1] = 'I';
  SafeTensors st;
  std::string err;
  ASSERT_TRUE(st.parse(bytes.data(), bytes.size(), "w.safetensors", &err)) << err;
  EXPECT_EQ(kda_error(c, st), "w.safetensors: tensor 'dt_bias': dtype I32, expected F32, BF16 or F16");
}

TEST(NnKda, InputErrors) {
  std::mt19937_64 rng(4);
  const KimiDeltaAttentionConfig c = small_kda();
  KimiDeltaAttention layer(c, kda_weights(rng, c).file());
  try {
    layer.forward(Tensor{{1, 3, 32}, std::vector<float>(96)});
    FAIL() << "no error";
  } catch (const Error &e) {
    EXPECT_STREQ(e.what(), "KimiDeltaAttention: x has shape (1, 3, 32): expected (batch, seq, 48)");
  }
}

TEST(NnConfig, FromMetadata) {
  auto d = deltanet_config({{"hidden_size", "256"}, {"num_heads", "4"}, {"use_bitnet", "True"},
                            {"mode", "decoder"}});
  EXPECT_EQ(d.hidden_size, 256);
  EXPECT_TRUE(d.use_bitnet);
  EXPECT_EQ(d.mode, "decoder");
  auto g = gated_deltanet_config({{"linear_num_value_heads", "8"}, {"layout", "qwen3_5"},
                                  {"linear_allow_neg_eigval", "true"}});
  EXPECT_EQ(g.num_v_heads, 8);
  EXPECT_TRUE(g.allow_neg_eigval);
  EXPECT_THROW(deltanet_config({{"hidden_size", "2k"}}), Error);
  auto k = kda_config({{"hidden_size", "96"}, {"num_heads", "3"}, {"head_dim", "32"},
                       {"short_conv_kernel_size", "3"}, {"rms_norm_eps", "1e-06"}});
  EXPECT_EQ(k.hidden_size, 96);
  EXPECT_EQ(k.num_heads, 3);
  EXPECT_EQ(k.head_dim, 32);
  EXPECT_EQ(k.conv_kernel, 3);
  EXPECT_FLOAT_EQ(k.rms_norm_eps, 1e-6f);
  EXPECT_EQ(kda_config({}).hidden_size, 2304);
}

} // namespace

// deltac::nn::KimiDeltaAttention: python/deltac/nn/kda.py in C++ (Kimi-Linear's
// parameter names). One stacked input projection with rows q || k || v || b
// || f_a || g_a, the three depthwise convs run as GatedDeltaNet's one over q
// || k || v (nn_conv.cpp), the low-rank decay and output-gate up-projections
// f_b and g_b, the kda kernel (per-channel decay), the sigmoid-gated RMSNorm
// per head and o_proj.
#include "nn_internal.h"
#include "nn_rows.h"

#include "deltac/params.h"

#include <cstring>

namespace deltac {
namespace nn {

using namespace detail;

KimiDeltaAttention::KimiDeltaAttention(const KimiDeltaAttentionConfig &config,
                                       const SafeTensors &w, const std::string &p)
    : cfg_(config) {
  const auto &c = cfg_;
  const int64_t H = c.num_heads, D = c.head_dim, W = c.conv_kernel, hs = c.hidden_size;
  if (H <= 0 || hs <= 0 || W <= 0)
    throw Error("KimiDeltaAttention: need positive hidden_size, num_heads and "
                "short_conv_kernel_size");
  if (D % 16 || D < 16 || D > 256)
    throw Error("KimiDeltaAttention: head_dim = " + std::to_string(D) +
                ": deltac's kernels need a multiple of 16 in [16, 256]");
  hd_ = H * D;
  in_ = stack({load_linear(w, p + "q_proj.weight", hs, hd_, false),
               load_linear(w, p + "k_proj.weight", hs, hd_, false),
               load_linear(w, p + "v_proj.weight", hs, hd_, false),
               load_linear(w, p + "b_proj.weight", hs, H, false),
               load_linear(w, p + "f_a_proj.weight", hs, D, false),
               load_linear(w, p + "g_a_proj.weight", hs, D, false)});
  f_b_ = load_linear(w, p + "f_b_proj.weight", D, hd_, false);
  g_b_ = load_linear(w, p + "g_b_proj.weight", D, hd_, false);
  conv_w_ = load_qkv_conv(w, p, hd_, hd_, W);
  conv_wt_ = taps_major(conv_w_, 3 * hd_, W);
  A_log_ = load(w, p + "A_log", {1, 1, H, 1});
  dt_bias_ = load(w, p + "dt_bias", {hd_});
  norm_w_ = load(w, p + "o_norm.weight", {D});
  out_ = load_linear(w, p + "o_proj.weight", hd_, hs, false);
}

Tensor KimiDeltaAttention::forward(const Tensor &x, GatedDeltaNetCache *cache) {
  const auto &c = cfg_;
  check_input(x, c.hidden_size, "KimiDeltaAttention");
  const int64_t B = x.shape[0], T = x.shape[1], rows = B * T;
  const int64_t H = c.num_heads, D = c.head_dim, W = c.conv_kernel, hd = hd_;
  const bool cont = continues(cache, B, size_t(B * 3 * hd * W), size_t(B * H * D * D),
                              "KimiDeltaAttention");
  const int64_t ncol = in_.out; // 3 hd + H + 2 D
  std::vector<float> &y = grow(ws_[0], rows * ncol);
  in_.forward(x.data.data(), rows, y.data(), ncol);

  std::vector<float> &q = grow(ws_[2], rows * hd), &k = grow(ws_[3], rows * hd),
                     &v = grow(ws_[4], rows * hd), &o = grow(ws_[5], rows * hd);
  std::vector<float> conv_state(size_t(B * 3 * hd * W)); // moved into the cache
  conv_silu_qkv(y.data(), ncol, B, T, hd, hd, W, conv_wt_.data(), nullptr,
                cont ? cache->conv.data() : nullptr, q.data(), k.data(), v.data(),
                conv_state.data(), ws_[1]);

  // The low-rank inputs f_a, g_a (D columns each) made dense for f_b, g_b.
  std::vector<float> &fa = grow(ws_[6], rows * D), &ga = grow(ws_[7], rows * D);
  for (int64_t r = 0; r < rows; ++r) {
    const float *src = y.data() + r * ncol + 3 * hd + H;
    std::memcpy(fa.data() + r * D, src, size_t(D) * 4);
    std::memcpy(ga.data() + r * D, src + D, size_t(D) * 4);
  }
  std::vector<float> &g = grow(ws_[8], rows * hd), &gate = grow(ws_[9], rows * hd);
  f_b_.forward(fa.data(), rows, g.data(), hd);
  g_b_.forward(ga.data(), rows, gate.data(), hd);

  // g = -exp(A_log) * softplus(f_b(f_a(x)) + dt_bias) per channel; beta = sigmoid(b).
  const rows::Ops &ops = rows::ops();
  std::vector<float> &beta = grow(ws_[10], rows * H);
  for (int64_t r = 0; r < rows; ++r) {
    float *gr = g.data() + r * hd;
    for (int64_t h = 0; h < H; ++h)
      ops.scaled_softplus(gr + h * D, dt_bias_.data() + h * D, -std::exp(A_log_[size_t(h)]), D);
    std::memcpy(beta.data() + r * H, y.data() + r * ncol + 3 * hd, size_t(H) * 4);
    ops.sigmoid(beta.data() + r * H, H, 1.0f);
  }
  std::vector<float> ht;
  if (cache) ht.resize(size_t(B * H * D * D));
  run_kernel({DELTAC_VARIANT_KDA, B, T, H, H, D, D, q.data(), k.data(), v.data(), beta.data(),
              g.data(), cont ? cache->recurrent.data() : nullptr, o.data(),
              cache ? ht.data() : nullptr, c.threads});
  if (cache) {
    cache->batch = B;
    cache->conv.swap(conv_state);
    cache->recurrent.swap(ht);
  }

  // o_norm per head: weight * (o * rsqrt(mean o^2 + eps)) * sigmoid(g_b(g_a(x))).
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < H; ++h)
      ops.sigmoid_rmsnorm(o.data() + r * hd + h * D, gate.data() + r * hd + h * D,
                          norm_w_.data(), D, c.rms_norm_eps);
  return project_out(out_, o.data(), B, T, c.hidden_size);
}

} // namespace nn
} // namespace deltac

// deltac::nn::GatedDeltaNet: python/deltac/nn/gated_deltanet.py in C++ (the
// qwen3_next, qwen3_5 and olmo_hybrid parameter layouts). Every layout is
// loaded into one stacked input projection with rows q || k || v || z || b
// || a (Qwen3-Next's fused, key-head-grouped rows reordered at load) and one
// depthwise conv over the q || k || v channels.
#include "nn_internal.h"
#include "nn_rows.h"

#include "deltac/params.h"

#include <cstring>

namespace deltac {
namespace nn {

using namespace detail;

namespace {
// Rows [first, first + count) of a [?, in] matrix.
Linear rows_of(const Linear &l, const std::vector<int64_t> &rows) {
  Linear r = l;
  r.out = int64_t(rows.size());
  r.w.resize(size_t(r.out * l.in));
  for (size_t i = 0; i < rows.size(); ++i)
    std::memcpy(r.w.data() + i * l.in, l.w.data() + rows[i] * l.in, size_t(l.in) * 4);
  return r;
}
} // namespace

GatedDeltaNet::GatedDeltaNet(const GatedDeltaNetConfig &config,
                             const SafeTensors &w, const std::string &prefix)
    : cfg_(config) {
  const auto &c = cfg_;
  const int64_t H = c.num_k_heads, HV = c.num_v_heads, Dk = c.head_k_dim,
                Dv = c.head_v_dim, W = c.conv_kernel, hs = c.hidden_size;
  if (H <= 0 || HV <= 0 || HV % H || hs <= 0 || W <= 0)
    throw Error("GatedDeltaNet: need positive sizes and linear_num_value_heads (" +
                std::to_string(HV) + ") a multiple of linear_num_key_heads (" +
                std::to_string(H) + ")");
  for (int64_t d : {Dk, Dv})
    if (d % 16 || d < 16 || d > 256)
      throw Error("GatedDeltaNet: head dim " + std::to_string(d) +
                  ": deltac's kernels need a multiple of 16 in [16, 256]");
  const bool olmo = c.layout == "olmo_hybrid";
  if (!olmo && c.layout != "qwen3_next" && c.layout != "qwen3_5")
    throw Error("GatedDeltaNet: layout = '" + c.layout +
                "': expected qwen3_next, qwen3_5 or olmo_hybrid");
  if (olmo) cfg_.rms_norm_eps = 1e-5f; // its o_norm's eps, as in Python
  key_dim_ = H * Dk;
  value_dim_ = HV * Dv;
  conv_dim_ = 2 * key_dim_ + value_dim_;
  const std::string &p = prefix;
  if (c.layout == "qwen3_next") {
    const int64_t ratio = HV / H, G = 2 * Dk + 2 * Dv * ratio;
    Linear qkvz = load_linear(w, p + "in_proj_qkvz.weight", hs, 2 * key_dim_ + 2 * value_dim_, false);
    Linear ba = load_linear(w, p + "in_proj_ba.weight", hs, 2 * HV, false);
    std::vector<int64_t> r1, r2;
    for (int64_t part = 0; part < 4; ++part) // q, k, v, z
      for (int64_t h = 0; h < H; ++h) {
        const int64_t off = part == 0 ? 0 : part == 1 ? Dk : part == 2 ? 2 * Dk : 2 * Dk + ratio * Dv;
        const int64_t len = part < 2 ? Dk : ratio * Dv;
        for (int64_t j = 0; j < len; ++j) r1.push_back(h * G + off + j);
      }
    for (int64_t part = 0; part < 2; ++part) // b, a
      for (int64_t h = 0; h < H; ++h)
        for (int64_t j = 0; j < ratio; ++j) r2.push_back(h * 2 * ratio + part * ratio + j);
    in_ = stack({rows_of(qkvz, r1), rows_of(ba, r2)});
  } else if (c.layout == "qwen3_5") {
    in_ = stack({load_linear(w, p + "in_proj_qkv.weight", hs, conv_dim_, false),
                 load_linear(w, p + "in_proj_z.weight", hs, value_dim_, false),
                 load_linear(w, p + "in_proj_b.weight", hs, HV, false),
                 load_linear(w, p + "in_proj_a.weight", hs, HV, false)});
  } else {
    in_ = stack({load_linear(w, p + "q_proj.weight", hs, key_dim_, false),
                 load_linear(w, p + "k_proj.weight", hs, key_dim_, false),
                 load_linear(w, p + "v_proj.weight", hs, value_dim_, false),
                 load_linear(w, p + "g_proj.weight", hs, value_dim_, false),
                 load_linear(w, p + "b_proj.weight", hs, HV, false),
                 load_linear(w, p + "a_proj.weight", hs, HV, false)});
  }
  if (olmo) {
    conv_w_ = load_qkv_conv(w, p, key_dim_, value_dim_, W);
    norm_w_ = load(w, p + "o_norm.weight", {Dv});
    out_ = load_linear(w, p + "o_proj.weight", value_dim_, hs, false);
  } else {
    conv_w_ = load(w, p + "conv1d.weight", {conv_dim_, 1, W});
    if (w.find(p + "conv1d.bias")) conv_b_ = load(w, p + "conv1d.bias", {conv_dim_});
    norm_w_ = load(w, p + "norm.weight", {Dv});
    out_ = load_linear(w, p + "out_proj.weight", value_dim_, hs, false);
  }
  conv_wt_ = taps_major(conv_w_, conv_dim_, W);
  dt_bias_ = load(w, p + "dt_bias", {HV});
  A_log_ = load(w, p + "A_log", {HV});
}

Tensor GatedDeltaNet::forward(const Tensor &x, GatedDeltaNetCache *cache) {
  const auto &c = cfg_;
  check_input(x, c.hidden_size, "GatedDeltaNet");
  const int64_t B = x.shape[0], T = x.shape[1], rows = B * T;
  const int64_t H = c.num_k_heads, HV = c.num_v_heads, Dk = c.head_k_dim,
                Dv = c.head_v_dim, W = c.conv_kernel, C = conv_dim_;
  const bool cont = continues(cache, B, size_t(B * conv_dim_ * W), size_t(B * HV * Dk * Dv),
                              "GatedDeltaNet");
  const int64_t ncol = in_.out; // C + value_dim + 2 HV
  std::vector<float> &y = grow(ws_[0], rows * ncol);
  in_.forward(x.data.data(), rows, y.data(), ncol);

  const rows::Ops &ops = rows::ops();
  const int64_t kd = key_dim_, vd = value_dim_;
  std::vector<float> &q = grow(ws_[4], rows * kd), &k = grow(ws_[5], rows * kd),
                     &v = grow(ws_[6], rows * vd), &o = grow(ws_[7], rows * vd);
  std::vector<float> conv_state(size_t(B * C * W)); // moved into the cache
  conv_silu_qkv(y.data(), ncol, B, T, kd, vd, W, conv_wt_.data(),
                conv_b_.empty() ? nullptr : conv_b_.data(), cont ? cache->conv.data() : nullptr,
                q.data(), k.data(), v.data(), conv_state.data(), ws_[2]);

  std::vector<float> &beta = grow(ws_[8], rows * HV), &g = grow(ws_[9], rows * HV);
  for (int64_t r = 0; r < rows; ++r) {
    const float *ba = y.data() + r * ncol + C + vd;
    float *bt = beta.data() + r * HV;
    for (int64_t h = 0; h < HV; ++h) bt[h] = ba[h];
    ops.sigmoid(bt, HV, c.allow_neg_eigval ? 2.0f : 1.0f);
    for (int64_t h = 0; h < HV; ++h)
      g[size_t(r * HV + h)] = -std::exp(A_log_[size_t(h)]) * softplus(ba[HV + h] + dt_bias_[size_t(h)]);
  }
  std::vector<float> ht;
  if (cache) ht.resize(size_t(B * HV * Dk * Dv));
  run_kernel({DELTAC_VARIANT_GATED, B, T, H, HV, Dk, Dv, q.data(), k.data(), v.data(),
              beta.data(), g.data(), cont ? cache->recurrent.data() : nullptr, o.data(),
              cache ? ht.data() : nullptr, c.threads});
  if (cache) {
    cache->batch = B;
    cache->conv.swap(conv_state);
    cache->recurrent.swap(ht);
  }

  // Gated RMSNorm per value head: weight * (x * rsqrt(mean x^2 + eps)) * silu(z).
  for (int64_t r = 0; r < rows; ++r) {
    const float *z = y.data() + r * ncol + C;
    for (int64_t h = 0; h < HV; ++h)
      ops.gated_rmsnorm(o.data() + r * vd + h * Dv, z + h * Dv, norm_w_.data(), Dv, c.rms_norm_eps);
  }
  return project_out(out_, o.data(), B, T, c.hidden_size);
}

} // namespace nn
} // namespace deltac

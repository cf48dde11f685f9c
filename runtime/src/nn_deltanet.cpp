// deltac::nn::DeltaNetAttention: python/deltac/nn/deltanet.py in C++.
#include "nn_internal.h"
#include "nn_rows.h"

#include "deltac/params.h"

#include <cstring>

namespace deltac {
namespace nn {

using namespace detail;

DeltaNetAttention::DeltaNetAttention(const DeltaNetConfig &config,
                                     const SafeTensors &w,
                                     const std::string &prefix)
    : cfg_(config) {
  const int64_t hs = cfg_.hidden_size, H = cfg_.num_heads;
  if (H <= 0 || hs <= 0 || hs % H != 0)
    throw Error("DeltaNetAttention: hidden_size (" + std::to_string(hs) +
                ") must be divisible by num_heads (" + std::to_string(H) + ")");
  H_ = H;
  D_ = hs / H;
  total_ = D_ * H;
  if (D_ % 16 || D_ < 16 || D_ > 256)
    throw Error("DeltaNetAttention: head_dim = " + std::to_string(D_) +
                ": deltac's kernels need a multiple of 16 in [16, 256]");
  if (cfg_.mode != "encoder" && cfg_.mode != "decoder")
    throw Error("DeltaNetAttention: mode = '" + cfg_.mode +
                "': expected 'encoder' or 'decoder'");
  const bool bit = cfg_.use_bitnet;
  const std::string &p = prefix;
  qkvg_ = stack({load_linear(w, p + "q_proj.weight", hs, total_, bit),
                 load_linear(w, p + "k_proj.weight", hs, total_, bit),
                 load_linear(w, p + "v_proj.weight", hs, total_, bit),
                 load_linear(w, p + "g_proj.weight", hs, total_, bit)});
  beta_ = load_linear(w, p + "beta_proj.weight", hs, H, false);
  out_ = load_linear(w, p + "out_proj.weight", total_, hs, bit);
  qkvg_.threads = out_.threads = cfg_.threads;
  norm_w_ = load(w, p + "norm.weight", {D_});
  norm_b_ = load(w, p + "norm.bias", {D_});
}

Tensor DeltaNetAttention::forward(const Tensor &x) {
  check_input(x, cfg_.hidden_size, "DeltaNetAttention");
  const int64_t B = x.shape[0], T = x.shape[1], H = H_, D = D_, n = total_;
  const int64_t rows = B * T;
  const bool decoder = cfg_.mode == "decoder";
  if (decoder && !state_.empty() && state_batch_ != B)
    throw Error("DeltaNetAttention: the cached decoder state has batch " +
                std::to_string(state_batch_) + " but x has batch " + std::to_string(B) +
                ": call reset_state() to start new sequences");

  std::vector<float> &y = grow(ws_[0], rows * 4 * n), &beta = grow(ws_[1], rows * H);
  qkvg_.forward(x.data.data(), rows, y.data(), 4 * n);
  beta_.forward(x.data.data(), rows, beta.data(), H);
  const rows::Ops &ops = rows::ops();
  ops.sigmoid(beta.data(), rows * H, 1.0f);
  std::vector<float> &q = grow(ws_[2], rows * n), &k = grow(ws_[3], rows * n),
                     &v = grow(ws_[4], rows * n), &o = grow(ws_[5], rows * n);
  for (int64_t r = 0; r < rows; ++r) {
    const float *yr = y.data() + r * 4 * n;
    std::memcpy(q.data() + r * n, yr, size_t(n) * 4);
    std::memcpy(k.data() + r * n, yr + n, size_t(n) * 4);
    std::memcpy(v.data() + r * n, yr + 2 * n, size_t(n) * 4);
  }
  std::vector<float> ht;
  if (decoder) ht.resize(size_t(B * H * D * D));
  run_kernel({DELTAC_VARIANT_DELTA, B, T, H, H, D, D, q.data(), k.data(), v.data(),
              beta.data(), nullptr, state_.empty() ? nullptr : state_.data(), o.data(),
              decoder ? ht.data() : nullptr, cfg_.threads});
  if (decoder) {
    state_.swap(ht);
    state_batch_ = B;
  }

  // LayerNorm over head_dim (biased variance), then the silu gate from g_proj.
  for (int64_t r = 0; r < rows; ++r) {
    const float *g = y.data() + r * 4 * n + 3 * n;
    for (int64_t h = 0; h < H; ++h)
      ops.layernorm_gate(o.data() + r * n + h * D, g + h * D, norm_w_.data(), norm_b_.data(), D,
                         cfg_.norm_eps);
  }
  return project_out(out_, o.data(), B, T, cfg_.hidden_size);
}

} // namespace nn
} // namespace deltac

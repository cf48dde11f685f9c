// The short conv of GatedDeltaNet and KimiDeltaAttention (nn_internal.h):
// causal depthwise conv1d + silu over q || k || v, continuing a cached state.
#include "nn_internal.h"
#include "nn_rows.h"

namespace deltac {
namespace nn {
namespace detail {

void conv_silu_qkv(const float *y, int64_t ldy, int64_t B, int64_t T, int64_t kd, int64_t vd,
                   int64_t W, const float *wt, const float *bias, const float *state_in,
                   float *q, float *k, float *v, float *state_out, std::vector<float> &st_buf) {
  // The W cached inputs then this call's (st: the cache token-major, [W, C]),
  // one sweep per token written straight into q, k and v:
  // out[t][c] = silu(sum_i w[c][i] in[t + 1 + i][c] + bias[c]).
  const rows::Ops &ops = rows::ops();
  const int64_t C = 2 * kd + vd;
  float *st = grow(st_buf, W * C).data();
  std::vector<const float *> src(static_cast<size_t>(W)), part_src(src);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t i = 0; i < W; ++i)
      for (int64_t ch = 0; ch < C; ++ch)
        st[i * C + ch] = state_in ? state_in[(b * C + ch) * W + i] : 0.0f;
    auto input = [&](int64_t j) { // j-th conv input of sequence b
      return j < W ? st + j * C : y + (b * T + j - W) * ldy;
    };
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t i = 0; i < W; ++i) src[size_t(i)] = input(t + 1 + i);
      const int64_t r = b * T + t;
      for (auto part : {std::make_pair(int64_t(0), q + r * kd), std::make_pair(kd, k + r * kd),
                        std::make_pair(2 * kd, v + r * vd)}) {
        const int64_t c0 = part.first, n = c0 == 2 * kd ? vd : kd;
        for (int64_t i = 0; i < W; ++i) part_src[size_t(i)] = src[size_t(i)] + c0;
        ops.conv_silu(part_src.data(), wt + c0, C, W, bias ? bias + c0 : nullptr, n, part.second);
      }
    }
    for (int64_t i = 0; i < W; ++i) {
      const float *e = input(T + i);
      for (int64_t ch = 0; ch < C; ++ch) state_out[(b * C + ch) * W + i] = e[ch];
    }
  }
}

std::vector<float> taps_major(const std::vector<float> &w, int64_t C, int64_t W) {
  std::vector<float> t(w.size());
  for (int64_t ch = 0; ch < C; ++ch)
    for (int64_t i = 0; i < W; ++i) t[size_t(i * C + ch)] = w[size_t(ch * W + i)];
  return t;
}

std::vector<float> load_qkv_conv(const SafeTensors &w, const std::string &p, int64_t kd,
                                 int64_t vd, int64_t W) {
  std::vector<float> out;
  for (auto part : {std::make_pair("q_conv1d", kd), std::make_pair("k_conv1d", kd),
                    std::make_pair("v_conv1d", vd)}) {
    auto cw = load(w, p + part.first + ".weight", {part.second, 1, W});
    out.insert(out.end(), cw.begin(), cw.end());
  }
  return out;
}

bool continues(const GatedDeltaNetCache *cache, int64_t B, size_t conv_n, size_t rec_n,
               const char *layer) {
  if (!cache || cache->empty()) return false;
  if (cache->batch != B)
    throw Error(std::string(layer) + ": the cached state has batch " +
                std::to_string(cache->batch) + " but hidden_states has batch " + std::to_string(B));
  if (cache->conv.size() != conv_n || cache->recurrent.size() != rec_n)
    throw Error(std::string(layer) + ": the cache holds states of another layer's shape (" +
                std::to_string(cache->conv.size()) + " conv and " +
                std::to_string(cache->recurrent.size()) + " recurrent floats; this layer's are " +
                std::to_string(conv_n) + " and " + std::to_string(rec_n) + ")");
  return true;
}

} // namespace detail
} // namespace nn
} // namespace deltac

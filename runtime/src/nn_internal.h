// Shared pieces of deltac::nn (nn_common.cpp, nn_conv.cpp): weight loading,
// the short conv, the kernel call and softplus (the vectorised elementwise
// passes: nn_rows.h).
#ifndef DELTAC_NN_INTERNAL_H
#define DELTAC_NN_INTERNAL_H

#include "deltac/nn.h"

#include <cmath>

namespace deltac {
namespace nn {
namespace detail {

std::vector<float> load(const SafeTensors &w, const std::string &name,
                        const std::vector<int64_t> &shape);
Linear load_linear(const SafeTensors &w, const std::string &name, int64_t in,
                   int64_t out, bool bitnet);
// Stacks linears with the same input (rows one after the other).
Linear stack(const std::vector<Linear> &parts);
void check_input(const Tensor &x, int64_t hidden, const char *layer);
// The layer's output [B, T, hidden] = proj(o), o [B * T, proj.in].
Tensor project_out(const Linear &proj, const float *o, int64_t B, int64_t T, int64_t hidden);

// The short conv of GatedDeltaNet and KDA (nn_conv.cpp): the causal
// depthwise conv1d + silu over the C = 2 kd + vd channels q || k || v at
// columns [0, C) of y (row b * T + t, row stride ldy), continuing state_in [B,
// C, W] (the inputs before this call; null: zeros), written to q [B*T, kd], k
// [B*T, kd], v [B*T, vd]; the last W inputs go to state_out [B, C, W]. wt:
// the weights token-major [W, C]; bias [C] or null; st: scratch.
void conv_silu_qkv(const float *y, int64_t ldy, int64_t B, int64_t T, int64_t kd, int64_t vd,
                   int64_t W, const float *wt, const float *bias, const float *state_in,
                   float *q, float *k, float *v, float *state_out, std::vector<float> &st);
// Conv weights [C, W] -> [W, C].
std::vector<float> taps_major(const std::vector<float> &w, int64_t C, int64_t W);
// OLMo-Hybrid's and Kimi's q_conv1d, k_conv1d, v_conv1d weights ([C, 1, W]
// each) one after the other.
std::vector<float> load_qkv_conv(const SafeTensors &w, const std::string &prefix, int64_t kd,
                                 int64_t vd, int64_t W);
// Whether a forward continues *cache (throws when its batch is not B or its
// conv / recurrent states are not conv_n / rec_n values: another layer's).
bool continues(const GatedDeltaNetCache *cache, int64_t B, size_t conv_n, size_t rec_n,
               const char *layer);

struct KernelCall {
  int32_t variant;
  int64_t B, T, H, HV, K, V;
  const float *q, *k, *v, *beta, *g, *h0; // g: [B, T, HV], kda [B, T, HV, K]
  float *o, *ht;
  int32_t threads;
};
void run_kernel(const KernelCall &c);

// v with at least n elements (grown, never shrunk: a scratch buffer reused
// across calls costs no allocation, page faults or zeroing after the first).
inline std::vector<float> &grow(std::vector<float> &v, int64_t n) {
  if (v.size() < size_t(n)) v.resize(size_t(n));
  return v;
}

inline float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

} // namespace detail
} // namespace nn
} // namespace deltac

#endif

// Shared pieces of deltac::nn (nn_common.cpp): weight loading, the kernel
// call and softplus (the vectorised elementwise passes: nn_rows.h).
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

struct KernelCall {
  int32_t variant;
  int64_t B, T, H, HV, K, V;
  const float *q, *k, *v, *beta, *g, *h0;
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

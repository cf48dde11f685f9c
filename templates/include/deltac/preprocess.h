// Host-side pre-processing for the layer options the dialect can fuse
// (delta.beta_sigmoid, delta.gate): the one definition of these formulas,
// used by `deltac run` and by the CPU code deltac generates.
#ifndef DELTAC_PREPROCESS_H
#define DELTAC_PREPROCESS_H

#include <cmath>
#include <cstddef>
#include <cstdint>

namespace deltac {

// beta[i] = range / (1 + exp(-logits[i])), range 1 (beta in [0, 1]) or 2
// (beta in [0, 2], negative eigenvalues allowed).
inline void beta_sigmoid(const float *logits, float *beta, std::size_t n,
                         float range) {
  for (std::size_t i = 0; i < n; ++i)
    beta[i] = range / (1.0f + std::exp(-logits[i]));
}

// g[i] = -exp(A_log[h]) * softplus(a[i] + dt_bias[h * width + c]) over a
// tensor [..., HV, width] (width 1 for gated, K for kda), h and c the head
// and channel of element i. softplus(x) = x for x > 20, else log1p(exp(x)).
inline void gate_from_logits(const float *a, const float *A_log,
                             const float *dt_bias, float *g, std::size_t n,
                             int HV, int width) {
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t h = (i / std::size_t(width)) % std::size_t(HV);
    const std::size_t c = i % std::size_t(width);
    const float x = a[i] + dt_bias[h * std::size_t(width) + c];
    const float sp = x > 20.0f ? x : std::log1p(std::exp(x));
    g[i] = -std::exp(A_log[h]) * sp;
  }
}

} // namespace deltac

#endif // DELTAC_PREPROCESS_H

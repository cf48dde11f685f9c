// BitLinear kernels for any CPU (bitlinear.h): plain loops, the reference
// the SIMD kernels are tested against (their int32 sums are equal).
#include "bitlinear.h"

#include <algorithm>
#include <cmath>

namespace deltac {
namespace nn {
namespace bitlinear {

void gemm_block_generic(const GemmArgs &g, int64_t n0, int64_t n1) {
  for (int64_t i = 0; i < g.m; ++i) {
    const uint8_t *a = g.a + i * g.kp;
    for (int64_t n = n0; n < n1; ++n) {
      const int8_t *t = g.t + n * g.kp;
      int32_t acc = 0;
      for (int64_t k = 0; k < g.kp; ++k) acc += int32_t(a[k]) * int32_t(t[k]);
      g.y[i * g.ldy + n] = float(acc - 128 * g.wsum[n]) * g.gamma[n] * g.r[i];
    }
  }
}

void quantize_rows_generic(const float *x, int64_t m, int64_t k, int64_t kp, float eps,
                           uint8_t *a, float *r) {
  for (int64_t i = 0; i < m; ++i) {
    const float *xr = x + i * k;
    uint8_t *ar = a + i * kp;
    float mx = 0, s;
    bool finite = true;
    for (int64_t j = 0; j < k; ++j) {
      finite = finite && std::isfinite(xr[j]);
      mx = std::max(mx, std::fabs(xr[j]));
    }
    r[i] = row_scale(finite ? mx : INFINITY, eps, &s);
    for (int64_t j = 0; j < kp; ++j) {
      // round half to even (torch.round), then clip to [-128, 127].
      const float q = j < k && finite ? std::nearbyint(xr[j] * s) : 0.0f;
      ar[j] = uint8_t(int(std::min(127.0f, std::max(-128.0f, q))) + 128);
    }
  }
}

} // namespace bitlinear
} // namespace nn
} // namespace deltac

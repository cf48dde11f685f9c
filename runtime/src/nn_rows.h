// The layers' elementwise passes, vectorised, one sweep per row or head
// (nn_rows.inc, compiled per instruction set: nn_rows_generic.cpp and
// nn_rows_avx2.cpp; ops() picks one with the BitLinear kernel's choice,
// bitlinear::active(), so DELTAC_CPU_ISA=generic forces the generic one).
// exp is a SIMD Cody-Waite + degree-5 polynomial (Cephes' expf): about 1 ulp
// on [-87, 88], inputs clamped there (silu and sigmoid need nothing wider);
// softplus adds Cephes' logf polynomial on [1, 2].
#ifndef DELTAC_NN_ROWS_H
#define DELTAC_NN_ROWS_H

#include <cstdint>

namespace deltac {
namespace nn {
namespace rows {

struct Ops {
  const char *isa;
  // out[c] = silu(sum_i w[i * ldw + c] * src[i][c] + bias[c]), c < n (bias
  // may be null): one token of the causal depthwise conv1d, taps in order.
  void (*conv_silu)(const float *const *src, const float *w, int64_t ldw, int64_t taps,
                    const float *bias, int64_t n, float *out);
  // o = w * (o * rsqrt(mean(o^2) + eps)) * silu(z) over one head (n values).
  void (*gated_rmsnorm)(float *o, const float *z, const float *w, int64_t n, float eps);
  // o = w * (o * rsqrt(mean(o^2) + eps)) * sigmoid(z) (KDA's o_norm).
  void (*sigmoid_rmsnorm)(float *o, const float *z, const float *w, int64_t n, float eps);
  // o = ((o - mean) * rsqrt(var + eps) * w + b) * silu(g) over one head
  // (LayerNorm with the biased variance, then the silu gate).
  void (*layernorm_gate)(float *o, const float *g, const float *w, const float *b, int64_t n,
                         float eps);
  // x = sigmoid(x) * scale (the betas).
  void (*sigmoid)(float *x, int64_t n, float scale);
  // x = scale * softplus(x + bias) (softplus with PyTorch's threshold 20; KDA's
  // per-channel decays, scale -exp(A_log)).
  void (*scaled_softplus)(float *x, const float *bias, float scale, int64_t n);
};

extern const Ops generic_ops, avx2_ops; // avx2_ops: x86-64 only
const Ops &ops();

} // namespace rows
} // namespace nn
} // namespace deltac

#endif

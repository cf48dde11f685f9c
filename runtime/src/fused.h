// The layers' fused elementwise CUDA kernels (fused_kernels.cu), called by
// the C++ CUDA layers (nn_cuda_*.cpp) and by the C API (deltac/fused.h,
// fused.cpp). No CUDA types here: the runtime's host code includes it. Each
// launch goes to `stream` (a cudaStream_t) and returns its cudaError_t as an
// int (0: launched); a build without CUDA returns nonzero (fused_none.cpp).
// "bf16" flags pick bf16 over f32 for a buffer.
#ifndef DELTAC_FUSED_INTERNAL_H
#define DELTAC_FUSED_INTERNAL_H

#include <cstdint>

namespace deltac {
namespace fused {

constexpr int kMaxConvKernel = 8;

// The causal depthwise conv1d + silu over the C = 2 kd + vd channels q || k
// || v read from y (rows b * T + t, row stride ldy), written to q [B*T, kd],
// k [B*T, kd], v [B*T, vd]; and beta = sigmoid(b) * beta_scale, g =
// -exp(A_log) * softplus(a + dt_bias) for the HV heads ([B*T, HV], f32).
//
// Columns in y: channel c at column c (group == 0), or, grouped by key head
// (Qwen3-Next's fused projection, group > 0 columns per key head h: q_h (dk),
// k_h (dk), v_h (vg), ...): q channel c at h*group + c%dk, k at h*group + dk
// + c%dk, v at h*group + 2 dk + c%vg. Head j's b and a: b[r * ldba +
// (j / ba_heads) * ba_group + j % ba_heads] (a alike), in y's dtype.
// The conv inputs before this call: state_in [B, C, W] (null: zeros); the
// last W inputs are written to state_out (may equal state_in; null: not
// kept); both in y's dtype.
struct ConvGates {
  const void *y;
  bool y_bf16;
  int64_t ldy, group, dk, vg;
  const void *w, *bias; // [C, W], [C] or null; params' dtype
  bool p_bf16;          // w, bias, A_log, dt_bias are bf16
  const void *state_in;
  void *state_out;
  void *q, *k, *v;
  bool out_bf16;
  int64_t B, T, C, kd, vd;
  int32_t W;
  int64_t HV;
  const void *b, *a;
  int64_t ldba, ba_heads, ba_group;
  const void *A_log, *dt_bias;
  float beta_scale;
  float *beta, *g;
};
int conv_gates(const ConvGates &a, void *stream);

// out [rows, heads * D] = w * (o * rsqrt(mean o^2 + eps)) * silu(z) per
// head (sigmoid(z) with sigmoid_gate: KDA's o_norm); head h of row r reads
// z[r * ldz + (h / z_heads) * z_group + (h % z_heads) * D]. o, out: bf16 or
// f32 each (out may be o); z: f32, or bf16 when o and out are bf16; w:
// p_bf16. D <= 256.
int gated_rmsnorm(const void *o, bool o_bf16, void *out, bool out_bf16, const void *z,
                  bool z_bf16, int64_t ldz, int64_t z_heads, int64_t z_group, const void *w,
                  bool p_bf16, int64_t rows, int64_t heads, int64_t D, float eps, void *stream,
                  bool sigmoid_gate = false);

// KDA's gates, f32: g [rows, H * D] = -exp(A_log[c / D]) * softplus(g +
// dt_bias[c]) in place, beta [rows, H] = sigmoid(b[r * ldb + h]). A_log [H],
// dt_bias [H * D].
int kda_gates(float *g, const float *b, int64_t ldb, const float *A_log, const float *dt_bias,
              float *beta, int64_t rows, int64_t H, int64_t D, void *stream);

// out [rows, heads * D] = ((o - mean) * rstd * w + b) * silu(g) per head
// (LayerNorm with the biased variance; g of o's dtype; out may be o; w, b:
// p_bf16). D <= 256.
int layernorm_gate(const void *o, const void *g, bool in_bf16, void *out, bool out_bf16,
                   const void *w, const void *b, bool p_bf16, int64_t rows, int64_t heads,
                   int64_t D, float eps, void *stream);

// out[i] = sigmoid(x[i]) * scale (x bf16 or f32; out f32, may be x when f32).
int sigmoid(const void *x, bool x_bf16, float *out, int64_t n, float scale, void *stream);

// BitLinear (bitlinear_kernels.cu; the numbers of bitlinear.h): x [m, k]
// (bf16 or f32) quantised per token to q [m, kp] (int8, zeros past k; kp a
// multiple of 64 >= k) and r [m] (1 / s; NaN for a row with a NaN or
// infinity). Then y = float(sum_k q t) * gamma[col] * r[row] for the
// ternary int8 weights t [n, kp] with scales gamma [n]: column col goes to
// part col / part_cols, column col % part_cols of rows ldy apart, parts
// part_stride elements apart (one part: part_cols = n); y bf16 or f32.
int bitlinear_quantize(const void *x, bool x_bf16, int64_t m, int64_t k, int64_t kp, float eps,
                       int8_t *q, float *r, void *stream);
int bitlinear_gemm(const int8_t *q, const float *r, int64_t m, int64_t kp, const int8_t *t,
                   const float *gamma, int64_t n, void *y, bool y_bf16, int64_t ldy,
                   int64_t part_cols, int64_t part_stride, void *stream);

// The name and text of a launch's error ("no CUDA support" without CUDA).
const char *error_text(int err);

} // namespace fused
} // namespace deltac

#endif

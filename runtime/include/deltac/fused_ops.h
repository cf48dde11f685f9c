/* deltac runtime: the layers' fused elementwise CUDA kernels as C functions
 * on device pointers (what deltac::nn's CUDA layers run around the delta
 * rule; the Python package's deltac.ops_fused calls them). Each checks its
 * arguments (a failure names the argument), enqueues one kernel on `stream`
 * (a cudaStream_t; NULL: the legacy default stream) of the current device
 * and returns 0 without synchronising; nonzero on error with the message in
 * deltac_last_error(). Pointers are not dereferenced on the host: they must
 * be device memory of the current device, dense, C order. A build without
 * CUDA checks the arguments, then fails with "no CUDA support".
 * dtype / param_dtype: DELTAC_F32 or DELTAC_BF16 (deltac/params.h); the
 * arithmetic is f32. */
#ifndef DELTAC_FUSED_OPS_H
#define DELTAC_FUSED_OPS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* GatedDeltaNet's short convolution and gates in one launch. The causal
 * depthwise conv1d (kernel W <= 8) + silu over the C = 2 H K + HV V
 * channels q || k || v of y (B * T rows of ldy elements), written to q
 * [B, T, H, K], k [B, T, H, K], v [B, T, HV, V]; beta = beta_scale *
 * sigmoid(b) and g = -exp(A_log) * softplus(a + dt_bias), f32 [B, T, HV].
 * y_group = 0: channel c at column c; y_group > 0: columns grouped by key
 * head as Qwen3-Next's in_proj_qkvz (head h: q_h, k_h, v_h (HV / H heads),
 * ... in y_group >= 2 K + (HV / H) V columns). b and a: value head j at
 * column (j / ba_heads) * ba_group + j % ba_heads of rows of ldba elements.
 * state_in [B, C, W] (NULL: zeros): the W inputs before this call;
 * state_out (NULL: not written; may be state_in): the last W inputs after it.
 * conv_w [C, W], conv_b [C] (NULL: none), A_log, dt_bias [HV]: param_dtype;
 * y, b, a, the states and q, k, v: dtype. */
int deltac_conv_gates(const void *y, int64_t ldy, int64_t y_group, const void *conv_w,
                      const void *conv_b, const void *state_in, void *state_out, const void *b,
                      const void *a, int64_t ldba, int64_t ba_heads, int64_t ba_group,
                      const void *A_log, const void *dt_bias, float beta_scale, void *q, void *k,
                      void *v, float *beta, float *g, int64_t B, int64_t T, int64_t H, int64_t HV,
                      int64_t K, int64_t V, int32_t W, int32_t dtype, int32_t param_dtype,
                      void *stream);

/* out [rows, heads, D] = w * (o * rsqrt(mean(o^2) + eps)) * silu(z) per
 * head (Qwen3-Next's gated RMSNorm), D <= 256; out may be o. Head h of row r
 * reads z at r * ldz + (h / z_heads) * z_group + (h % z_heads) * D. o, z,
 * out: dtype; w [D]: param_dtype. */
int deltac_gated_rmsnorm(const void *o, const void *z, void *out, int64_t rows, int64_t heads,
                         int64_t D, int64_t ldz, int64_t z_heads, int64_t z_group, const void *w,
                         float eps, int32_t dtype, int32_t param_dtype, void *stream);

/* out [rows, heads, D] = LayerNorm(o) * silu(g) per head (biased variance,
 * weight w and bias b [D]: param_dtype), D <= 256; o, g, out [rows, heads,
 * D]: dtype; out may be o. */
int deltac_layernorm_gate(const void *o, const void *g, void *out, int64_t rows, int64_t heads,
                          int64_t D, const void *w, const void *b, float eps, int32_t dtype,
                          int32_t param_dtype, void *stream);

/* out[i] = scale * sigmoid(x[i]) for i < n; x: dtype, out: f32 (may be x
 * when dtype is f32). */
int deltac_sigmoid(const void *x, float *out, int64_t n, float scale, int32_t dtype,
                   void *stream);

#ifdef __cplusplus
}
#endif

#endif /* DELTAC_FUSED_OPS_H */

/* deltac backward: the gradients of one delta-rule forward call
 * (deltac_fwd_params, params.h) with respect to its inputs. Plain C.
 *
 * Shapes and dims are the forward's (row-major):
 *   q, k, dq, dk   [B, T, H, K]   in_dtype
 *   v, dv          [B, T, HV, V]  in_dtype
 *   dout           [B, T, HV, V]  out_dtype   (the gradient of o)
 *   beta, dbeta    [B, T, HV]     f32
 *   g, dg          gated [B, T, HV], kda [B, T, HV, K]; f32; NULL for delta
 *   h0, dh0        [N, HV, K, V] (or [N, HV, V, K], DELTAC_STATE_VK) f32;
 *                  h0 NULL = zero initial state; dh0 NULL = not wanted
 *   dht            the gradient of the final state ht, same shape; NULL = 0
 *   cu_seqlens     [N + 1] int64 or NULL, as the forward.
 * Gradients of q and k are summed over the HV / H value heads that read
 * them (GVA). With qk_l2norm, dq and dk are the gradients of the raw q, k
 * (the L2 norm's backward included). beta is taken as given (any range:
 * (0, 1), (0, 2), ...); a sigmoid or a gate formula before the call is the
 * caller's (autograd's) business.
 *
 * DELTAC_BWD_F64 as in_dtype: every floating tensor of the call (inputs and
 * outputs, beta, g, states included) is float64 and the kernel computes in
 * double; for gradient checks. Otherwise the kernel computes in f32.
 *
 * Non-finite values: a gate g = -inf (a reset, decay exactly 0) gives finite
 * gradients (dg = 0 for that token; nothing flows to the earlier state
 * through that key row). The decay is e^g per token, never a cumulative sum,
 * so strong decay over long sequences neither overflows nor underflows into
 * NaN. */
#ifndef DELTAC_BACKWARD_H
#define DELTAC_BACKWARD_H

#include "deltac/params.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* in_dtype value of a float64 call (every floating tensor float64). */
#define DELTAC_BWD_F64 3

typedef struct deltac_bwd_params {
  int32_t variant; /* deltac_variant */
  int32_t B, T, H, HV, K, V;
  int32_t N;            /* number of sequences */
  int32_t in_dtype;     /* q, k, v, dq, dk, dv: F32, BF16 or DELTAC_BWD_F64 */
  int32_t out_dtype;    /* dout: F32 or BF16 (F64 with DELTAC_BWD_F64) */
  int32_t state_layout; /* deltac_state_layout of h0, dht, dh0 */
  const void *q, *k, *v;
  const void *g, *beta;
  const void *h0;
  const void *dout;
  const void *dht;
  void *dq, *dk, *dv;
  void *dg;    /* required for gated and kda, ignored for delta */
  void *dbeta;
  void *dh0;   /* may be NULL */
  const int64_t *cu_seqlens;
  float scale;       /* 0 = default 1/sqrt(K) */
  int32_t qk_l2norm; /* 0 or 1 */
  int32_t threads;   /* CPU worker threads, 0 = all cores */
  int32_t chunk;     /* CPU: tokens per chunk of the chunked form (delta,
                        gated; 1..256, else its default 64) and between
                        the sweep's saved states; 0 = the defaults (64, 16) */
  /* The forward's saved states (deltac_options.saved_states; NULL: none):
   * the chunked CUDA backward with bf16 states reads them where the
   * forward's kernel wrote them (the buffer's flag), else fills the buffer
   * itself and then needs that much less workspace; other paths ignore it.
   * Device memory, 256-byte aligned, saved_states_bytes at least
   * deltac_saved_states_size() for the same call. */
  void *saved_states;
  size_t saved_states_bytes;
} deltac_bwd_params;

#ifdef __cplusplus
}
#endif

#endif /* DELTAC_BACKWARD_H */

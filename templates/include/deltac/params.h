/* deltac kernel parameters: the one contract between the runtime, the
 * generated code and the kernel templates (CPU and CUDA). Plain C so that
 * it can be used from C, C++ and CUDA alike. */
#ifndef DELTAC_PARAMS_H
#define DELTAC_PARAMS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum deltac_variant {
  DELTAC_VARIANT_DELTA = 0, /* a_t = 1 */
  DELTAC_VARIANT_GATED = 1, /* a_t = exp(g_t), one scalar per value head */
  DELTAC_VARIANT_KDA = 2    /* a_t = diag(exp(g_t)), one value per key channel */
} deltac_variant;

typedef enum deltac_dtype {
  DELTAC_F32 = 0,
  DELTAC_BF16 = 1,
  DELTAC_F16 = 2,
  /* States only (state_dtype of the recurrent families): OCP FP8 E4M3
   * ("e4m3fn": max 448, no infinities, 0x7f / 0xff NaN), each element the
   * state value divided by the value head's state_scale (below). */
  DELTAC_FP8_E4M3 = 3
} deltac_dtype;

typedef enum deltac_state_layout {
  DELTAC_STATE_KV = 0, /* [K, V] per head (default) */
  DELTAC_STATE_VK = 1  /* [V, K] per head */
} deltac_state_layout;

/* One forward call of a delta-rule layer.
 *
 * Shapes (row-major, C order):
 *   q, k  [B, T, H, K]      in_dtype
 *   v     [B, T, HV, V]     in_dtype
 *   beta  [B, T, HV]        f32
 *   g     gated: [B, T, HV]; kda: [B, T, HV, K]; f32, log of the decay (<= 0);
 *         NULL for delta
 *   h0    [N, HV, K, V] (or [N, HV, V, K] for DELTAC_STATE_VK), state_dtype,
 *         may be NULL (zero initial state)
 *   o     [B, T, HV, V]     out_dtype
 *   ht    [N, HV, K, V] (or V-first), state_dtype, may be NULL; a pool with
 *         read_slots (see below)
 *   cu_seqlens [N + 1] int64 or NULL. With cu_seqlens B must be 1 and the
 *         sequences are tokens [cu_seqlens[n], cu_seqlens[n+1]); otherwise
 *         N == B and each batch row is one sequence of T tokens.
 * Value head j reads q/k head j / (HV / H).
 *
 * Per sequence and value head, for t in order:
 *   h <- a_t (.) h;  u = beta_t (v_t - h^T k_t);  h <- h + k_t u^T;
 *   o_t = scale * h^T q_t
 * with q, k first L2-normalised when qk_l2norm is set
 * (x / sqrt(sum x^2 + 1e-6)).
 *
 * Non-finite values, the rule for every kernel, CPU and CUDA (defined by
 * deltac/reference.h; tests/cpu/nonfinite_test.cpp holds the CPU kernels to
 * it):
 *   - g = -inf is a legal gate, a reset: a_t = exp(-inf) = 0 multiplies the
 *     state (kda: the key rows whose gate is -inf) by exactly 0, so from that
 *     token on nothing of the earlier state remains, to the last bit. A
 *     finite gate so negative that e^g underflows to 0 acts the same.
 *   - NaN or +-inf in any input (q, k, v, beta, g, h0) never comes back as a
 *     finite value: every element of o and ht that the reference makes NaN
 *     or +-inf (everything the value reaches) is NaN or +-inf. A NaN in the
 *     state is not reset away by a later -inf gate (0 * NaN = NaN). The
 *     other outputs stay finite and accurate, except that the CPU chunked
 *     kernels may also make earlier tokens of the same chunk non-finite.
 *   The kernels themselves never reject or repair values. */
typedef struct deltac_fwd_params {
  int32_t variant; /* deltac_variant */
  int32_t B, T, H, HV, K, V;
  int32_t N; /* number of sequences */
  int32_t in_dtype;     /* deltac_dtype of q, k, v */
  int32_t out_dtype;    /* deltac_dtype of o */
  int32_t state_dtype;  /* deltac_dtype of h0, ht: F32, or BF16 or
                           FP8_E4M3 (recurrent families) */
  int32_t state_layout; /* deltac_state_layout */
  const void *q, *k, *v;
  const float *g, *beta;
  const void *h0;
  void *o;
  void *ht;
  const int64_t *cu_seqlens;
  float scale;       /* 0 = default 1/sqrt(K) */
  int32_t qk_l2norm; /* 0 or 1 */
  int32_t threads;   /* CPU worker threads, 0 = all cores */

  /* ---- Decode for serving engines (all zero / NULL: none of it). ----
   *
   * State pool. With read_slots set, h0 and ht are pools of num_slots states,
   * [num_slots, HV, K, V] (or V-first) each, and sequence n starts from slot
   * read_slots[n] of h0 and leaves its state in slot write_slots[n] of ht
   * (write_slots NULL: the same slot as it read, the usual in-place pool with
   * h0 == ht). Slot -1 reads nothing (the zero state) or writes nothing; a
   * padding sequence has -1 for both (its o is still computed, from the zero
   * state). Reading one slot and writing another is copy-on-write / a prefix
   * copy inside the call. Pool entries that no sequence writes are never
   * touched. Rules (check_params checks them when the arrays are host memory,
   * the runtime's checking mode on the device): every slot in [-1,
   * num_slots); no slot >= 0 is written by two sequences; when h0 == ht, a
   * slot one sequence writes is read by no other sequence (each may read and
   * write its own). The families that take pools, bf16 states, state_steps
   * and accepted are the recurrent ones (catalogue: check_family).
   *
   * state_steps: optional [total tokens, HV, K, V] (token rows as q's, i.e.
   * B*T), state_dtype and state_layout: the state after each token (MTP /
   * speculative verify). accepted: optional [N] int32 in [0, len(n)]: the
   * state after the first accepted[n] tokens is the one written to ht (0:
   * the initial state); without it, all tokens. o holds every token's output
   * either way (the outputs of the whole chain, as if all were accepted).
   * With state_steps or accepted every sequence has at most
   * DELTAC_MAX_DECODE_TOKENS tokens.
   *
   * state_dtype BF16: h0, ht and state_steps hold bf16; the kernels read
   * bf16, compute in f32 and round once when they write.
   *
   * state_dtype FP8_E4M3: h0, ht and state_steps hold e4m3 bytes e, the
   * state value of value head j being e * state_scale[j] (state_scale NULL:
   * 1 for every head). The kernels read e * scale, compute in f32 and write
   * e4m3(x * (1 / scale)) rounded to nearest even, once; finite values past
   * the format's range saturate to +-448, inf and NaN become NaN (the
   * non-finite rule above holds). The scale is the caller's (static, per
   * head, as engines calibrate fp8 caches); the state must stay within
   * +-448 * scale to be kept, and precision is 3 bits of mantissa. The
   * checking mode rejects scales that are not finite and > 0 where
   * state_scale is host memory. Reachable through the C API (the dialect
   * and the Python ops do not offer fp8 states yet). */
  int32_t num_slots;          /* states per pool; 0 without read_slots */
  const int32_t *read_slots;  /* [N] or NULL (no pool) */
  const int32_t *write_slots; /* [N] or NULL (= read_slots) */
  void *state_steps;          /* [B*T, HV, K, V] or NULL */
  const int32_t *accepted;    /* [N] or NULL (all tokens) */
  const float *state_scale;   /* [HV] f32 > 0, FP8_E4M3 states only; NULL: 1 */
} deltac_fwd_params;

/* Longest sequence with state_steps or accepted (multi-token decode). */
#define DELTAC_MAX_DECODE_TOKENS 8

#ifdef __cplusplus
}
#endif

#endif /* DELTAC_PARAMS_H */

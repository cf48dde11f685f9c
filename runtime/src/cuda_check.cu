// The checking mode on the device: one small kernel reads every input once
// and ORs deltac_check_bit values into a caller-owned device flag, which the
// forward kernel enqueued after it reads first (deltac/cuda/launch.cuh). No
// host synchronisation and no host copy: the call stays asynchronous and
// graph-capturable.
#include "cuda_dispatch.h"
#include "deltac/runtime.h"
#include "dispatch.h"

#include <cuda_bf16.h>

#include <cstdint>

namespace deltac {
namespace rt {
namespace {

struct CheckArgs {
  const void *q, *k, *v, *h0;
  const float *g, *beta;
  const int64_t *cu;
  const int32_t *read, *write, *acc; // decode fields (params.h), may be null
  int32_t num_slots, state_dtype;
  bool in_place, mtp; // h0 == ht; state_steps or accepted (length limit)
  int64_t nqk, nv, ns, ng, nb;
  int64_t T;
  int32_t N;
  int32_t in_dtype; // deltac_dtype of q, k, v
  float beta_max;
  int32_t *flag;
};

// Whether element i of x (dtype: deltac_dtype) is finite: an all-ones
// exponent is inf or NaN (bf16: 8 bits, f16: 5 bits).
__device__ __forceinline__ bool finiteIn(const void *x, int64_t i, int32_t dtype) {
  if (dtype == DELTAC_FP8_E4M3) // e4m3fn: no inf, NaN is S.1111.111
    return (static_cast<const uint8_t *>(x)[i] & 0x7fu) != 0x7fu;
  if (dtype == DELTAC_BF16)
    return (static_cast<const uint16_t *>(x)[i] & 0x7f80u) != 0x7f80u;
  if (dtype == DELTAC_F16)
    return (static_cast<const uint16_t *>(x)[i] & 0x7c00u) != 0x7c00u;
  return isfinite(static_cast<const float *>(x)[i]);
}

// Tokens of sequence n (cu_seqlens or T).
__device__ __forceinline__ int64_t seqLen(const CheckArgs &a, int64_t n) {
  return a.cu ? a.cu[n + 1] - a.cu[n] : a.T;
}

// The decode rules of check_decode (deltac/check.h) on the device: slots in
// [-1, num_slots), no slot written twice, with h0 == ht no slot read by a
// sequence other than its writer, accepted in [0, len], and at most
// DELTAC_MAX_DECODE_TOKENS tokens with state_steps or accepted. The pair
// rules look at all N^2 pairs (checking mode only).
__device__ int32_t checkSlots(const CheckArgs &a, int64_t first, int64_t stride) {
  const int32_t *ws = a.write ? a.write : a.read;
  for (int64_t n = first; n < a.N; n += stride) {
    const int64_t len = a.cu && (a.cu[n + 1] < a.cu[n] || a.cu[a.N] != a.T) ? 0 : seqLen(a, n);
    if (a.mtp && len > DELTAC_MAX_DECODE_TOKENS)
      return DELTAC_CHECK_SLOTS;
    if (a.acc && (a.acc[n] < 0 || a.acc[n] > len))
      return DELTAC_CHECK_SLOTS;
    if (!a.read)
      continue;
    const int32_t r = a.read[n], w = ws[n];
    if (r < -1 || r >= a.num_slots || w < -1 || w >= a.num_slots)
      return DELTAC_CHECK_SLOTS;
    for (int64_t m = 0; m < a.N; ++m) {
      if (m == n)
        continue;
      if (w >= 0 && ws[m] == w)
        return DELTAC_CHECK_SLOTS;
      if (a.in_place && r >= 0 && ws[m] == r)
        return DELTAC_CHECK_SLOTS;
    }
  }
  return 0;
}

// Grid-stride over every tensor; an atomicOr from each thread that found
// something.
__global__ void checkKernel(CheckArgs a) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int32_t dt = a.in_dtype;
  int32_t bits = 0;
  for (int64_t i = first; i < a.nqk; i += stride) {
    if (!finiteIn(a.q, i, dt))
      bits |= DELTAC_CHECK_Q;
    if (!finiteIn(a.k, i, dt))
      bits |= DELTAC_CHECK_K;
  }
  for (int64_t i = first; i < a.nv; i += stride)
    if (!finiteIn(a.v, i, dt))
      bits |= DELTAC_CHECK_V;
  if (a.h0)
    for (int64_t i = first; i < a.ns; i += stride)
      if (!finiteIn(a.h0, i, a.state_dtype))
        bits |= DELTAC_CHECK_H0;
  for (int64_t i = first; i < a.ng; i += stride)
    if (!(a.g[i] <= 0.0f)) // NaN or > 0; -inf is a reset
      bits |= DELTAC_CHECK_G;
  for (int64_t i = first; i < a.nb; i += stride)
    if (!(a.beta[i] >= 0.0f && a.beta[i] <= a.beta_max))
      bits |= DELTAC_CHECK_BETA;
  if (a.cu)
    for (int64_t n = first; n <= a.N; n += stride) {
      const int64_t x = a.cu[n];
      if ((n == 0 && x != 0) || (n == a.N && x != a.T) ||
          (n > 0 && x < a.cu[n - 1]))
        bits |= DELTAC_CHECK_CU_SEQLENS;
    }
  bits |= checkSlots(a, first, stride);
  if (bits) // rare: only threads that found something touch the flag
    atomicOr(a.flag, bits);
}

} // namespace

cudaError_t cuda_check_values(const deltac_fwd_params &p, float beta_max,
                              int32_t *flag, cudaStream_t s) {
  CheckArgs a{};
  const int64_t tok = int64_t(p.B) * p.T;
  a.q = p.q;
  a.k = p.k;
  a.v = p.v;
  a.h0 = p.h0;
  a.g = p.g;
  a.beta = p.beta;
  a.cu = p.cu_seqlens;
  a.read = p.read_slots;
  a.write = p.write_slots;
  a.acc = p.accepted;
  a.num_slots = p.num_slots;
  a.state_dtype = p.state_dtype;
  a.in_place = p.h0 && p.h0 == p.ht;
  a.mtp = p.state_steps || p.accepted;
  a.nqk = tok * p.H * p.K;
  a.nv = tok * p.HV * p.V;
  a.ns = int64_t(p.read_slots ? p.num_slots : p.N) * p.HV * p.K * p.V;
  a.nb = tok * p.HV;
  a.ng = !p.g                                ? 0
         : p.variant == DELTAC_VARIANT_KDA   ? a.nb * p.K
         : p.variant == DELTAC_VARIANT_GATED ? a.nb
                                             : 0;
  a.T = p.T;
  a.N = p.N;
  a.in_dtype = p.in_dtype;
  a.beta_max = beta_max;
  a.flag = flag;
  int64_t most = a.nqk > a.nv ? a.nqk : a.nv;
  if (a.ns > most)
    most = a.ns;
  if (a.ng > most)
    most = a.ng;
  if (a.N > most)
    most = a.N;
  constexpr int kThreads = 256;
  // Enough blocks to fill the GPU; the grid-stride loops do the rest.
  int64_t blocks = (most + kThreads - 1) / kThreads;
  const int sms = cuda_sm_count();
  const int64_t cap = sms > 0 ? int64_t(sms) * 8 : 1024;
  if (blocks > cap)
    blocks = cap;
  if (blocks < 1)
    blocks = 1;
  checkKernel<<<unsigned(blocks), kThreads, 0, s>>>(a);
  return cudaGetLastError();
}

} // namespace rt
} // namespace deltac

// Shared pieces of the CPU kernels: dtype conversion, row loads/stores,
// state load/store in either layout, per-thread scratch, task loop.
#ifndef DELTAC_CPU_COMMON_H
#define DELTAC_CPU_COMMON_H

#include "deltac/convert.h"
#include "deltac/cpu/simd.h"
#include "deltac/fp8.h"
#include "deltac/params.h"

#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace deltac::cpu { inline namespace DELTAC_CPU_NS { namespace detail {

using deltac::bf16_to_f32;
using deltac::f32_to_bf16;

// dst[0..n) = element `off`.. of an F32 or BF16 tensor, as f32.
inline void load_row(float* dst, const void* base, int32_t dtype, int64_t off,
                     int n) {
  if (dtype == DELTAC_BF16) {
    const uint16_t* s = static_cast<const uint16_t*>(base) + off;
    for (int i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
  } else {
    const float* s = static_cast<const float*>(base) + off;
    int i = 0;
    for (; i + simd::W <= n; i += simd::W) simd::store(dst + i, simd::load(s + i));
    for (; i < n; ++i) dst[i] = s[i];
  }
}

// Writes n floats (times `scale`) to an F32 or BF16 output at element `off`.
inline void store_row(void* base, int32_t dtype, int64_t off, const float* src,
                      int n, float scale) {
  if (dtype == DELTAC_BF16) {
    uint16_t* d = static_cast<uint16_t*>(base) + off;
    for (int i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i] * scale);
  } else {
    float* d = static_cast<float*>(base) + off;
    for (int i = 0; i < n; ++i) d[i] = src[i] * scale;
  }
}

// x *= 1 / sqrt(sum x^2 + 1e-6); n a multiple of 16. Eight-lane partial
// sums in f32 (W lanes; relative error ~n * 2^-24 at worst), combined in double.
inline void l2norm(float* x, int n) {
  using namespace simd;
  vf a = zero(), b = zero();
  int i = 0;
  for (; i + 2 * W <= n; i += 2 * W) {
    const vf x0 = load(x + i), x1 = load(x + i + W);
    a = fma(x0, x0, a);
    b = fma(x1, x1, b);
  }
  for (; i < n; i += W) {  // W = 16: n may be an odd multiple of W
    const vf x0 = load(x + i);
    a = fma(x0, x0, a);
  }
  a += b;
  double s = 0.0;
  for (int i = 0; i < W; ++i) s += a[i];
  const vf r = set1(float(1.0 / std::sqrt(s + 1e-6)));
  for (int i = 0; i < n; i += W) store(x + i, load(x + i) * r);
}

// q, k rows of one token and q/k head (element offset qo) as f32, L2-normalised
// when p asks for it.
inline void load_qk(float* q, float* k, const deltac_fwd_params& p,
                    int64_t qo, int K) {
  load_row(q, p.q, p.in_dtype, qo, K);
  load_row(k, p.k, p.in_dtype, qo, K);
  if (p.qk_l2norm) {
    l2norm(q, K);
    l2norm(k, K);
  }
}

// Brings `bytes` bytes at p into the cache with one real load per 64-byte
// line. Measured on the target machine (a KVM guest), software prefetch
// instructions were nearly ignored while plain loads spread between compute
// phases halved the cost of the later row loads.
inline void prefetch(const void* p, size_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (size_t i = 0; i < bytes; i += 64) {
    float x;
    std::memcpy(&x, c + i, sizeof x);
#if defined(__x86_64__) || defined(__i386__)
    asm volatile("" : : "x"(x));  // keeps the load without using the value
#elif defined(__aarch64__)
    asm volatile("" : : "w"(x));
#else
    static volatile float sink;
    sink = x;
#endif
  }
}

// Prefetches the q, k, v, beta and g rows of token `tok`, head j (query/key
// head hk) so that the next block's loads do not wait on memory: rows of one
// head are H * K elements apart, too far for the hardware prefetcher.
inline void prefetch_token(const deltac_fwd_params& p, int64_t tok, int j,
                           int hk, int K, int V) {
  const size_t e = p.in_dtype == DELTAC_BF16 ? 2 : 4;
  const int64_t th = tok * p.HV + j;
  prefetch(static_cast<const char*>(p.q) + (tok * p.H + hk) * K * e, K * e);
  prefetch(static_cast<const char*>(p.k) + (tok * p.H + hk) * K * e, K * e);
  prefetch(static_cast<const char*>(p.v) + th * V * e, V * e);
  prefetch(p.beta + th, 1);
  if (p.variant == DELTAC_VARIANT_KDA)
    prefetch(p.g + th * K, sizeof(float) * K);
  else if (p.variant == DELTAC_VARIANT_GATED)
    prefetch(p.g + th, 1);
}

inline float kernel_scale(const deltac_fwd_params& p, int K) {
  return p.scale != 0.0f ? p.scale : float(1.0 / std::sqrt(double(K)));
}

// Copies the [K, V] state of one head into S (row-major [K][ld]) from a
// state tensor in either layout, or zeroes S when src is null.
inline void load_state(float* S, int ld, const float* src, int layout, int K,
                       int V) {
  for (int k = 0; k < K; ++k) {
    float* row = S + size_t(k) * ld;
    if (!src)
      std::memset(row, 0, sizeof(float) * V);
    else if (layout == DELTAC_STATE_VK)
      for (int v = 0; v < V; ++v) row[v] = src[size_t(v) * K + k];
    else
      std::memcpy(row, src + size_t(k) * V, sizeof(float) * V);
  }
}

inline void store_state(float* dst, int layout, const float* S, int ld, int K,
                        int V) {
  if (layout == DELTAC_STATE_VK) {
    for (int v = 0; v < V; ++v)
      for (int k = 0; k < K; ++k) dst[size_t(v) * K + k] = S[size_t(k) * ld + v];
  } else {
    for (int k = 0; k < K; ++k)
      std::memcpy(dst + size_t(k) * V, S + size_t(k) * ld, sizeof(float) * V);
  }
}

// Per-thread, 64-byte aligned scratch that only grows.
inline float* scratch(size_t floats) {
  struct Buf {
    float* p = nullptr;
    size_t n = 0;
    ~Buf() { std::free(p); }
  };
  thread_local Buf b;
  if (b.n < floats) {
    std::free(b.p);
    size_t bytes = (floats * sizeof(float) + 63) / 64 * 64;
    b.p = static_cast<float*>(std::aligned_alloc(64, bytes));
    b.n = floats;
  }
  return b.p;
}

// Rounds n floats up to a multiple of 16 (64 bytes), for carving scratch.
inline size_t pad16(size_t n) { return (n + 15) / 16 * 16; }

// Token rows [t0, t1) of sequence n in the flattened [B*T] token axis.
inline void seq_range(const deltac_fwd_params& p, int n, int64_t* t0,
                      int64_t* t1) {
  if (p.cu_seqlens) {
    *t0 = p.cu_seqlens[n];
    *t1 = p.cu_seqlens[n + 1];
  } else {
    *t0 = int64_t(n) * p.T;
    *t1 = int64_t(n + 1) * p.T;
  }
}

inline int num_seqs(const deltac_fwd_params& p) {
  return p.cu_seqlens ? p.N : p.B;
}

// p.threads, or with p.threads == 0 all cores, except one for tiny calls
// (fewer than 2^17 state-element updates, a few tens of microseconds), where
// waking a thread team costs more than it saves.
inline int thread_count(const deltac_fwd_params& p) {
  if (p.threads > 0)
    return p.threads;
  const int64_t rows =
      p.cu_seqlens ? p.cu_seqlens[p.N] - p.cu_seqlens[0] : int64_t(p.B) * p.T;
  if (rows * p.HV * int64_t(p.K) * p.V < (int64_t(1) << 17))
    return 1;
  return omp_get_max_threads();
}

// Value heads per work item of for_each_head_group: the largest g <= 4 (so
// that a group's states stay in L2) that divides HV and leaves the threads
// balanced work (a multiple of the thread count, or many items); else 1.
inline int heads_per_group(const deltac_fwd_params& p) {
  const int64_t N = num_seqs(p) > 0 ? num_seqs(p) : 1;
  const int nt = thread_count(p);
  for (int g = p.HV < 4 ? p.HV : 4; g > 1; --g) {
    if (p.HV % g)
      continue;
    const int64_t items = N * (p.HV / g);
    if (items % nt == 0 || items >= 4 * nt)
      return g;
  }
  return 1;
}

// Runs fn(n, j0, j1) for every sequence n and group [j0, j1) of consecutive
// value heads (at most heads_per_group(p)) on p.threads OpenMP threads
// (0 = all). Kernels step all heads of a group through the tokens together:
// the rows of consecutive heads are adjacent in memory, which keeps the
// input loads cheap (one head's rows alone are H * K elements apart).
template <class Fn>
void for_each_head_group(const deltac_fwd_params& p, Fn&& fn) {
  const int HV = p.HV, g = heads_per_group(p);
  const int per_seq = (HV + g - 1) / g;
  const int64_t tasks = int64_t(num_seqs(p)) * per_seq;
  int nt = thread_count(p);
  if (nt > tasks)
    nt = int(tasks > 0 ? tasks : 1);
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
  for (int64_t t = 0; t < tasks; ++t) {
    const int n = int(t / per_seq), j0 = int(t % per_seq) * g;
    fn(n, j0, j0 + g < HV ? j0 + g : HV);
  }
}

// Runs fn(n, j) for every sequence n and value head j on p.threads OpenMP
// threads (0 = all).
template <class Fn>
void for_each_head(const deltac_fwd_params& p, Fn&& fn) {
  const int HV = p.HV;
  const int64_t tasks = int64_t(num_seqs(p)) * HV;
  int nt = thread_count(p);
  if (nt > tasks)
    nt = int(tasks > 0 ? tasks : 1);
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
  for (int64_t t = 0; t < tasks; ++t)
    fn(int(t / HV), int(t % HV));
}

}}}  // namespace deltac::cpu::DELTAC_CPU_NS::detail

#endif  // DELTAC_CPU_COMMON_H

// BitLinear kernels for AVX2 (bitlinear.h), compiled under
// `#pragma GCC target` (the library itself has no -march; bitlinear.cpp
// calls these only when cpuid reports AVX2).
//
// Inner step, 32 bytes of K for one (row, column) pair: vpmaddubsw(a_u8,
// t_s8) gives 16 int16 sums of two products, vpaddw adds them to an int16
// accumulator. No saturation and no overflow: a pair is at most 2 * 255 *
// 1 = 510 in magnitude (the weights are ternary), and 64 steps add at most
// 64 * 510 = 32640 <= 32767; so every 64 steps (2048 bytes of K) vpmaddwd
// with ones widens the accumulator to int32 and it restarts. Two vector
// instructions per 32 multiply-adds against one FMA per 8 for sgemm.
#include "bitlinear.h"

#include <algorithm>
#include <cmath>

#if defined(__x86_64__)
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,fma,bmi,bmi2,popcnt")

namespace deltac {
namespace nn {
namespace bitlinear {
namespace {

#define DELTAC_LD(p) _mm256_load_si256(reinterpret_cast<const __m256i *>((p) + k))
#define DELTAC_MAC(s, x, w) s = _mm256_add_epi16(s, _mm256_maddubs_epi16(x, w))
// Keeps x in a register: else GCC reloads it for each product (vpmaddubsw
// overwrites it), 10 loads a step instead of 6 in the 4 x 2 tile.
#define DELTAC_PIN(x) asm("" : "+x"(x))

// The int16 sums of bytes [k0, k1) (at most 64 steps), one function per tile
// shape with named accumulators: written as loops over arrays, or inlined
// into the caller, GCC moves and spills them inside the loop (objdump).
__attribute__((noinline)) void sums_4x2(const uint8_t *a0, int64_t lda, const int8_t *t0,
                                        int64_t ldt, int64_t k0, int64_t k1, __m256i *out) {
  const uint8_t *a1 = a0 + lda, *a2 = a1 + lda, *a3 = a2 + lda;
  const int8_t *t1 = t0 + ldt;
  __m256i s00 = _mm256_setzero_si256(), s01 = s00, s10 = s00, s11 = s00, s20 = s00,
          s21 = s00, s30 = s00, s31 = s00;
  for (int64_t k = k0; k < k1; k += 32) {
    const __m256i w0 = DELTAC_LD(t0), w1 = DELTAC_LD(t1);
    __m256i x = DELTAC_LD(a0);
    DELTAC_PIN(x);
    DELTAC_MAC(s00, x, w0);
    DELTAC_MAC(s01, x, w1);
    x = DELTAC_LD(a1);
    DELTAC_PIN(x);
    DELTAC_MAC(s10, x, w0);
    DELTAC_MAC(s11, x, w1);
    x = DELTAC_LD(a2);
    DELTAC_PIN(x);
    DELTAC_MAC(s20, x, w0);
    DELTAC_MAC(s21, x, w1);
    x = DELTAC_LD(a3);
    DELTAC_PIN(x);
    DELTAC_MAC(s30, x, w0);
    DELTAC_MAC(s31, x, w1);
  }
  out[0] = s00, out[1] = s01, out[2] = s10, out[3] = s11;
  out[4] = s20, out[5] = s21, out[6] = s30, out[7] = s31;
}

__attribute__((noinline)) void sums_1x4(const uint8_t *a0, int64_t, const int8_t *t0,
                                        int64_t ldt, int64_t k0, int64_t k1, __m256i *out) {
  const int8_t *t1 = t0 + ldt, *t2 = t1 + ldt, *t3 = t2 + ldt;
  __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
  for (int64_t k = k0; k < k1; k += 32) {
    __m256i x = DELTAC_LD(a0);
    DELTAC_PIN(x);
    DELTAC_MAC(s0, x, DELTAC_LD(t0));
    DELTAC_MAC(s1, x, DELTAC_LD(t1));
    DELTAC_MAC(s2, x, DELTAC_LD(t2));
    DELTAC_MAC(s3, x, DELTAC_LD(t3));
  }
  out[0] = s0, out[1] = s1, out[2] = s2, out[3] = s3;
}

__attribute__((noinline)) void sums_1x1(const uint8_t *a0, int64_t, const int8_t *t0, int64_t,
                                        int64_t k0, int64_t k1, __m256i *out) {
  __m256i s0 = _mm256_setzero_si256(), s1 = s0;
  int64_t k = k0;
  for (; k + 64 <= k1; k += 64) {
    DELTAC_MAC(s0, DELTAC_LD(a0), DELTAC_LD(t0));
    DELTAC_MAC(s1, DELTAC_LD(a0 + 32), DELTAC_LD(t0 + 32));
  }
  if (k < k1) DELTAC_MAC(s0, DELTAC_LD(a0), DELTAC_LD(t0));
  out[0] = _mm256_add_epi16(s0, s1); // 2 x 32 steps at most: no overflow
}
#undef DELTAC_PIN
#undef DELTAC_MAC
#undef DELTAC_LD

using Sums = void (*)(const uint8_t *, int64_t, const int8_t *, int64_t, int64_t, int64_t, __m256i *);

// [sum of m[0]'s lanes, ..., sum of m[7]'s] (int32).
inline __m256i reduce8(const __m256i *m) {
  const __m256i t0 = _mm256_hadd_epi32(m[0], m[1]), t1 = _mm256_hadd_epi32(m[2], m[3]);
  const __m256i t2 = _mm256_hadd_epi32(m[4], m[5]), t3 = _mm256_hadd_epi32(m[6], m[7]);
  const __m256i u0 = _mm256_hadd_epi32(t0, t1), u1 = _mm256_hadd_epi32(t2, t3);
  return _mm256_add_epi32(_mm256_permute2x128_si256(u0, u1, 0x20),
                          _mm256_permute2x128_si256(u0, u1, 0x31));
}

// The int32 sums of rows [i0, i0 + MR) x columns [n0, n0 + NR) over all of
// K into acc[i * kBlock + j]: the int16 sums widened every 64 steps (2048
// bytes of K) and added up.
template <int MR, int NR>
void tile(const GemmArgs &g, int64_t i0, int64_t n0, Sums sums, int32_t *acc) {
  static_assert(MR * NR <= 8, "one reduce8");
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i tot = _mm256_setzero_si256();
  for (int64_t k0 = 0; k0 < g.kp; k0 += 64 * 32) {
    __m256i s[8];
    sums(g.a + i0 * g.kp, g.kp, g.t + n0 * g.kp, g.kp, k0, std::min(g.kp, k0 + 64 * 32), s);
    for (int u = 0; u < 8; ++u) s[u] = u < MR * NR ? _mm256_madd_epi16(s[u], ones) : _mm256_setzero_si256();
    tot = _mm256_add_epi32(tot, reduce8(s));
  }
  alignas(32) int32_t v[8];
  _mm256_store_si256(reinterpret_cast<__m256i *>(v), tot);
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i * kBlock + j] = v[i * NR + j];
}

// y[i][n0, n1) = float(acc - 128 wsum) * gamma * r[i], 8 columns a store
// (the generic kernel's operations in its order: equal results).
void epilogue(const GemmArgs &g, int64_t i, int64_t n0, int64_t n1, const int32_t *acc) {
  const __m256 r = _mm256_set1_ps(g.r[i]);
  float *y = g.y + i * g.ldy;
  int64_t n = n0;
  for (; n + 8 <= n1; n += 8) {
    const __m256i ws = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(g.wsum + n));
    const __m256i a = _mm256_sub_epi32(
        _mm256_loadu_si256(reinterpret_cast<const __m256i *>(acc + (n - n0))), _mm256_slli_epi32(ws, 7));
    _mm256_storeu_ps(y + n, _mm256_mul_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(a), _mm256_loadu_ps(g.gamma + n)), r));
  }
  for (; n < n1; ++n) y[n] = float(acc[n - n0] - 128 * g.wsum[n]) * g.gamma[n] * g.r[i];
}

} // namespace

// Within the caller's block of at most kBlock columns (64: 128 KB of
// weights at K = 2048, kept in L2), 4 rows of activations (8 KB, in L1) meet
// 2 weight rows at a time; the block's int32 sums are then scaled and stored
// a row at a time. One row (decode, and the rows past the last multiple of
// 4) meets 4 weight rows at a time.
void gemm_block_avx2(const GemmArgs &g, int64_t n0, int64_t n1) {
  alignas(32) int32_t acc[4 * kBlock];
  int64_t i = 0;
  for (; i + 4 <= g.m; i += 4) {
    // The output lines this pass stores at its end (a miss each otherwise:
    // y is 33 MB at 1024 x 8208): fetched while the sums run.
    for (int r = 0; r < 4; ++r)
      for (int64_t n = n0; n < n1; n += 16)
        _mm_prefetch(reinterpret_cast<const char *>(g.y + (i + r) * g.ldy + n), _MM_HINT_T0);
    int64_t n = n0;
    for (; n + 2 <= n1; n += 2) tile<4, 2>(g, i, n, sums_4x2, acc + (n - n0));
    for (; n < n1; ++n)
      for (int r = 0; r < 4; ++r) tile<1, 1>(g, i + r, n, sums_1x1, acc + r * kBlock + (n - n0));
    for (int r = 0; r < 4; ++r) epilogue(g, i + r, n0, n1, acc + r * kBlock);
  }
  for (; i < g.m; ++i) {
    int64_t n = n0;
    for (; n + 4 <= n1; n += 4) tile<1, 4>(g, i, n, sums_1x4, acc + (n - n0));
    for (; n < n1; ++n) tile<1, 1>(g, i, n, sums_1x1, acc + (n - n0));
    epilogue(g, i, n0, n1, acc);
  }
}

void quantize_rows_avx2(const float *x, int64_t m, int64_t k, int64_t kp, float eps,
                        uint8_t *a, float *r) {
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 big = _mm256_set1_ps(3.4028235e38f);
  const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const __m256i bias = _mm256_set1_epi8(char(0x80));
  for (int64_t i = 0; i < m; ++i) {
    const float *xr = x + i * k;
    uint8_t *ar = a + i * kp;
    __m256 mx = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 8 <= k; j += 8) {
      const __m256 v = _mm256_and_ps(_mm256_loadu_ps(xr + j), absmask);
      mx = _mm256_max_ps(mx, v);
      bad = _mm256_or_ps(bad, _mm256_cmp_ps(v, big, _CMP_NLE_UQ)); // NaN or inf
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, mx);
    float m1 = 0;
    for (float v : lanes) m1 = std::max(m1, v);
    bool finite = _mm256_movemask_ps(bad) == 0;
    for (; j < k; ++j) {
      finite = finite && std::isfinite(xr[j]);
      m1 = std::max(m1, std::fabs(xr[j]));
    }
    float s;
    r[i] = row_scale(finite ? m1 : INFINITY, eps, &s);
    if (!finite) {
      std::fill(ar, ar + kp, uint8_t(128));
      continue;
    }
    // vcvtps2dq rounds half to even (MXCSR's default, as std::nearbyint);
    // the saturating packs clip to [-128, 127] (|x * s| <= 127 anyway).
    const __m256 sv = _mm256_set1_ps(s);
    j = 0;
    for (; j + 32 <= k; j += 32) {
      __m256i q[4];
      for (int u = 0; u < 4; ++u)
        q[u] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xr + j + 8 * u), sv));
      const __m256i w01 = _mm256_packs_epi32(q[0], q[1]), w23 = _mm256_packs_epi32(q[2], q[3]);
      __m256i b = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(w01, w23), perm);
      _mm256_store_si256(reinterpret_cast<__m256i *>(ar + j), _mm256_xor_si256(b, bias));
    }
    for (; j < kp; ++j) {
      const float q = j < k ? std::nearbyint(xr[j] * s) : 0.0f;
      ar[j] = uint8_t(int(std::min(127.0f, std::max(-128.0f, q))) + 128);
    }
  }
}

} // namespace bitlinear
} // namespace nn
} // namespace deltac

#pragma GCC pop_options
#endif

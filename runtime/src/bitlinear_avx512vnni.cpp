// BitLinear GEMM for AVX-512 VNNI (bitlinear.h): vpdpbusd adds four u8 x s8
// products per int32 lane in one instruction (no int16 stage, no overflow:
// at most 4 * 255 per step). Compiled under `#pragma GCC target`; chosen
// only when cpuid reports AVX-512 F, BW and VNNI.
#include "bitlinear.h"

#if defined(__x86_64__)
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,fma,bmi,bmi2,popcnt,avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")

namespace deltac {
namespace nn {
namespace bitlinear {
namespace {

// The int32 sums of rows [i0, i0 + MR) x columns [n0, n0 + NR), 64 bytes
// of K per step, into acc[i * kBlock + j].
template <int MR, int NR>
void tile(const GemmArgs &g, int64_t i0, int64_t n0, int32_t *acc) {
  const uint8_t *a[MR];
  const int8_t *t[NR];
  for (int i = 0; i < MR; ++i) a[i] = g.a + (i0 + i) * g.kp;
  for (int j = 0; j < NR; ++j) t[j] = g.t + (n0 + j) * g.kp;
  __m512i s[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) s[i][j] = _mm512_setzero_si512();
  for (int64_t k = 0; k < g.kp; k += 64) {
    __m512i w[NR];
    for (int j = 0; j < NR; ++j) w[j] = _mm512_load_si512(t[j] + k);
    for (int i = 0; i < MR; ++i) {
      const __m512i x = _mm512_load_si512(a[i] + k);
      for (int j = 0; j < NR; ++j) s[i][j] = _mm512_dpbusd_epi32(s[i][j], x, w[j]);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i * kBlock + j] = _mm512_reduce_add_epi32(s[i][j]);
}

// As the generic kernel (the same operations in the same order).
void epilogue(const GemmArgs &g, int64_t i, int64_t n0, int64_t n1, const int32_t *acc) {
  float *y = g.y + i * g.ldy;
  for (int64_t n = n0; n < n1; ++n)
    y[n] = float(acc[n - n0] - 128 * g.wsum[n]) * g.gamma[n] * g.r[i];
}

template <int MR>
void rows(const GemmArgs &g, int64_t i0, int64_t n0, int64_t n1, int32_t *acc) {
  constexpr int NR = MR == 1 ? 8 : 4; // 4 x 4: 16 accumulators + 4 + 1 of 32 zmm
  int64_t n = n0;
  for (; n + NR <= n1; n += NR) tile<MR, NR>(g, i0, n, acc + (n - n0));
  for (; n < n1; ++n) tile<MR, 1>(g, i0, n, acc + (n - n0));
  for (int i = 0; i < MR; ++i) epilogue(g, i0 + i, n0, n1, acc + i * kBlock);
}

} // namespace

void gemm_block_avx512vnni(const GemmArgs &g, int64_t n0, int64_t n1) {
  alignas(64) int32_t acc[4 * kBlock];
  int64_t i = 0;
  for (; i + 4 <= g.m; i += 4) rows<4>(g, i, n0, n1, acc);
  for (; i < g.m; ++i) rows<1>(g, i, n0, n1, acc);
}

} // namespace bitlinear
} // namespace nn
} // namespace deltac

#pragma GCC pop_options
#endif

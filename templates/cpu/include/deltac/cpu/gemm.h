// Small register-blocked f32 GEMM for the chunked kernel's blocks (a few
// dozen to a few hundred rows/columns, operands in L1/L2, no packing).
//   C[M][N] (+)= A[M][kd] * B[kd][N]
// A(i, p) = A[i * rsa + p * csa] (any strides: A is only broadcast),
// B row-major with leading dimension ldb, C row-major with ldc.
// N must be a multiple of 16. With `Lower`, A is lower triangular (zero for
// p > i) and the inner loop of a row tile stops at its last row.
// Optional per-row scales: C_i = cs_i * C_i (Acc only) + os_i * (A B)_i,
// a null pointer meaning 1.
#ifndef DELTAC_CPU_GEMM_H
#define DELTAC_CPU_GEMM_H

#include "deltac/cpu/simd.h"

#include <algorithm>
#include <cstddef>

namespace deltac::cpu { inline namespace DELTAC_CPU_NS { namespace detail {

// Micro tile: kMR rows x kNR = 16 columns (kNR / W vectors per row). 256-bit:
// 6 x 2 vectors (12 accumulators of 16 registers). 512-bit: 12 x 2 (24 of
// 32; 32 columns) while N has 32 more columns, else 12 x 1: per k, 2 B loads
// and 12 broadcasts feed 24 FMAs instead of 1 and 12 feeding 12 (loads, 2 a
// cycle, held the 12 x 1 tile to 12 FMAs per 6.5 cycles).
constexpr int kNR = 16;
constexpr int kNB = kNR / simd::W;  // vectors per 16 columns
constexpr int kNBWide = simd::W == 16 ? 2 : kNB;  // vectors per wide tile row
constexpr int kMR = simd::W == 16 ? 12 : 6;

template <int MR, bool Acc, int NB = kNB>
inline void gemm_tile(int kd, const float* __restrict A, long rsa, long csa,
                      const float* __restrict B, long ldb, float* __restrict C,
                      long ldc, const float* os, const float* cs) {
  using namespace simd;
  constexpr int kNB = NB;
  vf c[MR][kNB];
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int b = 0; b < kNB; ++b) c[i][b] = zero();
  for (int p = 0; p < kd; ++p) {
    vf bv[kNB];
#pragma GCC unroll 2
    for (int b = 0; b < kNB; ++b) bv[b] = load(B + p * ldb + b * W);
    const float* a = A + p * csa;
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
      const vf av = set1(a[i * rsa]);
#pragma GCC unroll 2
      for (int b = 0; b < kNB; ++b) c[i][b] = fma(av, bv[b], c[i][b]);
    }
  }
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i) {
    float* cr = C + i * ldc;
#pragma GCC unroll 2
    for (int b = 0; b < kNB; ++b) {
      if (os)
        c[i][b] *= set1(os[i]);
      if (Acc)
        c[i][b] = fma(load(cr + b * W), set1(cs ? cs[i] : 1.0f), c[i][b]);
      store(cr + b * W, c[i][b]);
    }
  }
}

// gemm_tile<mr> for a run-time mr in 1..kMR.
template <bool Acc, int NB = kNB, int MR = kMR>
inline void gemm_rows(int mr, int kd, const float* A, long rsa, long csa,
                      const float* B, long ldb, float* C, long ldc,
                      const float* os, const float* cs) {
  if constexpr (MR == 1) {
    gemm_tile<1, Acc, NB>(kd, A, rsa, csa, B, ldb, C, ldc, os, cs);
  } else {
    if (mr == MR)
      gemm_tile<MR, Acc, NB>(kd, A, rsa, csa, B, ldb, C, ldc, os, cs);
    else
      gemm_rows<Acc, NB, MR - 1>(mr, kd, A, rsa, csa, B, ldb, C, ldc, os, cs);
  }
}

// One column panel [j, j + NB * W) of C: its row tiles.
template <bool Acc, bool Lower, int NB>
inline void gemm_panel(int M, int j, int kd, const float* A, long rsa, long csa,
                       const float* B, long ldb, float* C, long ldc,
                       const float* os, const float* cs) {
  for (int i = 0; i < M; i += kMR) {
    const int mr = M - i < kMR ? M - i : kMR;
    int k = kd;
    if (Lower && i + mr < k)
      k = i + mr;
    gemm_rows<Acc, NB>(mr, k, A + i * rsa, rsa, csa, B + j, ldb, C + i * ldc + j,
                       ldc, os ? os + i : nullptr, cs ? cs + i : nullptr);
  }
}

template <bool Acc, bool Lower = false>
inline void gemm(int M, int N, int kd, const float* A, long rsa, long csa,
                 const float* B, long ldb, float* C, long ldc,
                 const float* os = nullptr, const float* cs = nullptr) {
  int j = 0;
  if constexpr (kNBWide != kNB)
    for (; j + kNBWide * simd::W <= N; j += kNBWide * simd::W)
      gemm_panel<Acc, Lower, kNBWide>(M, j, kd, A, rsa, csa, B, ldb, C, ldc, os, cs);
  for (; j < N; j += kNR)
    gemm_panel<Acc, Lower, kNB>(M, j, kd, A, rsa, csa, B, ldb, C, ldc, os, cs);
}

// C = A B computed only where column j < i + (row tile height), rounded up to
// 16 columns: enough for the lower triangle (j <= i) of C [M][N]. Entries
// above that band are left unwritten.
inline void gemm_lower_out(int M, int N, int kd, const float* A, long rsa,
                           long csa, const float* B, long ldb, float* C,
                           long ldc) {
  for (int i = 0; i < M; i += kMR) {
    const int mr = M - i < kMR ? M - i : kMR;
    int n = (i + mr + kNR - 1) / kNR * kNR;
    if (n > N)
      n = N;
    for (int j = 0; j < n; j += kNR)
      gemm_rows<false>(mr, kd, A + i * rsa, rsa, csa, B + j, ldb,
                       C + i * ldc + j, ldc, nullptr, nullptr);
  }
}

// dst [cols][rows] = src [rows][cols]^T, in 16 x 16 blocks (the block's
// destination lines stay in L1).
template <class R>
inline void transpose(R* dst, const R* src, int rows, int cols) {
  constexpr int B = 16;
  for (int i0 = 0; i0 < rows; i0 += B)
    for (int j0 = 0; j0 < cols; j0 += B) {
      const int i1 = std::min(rows, i0 + B), j1 = std::min(cols, j0 + B);
      for (int j = j0; j < j1; ++j)
        for (int i = i0; i < i1; ++i) dst[size_t(j) * rows + i] = src[size_t(i) * cols + j];
    }
}


// dst [n][m] = src [m][n]^T (rows contiguous; m, n multiples of 8): 8 x 8
// blocks in registers where AVX is there (a scalar scatter cost 3-8% of the
// chunked kernel on one AVX-512 core).
inline void transpose8(float* dst, const float* src, int m, int n) {
#if DELTAC_CPU_AVX
  for (int i = 0; i < m; i += 8)
    for (int j = 0; j < n; j += 8) {
      __m256 r[8], t[8];
      for (int a = 0; a < 8; ++a) r[a] = _mm256_loadu_ps(src + size_t(i + a) * n + j);
      for (int a = 0; a < 8; a += 2) {  // pairs of rows interleaved
        t[a] = _mm256_unpacklo_ps(r[a], r[a + 1]);
        t[a + 1] = _mm256_unpackhi_ps(r[a], r[a + 1]);
      }
      for (int a = 0; a < 8; a += 4) {  // columns c and c + 4 of 4 rows
        r[a] = _mm256_shuffle_ps(t[a], t[a + 2], 0x44);
        r[a + 1] = _mm256_shuffle_ps(t[a], t[a + 2], 0xEE);
        r[a + 2] = _mm256_shuffle_ps(t[a + 1], t[a + 3], 0x44);
        r[a + 3] = _mm256_shuffle_ps(t[a + 1], t[a + 3], 0xEE);
      }
      for (int c = 0; c < 4; ++c) {  // low halves: column c, high: c + 4
        _mm256_storeu_ps(dst + size_t(j + c) * m + i, _mm256_permute2f128_ps(r[c], r[c + 4], 0x20));
        _mm256_storeu_ps(dst + size_t(j + c + 4) * m + i,
                         _mm256_permute2f128_ps(r[c], r[c + 4], 0x31));
      }
    }
#else
  transpose(dst, src, m, n);
#endif
}

}}}  // namespace deltac::cpu::DELTAC_CPU_NS::detail

#endif  // DELTAC_CPU_GEMM_H

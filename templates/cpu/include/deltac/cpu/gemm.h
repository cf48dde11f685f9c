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

}}}  // namespace deltac::cpu::DELTAC_CPU_NS::detail

#endif  // DELTAC_CPU_GEMM_H

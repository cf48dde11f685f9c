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
// 6 x 2 vectors (12 accumulators of 16 registers); 512-bit: 12 x 1 (12 of 32;
// N is only a multiple of 16, so one vector per row).
constexpr int kNR = 16;
constexpr int kNB = kNR / simd::W;  // vectors per micro-tile row
constexpr int kMR = simd::W == 16 ? 12 : 6;

template <int MR, bool Acc>
inline void gemm_tile(int kd, const float* __restrict A, long rsa, long csa,
                      const float* __restrict B, long ldb, float* __restrict C,
                      long ldc, const float* os, const float* cs) {
  using namespace simd;
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
template <bool Acc, int MR = kMR>
inline void gemm_rows(int mr, int kd, const float* A, long rsa, long csa,
                      const float* B, long ldb, float* C, long ldc,
                      const float* os, const float* cs) {
  if constexpr (MR == 1) {
    gemm_tile<1, Acc>(kd, A, rsa, csa, B, ldb, C, ldc, os, cs);
  } else {
    if (mr == MR)
      gemm_tile<MR, Acc>(kd, A, rsa, csa, B, ldb, C, ldc, os, cs);
    else
      gemm_rows<Acc, MR - 1>(mr, kd, A, rsa, csa, B, ldb, C, ldc, os, cs);
  }
}

template <bool Acc, bool Lower = false>
inline void gemm(int M, int N, int kd, const float* A, long rsa, long csa,
                 const float* B, long ldb, float* C, long ldc,
                 const float* os = nullptr, const float* cs = nullptr) {
  for (int j = 0; j < N; j += kNR) {
    for (int i = 0; i < M; i += kMR) {
      const int mr = M - i < kMR ? M - i : kMR;
      int k = kd;
      if (Lower && i + mr < k)
        k = i + mr;
      gemm_rows<Acc>(mr, k, A + i * rsa, rsa, csa, B + j, ldb, C + i * ldc + j,
                     ldc, os ? os + i : nullptr, cs ? cs + i : nullptr);
    }
  }
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

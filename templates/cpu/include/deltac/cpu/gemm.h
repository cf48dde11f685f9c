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

namespace deltac::cpu::detail {

constexpr int kMR = 6;   // rows per micro tile
constexpr int kNR = 16;  // columns per micro tile (two vectors)

template <int MR, bool Acc>
inline void gemm_tile(int kd, const float* __restrict A, long rsa, long csa,
                      const float* __restrict B, long ldb, float* __restrict C,
                      long ldc, const float* os, const float* cs) {
  using namespace simd;
  v8 c0[MR], c1[MR];
#pragma GCC unroll 6
  for (int i = 0; i < MR; ++i) c0[i] = c1[i] = zero();
  for (int p = 0; p < kd; ++p) {
    const v8 b0 = load(B + p * ldb), b1 = load(B + p * ldb + W);
    const float* a = A + p * csa;
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      const v8 av = set1(a[i * rsa]);
      c0[i] = fma(av, b0, c0[i]);
      c1[i] = fma(av, b1, c1[i]);
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < MR; ++i) {
    float* c = C + i * ldc;
    if (os) {
      c0[i] *= set1(os[i]);
      c1[i] *= set1(os[i]);
    }
    if (Acc) {
      const v8 s = set1(cs ? cs[i] : 1.0f);
      c0[i] = fma(load(c), s, c0[i]);
      c1[i] = fma(load(c + W), s, c1[i]);
    }
    store(c, c0[i]);
    store(c + W, c1[i]);
  }
}

template <bool Acc>
inline void gemm_rows(int mr, int kd, const float* A, long rsa, long csa,
                      const float* B, long ldb, float* C, long ldc,
                      const float* os, const float* cs) {
  switch (mr) {
    case 6: gemm_tile<6, Acc>(kd, A, rsa, csa, B, ldb, C, ldc, os, cs); break;
    case 5: gemm_tile<5, Acc>(kd, A, rsa, csa, B, ldb, C, ldc, os, cs); break;
    case 4: gemm_tile<4, Acc>(kd, A, rsa, csa, B, ldb, C, ldc, os, cs); break;
    case 3: gemm_tile<3, Acc>(kd, A, rsa, csa, B, ldb, C, ldc, os, cs); break;
    case 2: gemm_tile<2, Acc>(kd, A, rsa, csa, B, ldb, C, ldc, os, cs); break;
    default: gemm_tile<1, Acc>(kd, A, rsa, csa, B, ldb, C, ldc, os, cs); break;
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

}  // namespace deltac::cpu::detail

#endif  // DELTAC_CPU_GEMM_H

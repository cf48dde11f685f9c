// T = (I + A)^-1 for a chunk's strictly lower-triangular A (C = 16 NB rows,
// f32 in shared memory, row stride LD): the UT transform of the chunked
// forward (chunked_prep.cuh) and of the backward's prep
// (backward_chunked.cuh, backward_grad_bf16.cuh), in two steps with a block
// barrier between them:
//   ut_diag:    the diagonal 16 x 16 blocks by forward substitution, one
//               lane per column, two blocks per warp;
//   ut_offdiag: the blocks below by doubling, on tensor cores in f32 (three
//               TF32 products per step, ~f32 accuracy).
// A's elements on and above the diagonal are never read; T's blocks above
// the diagonal are never written (the caller zeroes or skips them).
#ifndef DELTAC_CUDA_UT_SOLVE_CUH
#define DELTAC_CUDA_UT_SOLVE_CUH

#include "deltac/cuda/chunked_mma.cuh"

namespace deltac::cuda::detail {

// Warps that ut_diag takes (warps 0 .. kUtDiagWarps - 1).
template <int NB>
constexpr int kUtDiagWarps = (NB + 1) / 2;

// The diagonal blocks of T into Tf. Returns false, at once, on warps it
// does not take (free for other work until the barrier).
template <int NB, int LD>
__device__ __forceinline__ bool ut_diag(const float* Af, float* Tf, int warp, int lane) {
  if (warp >= kUtDiagWarps<NB>)
    return false;
  const int b = warp * 2 + (lane >> 4), c = lane & 15;
  if (b < NB) {
    const float* a = Af + 16 * b * LD + 16 * b;
    float x[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      float s = i == c ? 1.f : 0.f;
#pragma unroll
      for (int jj = 0; jj < i; ++jj) s = fmaf(-a[i * LD + jj], x[jj], s);
      x[i] = s;
    }
    float* t = Tf + 16 * b * LD + 16 * b;
#pragma unroll
    for (int i = 0; i < 16; ++i) t[i * LD + c] = x[i];
  }
  return true;
}

// The blocks below the diagonal, after ut_diag and a block barrier; each
// product staged through a 16 x 16 buffer of P (NB == 4: [4][16][16], else
// [1][16][16] floats):
//   level 1 (16 -> 32): T_{I,I-1} = -T_II (A_{I,I-1} T_{I-1,I-1}), I odd;
//   level 2 (32 -> 64): X_ij = sum_{L=j..1} A_iL T_Lj, then
//                       T_ij = -sum_{M=2..i} T_iM X_Mj  (i = 2, 3; j = 0, 1).
// Every thread of the block calls it (at least 4 warps); barriers inside,
// the last one after T is complete (none for NB == 1).
template <int NB, int LD>
__device__ __forceinline__ void ut_offdiag(const float* Af, float* Tf, float* P, int warp,
                                           int lane) {
  static_assert(NB == 1 || NB == 2 || NB == 4, "chunk 16, 32 or 64");
  if constexpr (NB >= 2) {
    using Of = Mma<float>;
    const int g = lane >> 2, t = lane & 3;
    auto blk = [&](auto* base, int I, int J) { return base + 16 * I * LD + 16 * J; };
    // acc += X Y (16 x 16 each; Y's rows are the k index).
    auto prod = [&](float acc[2][4], const float* x, int lx, const float* y, int ly) {
      typename Of::FragA fa;
      Of::load_a(fa, x, lx);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        typename Of::FragB fb;
        Of::load_b_t(fb, y + 8 * h, ly);
        Of::mma(acc[h], fa, fb);
      }
    };
    // dst (16 x 16, row stride ld) = f * acc; 8-byte stores where ld is even.
    auto put = [&](float* dst, int ld, const float acc[2][4], float f) {
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int a = 0; a < 2; ++a) {
          float* d = dst + (g + 8 * a) * ld + 8 * h + 2 * t;
          if (ld % 2 == 0) {
            *reinterpret_cast<float2*>(d) = make_float2(f * acc[h][2 * a], f * acc[h][2 * a + 1]);
          } else {
            d[0] = f * acc[h][2 * a];
            d[1] = f * acc[h][2 * a + 1];
          }
        }
    };
    if (warp < NB / 2) {
      const int I = 2 * warp + 1, J = I - 1;
      float* pw = P + warp * 256;
      float acc[2][4] = {}, o[2][4] = {};
      prod(acc, blk(Af, I, J), LD, blk(Tf, J, J), LD);
      put(pw, 16, acc, 1.f);
      __syncwarp();
      prod(o, blk(Tf, I, I), LD, pw, 16);
      put(blk(Tf, I, J), LD, o, -1.f);
    }
    __syncthreads();
    if constexpr (NB == 4) {
      const int i = 2 + warp / 2, j = warp % 2;
      if (warp < 4) {
        float acc[2][4] = {};
        for (int L = j; L < 2; ++L) prod(acc, blk(Af, i, L), LD, blk(Tf, L, j), LD);
        put(P + warp * 256, 16, acc, 1.f);  // X_ij in P[2 (i - 2) + j]
      }
      __syncthreads();
      if (warp < 4) {
        float o[2][4] = {};
        for (int M = 2; M <= i; ++M) prod(o, blk(Tf, i, M), LD, P + (2 * (M - 2) + j) * 256, 16);
        put(blk(Tf, i, j), LD, o, -1.f);
      }
      __syncthreads();
    }
  }
}

}  // namespace deltac::cuda::detail

#endif  // DELTAC_CUDA_UT_SOLVE_CUH

// The staged one-token kernel's sums h^T k and h^T q on tensor cores
// (recurrent_strip.cuh, strip_one where kMma): one warp, its WV columns of a
// bf16 state staged in shared memory by rows of a lane (StripTraits), every
// row of K. Per 16 rows: C[16 x 8] += A B (mma.sync m16n8k16), A = h^T (16
// columns x 16 rows, by ldmatrix.trans), B = [k q] (column 0 k, 1 q; f32
// inputs as bf16 hi + lo in columns 2, 3, summed after).
#ifndef DELTAC_CUDA_RECURRENT_MMA_CUH
#define DELTAC_CUDA_RECURRENT_MMA_CUH

#include "deltac/cuda/chunked_mma.cuh"

#include <cuda_bf16.h>

#include <cstdint>

namespace deltac::cuda::detail {

// Where thread t's row i lies in its stage row (in 16-byte slots): XOR-
// swizzled by the row, so that eight rows of a lane (one ldmatrix matrix)
// fall in eight bank groups and a warp's 32 slots of one row in all of them.
__device__ __forceinline__ int staged_slot(int i, int t) { return t ^ (i & 7); }

// stage: row i of thread t at stage + i * row_words + 4 * staged_slot(i, t)
// (words); lane l of warp `warp` (block thread 32 warp + l) staged rows
// (l / L) R .. + R of columns 8 (l % L) .. + 8 of the warp's strip. sqk: q
// (row 0) and k (row 1), K each. The sums of column 8 m + l / 4 of the strip
// (m < WV / 8) land in hk[m], hq[m] of the lanes l % 4 == 0 (others: parts).
// The caller has waited for its own rows; the warp's lanes meet here.
template <int K, int R, int L, int WV, class InT>
__device__ __forceinline__ void staged_mma_sums(const uint32_t* stage, int row_words,
                                                const InT* sqk, float (&hk)[WV / 8],
                                                float (&hq)[WV / 8]) {
  static_assert(WV % 16 == 0 && R % 8 == 0 && K % 16 == 0, "staged_mma_sums: whole tiles");
  constexpr int kT = WV / 16;
  using M = Mma<__nv_bfloat16>;
  __syncwarp();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int gid = lane / 4, tig = lane % 4, mat = lane / 8;
  float acc[kT][4];
#pragma unroll
  for (int mt = 0; mt < kT; ++mt) acc[mt][0] = acc[mt][1] = acc[mt][2] = acc[mt][3] = 0.f;
#pragma unroll
  for (int ks = 0; ks < K / 16; ++ks) {
    M::FragB fb;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int e = ks * 16 + 8 * h + 2 * tig;  // rows e, e + 1 of B's column gid
      fb.r[h] = 0u;
      if constexpr (sizeof(InT) == 2) {
        if (gid < 2)
          fb.r[h] = *reinterpret_cast<const uint32_t*>(sqk + (1 - gid) * K + e);
      } else if (gid < 4) {
        const float2 x = *reinterpret_cast<const float2*>(sqk + (1 - (gid & 1)) * K + e);
        uint32_t hi, lo;
        split2<__nv_bfloat16>(x.x, x.y, hi, lo);
        fb.r[h] = gid < 2 ? hi : lo;
      }
    }
    // Lane l gives row l % 8 of matrix l / 8: rows ks 16 + 8 (mat / 2) .. + 8
    // of columns 8 (2 mt + mat % 2) .. + 8, all staged by one lane.
    const int kr = ks * 16 + (mat >> 1) * 8 + lane % 8, i = kr % R;
#pragma unroll
    for (int mt = 0; mt < kT; ++mt) {
      const int t = warp * 32 + (kr / R) * L + 2 * mt + (mat & 1);
      M::FragA fa;
      ldmatrix_x4_trans(fa.r, uint32_t(__cvta_generic_to_shared(
                                  stage + i * row_words + 4 * staged_slot(i, t))));
      M::mma(acc[mt], fa, fb);
    }
  }
  // Lane (g, t) holds C rows g, g + 8, columns 2 t, 2 t + 1: the hi sums in
  // t = 0, the lo ones in t = 1.
  if constexpr (sizeof(InT) == 4)
#pragma unroll
    for (int mt = 0; mt < kT; ++mt)
#pragma unroll
      for (int x = 0; x < 4; ++x) acc[mt][x] += __shfl_down_sync(0xffffffffu, acc[mt][x], 1);
#pragma unroll
  for (int m = 0; m < WV / 8; ++m) {
    hk[m] = acc[m / 2][2 * (m % 2)];
    hq[m] = acc[m / 2][2 * (m % 2) + 1];
  }
}

}  // namespace deltac::cuda::detail

#endif  // DELTAC_CUDA_RECURRENT_MMA_CUH

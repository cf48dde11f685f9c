// kda's diagonal 16 x 16 blocks of A and Aqk on tensor cores (the intra-chunk
// kernel, chunked_prep.cuh), for blocks whose gates span little:
//   K K^T ∘ exp(G_i - G_j) = (K ∘ exp(G - G_r)) (K ∘ exp(G_r - G))^T
// per key channel, through the block's middle row r. Every factor lies in
// [e^-kDiagSpan, e^kDiagSpan] when, per channel, G_first - G_r and G_r -
// G_last are at most kDiagSpan (G falls along the chunk); else the block
// takes the exact per-element path. The operands are built in registers in
// f32 from the raw rows and split into bf16 hi + lo (three products: ~2^-16
// relative per term, against the stored bf16 T / Aqk's 2^-9).
#ifndef DELTAC_CUDA_CHUNKED_KDA_DIAG_CUH
#define DELTAC_CUDA_CHUNKED_KDA_DIAG_CUH

#include "deltac/cuda/chunked_mma.cuh"

#include <cuda_bf16.h>

#include <cstdint>

namespace deltac::cuda::detail {

// e^30 ~ 1.1e13: a scaled row overflows f32 only where K K^T itself would.
constexpr float kDiagSpan = 30.f;

// Whether channel c of the block at rows [r0, r0 + 16) of G (row stride LG)
// is within kDiagSpan of its middle row (false for NaN).
__device__ __forceinline__ bool diag_span_ok(const float* G, int LG, int r0, int c) {
  const float first = G[r0 * LG + c], mid = G[(r0 + 8) * LG + c], last = G[(r0 + 15) * LG + c];
  return first - mid <= kDiagSpan && mid - last <= kDiagSpan;
}

// One warp: the block at rows and columns [r0, r0 + 16), over the channels
// [c0, c1) (multiples of 16): a[h] += the columns 8h .. 8h + 7 of
// K K^T ∘ exp(G_i - G_j), q[h] of Q K^T ∘ exp(G_i - G_j), in the m16n8
// accumulator layout. kn, qn: raw rows (stride LK); G: the gate cumsum.
template <class Ts>
__device__ __forceinline__ void kda_diag_block(const Ts* kn, const Ts* qn, int LK,
                                               const float* G, int LG, int r0, int c0, int c1,
                                               float a[2][4], float q[2][4]) {
  using Op = Mma<__nv_bfloat16>;
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, r = r0 + 8;
  for (int k0 = c0; k0 < c1; k0 += 16) {
    Op::FragA kh, kl, qh, ql;
    Op::FragB bh[2], bl[2];
#pragma unroll
    for (int s = 0; s < 2; ++s) {  // channels k0 + 2t + 8s, + 1
      const int c = k0 + 2 * t + 8 * s;
      const float2 gr = *reinterpret_cast<const float2*>(G + r * LG + c);
#pragma unroll
      for (int m = 0; m < 2; ++m) {  // rows r0 + g + 8m
        const int i = r0 + g + 8 * m;
        const float2 gi = *reinterpret_cast<const float2*>(G + i * LG + c);
        const float e0 = __expf(gi.x - gr.x), e1 = __expf(gi.y - gr.y);
        float k0v, k1v, q0v, q1v;
        load2f(kn + i * LK + c, k0v, k1v);
        load2f(qn + i * LK + c, q0v, q1v);
        split2<__nv_bfloat16>(k0v * e0, k1v * e1, kh.r[2 * s + m], kl.r[2 * s + m]);
        split2<__nv_bfloat16>(q0v * e0, q1v * e1, qh.r[2 * s + m], ql.r[2 * s + m]);
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // columns r0 + 8h + g
        const int j = r0 + 8 * h + g;
        const float2 gj = *reinterpret_cast<const float2*>(G + j * LG + c);
        float k0v, k1v;
        load2f(kn + j * LK + c, k0v, k1v);
        split2<__nv_bfloat16>(k0v * __expf(gr.x - gj.x), k1v * __expf(gr.y - gj.y), bh[h].r[s],
                              bl[h].r[s]);
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      Op::mma(a[h], kl, bh[h]);
      Op::mma(a[h], kh, bl[h]);
      Op::mma(a[h], kh, bh[h]);
      Op::mma(q[h], ql, bh[h]);
      Op::mma(q[h], qh, bl[h]);
      Op::mma(q[h], qh, bh[h]);
    }
  }
}

}  // namespace deltac::cuda::detail

#endif  // DELTAC_CUDA_CHUNKED_KDA_DIAG_CUH

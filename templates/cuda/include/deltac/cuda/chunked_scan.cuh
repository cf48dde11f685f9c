// Stage 5 of the chunked forward pass: the sequential scan over the chunks
// of one sequence, fused with the output. One block per (V tile, value head,
// sequence) holds the f32 state tile S [K, BV] in registers (tensor-core
// accumulator layout) and a copy in the compute type in shared memory
// (Sᵀ, the B operand). Per chunk, with the operands of chunked_prep.cuh:
//   v' = U - W S                          (the chunk's corrected values; U in
//                                          f32 and, for 16-bit types,
//                                          W_hi S_hi + W_hi S_lo + W_lo S_hi:
//                                          v' is a residual, a rounding of U,
//                                          W or S would cost several times
//                                          its size)
//   o  = Qg S + Aqk v'                    (scale folded into Qg and Aqk)
//   S  = gamma ∘ S + KdT v'               (gamma per key row)
// The next chunk's operands are copied with cp.async while this one computes
// (Stages = 2).
#ifndef DELTAC_CUDA_CHUNKED_SCAN_CUH
#define DELTAC_CUDA_CHUNKED_SCAN_CUH

#include "deltac/cuda/chunked_mma.cuh"
#include "deltac/cuda/chunked_prep.cuh"
#include "deltac/cuda/chunked_traits.cuh"
#include "deltac/params.h"

#include <cstdint>

namespace deltac::cuda::detail {

// rows x (cols elements of T) from global (row stride gstride) into shared
// memory (row stride sstride); cols * sizeof(T) is a multiple of 16.
template <class T>
__device__ __forceinline__ void copy_tile(T* dst, int sstride, const T* src, int64_t gstride,
                                          int rows, int cols, int tid, int nth) {
  constexpr int E = 16 / sizeof(T);
  const int segs = cols / E;
  for (int i = tid; i < rows * segs; i += nth) {
    const int r = i / segs, s = i % segs;
    cp_async16(dst + r * sstride + s * E, src + r * gstride + s * E);
  }
}

template <deltac_variant Var, class Tr>
__global__ void __launch_bounds__(Tr::kThreads)
    chunked_scan_kernel(const deltac_fwd_params p, const ChunkedWs<typename Tr::Ts> ws) {
  if (ws.skip && *ws.skip)  // the whole grid: before any barrier or write
    return;
  using Ts = typename Tr::Ts;
  using In = typename Tr::In;
  using Op = Mma<Ts>;
  constexpr int C = Tr::C, K = Tr::K, V = Tr::V, BV = Tr::BV;
  constexpr int LK = Tr::LK, LC = Tr::LC, NTH = Tr::kThreads;
  constexpr int MW1 = Tr::MW1, MT1 = Tr::MT1, NT1 = Tr::NT1;
  constexpr int MW3 = Tr::MW3, MT3 = Tr::MT3, NT3 = Tr::NT3;
  constexpr bool kSplit = Tr::kSplit;
  constexpr int LU = BV + 4;  // f32 row of the U tile
  // Stage: W [C][LK], W_lo [C][LK] (16-bit types), Qg [C][LK], KdT [K][LC],
  // Aqk [C][LC] (compute type); U [C][LU], gamma [K] (f32).
  constexpr int kWs = (kSplit ? 3 : 2) * C * LK;  // W, W_lo, Qg
  constexpr int kStageTs = kWs + K * LC + C * LC;
  constexpr int kStageBytes = kStageTs * int(sizeof(Ts)) + C * LU * 4 + K * 4;
  static_assert(kStageBytes % 16 == 0, "stage alignment");

  extern __shared__ __align__(16) unsigned char smem_raw[];
  auto stage_w = [&](int s) { return reinterpret_cast<Ts*>(smem_raw + s * kStageBytes); };
  Ts* ST = reinterpret_cast<Ts*>(smem_raw + Tr::kStages * kStageBytes);  // [BV][LK]
  Ts* STlo = ST + BV * LK;                       // [BV][LK] S - S_hi (16-bit types)
  Ts* VT = STlo + (kSplit ? BV * LK : 0);        // [BV][LC]

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane >> 2, t = lane & 3;
  const int v0 = blockIdx.x * BV, j = blockIdx.y, n = blockIdx.z;
  const int wm1 = warp % MW1, wn1 = warp / MW1;
  const int wm3 = warp % MW3, wn3 = warp / MW3;

  int64_t s0, s1, first, last;
  seq_bounds(p, n, s0, s1);
  seq_slots(p, ws.offsets, n, C, first, last);
  if (last > ws.max_chunks)
    last = ws.max_chunks;
  const int64_t nchunks = last > first ? last - first : 0;

  // State tile: element e of tile (mi, ni) is row srow(mi, e), column scol(ni, e).
  auto srow = [&](int mi, int e) { return (wm3 * MT3 + mi) * 16 + g + (e >= 2 ? 8 : 0); };
  auto scol = [&](int ni, int e) { return (wn3 * NT3 + ni) * 8 + 2 * t + (e & 1); };
  const int64_t sbase = (int64_t(n) * p.HV + j) * K * V;
  const bool vk = p.state_layout == DELTAC_STATE_VK;
  float S[MT3][NT3][4];
  if (p.h0) {
    const float* h0 = static_cast<const float*>(p.h0) + sbase;
#pragma unroll
    for (int mi = 0; mi < MT3; ++mi)
#pragma unroll
      for (int ni = 0; ni < NT3; ++ni)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = srow(mi, 2 * h), c = v0 + scol(ni, 0);
          if (!vk) {
            const float2 x = *reinterpret_cast<const float2*>(h0 + int64_t(r) * V + c);
            S[mi][ni][2 * h] = x.x, S[mi][ni][2 * h + 1] = x.y;
          } else {
            S[mi][ni][2 * h] = h0[int64_t(c) * K + r];
            S[mi][ni][2 * h + 1] = h0[int64_t(c + 1) * K + r];
          }
        }
  } else {
#pragma unroll
    for (int mi = 0; mi < MT3; ++mi)
#pragma unroll
      for (int ni = 0; ni < NT3; ++ni)
#pragma unroll
        for (int e = 0; e < 4; ++e) S[mi][ni][e] = 0.f;
  }
  auto store_state = [&] {
#pragma unroll
    for (int mi = 0; mi < MT3; ++mi)
#pragma unroll
      for (int ni = 0; ni < NT3; ++ni)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const Ts hi = cvt_t<Ts>(S[mi][ni][e]);
          ST[scol(ni, e) * LK + srow(mi, e)] = hi;
          if constexpr (kSplit)
            STlo[scol(ni, e) * LK + srow(mi, e)] = cvt_t<Ts>(S[mi][ni][e] - cvt_f(hi));
        }
  };
  store_state();

  auto issue = [&](int64_t chunk, int s) {
    const int64_t slot = chunk * p.HV + j;
    Ts* b = stage_w(s);
    copy_tile(b, LK, ws.w + slot * C * K, K, C, K, tid, NTH);
    copy_tile(b + C * LK, LK, ws.qg + slot * C * K, K, C, K, tid, NTH);
    if constexpr (kSplit)
      copy_tile(b + 2 * C * LK, LK, ws.wlo + slot * C * K, K, C, K, tid, NTH);
    copy_tile(b + kWs, LC, ws.kdt + slot * K * C, C, K, C, tid, NTH);
    copy_tile(b + kWs + K * LC, LC, ws.aqk + slot * C * C, C, C, C, tid, NTH);
    float* fb = reinterpret_cast<float*>(b + kStageTs);
    copy_tile(fb, LU, ws.u + slot * C * V + v0, V, C, BV, tid, NTH);
    copy_tile(fb + C * LU, K, ws.gamma + slot * K, K, 1, K, tid, NTH);
    cp_async_commit();
  };

  In* o = static_cast<In*>(p.o);
  if (nchunks > 0)
    issue(first, 0);
  for (int64_t c = 0; c < nchunks; ++c) {
    const int s = Tr::kStages == 2 ? int(c & 1) : 0;
    cp_async_wait_all();
    __syncthreads();
    if (Tr::kStages == 2 && c + 1 < nchunks)
      issue(first + c + 1, s ^ 1);
    const Ts* sw = stage_w(s);
    const Ts* sqg = sw + C * LK;
    const Ts* swlo = sw + 2 * C * LK;
    const Ts* skdt = sw + kWs;
    const Ts* saqk = skdt + K * LC;
    const float* su = reinterpret_cast<const float*>(sw + kStageTs);
    const float* sgam = su + C * LU;
    const int64_t tc0 = s0 + c * C;
    const int len = int(s1 - tc0 < C ? s1 - tc0 : C);

    // Phase 1: acc = W S - U (so v' = -acc), ao = Qg S.
    float av[MT1][NT1][4], ao[MT1][NT1][4];
#pragma unroll
    for (int mi = 0; mi < MT1; ++mi)
#pragma unroll
      for (int ni = 0; ni < NT1; ++ni)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = (wm1 * MT1 + mi) * 16 + g + (e >= 2 ? 8 : 0);
          const int cl = (wn1 * NT1 + ni) * 8 + 2 * t + (e & 1);
          av[mi][ni][e] = -su[r * LU + cl];
          ao[mi][ni][e] = 0.f;
        }
#pragma unroll 2
    for (int k0 = 0; k0 < K; k0 += 16) {
      typename Op::FragB fb[NT1], fl[kSplit ? NT1 : 1];
#pragma unroll
      for (int ni = 0; ni < NT1; ++ni) {
        Op::load_b(fb[ni], ST + (wn1 * NT1 + ni) * 8 * LK + k0, LK);
        if constexpr (kSplit)
          Op::load_b(fl[ni], STlo + (wn1 * NT1 + ni) * 8 * LK + k0, LK);
      }
#pragma unroll
      for (int mi = 0; mi < MT1; ++mi) {
        typename Op::FragA fa;
        Op::load_a(fa, sw + (wm1 * MT1 + mi) * 16 * LK + k0, LK);
#pragma unroll
        for (int ni = 0; ni < NT1; ++ni) {
          Op::mma(av[mi][ni], fa, fb[ni]);
          if constexpr (kSplit)
            Op::mma(av[mi][ni], fa, fl[ni]);
        }
        if constexpr (kSplit) {
          Op::load_a(fa, swlo + (wm1 * MT1 + mi) * 16 * LK + k0, LK);
#pragma unroll
          for (int ni = 0; ni < NT1; ++ni) Op::mma(av[mi][ni], fa, fb[ni]);
        }
        Op::load_a(fa, sqg + (wm1 * MT1 + mi) * 16 * LK + k0, LK);
#pragma unroll
        for (int ni = 0; ni < NT1; ++ni) Op::mma(ao[mi][ni], fa, fb[ni]);
      }
    }
#pragma unroll
    for (int mi = 0; mi < MT1; ++mi)
#pragma unroll
      for (int ni = 0; ni < NT1; ++ni)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = (wm1 * MT1 + mi) * 16 + g + (e >= 2 ? 8 : 0);
          const int cl = (wn1 * NT1 + ni) * 8 + 2 * t + (e & 1);
          VT[cl * LC + r] = cvt_t<Ts>(-av[mi][ni][e]);
        }
    __syncthreads();

    // Phase 2: o += Aqk v' (Aqk is lower triangular: k blocks <= row block).
#pragma unroll
    for (int mi = 0; mi < MT1; ++mi) {
      const int rb = wm1 * MT1 + mi;
      for (int k0 = 0; k0 <= rb * 16; k0 += 16) {
        typename Op::FragA fa;
        Op::load_a(fa, saqk + rb * 16 * LC + k0, LC);
#pragma unroll
        for (int ni = 0; ni < NT1; ++ni) {
          typename Op::FragB fb;
          Op::load_b(fb, VT + (wn1 * NT1 + ni) * 8 * LC + k0, LC);
          Op::mma(ao[mi][ni], fa, fb);
        }
      }
#pragma unroll
      for (int ni = 0; ni < NT1; ++ni)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = rb * 16 + g + 8 * h;
          const int cl = (wn1 * NT1 + ni) * 8 + 2 * t;
          if (r < len)
            store2(o + ((tc0 + r) * p.HV + j) * V + v0 + cl, ao[mi][ni][2 * h],
                   ao[mi][ni][2 * h + 1]);
        }
    }

    // Phase 3: S = gamma ∘ S + KdT v'.
#pragma unroll
    for (int mi = 0; mi < MT3; ++mi)
#pragma unroll
      for (int ni = 0; ni < NT3; ++ni)
#pragma unroll
        for (int e = 0; e < 4; ++e) S[mi][ni][e] *= sgam[srow(mi, e)];
#pragma unroll
    for (int k0 = 0; k0 < C; k0 += 16) {
      typename Op::FragB fb[NT3];
#pragma unroll
      for (int ni = 0; ni < NT3; ++ni)
        Op::load_b(fb[ni], VT + (wn3 * NT3 + ni) * 8 * LC + k0, LC);
#pragma unroll
      for (int mi = 0; mi < MT3; ++mi) {
        typename Op::FragA fa;
        Op::load_a(fa, skdt + (wm3 * MT3 + mi) * 16 * LC + k0, LC);
#pragma unroll
        for (int ni = 0; ni < NT3; ++ni) Op::mma(S[mi][ni], fa, fb[ni]);
      }
    }
    store_state();
    if (Tr::kStages == 1 && c + 1 < nchunks) {
      __syncthreads();
      issue(first + c + 1, 0);
    }
  }

  if (p.ht) {
    float* ht = static_cast<float*>(p.ht) + sbase;
#pragma unroll
    for (int mi = 0; mi < MT3; ++mi)
#pragma unroll
      for (int ni = 0; ni < NT3; ++ni)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = srow(mi, 2 * h), cl = v0 + scol(ni, 0);
          if (!vk) {
            *reinterpret_cast<float2*>(ht + int64_t(r) * V + cl) =
                make_float2(S[mi][ni][2 * h], S[mi][ni][2 * h + 1]);
          } else {
            ht[int64_t(cl) * K + r] = S[mi][ni][2 * h];
            ht[int64_t(cl + 1) * K + r] = S[mi][ni][2 * h + 1];
          }
        }
  }
}

}  // namespace deltac::cuda::detail

#endif  // DELTAC_CUDA_CHUNKED_SCAN_CUH

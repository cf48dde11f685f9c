// The sequential scan over the chunks of one sequence, fused with the
// output. One block per (V tile, value head, sequence) holds the f32 state
// tile S [K, BV] in registers (tensor-core accumulator layout) and a copy in
// the compute type in shared memory (hi + lo halves for 16-bit types). Per
// chunk, from the raw q, k, v rows (kda: the decayed operands of
// chunked_prep.cuh) and the intra-chunk T, Aqk and row factors:
//   r  = fb ∘ V - fa ∘ (K S_hi + K S_lo)   (the residual, in f32: a rounding
//                                          of K S or S would be amplified by
//                                          its cancellation; rounded once)
//   v' = T r
//   o  = fq ∘ (Q S_hi) + Aqk v'
//   S  = gamma ∘ S + Kᵀ (fk ∘ v')          (gamma per key row)
// with the row factors fa, fb, fq, fk applied in f32 per token. The next
// chunk's rows are copied with cp.async while this one computes (Stages = 2).
#ifndef DELTAC_CUDA_CHUNKED_SCAN_CUH
#define DELTAC_CUDA_CHUNKED_SCAN_CUH

#include "deltac/cuda/chunked_mma.cuh"
#include "deltac/cuda/chunked_prep.cuh"
#include "deltac/cuda/chunked_traits.cuh"
#include "deltac/params.h"

#include <cstdint>

namespace deltac::cuda::detail {

template <deltac_variant Var, class Tr>
__global__ void __launch_bounds__(Tr::kThreads)
    chunked_scan_kernel(const deltac_fwd_params p, const ChunkedWs<typename Tr::Ts> ws) {
  if (ws.skip && *ws.skip)  // the whole grid: before any barrier or write
    return;
  using Ts = typename Tr::Ts;
  using In = typename Tr::In;
  using Op = Mma<Ts>;
  constexpr int C = Tr::C, K = Tr::K, V = Tr::V, BV = Tr::BV;
  constexpr int LK = Tr::LK, LC = Tr::LC, LB = Tr::LB, NTH = Tr::kThreads;
  constexpr int MW1 = Tr::MW1, MT1 = Tr::MT1, NT1 = Tr::NT1;
  constexpr int MW3 = Tr::MW3, MT3 = Tr::MT3, NT3 = Tr::NT3;
  constexpr bool kSplit = Tr::kSplit, kKda = Tr::kKda;
  constexpr int E = 16 / int(sizeof(Ts));
  // Stage: q [C][LK], k [C][LK], kda: k for the update [C][LK], v tile
  // [C][LB], T [C][LC], Aqk [C][LC] (compute type); row factors [4][C] and
  // gamma [K] (f32).
  constexpr int kOffV = (kKda ? 3 : 2) * C * LK;
  constexpr int kOffT = kOffV + C * LB;
  constexpr int kOffA = kOffT + C * LC;
  constexpr int kStageTs = kOffA + C * LC;
  constexpr int kStageBytes = kStageTs * int(sizeof(Ts)) + (4 * C + K) * 4;
  static_assert(kStageBytes % 16 == 0, "stage alignment");

  extern __shared__ __align__(16) unsigned char smem_raw[];
  auto stage = [&](int s) { return reinterpret_cast<Ts*>(smem_raw + s * kStageBytes); };
  Ts* SH = reinterpret_cast<Ts*>(smem_raw + Tr::kStages * kStageBytes);  // [K][LB]
  Ts* SL = SH + K * LB;                     // [K][LB] S - S_hi (16-bit types)
  Ts* R = SL + (kSplit ? K * LB : 0);       // [C][LB] residual
  Ts* VP = R + C * LB;                      // [C][LB] v'
  Ts* VD = VP + C * LB;                     // [C][LB] fk ∘ v'

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane >> 2, t = lane & 3;
  const int v0 = blockIdx.x * BV, j = blockIdx.y, n = blockIdx.z;
  const int wm1 = warp % MW1, wn1 = warp / MW1;
  const int wm3 = warp % MW3, wn3 = warp / MW3;
  const int hqk = j / (p.HV / p.H);

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
        for (int h = 0; h < 2; ++h) {
          const float x0 = S[mi][ni][2 * h], x1 = S[mi][ni][2 * h + 1];
          const int off = srow(mi, 2 * h) * LB + scol(ni, 0);
          store2(SH + off, x0, x1);
          if constexpr (kSplit)
            store2(SL + off, x0 - cvt_f(cvt_t<Ts>(x0)), x1 - cvt_f(cvt_t<Ts>(x1)));
        }
  };
  store_state();

  // Rows of one chunk into stage s; rows past the sequence are zero.
  auto issue = [&](int64_t c, int s) {
    const int64_t slot = (first + c) * p.HV + j;
    const int64_t t0 = s0 + c * C;
    const int len = int(s1 - t0 < C ? s1 - t0 : C);
    Ts* b = stage(s);
    constexpr int SK = K / E;
    for (int i = tid; i < C * SK; i += NTH) {
      const int r = i / SK, sg = i % SK;
      const bool in = r < len;
      const int64_t tok = in ? t0 + r : 0;
      if constexpr (kKda) {
        const int64_t off = (slot * C + r) * K + sg * E;
        cp_async16_zfill(b + r * LK + sg * E, ws.qg + off, in);
        cp_async16_zfill(b + C * LK + r * LK + sg * E, ws.kg + off, in);
        cp_async16_zfill(b + 2 * C * LK + r * LK + sg * E, ws.kd + off, in);
      } else {
        const int64_t off = (tok * p.H + hqk) * K + sg * E;
        cp_async16_zfill(b + r * LK + sg * E, static_cast<const In*>(p.q) + off, in);
        cp_async16_zfill(b + C * LK + r * LK + sg * E, static_cast<const In*>(p.k) + off, in);
      }
    }
    constexpr int SB = BV / E;
    for (int i = tid; i < C * SB; i += NTH) {
      const int r = i / SB, sg = i % SB;
      const bool in = r < len;
      const int64_t tok = in ? t0 + r : 0;
      cp_async16_zfill(b + kOffV + r * LB + sg * E,
                       static_cast<const In*>(p.v) + (tok * p.HV + j) * V + v0 + sg * E, in);
    }
    constexpr int SC = C / E;
    for (int i = tid; i < C * SC; i += NTH) {
      const int r = i / SC, sg = i % SC;
      cp_async16(b + kOffT + r * LC + sg * E, ws.t + (slot * C + r) * C + sg * E);
      cp_async16(b + kOffA + r * LC + sg * E, ws.aqk + (slot * C + r) * C + sg * E);
    }
    float* fb = reinterpret_cast<float*>(b + kStageTs);
    for (int i = tid; i < C + K / 4; i += NTH) {
      if (i < C)
        cp_async16(fb + 4 * i, ws.f + slot * 4 * C + 4 * i);
      else
        cp_async16(fb + 4 * C + 4 * (i - C), ws.gamma + slot * K + 4 * (i - C));
    }
    cp_async_commit();
  };

  In* o = static_cast<In*>(p.o);
  if (nchunks > 0)
    issue(0, 0);
  for (int64_t c = 0; c < nchunks; ++c) {
    const int s = Tr::kStages == 2 ? int(c & 1) : 0;
    cp_async_wait_all();
    __syncthreads();
    if (Tr::kStages == 2 && c + 1 < nchunks)
      issue(c + 1, s ^ 1);
    const Ts* sq = stage(s);
    const Ts* sk = sq + C * LK;
    const Ts* skd = kKda ? sq + 2 * C * LK : sk;
    const Ts* sv = sq + kOffV;
    const Ts* st = sq + kOffT;
    const Ts* sa = sq + kOffA;
    const float* fa = reinterpret_cast<const float*>(sq + kStageTs);
    const float* fbv = fa + C;
    const float* fq = fa + 2 * C;
    const float* fk = fa + 3 * C;
    const float* sgam = fa + 4 * C;
    const int64_t tc0 = s0 + c * C;
    const int len = int(s1 - tc0 < C ? s1 - tc0 : C);

    // Phase 1: X = K S_hi (+ K S_lo), Y = Q S_hi; r = fb V - fa X, o = fq Y.
    float ax[MT1][NT1][4], al[MT1][NT1][4], ao[MT1][NT1][4];
#pragma unroll
    for (int mi = 0; mi < MT1; ++mi)
#pragma unroll
      for (int ni = 0; ni < NT1; ++ni)
#pragma unroll
        for (int e = 0; e < 4; ++e) ax[mi][ni][e] = al[mi][ni][e] = ao[mi][ni][e] = 0.f;
#pragma unroll 2
    for (int k0 = 0; k0 < K; k0 += 16) {
      typename Op::FragB fh[NT1], fl[kSplit ? NT1 : 1];
#pragma unroll
      for (int ni = 0; ni < NT1; ++ni) {
        Op::load_b_t(fh[ni], SH + k0 * LB + (wn1 * NT1 + ni) * 8, LB);
        if constexpr (kSplit)
          Op::load_b_t(fl[ni], SL + k0 * LB + (wn1 * NT1 + ni) * 8, LB);
      }
#pragma unroll
      for (int mi = 0; mi < MT1; ++mi) {
        typename Op::FragA fa_k, fa_q;
        Op::load_a(fa_k, sk + (wm1 * MT1 + mi) * 16 * LK + k0, LK);
        Op::load_a(fa_q, sq + (wm1 * MT1 + mi) * 16 * LK + k0, LK);
#pragma unroll
        for (int ni = 0; ni < NT1; ++ni) {
          Op::mma(ax[mi][ni], fa_k, fh[ni]);
          if constexpr (kSplit)
            Op::mma(al[mi][ni], fa_k, fl[ni]);
          Op::mma(ao[mi][ni], fa_q, fh[ni]);
        }
      }
    }
#pragma unroll
    for (int mi = 0; mi < MT1; ++mi)
#pragma unroll
      for (int ni = 0; ni < NT1; ++ni)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = (wm1 * MT1 + mi) * 16 + g + 8 * h;
          const int cl = (wn1 * NT1 + ni) * 8 + 2 * t;
          const float a = fa[r], b = fbv[r], qf = fq[r];
          const float x0 = ax[mi][ni][2 * h] + al[mi][ni][2 * h];
          const float x1 = ax[mi][ni][2 * h + 1] + al[mi][ni][2 * h + 1];
          store2(R + r * LB + cl, b * cvt_f(sv[r * LB + cl]) - a * x0,
                 b * cvt_f(sv[r * LB + cl + 1]) - a * x1);
          ao[mi][ni][2 * h] *= qf;
          ao[mi][ni][2 * h + 1] *= qf;
        }
    __syncthreads();

    // Phase 2: v' = T r (T is lower triangular: k blocks <= row block).
#pragma unroll
    for (int mi = 0; mi < MT1; ++mi) {
      const int rb = wm1 * MT1 + mi;
      float av[NT1][4];
#pragma unroll
      for (int ni = 0; ni < NT1; ++ni) av[ni][0] = av[ni][1] = av[ni][2] = av[ni][3] = 0.f;
      for (int k0 = 0; k0 <= rb * 16; k0 += 16) {
        typename Op::FragA fa_t;
        Op::load_a(fa_t, st + rb * 16 * LC + k0, LC);
#pragma unroll
        for (int ni = 0; ni < NT1; ++ni) {
          typename Op::FragB fb;
          Op::load_b_t(fb, R + k0 * LB + (wn1 * NT1 + ni) * 8, LB);
          Op::mma(av[ni], fa_t, fb);
        }
      }
#pragma unroll
      for (int ni = 0; ni < NT1; ++ni)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = rb * 16 + g + 8 * h;
          const int off = r * LB + (wn1 * NT1 + ni) * 8 + 2 * t;
          const float x0 = av[ni][2 * h], x1 = av[ni][2 * h + 1], f = fk[r];
          store2(VP + off, x0, x1);
          store2(VD + off, f * x0, f * x1);
        }
    }
    __syncthreads();

    // Phase 3: o += Aqk v' (lower triangular), out.
#pragma unroll
    for (int mi = 0; mi < MT1; ++mi) {
      const int rb = wm1 * MT1 + mi;
      for (int k0 = 0; k0 <= rb * 16; k0 += 16) {
        typename Op::FragA fa_a;
        Op::load_a(fa_a, sa + rb * 16 * LC + k0, LC);
#pragma unroll
        for (int ni = 0; ni < NT1; ++ni) {
          typename Op::FragB fb;
          Op::load_b_t(fb, VP + k0 * LB + (wn1 * NT1 + ni) * 8, LB);
          Op::mma(ao[mi][ni], fa_a, fb);
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

    // Phase 4: S = gamma ∘ S + Kᵀ (fk ∘ v').
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
        Op::load_b_t(fb[ni], VD + k0 * LB + (wn3 * NT3 + ni) * 8, LB);
#pragma unroll
      for (int mi = 0; mi < MT3; ++mi) {
        typename Op::FragA fa_k;
        Op::load_a_t(fa_k, skd + k0 * LK + (wm3 * MT3 + mi) * 16, LK);
#pragma unroll
        for (int ni = 0; ni < NT3; ++ni) Op::mma(S[mi][ni], fa_k, fb[ni]);
      }
    }
    store_state();
    if (Tr::kStages == 1 && c + 1 < nchunks) {
      __syncthreads();
      issue(c + 1, 0);
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

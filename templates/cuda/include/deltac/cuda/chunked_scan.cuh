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
// Stages - 1 chunks' rows are copied with cp.async while one computes.
// With the sequence split a block runs one segment of the sequence, and the
// later segments' extra identity columns (chunked_split.cuh).
// Precise (scan 5, 16-bit types): r, T and fk ∘ v' enter their products as
// hi + lo terms (v' = T_hi r_hi + T_hi r_lo + T_lo r_hi; S += Kᵀ (vd_hi +
// vd_lo)), so no operand rounding reaches the f32 state: what beta near 2
// (no decay, reflections) needs over long sequences.
#ifndef DELTAC_CUDA_CHUNKED_SCAN_CUH
#define DELTAC_CUDA_CHUNKED_SCAN_CUH

#include "deltac/cuda/chunked_mma.cuh"
#include "deltac/cuda/chunked_prep.cuh"
#include "deltac/cuda/chunked_traits.cuh"
#include "deltac/params.h"

#include <cstdint>

namespace deltac::cuda::detail {

// The lower block triangle of a [C][C] 16-bit matrix (row r: its 16-column
// blocks up to and including the diagonal one), from global (row stride C)
// into shared memory (row stride LD), by cp.async over NTH threads (!on:
// zeros, nothing read); the blocks above the diagonal are not copied.
template <int C, int NTH, int LD, class Ts>
__device__ __forceinline__ void copy_lower(Ts* dst, const Ts* src, int tid, bool on = true) {
  static_assert(sizeof(Ts) == 2 && C % 16 == 0, "16-bit, 16-row blocks");
#pragma unroll
  for (int b = 0; b < C / 16; ++b) {
    constexpr int E = 8;
    const int n = 2 * (b + 1);  // 16-byte segments a row of block row b
    for (int i = tid; i < 16 * n; i += NTH) {
      const int r = 16 * b + i / n, c = (i % n) * E;
      cp_async16_zfill(dst + r * LD + c, src + r * C + c, on);
    }
  }
}

// Rows [0, C) of SEGS 16-byte segments each, from global (row stride
// gstride elements) into shared memory (row stride LD), by cp.async over the
// block's NTH threads; with ZFILL, rows >= len are zero (and not read).
template <int C, int NTH, int SEGS, int LD, bool ZFILL, class Ts>
__device__ __forceinline__ void copy_rows(Ts* dst, const Ts* src, int64_t gstride, int len,
                                          int tid) {
  constexpr int E = 16 / int(sizeof(Ts));
  if constexpr (NTH % SEGS == 0 && (C * SEGS) % NTH == 0) {
    constexpr int RS = NTH / SEGS, N = C * SEGS / NTH;  // row step, items per thread
    const int r0 = tid / SEGS, sg = tid % SEGS;
    const Ts* g0 = src + r0 * gstride + sg * E;
    Ts* d0 = dst + r0 * LD + sg * E;
#pragma unroll
    for (int m = 0; m < N; ++m) {
      const int r = r0 + m * RS;
      if constexpr (ZFILL)
        cp_async16_zfill(d0 + m * RS * LD, r < len ? g0 + m * RS * gstride : src, r < len);
      else
        cp_async16(d0 + m * RS * LD, g0 + m * RS * gstride);
    }
  } else {
    for (int i = tid; i < C * SEGS; i += NTH) {
      const int r = i / SEGS, sg = i % SEGS;
      if constexpr (ZFILL)
        cp_async16_zfill(dst + r * LD + sg * E, r < len ? src + r * gstride + sg * E : src,
                         r < len);
      else
        cp_async16(dst + r * LD + sg * E, src + r * gstride + sg * E);
    }
  }
}

// Thread 0: waits until the intra-chunk output of a slot is written (the
// fused kernel, chunked_fused.cuh); the block's barrier that follows orders
// the other threads' reads after it.
__device__ __forceinline__ void wait_ready(const int32_t* flag) {
#if DELTAC_MMA_OK
  for (;;) {
    int32_t v;
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(flag) : "memory");
    if (v)
      return;
    __nanosleep(64);
  }
#else
  while (!*reinterpret_cast<const volatile int32_t*>(flag)) {
  }
  __threadfence();
#endif
}

// Under the sequence split (chunked_split.cuh), where segment seg of
// sequence n ends for value head j: P ([K][K], the identity columns) or C
// ([K][V], the real ones); *ld gets its row stride.
template <class Ts>
__device__ __forceinline__ float* split_state(const ChunkedWs<Ts>& ws, int HV, int n, int seg,
                                              int j, bool ident, int K, int V, int* ld) {
  const int64_t sl = (int64_t(n) * ws.split + seg) * HV + j;
  *ld = ident ? K : V;
  return ident ? ws.pst + sl * K * K : ws.cst + sl * K * V;
}

// One block of the scan: V tile bx, value head by, sequence x split +
// segment bz (kThreads threads, chunked_scan_smem(..., Precise) bytes of
// dynamic shared memory). With ws.ready (the fused kernel), each chunk's
// intra-chunk output is waited for before its copy is issued.
template <deltac_variant Var, class Tr, bool Precise = false>
__device__ __forceinline__ void chunked_scan_block(const deltac_fwd_params& p,
                                                   const ChunkedWs<typename Tr::Ts>& ws, int bx,
                                                   int by, int bz) {
  using Ts = typename Tr::Ts;
  using In = typename Tr::In;
  using Op = Mma<Ts>;
  constexpr int C = Tr::C, K = Tr::K, V = Tr::V, BV = Tr::BV;
  constexpr int LK = Tr::LK, LC = Tr::LC, LB = Tr::LB, NTH = Tr::kThreads;
  constexpr int MW1 = Tr::MW1, MT1 = Tr::MT1, NT1 = Tr::NT1;
  constexpr int MW3 = Tr::MW3, MT3 = Tr::MT3, NT3 = Tr::NT3;
  constexpr bool kSplit = Tr::kSplit, kKda = Tr::kKda;
  static_assert(!Precise || kSplit, "scan 5: 16-bit types (f32 products are already exact)");
  constexpr int E = 16 / int(sizeof(Ts));
  // Stage: q [C][LK], k [C][LK], kda: k for the update [C][LK], v tile
  // [C][LB], T [C][LC], Aqk [C][LC] (compute type), Precise: T_lo [C][LC];
  // row factors [4][C] and gamma [K] (f32).
  constexpr int kOffV = (kKda ? 3 : 2) * C * LK;
  constexpr int kOffT = kOffV + C * LB;
  constexpr int kOffA = kOffT + C * LC;
  constexpr int kOffTL = kOffA + C * LC;
  constexpr int kStageTs = kOffTL + (Precise ? C * LC : 0);
  constexpr int kStageBytes = kStageTs * int(sizeof(Ts)) + (4 * C + K) * 4;
  static_assert(kStageBytes % 16 == 0, "stage alignment");

  extern __shared__ __align__(16) unsigned char smem_raw[];
  auto stage = [&](int s) { return reinterpret_cast<Ts*>(smem_raw + s * kStageBytes); };
  Ts* SH = reinterpret_cast<Ts*>(smem_raw + Tr::kStages * kStageBytes);  // [K][LB]
  Ts* SL = SH + K * LB;                     // [K][LB] S - S_hi (16-bit types)
  Ts* R = SL + (kSplit ? K * LB : 0);       // [C][LB] residual
  Ts* VP = R + C * LB;                      // [C][LB] v'
  Ts* VD = VP + C * LB;                     // [C][LB] fk ∘ v'
  Ts* RL = VD + C * LB;                     // Precise: [C][LB] r - r_hi
  Ts* VDL = RL + C * LB;                    // Precise: [C][LB] fk ∘ v' - its hi

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane >> 2, t = lane & 3;
  // Sequence split (ws.split > 1): blockIdx.z = sequence x split + segment;
  // V tiles past V are the identity columns of later segments: their state
  // starts at the identity, their v is zero, their outputs go to ws.qt and
  // their final state (the segment's transfer matrix) to ws.pst.
  const int nsplit = ws.split;
  const int v0 = bx * BV, j = by;
  const int n = bz / nsplit, seg = bz % nsplit;
  const bool ident = v0 >= V;
  if (ident && seg == 0)  // the whole block: before any barrier
    return;
  const int wm1 = warp % MW1, wn1 = warp / MW1;
  const int wm3 = warp % MW3, wn3 = warp / MW3;
  const int hqk = j / (p.HV / p.H);

  int64_t s0, s1, first, last;
  seq_bounds(p, n, s0, s1);
  seq_slots(p, ws.offsets, n, C, first, last);
  if (last > ws.max_chunks)
    last = ws.max_chunks;
  int64_t nchunks = last > first ? last - first : 0;
  if (nsplit > 1) {  // segment seg: chunks [seg L, seg L + L) of the sequence
    const int64_t L = (nchunks + nsplit - 1) / nsplit, cb = seg * L;
    if (seg > 0 && cb >= nchunks)  // empty segment (the whole block)
      return;
    const int64_t ce = cb + L < nchunks ? cb + L : nchunks;
    first += cb;
    s0 += cb * C;
    nchunks = ce - cb;
  }

  // State tile: element e of tile (mi, ni) is row srow(mi, e), column scol(ni, e).
  auto srow = [&](int mi, int e) { return (wm3 * MT3 + mi) * 16 + g + (e >= 2 ? 8 : 0); };
  auto scol = [&](int ni, int e) { return (wn3 * NT3 + ni) * 8 + 2 * t + (e & 1); };
  const int64_t sbase = (int64_t(n) * p.HV + j) * K * V;
  const bool vk = p.state_layout == DELTAC_STATE_VK;
  float S[MT3][NT3][4];
  if (p.h0 && seg == 0 && !ident) {
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
        for (int e = 0; e < 4; ++e)
          S[mi][ni][e] = ident && srow(mi, e) == v0 - V + scol(ni, e) ? 1.f : 0.f;
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
  // S into a state of p's layout at dst ([K][V], or [V][K] for VK).
  auto write_state = [&](float* dst) {
#pragma unroll
    for (int mi = 0; mi < MT3; ++mi)
#pragma unroll
      for (int ni = 0; ni < NT3; ++ni)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = srow(mi, 2 * h), cl = v0 + scol(ni, 0);
          if (!vk) {
            *reinterpret_cast<float2*>(dst + int64_t(r) * V + cl) =
                make_float2(S[mi][ni][2 * h], S[mi][ni][2 * h + 1]);
          } else {
            dst[int64_t(cl) * K + r] = S[mi][ni][2 * h];
            dst[int64_t(cl + 1) * K + r] = S[mi][ni][2 * h + 1];
          }
        }
  };
  // Chunk-end states: only unsplit (the host forces split 1 with them).
  const bool cstates = ws.cstates && nsplit == 1;

  // Rows of one chunk into stage s; rows past the sequence are zero.
  const Ts* qsrc = static_cast<const Ts*>(p.q);
  const Ts* ksrc = static_cast<const Ts*>(p.k);
  const Ts* vsrc = static_cast<const Ts*>(p.v);
  auto issue = [&](int64_t c, int s) {
    const int64_t slot = (first + c) * p.HV + j;
    const int64_t t0 = s0 + c * C;
    const int len = int(s1 - t0 < C ? s1 - t0 : C);
    Ts* b = stage(s);
    if constexpr (kKda) {
      copy_rows<C, NTH, K / E, LK, true>(b, ws.qg + slot * C * K, K, len, tid);
      copy_rows<C, NTH, K / E, LK, true>(b + C * LK, ws.kg + slot * C * K, K, len, tid);
      copy_rows<C, NTH, K / E, LK, true>(b + 2 * C * LK, ws.kd + slot * C * K, K, len, tid);
    } else {
      const int64_t off = (t0 * p.H + hqk) * K;
      copy_rows<C, NTH, K / E, LK, true>(b, qsrc + off, int64_t(p.H) * K, len, tid);
      copy_rows<C, NTH, K / E, LK, true>(b + C * LK, ksrc + off, int64_t(p.H) * K, len, tid);
    }
    if (!ident)
      copy_rows<C, NTH, BV / E, LB, true>(b + kOffV, vsrc + (t0 * p.HV + j) * V + v0,
                                          int64_t(p.HV) * V, len, tid);
    copy_rows<C, NTH, C / E, LC, false>(b + kOffT, ws.t + slot * C * C, C, C, tid);
    copy_rows<C, NTH, C / E, LC, false>(b + kOffA, ws.aqk + slot * C * C, C, C, tid);
    if constexpr (Precise)
      copy_rows<C, NTH, C / E, LC, false>(b + kOffTL, ws.tlo + slot * C * C, C, C, tid);
    float* fb = reinterpret_cast<float*>(b + kStageTs);
    for (int i = tid; i < C + K / 4; i += NTH) {
      if (i < C)
        cp_async16(fb + 4 * i, ws.f + slot * 4 * C + 4 * i);
      else
        cp_async16(fb + 4 * C + 4 * (i - C), ws.gamma + slot * K + 4 * (i - C));
    }
    cp_async_commit();
  };

  // Per-thread tile origins (elements) of the warp tilings.
  const int m1 = wm1 * MT1 * 16, n1 = wn1 * NT1 * 8;  // phases 1-3: C x BV
  const int m3 = wm3 * MT3 * 16, n3 = wn3 * NT3 * 8;  // phase 4: K x BV
  const Tile<Ts, LB> tSH(SH), tSL(SL), tR(R), tVP(VP), tVD(VD), tRL(RL), tVDL(VDL);
  In* o = ident ? ws.qt : static_cast<In*>(p.o);
  const int ow = ident ? K : V;                // columns per head
  const int64_t ostride = int64_t(p.HV) * ow;  // o row stride
  In* orow = o + (s0 + m1 + g) * ostride + int64_t(j) * ow + (ident ? v0 - V : v0) + n1 + 2 * t;
  // Stages S > 1: chunks c + 1 .. c + S - 1 are in flight while c computes
  // (one cp.async group per chunk, empty past the last).
  constexpr int NS = Tr::kStages;
  auto ready = [&](int64_t c) { return ws.ready + (first + c) * p.HV + j; };
  if (ws.ready) {
    if (tid == 0)
      for (int i = 0; i < (NS > 1 ? NS - 1 : 1) && i < nchunks; ++i) wait_ready(ready(i));
    __syncthreads();
  }
  for (int i = 0; i < (NS > 1 ? NS - 1 : 1); ++i) {
    if (i < nchunks)
      issue(i, i);
    else
      cp_async_commit();
  }
  for (int64_t c = 0; c < nchunks; ++c, orow += C * ostride) {
    const int s = NS > 1 ? int(c % NS) : 0;
    if (NS > 1 && ws.ready && tid == 0 && c + NS - 1 < nchunks)
      wait_ready(ready(c + NS - 1));
    if constexpr (NS > 1)
      cp_async_wait<NS - 2>();
    else
      cp_async_wait_all();
    __syncthreads();
    if constexpr (NS > 1) {
      if (c + NS - 1 < nchunks)
        issue(c + NS - 1, int((c + NS - 1) % NS));
      else
        cp_async_commit();
    }
    const Ts* sq = stage(s);
    const Tile<Ts, LK> tQ(sq), tK(sq + C * LK), tKd(kKda ? sq + 2 * C * LK : sq + C * LK);
    const Tile<Ts, LC> tT(sq + kOffT), tA(sq + kOffA), tTL(sq + kOffTL);
    const Ts* sv = sq + kOffV;
    const float* fa = reinterpret_cast<const float*>(sq + kStageTs);
    const float* fbv = fa + C;
    const float* fq = fa + 2 * C;
    const float* fk = fa + 3 * C;
    const float* sgam = fa + 4 * C;
    const int len = int(s1 - (s0 + c * C) < C ? s1 - (s0 + c * C) : C);

    // Phase 1: X = K S_hi (+ K S_lo); r = fb V - fa X.
    float ax[MT1][NT1][4], al[MT1][NT1][4], ao[MT1][NT1][4];
#pragma unroll
    for (int mi = 0; mi < MT1; ++mi)
#pragma unroll
      for (int ni = 0; ni < NT1; ++ni)
#pragma unroll
        for (int e = 0; e < 4; ++e) ax[mi][ni][e] = al[mi][ni][e] = ao[mi][ni][e] = 0.f;
#pragma unroll
    for (int k0 = 0; k0 < K; k0 += 16) {
      typename Op::FragB fh[NT1], fl[kSplit ? NT1 : 1];
#pragma unroll
      for (int ni = 0; ni < NT1; ++ni) {
        tSH.lbt(fh[ni], k0 * LB + n1 + ni * 8);
        if constexpr (kSplit)
          tSL.lbt(fl[ni], k0 * LB + n1 + ni * 8);
      }
#pragma unroll
      for (int mi = 0; mi < MT1; ++mi) {
        typename Op::FragA fa_k;
        tK.la(fa_k, (m1 + mi * 16) * LK + k0);
#pragma unroll
        for (int ni = 0; ni < NT1; ++ni) {
          Op::mma(ax[mi][ni], fa_k, fh[ni]);
          if constexpr (kSplit)
            Op::mma(al[mi][ni], fa_k, fl[ni]);
        }
      }
    }
#pragma unroll
    for (int mi = 0; mi < MT1; ++mi)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = m1 + mi * 16 + g + 8 * h;
        const float a = fa[r], b = fbv[r];
#pragma unroll
        for (int ni = 0; ni < NT1; ++ni) {
          const int cl = n1 + ni * 8 + 2 * t;
          const float x0 = ax[mi][ni][2 * h] + al[mi][ni][2 * h];
          const float x1 = ax[mi][ni][2 * h + 1] + al[mi][ni][2 * h + 1];
          const float y0 = ident ? 0.f : cvt_f(sv[r * LB + cl]);
          const float y1 = ident ? 0.f : cvt_f(sv[r * LB + cl + 1]);
          const float r0 = b * y0 - a * x0, r1 = b * y1 - a * x1;
          store2(R + r * LB + cl, r0, r1);
          if constexpr (Precise)
            store2(RL + r * LB + cl, r0 - cvt_f(cvt_t<Ts>(r0)), r1 - cvt_f(cvt_t<Ts>(r1)));
        }
      }
    __syncthreads();

    // Phase 2: v' = T r (T is lower triangular: k blocks <= row block), and
    // Y = Q S_hi, o = fq Y (off the state's chain: S_hi is rewritten only
    // after phase 4; its products fill phase 2's latency).
#pragma unroll
    for (int mi = 0; mi < MT1; ++mi) {
      const int rb = wm1 * MT1 + mi;
      float av[NT1][4];
#pragma unroll
      for (int ni = 0; ni < NT1; ++ni) av[ni][0] = av[ni][1] = av[ni][2] = av[ni][3] = 0.f;
#pragma unroll
      for (int kb = 0; kb < C / 16; ++kb) {
        if (kb > rb)
          break;
        typename Op::FragA fa_t;
        tT.la(fa_t, rb * 16 * LC + kb * 16);
#pragma unroll
        for (int ni = 0; ni < NT1; ++ni) {
          typename Op::FragB fb;
          tR.lbt(fb, kb * 16 * LB + n1 + ni * 8);
          Op::mma(av[ni], fa_t, fb);
          if constexpr (Precise) {
            typename Op::FragB fl;
            tRL.lbt(fl, kb * 16 * LB + n1 + ni * 8);
            Op::mma(av[ni], fa_t, fl);
          }
        }
        if constexpr (Precise) {
          typename Op::FragA fa_tl;
          tTL.la(fa_tl, rb * 16 * LC + kb * 16);
#pragma unroll
          for (int ni = 0; ni < NT1; ++ni) {
            typename Op::FragB fb;
            tR.lbt(fb, kb * 16 * LB + n1 + ni * 8);
            Op::mma(av[ni], fa_tl, fb);
          }
        }
      }
#pragma unroll
      for (int k0 = 0; k0 < K; k0 += 16) {
        typename Op::FragA fa_q;
        tQ.la(fa_q, (m1 + mi * 16) * LK + k0);
#pragma unroll
        for (int ni = 0; ni < NT1; ++ni) {
          typename Op::FragB fh;
          tSH.lbt(fh, k0 * LB + n1 + ni * 8);
          Op::mma(ao[mi][ni], fa_q, fh);
        }
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = rb * 16 + g + 8 * h;
        const float qf = fq[r];
#pragma unroll
        for (int ni = 0; ni < NT1; ++ni) {
          ao[mi][ni][2 * h] *= qf;
          ao[mi][ni][2 * h + 1] *= qf;
        }
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = rb * 16 + g + 8 * h;
        const float f = fk[r];
#pragma unroll
        for (int ni = 0; ni < NT1; ++ni) {
          const int off = r * LB + n1 + ni * 8 + 2 * t;
          const float x0 = av[ni][2 * h], x1 = av[ni][2 * h + 1];
          store2(VP + off, x0, x1);
          store2(VD + off, f * x0, f * x1);
          if constexpr (Precise)
            store2(VDL + off, f * x0 - cvt_f(cvt_t<Ts>(f * x0)),
                   f * x1 - cvt_f(cvt_t<Ts>(f * x1)));
        }
      }
    }
    __syncthreads();

    // Phase 3: o += Aqk v' (lower triangular), out.
#pragma unroll
    for (int mi = 0; mi < MT1; ++mi) {
      const int rb = wm1 * MT1 + mi;
#pragma unroll
      for (int kb = 0; kb < C / 16; ++kb) {
        if (kb > rb)
          break;
        typename Op::FragA fa_a;
        tA.la(fa_a, rb * 16 * LC + kb * 16);
#pragma unroll
        for (int ni = 0; ni < NT1; ++ni) {
          typename Op::FragB fb;
          tVP.lbt(fb, kb * 16 * LB + n1 + ni * 8);
          Op::mma(ao[mi][ni], fa_a, fb);
        }
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = m1 + mi * 16 + g + 8 * h;
        if (r < len) {
          In* orr = orow + (mi * 16 + 8 * h) * ostride;
#pragma unroll
          for (int ni = 0; ni < NT1; ++ni)
            store2(orr + ni * 8, ao[mi][ni][2 * h], ao[mi][ni][2 * h + 1]);
        }
      }
    }

    // Phase 4: S = gamma ∘ S + Kᵀ (fk ∘ v').
#pragma unroll
    for (int mi = 0; mi < MT3; ++mi)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float gm = sgam[m3 + mi * 16 + g + 8 * h];
#pragma unroll
        for (int ni = 0; ni < NT3; ++ni) {
          S[mi][ni][2 * h] *= gm;
          S[mi][ni][2 * h + 1] *= gm;
        }
      }
#pragma unroll
    for (int k0 = 0; k0 < C; k0 += 16) {
      typename Op::FragB fb[NT3], fl[Precise ? NT3 : 1];
#pragma unroll
      for (int ni = 0; ni < NT3; ++ni) {
        tVD.lbt(fb[ni], k0 * LB + n3 + ni * 8);
        if constexpr (Precise)
          tVDL.lbt(fl[ni], k0 * LB + n3 + ni * 8);
      }
#pragma unroll
      for (int mi = 0; mi < MT3; ++mi) {
        typename Op::FragA fa_k;
        tKd.lat(fa_k, k0 * LK + m3 + mi * 16);
#pragma unroll
        for (int ni = 0; ni < NT3; ++ni) {
          Op::mma(S[mi][ni], fa_k, fb[ni]);
          if constexpr (Precise)
            Op::mma(S[mi][ni], fa_k, fl[ni]);
        }
      }
    }
    store_state();
    if (cstates && first + c < ws.cstates_count)
      write_state(ws.cstates + ((first + c) * p.HV + j) * K * V);
    if (NS == 1 && c + 1 < nchunks) {
      if (ws.ready && tid == 0)
        wait_ready(ready(c + 1));
      __syncthreads();
      issue(c + 1, 0);
    }
  }

  if (nsplit > 1) {  // the segment's final state (identity columns: P)
    int ld;
    float* dst = split_state(ws, p.HV, n, seg, j, ident, K, V, &ld);
    const int cb = ident ? v0 - V : v0;
#pragma unroll
    for (int mi = 0; mi < MT3; ++mi)
#pragma unroll
      for (int ni = 0; ni < NT3; ++ni)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          *reinterpret_cast<float2*>(dst + int64_t(srow(mi, 2 * h)) * ld + cb + scol(ni, 0)) =
              make_float2(S[mi][ni][2 * h], S[mi][ni][2 * h + 1]);
  } else if (p.ht) {
    write_state(static_cast<float*>(p.ht) + sbase);
  }
}

template <deltac_variant Var, class Tr, bool Precise = false>
__global__ void __launch_bounds__(Tr::kThreads)
    chunked_scan_kernel(const deltac_fwd_params p, const ChunkedWs<typename Tr::Ts> ws) {
  if (ws.skip && *ws.skip)  // the whole grid: before any barrier or write
    return;
  if (ws.route > 0 && p.cu_seqlens) {  // mixed batches: the recurrent kernel's sequence
    int64_t s0, s1;
    seq_bounds(p, int(blockIdx.z) / ws.split, s0, s1);
    if (s1 - s0 <= ws.route)
      return;
  }
  chunked_scan_block<Var, Tr, Precise>(p, ws, int(blockIdx.x), int(blockIdx.y),
                                       int(blockIdx.z));
}

}  // namespace deltac::cuda::detail

#endif  // DELTAC_CUDA_CHUNKED_SCAN_CUH

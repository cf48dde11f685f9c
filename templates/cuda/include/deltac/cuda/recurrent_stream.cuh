// The stream form of the fused recurrent kernel (sm_80 or newer; where it
// runs: recurrent.cuh's stream_applies). Persistent blocks walk the
// (sequence, value head, V tile) tiles blockIdx.x, + gridDim.x, ... In each
// block a producer warp copies a tile's state rows and its tokens' q / k / v
// (kda: g) rows into a ring of shared-memory stages by cp.async, up to
// `stages` tiles ahead, having loaded the tile's slots, betas and gates
// into its registers one tile earlier; the other warps compute the tile as
// strip_body does (StripTraits geometry, the state in registers across the
// tokens, its rows interleaved: lane group g holds rows g, g + G, ...) and
// store the new state from registers. So the state loads, the pool's slot
// loads and the compute of different tiles overlap, where the
// one-block-per-tile kernels wait on each block's first load.
// Same math, fields and contract as strip_body, for calls without
// cu_seqlens, state_steps or accepted, of 1..DELTAC_MAX_DECODE_TOKENS
// tokens, K-first states.
#ifndef DELTAC_CUDA_RECURRENT_STREAM_CUH
#define DELTAC_CUDA_RECURRENT_STREAM_CUH

#include "deltac/cuda/mbarrier.cuh"
#include "deltac/cuda/recurrent_strip.cuh"

namespace deltac::cuda::detail {

constexpr int kStreamMaxStages = 8;

// One stage's shared memory for tiles of Tr: the state rows (padded so that
// a warp's lane groups, reading consecutive rows at once, start kPiece
// bytes apart modulo 128: no bank conflicts), then per token the q, k, v
// (and kda's g) rows. Offsets in bytes, all 16-byte multiples.
template <class Tr, class InT, class StT>
struct StreamLayout {
  static constexpr int kRowBytes = Tr::BV * int(sizeof(StT));
  static constexpr int kPiece = Tr::L * Tr::kVec * int(sizeof(StT));  // a lane group's row piece
  static constexpr int kTarget = kPiece < 16 ? 16 : kPiece;
  static constexpr int kStride =
      kRowBytes + (kPiece >= 128 ? 0 : (kTarget - kRowBytes % 128 + 128) % 128);
  static constexpr int kStateBytes = Tr::K * kStride;
  static_assert(kRowBytes % 16 == 0 && kStride % 16 == 0, "rows of 16-byte pieces");

  int q, k, v, g, end, bytes;
  __host__ __device__ constexpr StreamLayout(int T, bool kda)
      : q(kStateBytes),
        k(q + T * Tr::K * int(sizeof(InT))),
        v(k + T * Tr::K * int(sizeof(InT))),
        g(v + T * Tr::BV * int(sizeof(InT))),
        end(g + (kda ? T * Tr::K * 4 : 0)),
        bytes((end + 127) / 128 * 128) {}
};

template <deltac_variant Var, class Tr, class InT, class StT>
__global__ void __launch_bounds__((Tr::kWarps + 1) * 32)
    stream_kernel(const deltac_fwd_params p, float scale, int stages, const int32_t* skip) {
#if DELTAC_MBAR_OK
  constexpr int K = Tr::K, V = Tr::V, BV = Tr::BV, R = Tr::R, L = Tr::L, G = Tr::kGroups;
  constexpr int Vec = Tr::kVec, W = Tr::kWarps;
  constexpr int kWords = Vec * int(sizeof(StT)) / 4;
  constexpr bool kKda = Var == DELTAC_VARIANT_KDA;
  constexpr bool kGated = Var == DELTAC_VARIANT_GATED;
  constexpr bool kFp8 = kFp8State<StT>;
  constexpr int kMaxT = DELTAC_MAX_DECODE_TOKENS;
  using Lay = StreamLayout<Tr, InT, StT>;
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ __align__(8) uint64_t full[kStreamMaxStages], empty[kStreamMaxStages];
  __shared__ int32_t s_rs[kStreamMaxStages], s_ws[kStreamMaxStages];
  __shared__ float s_beta[kStreamMaxStages][kMaxT], s_gate[kStreamMaxStages][kMaxT];
  __shared__ float s_scale[kStreamMaxStages];  // fp8: the head's state scale

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) {
      mbar_init(smem_addr(&full[s]), 33);  // the producer's lanes' copies + its lane 0
      mbar_init(smem_addr(&empty[s]), W);
    }
    }
  __syncthreads();
  pdl_enter();
  if (skip && *skip != 0)
    return;
  const int T = p.T;
  const Lay lay(T, kKda);
  const int64_t tiles = int64_t(p.N) * p.HV * Tr::kTiles;
  const int ratio = p.HV / p.H;
  auto where = [&](int64_t t, int* tl, int* j, int* n) {
    *tl = int(t % Tr::kTiles);
    t /= Tr::kTiles;
    *j = int(t % p.HV);
    *n = int(t / p.HV);
  };

  if (warp == W) {  // the producer
    int32_t rs = -1, ws = -1;      // lane 0: the next tile's slots, unchecked
    float s8 = 1.f;                // lane 0: its head's fp8 scale
    float beta = 0.f, gate = 0.f;  // lane tt < T: its token's
    auto fetch = [&](int64_t t) {
      int tl, j, n;
      where(t, &tl, &j, &n);
      if (lane == 0) {
        rs = p.h0 ? (p.read_slots ? p.read_slots[n] : n) : -1;
        ws = p.ht ? (p.read_slots ? (p.write_slots ? p.write_slots : p.read_slots)[n] : n) : -1;
        if constexpr (kFp8)
          s8 = fp8_scale_of(p.state_scale, j);
      }
      if (lane < T) {
        const int64_t th = (int64_t(n) * T + lane) * p.HV + j;
        beta = __ldg(p.beta + th);
        if constexpr (kGated)
          gate = __ldg(p.g + th);
      }
    };
    int64_t t = blockIdx.x;
    if (t < tiles)
      fetch(t);
    for (int f = 0; t < tiles; ++f, t += gridDim.x) {
      const int s = f % stages;
      if (f >= stages)
        mbar_wait(smem_addr(&empty[s]), uint32_t((f / stages - 1) & 1));
      int tl, j, n;
      where(t, &tl, &j, &n);
      int32_t r = rs, w = ws;
      if (p.read_slots) {
        r = r >= 0 && r < p.num_slots ? r : -1;
        w = w >= 0 && w < p.num_slots ? w : -1;
      }
      if (lane == 0) {
        s_rs[s] = r;
        s_ws[s] = w;
        s_scale[s] = s8;
      }
      if (lane < T) {
        s_beta[s][lane] = beta;
        s_gate[s][lane] = kGated ? expf(gate) : 1.f;
      }
      r = __shfl_sync(0xffffffffu, r, 0);  // every lane copies a share of the rows
      unsigned char* base = smem + size_t(s) * lay.bytes;
      // 16-byte pieces by cp.async (a bulk copy per 64- or 128-byte row ran
      // 1.5-3x slower on the H200: docs/performance.md, "The stream kernel").
      auto copy = [&](unsigned char* dst, const void* src, int pieces_per_row, int rows,
                      int dst_stride, int64_t src_stride) {
        for (int e = lane; e < rows * pieces_per_row; e += 32) {
          const int row = e / pieces_per_row, c = e % pieces_per_row;
          cp_async_row<16>(dst + row * dst_stride + c * 16,
                           static_cast<const unsigned char*>(src) + row * src_stride + c * 16,
                           true);
        }
      };
      if (r >= 0)
        copy(base, static_cast<const StT*>(p.h0) + (int64_t(r) * p.HV + j) * K * V + tl * BV,
             Lay::kRowBytes / 16, K, Lay::kStride, int64_t(V) * int(sizeof(StT)));
      constexpr int kQk = K * int(sizeof(InT));  // bytes of a q / k row
      const int64_t tok = int64_t(n) * T, hqk = j / ratio;
      copy(base + lay.q, static_cast<const InT*>(p.q) + (tok * p.H + hqk) * K, kQk / 16, T, kQk,
           int64_t(p.H) * kQk);
      copy(base + lay.k, static_cast<const InT*>(p.k) + (tok * p.H + hqk) * K, kQk / 16, T, kQk,
           int64_t(p.H) * kQk);
      copy(base + lay.v, static_cast<const InT*>(p.v) + (tok * p.HV + j) * V + tl * BV,
           BV * int(sizeof(InT)) / 16, T, BV * int(sizeof(InT)),
           int64_t(p.HV) * V * int(sizeof(InT)));
      if constexpr (kKda)
        copy(base + lay.g, p.g + (tok * p.HV + j) * K, K / 4, T, K * 4, int64_t(p.HV) * K * 4);
      const uint32_t bar = smem_addr(&full[s]);
      cp_async_mbar_arrive(bar);  // each lane's copies, once landed
      __syncwarp();
      if (lane == 0)
        mbar_arrive(bar);  // after the slots, betas and gates above
      if (t + gridDim.x < tiles)
        fetch(t + gridDim.x);
    }
    return;
  }

  // The consumers: warp w owns columns w * WV .. + WV of each tile.
  const int grp = lane / L;                          // rows grp, grp + G, ...
  const int c0 = warp * Tr::WV + (lane % L) * Vec;  // first column in the tile
  InT* o = static_cast<InT*>(p.o);
  int64_t t = blockIdx.x;
  for (int f = 0; t < tiles; ++f, t += gridDim.x) {
    const int s = f % stages;
    int tl, j, n;
    where(t, &tl, &j, &n);
    mbar_wait(smem_addr(&full[s]), uint32_t((f / stages) & 1));
    const unsigned char* base = smem + size_t(s) * lay.bytes;
    const int32_t rs = s_rs[s], ws = s_ws[s];
    const float s8 = s_scale[s];  // an fp8 state is e4m3 times it (params.h); else 1
    float h[R][Vec];
    read_rows<kFp8>(h, rs >= 0, s8, [&](int i, float* x) {
      Packed<Vec, StT> w;
      lds_words<kWords>(reinterpret_cast<const uint32_t*>(
                            base + (i * G + grp) * Lay::kStride + c0 * int(sizeof(StT))),
                        w.w);
      unpack(w, x);
    });
    const InT* sq = reinterpret_cast<const InT*>(base + lay.q);
    const InT* sk = reinterpret_cast<const InT*>(base + lay.k);
    const InT* sv = reinterpret_cast<const InT*>(base + lay.v);
    const float* sg = reinterpret_cast<const float*>(base + lay.g);
#pragma unroll 1
    for (int tt = 0; tt < T; ++tt) {
      float qr[R], kr[R], dot = 0.f, ssq = 0.f, ssk = 0.f;
#pragma unroll
      for (int i = 0; i < R; ++i) {
        qr[i] = to_float(sq[tt * K + i * G + grp]);
        kr[i] = to_float(sk[tt * K + i * G + grp]);
        dot = fmaf(qr[i], kr[i], dot);
        ssq = fmaf(qr[i], qr[i], ssq);
        ssk = fmaf(kr[i], kr[i], ssk);
      }
      dot = reduce_rows<L>(dot);
      float rq = 1.f, rk = 1.f;
      if (p.qk_l2norm) {
        rq = 1.f / sqrtf(reduce_rows<L>(ssq) + 1e-6f);
        rk = 1.f / sqrtf(reduce_rows<L>(ssk) + 1e-6f);
      }
      const float qk = dot * rq * rk, beta = s_beta[s][tt], a = s_gate[s][tt];
      float pk[Vec], pq[Vec], vv[Vec];
#pragma unroll
      for (int c = 0; c < Vec; ++c) {
        pk[c] = pq[c] = 0.f;
        vv[c] = to_float(sv[tt * BV + c0 + c]);
      }
#pragma unroll
      for (int i = 0; i < R; ++i) {
        kr[i] *= rk;
        const float qi = qr[i] * rq;
        const float ai = kKda ? expf(sg[tt * K + i * G + grp]) : a;
#pragma unroll
        for (int c = 0; c < Vec; ++c) {
          if constexpr (Var != DELTAC_VARIANT_DELTA)
            h[i][c] *= ai;
          pk[c] = fmaf(h[i][c], kr[i], pk[c]);
          pq[c] = fmaf(h[i][c], qi, pq[c]);
        }
      }
      float u[Vec], out[Vec];
      readout<L>(pk, pq, vv, beta, qk, scale, u, out);
#pragma unroll
      for (int i = 0; i < R; ++i)
#pragma unroll
        for (int c = 0; c < Vec; ++c) h[i][c] = fmaf(kr[i], u[c], h[i][c]);
      if (lane < L)
        store_n<Vec>(o + ((int64_t(n) * T + tt) * p.HV + j) * V + tl * BV + c0, true, out);
    }
    __syncwarp();
    if (lane == 0)
      mbar_arrive(smem_addr(&empty[s]));  // this warp is done with stage s
    if (ws >= 0) {
      StT* ht = static_cast<StT*>(p.ht) + (int64_t(ws) * p.HV + j) * K * V + tl * BV + c0;
      const float inv = 1.f / s8;
#pragma unroll
      for (int i = 0; i < R; ++i) {
        if constexpr (kFp8)
#pragma unroll
          for (int c = 0; c < Vec; ++c) h[i][c] *= inv;
        store_n<Vec>(ht + int64_t(i * G + grp) * V, true, h[i]);
      }
    }
  }
#else
  (void)p, (void)scale, (void)stages, (void)skip;
  __trap();  // the launch checks the binary's architecture first
#endif
}

}  // namespace deltac::cuda::detail

#endif  // DELTAC_CUDA_RECURRENT_STREAM_CUH

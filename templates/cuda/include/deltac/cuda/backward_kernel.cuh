// The CUDA backward's sweep kernel (contract: deltac/backward.h; math:
// deltac/reference_backward.h). SIMT, f32 state, one block per (sequence,
// value head, tile of kBV value columns); blocks loop over such tasks.
//
// The state's columns evolve independently, so a block owns its kBV columns
// of the K x V state alone. Thread (warp w, lane l) holds column w * 8 + l % 8
// and key rows r * 4 + l / 8 (r < K / 4): the sum over rows of a column (w of
// the forward, du of the reverse) is two shuffles; sums over columns per key
// row (dq, dk, kda's dg) are a reduce-scatter over the warp's 8 columns, then
// a sum over warps in shared memory, then one atomicAdd per key row and token
// into f32 accumulators (summing the V tiles and, for dq/dk, the value heads
// of a q/k head).
//
// Per task:
//  1. forward from h0 over the sequence, saving the state at every kChunk-th
//     token (workspace, f32);
//  2. chunks in reverse: from the chunk's saved state, forward again saving
//     the state every S tokens (the block's workspace scratch); then the
//     S-token pieces in reverse: forward once more keeping each token's
//     state in shared memory, and the reverse sweep over those tokens.
// Every saved element is written and read back by the thread that owns it.
#ifndef DELTAC_CUDA_BACKWARD_KERNEL_CUH
#define DELTAC_CUDA_BACKWARD_KERNEL_CUH

#include "deltac/backward.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace deltac::cuda::bwd {

constexpr int kWarps = 4;
constexpr int kCols = 8;                 // value columns per warp
constexpr int kBV = kWarps * kCols;      // value columns per task
constexpr int kThreads = kWarps * 32;
constexpr int kChunk = 64;               // tokens between saved states
constexpr int kStage = 8;                // tokens staged in shared memory at a time
// Tokens whose states the reverse keeps in shared memory.
template <int K>
constexpr int sub_len() { return K >= 256 ? 2 : 4; }

// Device pointers and derived values of one call.
struct Args {
  deltac_bwd_params p;
  float scale;
  int nvt;        // V tiles
  int64_t tasks;  // N * HV * nvt
  float* ckpt;    // [slots, HV, nvt, K / 4, kThreads]
  float* sub;     // [gridDim.x, kChunk / S, K / 4, kThreads]
  float* dqa;     // [B * T, H, K]: dL/dq^ summed over value heads (scaled)
  float* dka;
  const float* rq;  // [B * T, H]: 1 / |q| (qk_l2norm), else null
  const float* rk;
};

__device__ __forceinline__ float ld(const void* p, int dt, int64_t i) {
  if (dt == DELTAC_BF16) return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  if (dt == DELTAC_F16) return __half2float(static_cast<const __half*>(p)[i]);
  return static_cast<const float*>(p)[i];
}

__device__ __forceinline__ void st(void* p, int dt, int64_t i, float x) {
  if (dt == DELTAC_BF16)
    static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16(x);
  else if (dt == DELTAC_F16)
    static_cast<__half*>(p)[i] = __float2half(x);
  else
    static_cast<float*>(p)[i] = x;
}

// One halving step of the reduce-scatter over lane bit `bit`: lanes with the
// bit set keep (and receive) the upper half of x[0..2H), the others the lower.
template <int H>
__device__ __forceinline__ void rs_step(float* x, int lane, int bit) {
  const bool up = lane & bit;
#pragma unroll
  for (int i = 0; i < H; ++i) {
    const float send = up ? x[i] : x[i + H];
    const float keep = up ? x[i + H] : x[i];
    x[i] = keep + __shfl_xor_sync(0xffffffffu, send, bit);
  }
}

// x[0..N) summed over the 8 lanes of a row group (lane bits 0..2); lane c
// then holds the sums of x[c * N / 8 + i], i < N / 8, in x[0..N / 8).
template <int N>
__device__ __forceinline__ void reduce_scatter8(float* x, int lane) {
  rs_step<N / 2>(x, lane, 4);
  rs_step<N / 4>(x, lane, 2);
  rs_step<N / 8>(x, lane, 1);
}

template <deltac_variant Var, int K>
struct Smem {
  static constexpr int RPT = K / 4, S = sub_len<K>();
  static constexpr int AK = Var == DELTAC_VARIANT_KDA ? K : 1;
  static constexpr int PG = Var == DELTAC_VARIANT_KDA ? K : 1;  // dg partials per token
  // offsets in floats
  static constexpr int k = 0, q = k + kStage * K, a = q + kStage * K, b = a + kStage * AK;
  static constexpr int v = b + kStage, dout = v + kStage * kBV;
  static constexpr int states = dout + kStage * kBV;
  static constexpr int pq = states + S * RPT * kThreads, pk = pq + kWarps * S * K;
  static constexpr int pg = pk + kWarps * S * K, pb = pg + kWarps * S * PG;
  static constexpr int floats = pb + kWarps * S;
  static constexpr size_t bytes = size_t(floats) * sizeof(float);
};

template <deltac_variant Var, int K>
struct Sweep {
  using L = Smem<Var, K>;
  static constexpr int RPT = L::RPT, S = L::S;
  const Args& A;
  float* sm;
  int tid, w, lane, cl, rg, col;  // col: the thread's value column (global)
  int n, j, hk, col0;
  int64_t t0, t1;

  __device__ float decay(const float* a, int r) const {
    if constexpr (Var == DELTAC_VARIANT_KDA) return a[r * 4 + rg];
    else if constexpr (Var == DELTAC_VARIANT_GATED) return a[0];
    else return 1.0f;
  }

  // Tokens t .. t + cnt into shared memory (k, decays, beta, v; with `all`
  // also scale * q and dout), L2-normalised when asked. Every load of the
  // stage is issued before the first store (one memory latency per stage).
  __device__ void stage(int64_t t, int cnt, bool all) {
    const deltac_bwd_params& p = A.p;
    constexpr int NK = (kStage * K + kThreads - 1) / kThreads;  // key elements per thread
    constexpr int NV = (kStage * kBV + kThreads - 1) / kThreads;
    float kr[NK], qr[NK], ar[NK], vr[NV], dr[NV], br = 0.0f, gr = 0.0f;
#pragma unroll
    for (int m = 0; m < NK; ++m) {
      const int e = tid + m * kThreads;
      kr[m] = qr[m] = ar[m] = 0.0f;
      if (e < cnt * K) {
        const int i = e / K, c = e % K;
        const int64_t tt = t + i, row = tt * p.H + hk;
        kr[m] = ld(p.k, p.in_dtype, row * K + c);
        if (A.rk) kr[m] *= A.rk[row];
        if (all) {
          qr[m] = ld(p.q, p.in_dtype, row * K + c);
          if (A.rq) qr[m] *= A.rq[row];
        }
        if constexpr (Var == DELTAC_VARIANT_KDA)
          ar[m] = static_cast<const float*>(p.g)[(tt * p.HV + j) * K + c];
      }
    }
    if (tid < cnt) {
      const int64_t th = (t + tid) * p.HV + j;
      if constexpr (Var == DELTAC_VARIANT_GATED) gr = static_cast<const float*>(p.g)[th];
      br = static_cast<const float*>(p.beta)[th];
    }
#pragma unroll
    for (int m = 0; m < NV; ++m) {
      const int e = tid + m * kThreads;
      vr[m] = dr[m] = 0.0f;
      const int i = e / kBV, c = col0 + e % kBV;
      if (e < cnt * kBV && c < p.V) {
        const int64_t th = (t + i) * p.HV + j;
        vr[m] = ld(p.v, p.in_dtype, th * p.V + c);
        if (all) dr[m] = ld(p.dout, p.out_dtype, th * p.V + c);
      }
    }
    __syncthreads();  // the previous stage's data is no longer read
#pragma unroll
    for (int m = 0; m < NK; ++m) {
      const int e = tid + m * kThreads;
      if (e < cnt * K) {
        sm[L::k + e] = kr[m];
        if (all) sm[L::q + e] = A.scale * qr[m];
        if constexpr (Var == DELTAC_VARIANT_KDA) sm[L::a + e] = expf(ar[m]);
      }
    }
    if (tid < cnt) {
      if constexpr (Var == DELTAC_VARIANT_GATED) sm[L::a + tid] = expf(gr);
      sm[L::b + tid] = br;
    }
#pragma unroll
    for (int m = 0; m < NV; ++m) {
      const int e = tid + m * kThreads;
      if (e < cnt * kBV) {
        sm[L::v + e] = vr[m];
        if (all) sm[L::dout + e] = dr[m];
      }
    }
    __syncthreads();
  }

  // One forward step of staged token i: s <- a s + k u^T; returns r (u = beta r).
  __device__ float step(float* s, int i) const {
    const float* k = sm + L::k + i * K;
    const float* a = sm + L::a + i * L::AK;
    float ws[4] = {0.0f, 0.0f, 0.0f, 0.0f};  // four chains: shorter FMA latency
#pragma unroll
    for (int r = 0; r < RPT; ++r) {
      s[r] *= decay(a, r);
      ws[r % 4] += s[r] * k[r * 4 + rg];
    }
    float wsum = (ws[0] + ws[1]) + (ws[2] + ws[3]);
    wsum += __shfl_xor_sync(0xffffffffu, wsum, 8);
    wsum += __shfl_xor_sync(0xffffffffu, wsum, 16);
    const float rr = sm[L::v + i * kBV + w * kCols + cl] - wsum;
    const float u = sm[L::b + i] * rr;
#pragma unroll
    for (int r = 0; r < RPT; ++r) s[r] += k[r * 4 + rg] * u;
    return rr;
  }

  // Index of the thread's element r in a [.., K / 4, kThreads] save area.
  __device__ static int64_t own(int r, int tid) { return int64_t(r) * kThreads + tid; }

  // The reverse step of staged token i (global token t) with its r; dh:
  // dL/d(state after t) in, dL/d(state before t) out.
  __device__ void reverse(float* dh, int i, int64_t t, float rr) {
    const deltac_bwd_params& p = A.p;
    const float* k = sm + L::k + i * K;
    const float* q = sm + L::q + i * K;
    const float* a = sm + L::a + i * L::AK;
    const float* S0 = sm + L::states + i * RPT * kThreads;
    const float b = sm[L::b + i], u = b * rr;
    const float dov = sm[L::dout + i * kBV + w * kCols + cl];
    float dus[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int r = 0; r < RPT; ++r) {
      dh[r] += q[r * 4 + rg] * dov;
      dus[r % 4] += dh[r] * k[r * 4 + rg];
    }
    float du = (dus[0] + dus[1]) + (dus[2] + dus[3]);
    du += __shfl_xor_sync(0xffffffffu, du, 8);
    du += __shfl_xor_sync(0xffffffffu, du, 16);
    const float dw = -b * du;
    const int64_t th = t * p.HV + j;
    if (rg == 0 && col < p.V) st(p.dv, p.in_dtype, th * p.V + col, b * du);
    float db = du * rr;  // summed over the warp's columns (all row groups hold it)
    db += __shfl_xor_sync(0xffffffffu, db, 1);
    db += __shfl_xor_sync(0xffffffffu, db, 2);
    db += __shfl_xor_sync(0xffffffffu, db, 4);
    if (lane == 0) sm[L::pb + w * S + i] = db;
    if constexpr (RPT <= 32) {
      // One pass over the state (registers allow three row vectors).
      float xq[RPT], xk[RPT], xg[RPT];
      float gs = 0.0f;
#pragma unroll
      for (int r = 0; r < RPT; ++r) {
        const float ar = decay(a, r), kr = k[r * 4 + rg], hp = ar * S0[own(r, tid)];
        xq[r] = (hp + kr * u) * dov;        // dq^ (unscaled): the state after t times dout
        xk[r] = dh[r] * u + hp * dw;        // dk^: dh u + hp dw (dh before the k dw^T term)
        dh[r] += kr * dw;                   // dh += k dw^T
        const float gg = dh[r] * hp;        // dg = dh (.) hp
        if constexpr (Var == DELTAC_VARIANT_KDA) xg[r] = gg;
        else gs += gg;
        dh[r] *= ar;                        // dh <- a (.) dh
      }
      reduce_scatter8<RPT>(xq, lane);
      put(L::pq, i, xq);
      reduce_scatter8<RPT>(xk, lane);
      put(L::pk, i, xk);
      finish_dg(i, xg, gs);
    } else {
      float x[RPT];
#pragma unroll
      for (int r = 0; r < RPT; ++r)
        x[r] = (decay(a, r) * S0[own(r, tid)] + k[r * 4 + rg] * u) * dov;
      reduce_scatter8<RPT>(x, lane);
      put(L::pq, i, x);
#pragma unroll
      for (int r = 0; r < RPT; ++r) x[r] = dh[r] * u + decay(a, r) * S0[own(r, tid)] * dw;
      reduce_scatter8<RPT>(x, lane);
      put(L::pk, i, x);
      float gs = 0.0f;
#pragma unroll
      for (int r = 0; r < RPT; ++r) {
        const float ar = decay(a, r), hp = ar * S0[own(r, tid)];
        dh[r] += k[r * 4 + rg] * dw;
        const float gg = dh[r] * hp;
        if constexpr (Var == DELTAC_VARIANT_KDA) x[r] = gg;
        else gs += gg;
        dh[r] *= ar;
      }
      finish_dg(i, x, gs);
    }
  }

  // dg of token i into the partial sums: kda per key row (x), gated the sum gs.
  __device__ void finish_dg(int i, float* x, float gs) {
    if constexpr (Var == DELTAC_VARIANT_KDA) {
      reduce_scatter8<RPT>(x, lane);
      put(L::pg, i, x);
    } else if constexpr (Var == DELTAC_VARIANT_GATED) {
#pragma unroll
      for (int m = 1; m < 32; m *= 2) gs += __shfl_xor_sync(0xffffffffu, gs, m);
      if (lane == 0) sm[L::pg + w * S + i] = gs;
    }
  }

  // The reduce-scatter's result (key rows (cl * RPT / 8 + e) * 4 + rg) into
  // the warp's partial-sum row of token i.
  __device__ void put(int base, int i, const float* x) {
#pragma unroll
    for (int e = 0; e < RPT / 8; ++e)
      sm[base + (w * S + i) * K + (cl * (RPT / 8) + e) * 4 + rg] = x[e];
  }

  // Sums the warps' partials of tokens ts .. ts + len and adds them to the
  // accumulators (and to dbeta, dg).
  __device__ void flush(int64_t ts, int len) {
    const deltac_bwd_params& p = A.p;
    __syncthreads();
    for (int e = tid; e < len * K; e += kThreads) {
      const int i = e / K, c = e % K;
      float sq = 0.0f, sk = 0.0f, sg = 0.0f;
#pragma unroll
      for (int ww = 0; ww < kWarps; ++ww) {
        sq += sm[L::pq + (ww * S + i) * K + c];
        sk += sm[L::pk + (ww * S + i) * K + c];
        if constexpr (Var == DELTAC_VARIANT_KDA) sg += sm[L::pg + (ww * S + i) * K + c];
      }
      const int64_t t = ts + i, o = (t * p.H + hk) * K + c;
      atomicAdd(A.dqa + o, A.scale * sq);
      atomicAdd(A.dka + o, sk);
      if constexpr (Var == DELTAC_VARIANT_KDA)
        atomicAdd(static_cast<float*>(p.dg) + (t * p.HV + j) * K + c, sg);
    }
    for (int e = tid; e < len; e += kThreads) {
      float sb = 0.0f, sg = 0.0f;
#pragma unroll
      for (int ww = 0; ww < kWarps; ++ww) {
        sb += sm[L::pb + ww * S + e];
        if constexpr (Var == DELTAC_VARIANT_GATED) sg += sm[L::pg + ww * S + e];
      }
      const int64_t th = (ts + e) * p.HV + j;
      atomicAdd(static_cast<float*>(p.dbeta) + th, sb);
      if constexpr (Var == DELTAC_VARIANT_GATED) atomicAdd(static_cast<float*>(p.dg) + th, sg);
    }
  }

  __device__ int64_t sidx(int r) const {  // the thread's element r of h0 / dht / dh0
    const int64_t base = (int64_t(n) * A.p.HV + j) * K * A.p.V;
    const int row = r * 4 + rg;
    return base + (A.p.state_layout == DELTAC_STATE_VK ? int64_t(col) * K + row
                                                       : int64_t(row) * A.p.V + col);
  }

  __device__ void run(int64_t task) {
    const deltac_bwd_params& p = A.p;
    const int vt = int(task % A.nvt);
    j = int((task / A.nvt) % p.HV);
    n = int(task / (int64_t(A.nvt) * p.HV));
    hk = j / (p.HV / p.H);
    col0 = vt * kBV;
    col = col0 + w * kCols + cl;
    t0 = p.cu_seqlens ? p.cu_seqlens[n] : int64_t(n) * p.T;
    t1 = p.cu_seqlens ? p.cu_seqlens[n + 1] : int64_t(n + 1) * p.T;
    const int64_t len = t1 - t0, nc = (len + kChunk - 1) / kChunk;
    const int64_t slot0 = t0 / kChunk + n;
    const bool in = col < p.V;
    const int64_t ck = int64_t(RPT) * kThreads;  // floats per saved tile
    auto ckpt = [&](int64_t ci) {
      return A.ckpt + ((slot0 + ci) * p.HV + j) * A.nvt * ck + int64_t(vt) * ck;
    };
    float* sub = A.sub + int64_t(blockIdx.x) * (kChunk / S) * ck;

    float s[RPT];
#pragma unroll
    for (int r = 0; r < RPT; ++r) s[r] = (p.h0 && in) ? static_cast<const float*>(p.h0)[sidx(r)] : 0.0f;
    // 1. Forward, saving the state at each chunk start.
    const int64_t last = t0 + (nc > 0 ? nc - 1 : 0) * kChunk;
    for (int64_t ts = t0; ts < last; ts += kStage) {
      if ((ts - t0) % kChunk == 0) {
        float* c = ckpt((ts - t0) / kChunk);
#pragma unroll
        for (int r = 0; r < RPT; ++r) c[own(r, tid)] = s[r];
      }
      stage(ts, kStage, false);
      for (int i = 0; i < kStage; ++i) step(s, i);
    }
    if (nc > 0) {
      float* c = ckpt(nc - 1);
#pragma unroll
      for (int r = 0; r < RPT; ++r) c[own(r, tid)] = s[r];
    }

    // 2. Chunks in reverse.
    float dh[RPT];
#pragma unroll
    for (int r = 0; r < RPT; ++r) dh[r] = (p.dht && in) ? static_cast<const float*>(p.dht)[sidx(r)] : 0.0f;
    for (int64_t ci = nc - 1; ci >= 0; --ci) {
      const int64_t cs = t0 + ci * kChunk, ce = cs + kChunk < t1 ? cs + kChunk : t1;
      const float* c = ckpt(ci);
#pragma unroll
      for (int r = 0; r < RPT; ++r) s[r] = c[own(r, tid)];
      const int nsub = int((ce - cs + S - 1) / S);
      // The state every S tokens into the scratch, the last piece's start last.
      const int64_t lastp = cs + int64_t(nsub - 1) * S;
      for (int64_t ts = cs; ts < lastp; ts += kStage) {
        const int cnt = lastp - ts < kStage ? int(lastp - ts) : kStage;
        stage(ts, cnt, false);
        for (int i = 0; i < cnt; ++i) {
          const int o = int(ts - cs) + i;
          if (o % S == 0) {
            float* d = sub + int64_t(o / S) * ck;
#pragma unroll
            for (int r = 0; r < RPT; ++r) d[own(r, tid)] = s[r];
          }
          step(s, i);
        }
      }
      {
        float* d = sub + int64_t(nsub - 1) * ck;
#pragma unroll
        for (int r = 0; r < RPT; ++r) d[own(r, tid)] = s[r];
      }
      for (int m = nsub - 1; m >= 0; --m) {
        const int64_t ts = cs + int64_t(m) * S;
        const int cnt = ce - ts < S ? int(ce - ts) : S;
        stage(ts, cnt, true);
        const float* d = sub + int64_t(m) * ck;
#pragma unroll
        for (int r = 0; r < RPT; ++r) s[r] = d[own(r, tid)];
        float rr[S];
#pragma unroll
        for (int i = 0; i < S; ++i) {
          if (i < cnt) {
            float* sv = sm + L::states + i * RPT * kThreads;
#pragma unroll
            for (int r = 0; r < RPT; ++r) sv[own(r, tid)] = s[r];
            rr[i] = step(s, i);
          }
        }
#pragma unroll
        for (int i = S - 1; i >= 0; --i)
          if (i < cnt) reverse(dh, i, ts + i, rr[i]);
        flush(ts, cnt);
      }
    }
    if (p.dh0 && in) {
#pragma unroll
      for (int r = 0; r < RPT; ++r) static_cast<float*>(p.dh0)[sidx(r)] = dh[r];
    }
  }
};

template <deltac_variant Var, int K>
__global__ void __launch_bounds__(kThreads) sweep_kernel(const __grid_constant__ Args args) {
  extern __shared__ float smem[];
  Sweep<Var, K> sw{args, smem};
  sw.tid = threadIdx.x;
  sw.w = sw.tid / 32;
  sw.lane = sw.tid % 32;
  sw.cl = sw.lane % kCols;
  sw.rg = sw.lane / kCols;
  for (int64_t task = blockIdx.x; task < args.tasks; task += gridDim.x) {
    sw.run(task);
    __syncthreads();  // the next task's staging overwrites shared memory
  }
}

}  // namespace deltac::cuda::bwd

#endif  // DELTAC_CUDA_BACKWARD_KERNEL_CUH

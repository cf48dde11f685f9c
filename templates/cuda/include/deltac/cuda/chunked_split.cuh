// The sequence split of the chunked forward pass (chunked.cuh): a sequence's
// chunks run as ws.split segments in parallel. A segment s > 0 starts from a
// zero state and carries K extra value columns that start at the identity
// with v = 0 (the V columns of the state never mix), so that it ends with
// [C_s | P_s]: the state after the segment is P_s h_in + C_s, and the extra
// outputs are qt_t = scale P_{<=t}^T q_t, with o_t = o_t(h_in = 0) + qt_t h_in.
// The scan writes C_s, P_s (f32) and qt (compute type); then
//   fold: per (16 columns, value head, sequence), h = C_0 (segment 0 ran
//         from h0), h = P_s h + C_s over the later non-empty segments, each
//         stored over C_s and, for the fix-up, in the compute type (hin:
//         hi + lo for 16-bit types); the last is ht; P_s comes through
//         shared memory a slab of columns at a time;
//   fix:  per (chunk, value head, CV columns) of a segment s > 0,
//         o += qt h_in(s) on tensor cores (h_in = the folded C_{s-1} from
//         hin), o read and rewritten in place.
#ifndef DELTAC_CUDA_CHUNKED_SPLIT_CUH
#define DELTAC_CUDA_CHUNKED_SPLIT_CUH

#include "deltac/cuda/chunked_mma.cuh"
#include "deltac/cuda/chunked_prep.cuh"
#include "deltac/cuda/chunked_scan.cuh"
#include "deltac/params.h"

#include <cstdint>

namespace deltac::cuda::detail {

// Chunks of sequence n (as the scan counts them) and its segment length.
__device__ __forceinline__ void split_extent(const deltac_fwd_params& p, const int32_t* offsets,
                                             int64_t max_chunks, int n, int C, int split,
                                             int64_t& first, int64_t& nch, int64_t& L) {
  int64_t last;
  seq_slots(p, offsets, n, C, first, last);
  if (last > max_chunks)
    last = max_chunks;
  nch = last > first ? last - first : 0;
  L = (nch + split - 1) / split;
}

// Rows r of h (one column) into hin slot s: hi, then (16-bit Ts) lo.
template <class Ts, int K, int V, int R>
__device__ __forceinline__ void fold_store_hin(Ts* hin, const float (&acc)[R], int rg, int c0) {
  constexpr bool kSplit = sizeof(Ts) == 2;
#pragma unroll
  for (int i = 0; i < R; ++i) {
    const int r = rg + 16 * i;
    const Ts hi = cvt_t<Ts>(acc[i]);
    hin[r * V + c0] = hi;
    if constexpr (kSplit)
      hin[K * V + r * V + c0] = cvt_t<Ts>(acc[i] - cvt_f(hi));
  }
}

// The fold's P columns a slab (K is a multiple of 16), and its shared
// memory: two slabs of P ([K][slab] f32), the next copied while one is used.
__host__ __device__ constexpr int chunked_fold_slab(int K) { return K % 32 == 0 ? 32 : 16; }
constexpr size_t chunked_fold_smem(int K) { return size_t(2) * K * chunked_fold_slab(K) * 4; }

template <class Ts, int K, int V, int C>
__global__ void __launch_bounds__(256)
    chunked_fold_kernel(const deltac_fwd_params p, const int32_t* offsets, int64_t max_chunks,
                        int split, const float* pst, float* cst, Ts* hin, const int32_t* skip) {
  if (skip && *skip)
    return;
  constexpr int R = K / 16;  // rows per thread
  constexpr int MW = chunked_fold_slab(K), NSL = K / MW, Q4 = MW / 4;  // slab width, slabs a step
  static_assert(K % MW == 0, "slabs");
  __shared__ float h[K][16];
  extern __shared__ __align__(16) unsigned char fold_raw[];
  float4* const slab = reinterpret_cast<float4*>(fold_raw);  // [2][K][Q4]
  const int tid = threadIdx.x, cv = tid % 16, rg = tid / 16;
  const int c0 = blockIdx.x * 16 + cv, j = blockIdx.y, n = blockIdx.z;
  int64_t first, nch, L;
  split_extent(p, offsets, max_chunks, n, C, split, first, nch, L);
  const int64_t ns = L > 0 ? (nch + L - 1) / L : 1;  // non-empty segments (>= 1)
  auto seg_state = [&](int64_t s) { return cst + ((int64_t(n) * split + s) * p.HV + j) * K * V; };
  auto seg_hin = [&](int64_t s) { return hin + ((int64_t(n) * split + s) * p.HV + j) * 2 * K * V; };
  // Slab q of the walk (step 1 + q / NSL, columns (q % NSL) MW ..) into buffer b.
  auto load_slab = [&](int64_t q, int b) {
    const int64_t s = 1 + q / NSL;
    const int m0 = int(q % NSL) * MW;
    const float* P = pst + ((int64_t(n) * split + s) * p.HV + j) * K * K + m0;
    for (int i = tid; i < K * Q4; i += 256)
      cp_async16(slab + (b * K + i / Q4) * Q4 + i % Q4, P + (i / Q4) * K + 4 * (i % Q4));
    cp_async_commit();
  };
  const int64_t total = (ns - 1) * NSL;
  if (total > 0)
    load_slab(0, 0);
  float acc[R];
  const float* c_0 = seg_state(0);
#pragma unroll
  for (int i = 0; i < R; ++i) {
    acc[i] = c_0[(rg + 16 * i) * V + c0];
    h[rg + 16 * i][cv] = acc[i];
  }
  if (ns > 1)
    fold_store_hin<Ts, K, V>(seg_hin(0), acc, rg, c0);
  // h = P_s h + C_s, step s = 1 .. ns - 1, P_s a slab of columns at a time.
  for (int64_t q = 0; q < total; ++q) {
    const int b = int(q & 1), sl = int(q % NSL);
    const int64_t s = 1 + q / NSL;
    if (sl == 0) {
#pragma unroll
      for (int i = 0; i < R; ++i) acc[i] = seg_state(s)[(rg + 16 * i) * V + c0];
    }
    if (q + 1 < total) {
      load_slab(q + 1, b ^ 1);
      cp_async_wait<1>();
    } else {
      cp_async_wait_all();
    }
    __syncthreads();  // slab q landed for every thread; h holds step s - 1
    const float4* sp = slab + b * K * Q4;
#pragma unroll 4
    for (int m = 0; m < MW; m += 4) {
      const int mm = sl * MW + m;
      const float h0 = h[mm][cv], h1 = h[mm + 1][cv], h2 = h[mm + 2][cv], h3 = h[mm + 3][cv];
#pragma unroll
      for (int i = 0; i < R; ++i) {
        const float4 pr = sp[(rg + 16 * i) * Q4 + m / 4];
        acc[i] += pr.x * h0 + pr.y * h1 + pr.z * h2 + pr.w * h3;
      }
    }
    if (sl == NSL - 1) {  // step s done
      __syncthreads();  // every read of h (step s - 1) is done
#pragma unroll
      for (int i = 0; i < R; ++i) {
        h[rg + 16 * i][cv] = acc[i];
        seg_state(s)[(rg + 16 * i) * V + c0] = acc[i];
      }
      if (s + 1 < ns)
        fold_store_hin<Ts, K, V>(seg_hin(s), acc, rg, c0);
    }
    __syncthreads();  // slab b read by every thread before it is refilled
  }
  if (p.ht) {
    float* ht = static_cast<float*>(p.ht) + (int64_t(n) * p.HV + j) * K * V;
    const bool vk = p.state_layout == DELTAC_STATE_VK;
#pragma unroll
    for (int i = 0; i < R; ++i) {
      const int r = rg + 16 * i;
      ht[vk ? int64_t(c0) * K + r : int64_t(r) * V + c0] = acc[i];
    }
  }
}

// Columns per block of the fix kernel, and its shared memory (qt rows
// padded by 16 bytes; h_in and, for 16-bit types, its remainder).
constexpr int chunked_fix_cols(int V) { return V % 64 == 0 ? 64 : V % 32 == 0 ? 32 : 16; }
constexpr size_t chunked_fix_smem(int K, int elem, int C, int CV) {
  const int pad = 16 / elem;
  return (size_t(C) * (K + pad) + size_t(elem == 2 ? 2 : 1) * K * (CV + pad)) * size_t(elem);
}

// o += qt h_in for one chunk of a later segment, CV columns of one value
// head; one warp per 16 rows. qt and h_in (hin: hi, lo) by cp.async, the
// block's o elements loaded into registers meanwhile. (Eight chunks per
// block with h_in loaded once, together with an unrolled fold loop,
// measured slower: fold + fix ~0.35 -> 0.50 ms, GDN 2/8 1x32768, S = 4,
// H200, when h_in was read as f32 and converted per block.)
template <class Tr, int CV>
__global__ void __launch_bounds__(Tr::C / 16 * 32)
    chunked_fix_kernel(const deltac_fwd_params p, const ChunkedWs<typename Tr::Ts> ws) {
  if (ws.skip && *ws.skip)
    return;
  using Ts = typename Tr::Ts;
  using Op = Mma<Ts>;
  constexpr int C = Tr::C, K = Tr::K, V = Tr::V, NTH = C / 16 * 32, NT = CV / 8;
  constexpr int E = 16 / int(sizeof(Ts)), LK = Tr::LK, LB = CV + Tr::kPad;
  constexpr bool kSplit = Tr::kSplit;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  Ts* sA = reinterpret_cast<Ts*>(smem_raw);  // [C][LK] qt rows
  Ts* sH = sA + C * LK;                      // [K][LB] h_in (hi)
  Ts* sL = sH + K * LB;                      // [K][LB] h_in - hi (16-bit types)
  const int64_t slot = blockIdx.x;
  const int j = blockIdx.y, cv0 = blockIdx.z * CV;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane >> 2, t = lane & 3;
  int n;
  if (p.cu_seqlens) {
    if (slot >= ws.offsets[p.N])
      return;
    int lo = 0, hi = p.N - 1;  // largest n with offsets[n] <= slot
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (ws.offsets[mid] <= slot)
        lo = mid;
      else
        hi = mid - 1;
    }
    n = lo;
  } else {
    n = int(slot / ((int64_t(p.T) + C - 1) / C));
  }
  int64_t first, nch, L, s0, s1;
  split_extent(p, ws.offsets, ws.max_chunks, n, C, ws.split, first, nch, L);
  const int64_t c = slot - first;
  if (c < 0 || c >= nch || c < L)  // segment 0 (or no chunk) needs nothing
    return;
  const int64_t s = c / L;
  seq_bounds(p, n, s0, s1);
  const int64_t t0 = s0 + c * C;
  const int len = int(s1 - t0 < C ? s1 - t0 : C);
  if (len <= 0)
    return;
  copy_rows<C, NTH, K / E, LK, true>(sA, ws.qt + (t0 * p.HV + j) * K, int64_t(p.HV) * K, len,
                                     tid);
  const Ts* hin = ws.hin + ((int64_t(n) * ws.split + s - 1) * p.HV + j) * 2 * K * V + cv0;
  copy_rows<K, NTH, CV / E, LB, false>(sH, hin, V, K, tid);
  if constexpr (kSplit)
    copy_rows<K, NTH, CV / E, LB, false>(sL, hin + K * V, V, K, tid);
  cp_async_commit();
  // This thread's o elements (rows g, g + 8 of its warp's 16, columns
  // 2 t, 2 t + 1 of each n-tile), loaded while the copies land.
  using In = typename Tr::In;
  float ov[2][NT][2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = warp * 16 + g + 8 * h;
    const In* orow = static_cast<const In*>(p.o) + ((t0 + r) * p.HV + j) * V + cv0 + 2 * t;
#pragma unroll
    for (int ni = 0; ni < NT; ++ni)
      if (r < len)
        load2f(orow + ni * 8, ov[h][ni][0], ov[h][ni][1]);
  }
  cp_async_wait_all();
  __syncthreads();
  const Tile<Ts, LK> tA(sA);
  const Tile<Ts, LB> tH(sH), tL(sL);
  float acc[NT][4];
#pragma unroll
  for (int ni = 0; ni < NT; ++ni) acc[ni][0] = acc[ni][1] = acc[ni][2] = acc[ni][3] = 0.f;
#pragma unroll
  for (int k0 = 0; k0 < K; k0 += 16) {
    typename Op::FragA fa;
    tA.la(fa, warp * 16 * LK + k0);
#pragma unroll
    for (int ni = 0; ni < NT; ++ni) {
      typename Op::FragB fb;
      tH.lbt(fb, k0 * LB + ni * 8);
      Op::mma(acc[ni], fa, fb);
      if constexpr (kSplit) {
        tL.lbt(fb, k0 * LB + ni * 8);
        Op::mma(acc[ni], fa, fb);
      }
    }
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = warp * 16 + g + 8 * h;
    if (r < len) {
      In* orow = static_cast<In*>(p.o) + ((t0 + r) * p.HV + j) * V + cv0 + 2 * t;
#pragma unroll
      for (int ni = 0; ni < NT; ++ni)
        store2(orow + ni * 8, ov[h][ni][0] + acc[ni][2 * h], ov[h][ni][1] + acc[ni][2 * h + 1]);
    }
  }
}

}  // namespace deltac::cuda::detail

#endif  // DELTAC_CUDA_CHUNKED_SPLIT_CUH
